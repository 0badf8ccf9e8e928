"""The Python API and the one orchestration layer (the CLI only parses arguments and prints):

- `evaluate(...)` runs tasks on a model and returns the results document, as `econeval run` does;
- `score_predictions(...)` scores answers produced elsewhere, as `econeval score` does;
- `export_prompts(...)` gives each item's prompts as econeval would send them.

The roles (the evaluated model, the judge, the embedder, a task's own) are resolved and built by
`roles.py`, the same way for each.
"""

from __future__ import annotations

import functools
import shlex
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from . import config, data, registry
from .version import __version__
from .run import runner, shards
from .run import roles as role_specs
from .run.roles import role_args
from .run.spec import RunSpec
from .context import DEFAULT_SEED, RunContext, check_bootstrap, check_task_options, given_seed, protocol_shift
from .scoring import aggregate, score_records, select_items
from .run.selection import Full, Selection
from .backends.base import Settings
from .errors import Interrupted, UsageError, hide_credentials
from .store import epochs as epoch_folders
from .store.folder import RunFolder
from .predictions import prediction_outputs
from .results import read_jsonl
from .store.runfiles import SAMPLES
from .store.runmeta import CHUNK, partial_identity, role_entry, scored_record
from .types import EMBEDDER, JUDGE, MODEL, Prepared, ResultsDoc, Task, task_roles


def _registry_default(role: str, seed: int) -> Any:
    """The registry's default model for a role (its embedder), made."""
    return role_specs.build(role_specs.resolve(None, role), Settings(seed=seed), role)


def _role_factories(ctx: RunContext, specs: dict[str, config.ModelSpec], seed: int, model_fills: bool = True) -> None:
    """Set the context's factories for every role: a model named for it (its spec parsed and
    checked now, the model made when first needed), else its fallback: the evaluated model (when
    `model_fills`), or the registry's default of its kind."""
    for name, role in registry.roles().items():
        if name in specs:
            ctx.factories[name] = role_specs.plan(specs[name], Settings(seed=seed), name).build
        elif role.fallback == "model" and model_fills:
            ctx.factories[name] = lambda: ctx.role(MODEL)
        elif role.fallback == "registry":
            ctx.factories[name] = functools.partial(_registry_default, name, seed)
    ctx.given = frozenset(specs)


def evaluate(model: str | config.ModelSpec | RunSpec | None = None, tasks: Sequence[str | Task] = (), *, suite: str | None = None,
             selection: Selection | None = None, out: str | Path | None = None, seed: int | None = None,
             task_options: dict[str, Any] | None = None, bootstrap: int = 1000,
             prepared: dict[str, Prepared] | None = None, epochs: int | None = None) -> ResultsDoc:
    """Evaluate a model on `tasks` (names, or Task objects as inspect_ai's `eval()` takes them) or
    a `suite` (default: all), write the run folder `out`
    and return the results document. Without `out` the folder is the run's own under the data
    dir, named by what the run is (model, tasks, options, seed): the same call resumes it. A
    folder of the same run, or of some or more of the same tasks, is resumed.

    `model`: a model file, a models.toml name, `PREFIX:NAME` for a served model, a ModelSpec, or
    None for the registry's default; or a `RunSpec` (run/spec.py), which is the model with how it
    runs: its options (`model_options`, e.g. {"parallel": 4} or {"base_url": ...}), `n_ctx`,
    `chat`, the models named for roles (`judge`, `embedder`, `roles`), `progress` (True shows it
    on stderr, False nothing, None when stderr is a terminal; a callable gets the progress figures
    after every step instead) and `new` (a new timestamped folder). `econeval run` and `econeval
    gate` pass one.

    `task_options` maps option names to values for every selected task that declares them (e.g.
    {"adaptation": "cot-hidden"}); an option no selected task declares is refused. `selection`
    (run/selection.py; default every item) names the items: `Limit(20)`, a stratified
    `StratifiedSample(0.1)`, a budget's growing samples, a `Shard` (run into `out`/shard-K-of-N;
    `merge` joins them); `from_flags(limit=, sample=, budget=, shard=)` makes one from the command
    line's flags. `prepared`: tasks prepared already, taken as they are (a gate's, as its
    baseline prepared them, options included). `epochs`: repeat the run N times, epoch k into
    `out`/epoch-k with the seed store/epochs.py gives it (the model loaded once); the document's
    numbers are then the means over the epochs and `epochs` lists each one's seed and folder.

    Returns the results document with one key added: `run_folder`, the folder written."""
    run = model if isinstance(model, RunSpec) else RunSpec(model=model)
    seed, seed_given = given_seed(seed)
    check_bootstrap(bootstrap)
    if selection is not None and not isinstance(selection, Selection):
        raise UsageError(f"selection {selection!r}: a Selection (Full(), Limit(n), StratifiedSample(spec), Shard(...); "
                         "run/selection.py), or None for every item")
    selected = registry.select(suite, list(tasks))
    spec, named = _models(run)
    settings = Settings(seed=seed, n_ctx=run.n_ctx)
    planned = role_specs.plan(spec, settings)  # the model's options parsed and validated once
    selection = selection or Full()
    out = Path(out) if out else None
    if selection.shard() is not None and out is None:
        raise UsageError("--shard needs --out DIR (a folder every shard can reach; each writes DIR/shard-K-of-N)")
    if epochs is not None:
        _check_epochs(epochs, selection, prepared)
    ctx = RunContext(seed=seed, seed_given=seed_given, task_options=dict(task_options or {}), bootstrap=bootstrap)
    _role_factories(ctx, named, seed)
    try:
        preps = runner.prepare(selected, ctx, prepared=prepared)  # data, options and embedder problems show before a model loads
        if out is None:
            out = default_folder(spec, selected, preps, ctx, settings, named, run.named, run.new, selection.shard(), epochs)
        if epochs is not None:
            doc = _run_epochs(out, epochs, run, planned, selected, ctx, selection, seed if seed_given else None)
        else:
            if (where := selection.shard()) is not None:
                out = shards.folder_for(out, where)
            doc = _run_in(out, run, planned, selected, preps, ctx, selection)
    finally:
        ctx.close()
    return {**doc, "run_folder": str(out)}


def _check_epochs(epochs: int, selection: Selection, prepared: dict[str, Prepared] | None) -> None:
    if not 1 <= epochs <= epoch_folders.MAX_EPOCHS:
        raise UsageError(f"--epochs {epochs} is out of range (1 to {epoch_folders.MAX_EPOCHS})")
    if selection.shard() is not None:
        raise UsageError("--epochs and --shard together: run each epoch's command (its --seed) with --shard instead")
    if selection.deadline is not None or selection.watches or prepared is not None:
        raise UsageError("--epochs repeats a whole run: it does not go with --budget or a gate")


def _run_epochs(parent: Path, epochs: int, run: RunSpec, planned: role_specs.Planned, selected: list, ctx: RunContext,
                selection: Selection, given: int | None) -> dict:
    """Each epoch into its own run folder under `parent` (the model made once, shared; `given`:
    the --seed given, or None); the document of the means over the epochs, with each epoch's seed
    and folder."""
    epoch_folders.check_parent(parent)
    docs = []
    for k in range(1, epochs + 1):
        seed, ctx.seed_given = epoch_folders.seed_of(given, k)
        ctx.seed = DEFAULT_SEED if seed is None else seed
        ctx.protocol_shift = protocol_shift(ctx.seed, ctx.seed_given)
        preps = runner.prepare(selected, ctx)  # the epoch's seed: its own draws
        folder = epoch_folders.folder_for(parent, k)
        try:
            docs.append({"epoch": k, "seed": ctx.seed, "run_folder": str(folder),
                         **_run_in(folder, run, planned, selected, preps, ctx, selection)})
        except Interrupted as exc:  # the same command resumes every epoch: it names the parent
            if run.argv:
                exc.hint = resume_hint(list(run.argv), parent)
            raise
    tasks = {t: epoch_folders.mean([d["tasks"][t] for d in docs]) for t in docs[0]["tasks"] if all(t in d["tasks"] for d in docs)}
    return {**{k: v for k, v in docs[0].items() if k not in ("tasks", "epoch", "seed", "run_folder")}, "tasks": tasks,
            "epochs": [{k: d[k] for k in ("epoch", "seed", "run_folder")} for d in docs]}


def _loaded_on(info) -> str:
    """Where and how the model runs, as the load line says it: its device, how many requests it
    takes together and its context, each where there is one (a stand-in model has no device, a
    served one no context)."""
    parts = [f"parallel {info.parallel_note or info.parallel}", *([f"n_ctx {info.n_ctx}"] if info.n_ctx else [])]
    return (f" on {info.device_note or info.device}" if info.device and info.device != "none" else "") + f" ({', '.join(parts)})"


def _run_in(out: Path, run: RunSpec, planned: role_specs.Planned, selected: list, preps: dict[str, Prepared],
            ctx: RunContext, selection: Selection) -> dict:
    """The run in its folder (locked; refused before the model loads if it holds another run)."""
    spec = planned.spec
    show = sys.stderr.isatty() if run.progress is None else run.progress is True
    say = (lambda msg: print(msg, file=sys.stderr, flush=True)) if show else (lambda msg: None)
    folder = RunFolder.open(out)
    try:
        folder.check_identity(partial_identity(ctx.seed, selected, preps, planned.preview()), partial=True)
        if ctx.made(MODEL):  # an earlier epoch's (--epochs): the same model, loaded once
            backend = ctx.role(MODEL)
            say(f"econeval: run folder {out} (seed {ctx.seed}); model {spec.name} as loaded")
        else:
            say(f"econeval: run folder {out}; loading model {spec.name} …")
            t0 = time.monotonic()
            backend = ctx.role_made(MODEL, planned.build())
            info = backend.info()
            say(f"econeval: model {spec.name} loaded in {time.monotonic() - t0:.1f} s{_loaded_on(info)}; "
                f"tasks: {', '.join(t.name for t in selected)}")
        return runner.run(selected, backend, folder, ctx, preps, selection, argv=list(run.argv) or None, config=run.config_file,
                          show_progress=show, say=say, on_progress=run.progress if callable(run.progress) else None)
    except Interrupted as exc:
        if run.argv:
            exc.hint = resume_hint(list(run.argv), out)
        raise
    finally:
        folder.close()


def _models(run: RunSpec) -> tuple[config.ModelSpec, dict[str, config.ModelSpec]]:
    """The evaluated model's spec and the role models' (by role), each with its share of the
    run's -M options (the text models take them) and the evaluated model with its chat mode."""
    named = {name: role_specs.resolve(arg, name) for name, arg in run.named.items()}
    text = {name: s for name, s in named.items() if registry.role(name).serves == MODEL}  # -M goes to text models
    split = role_specs.split_options(dict(run.model_options), {MODEL: run.model_spec, **text})
    spec = role_specs.with_options(run.model_spec, split[MODEL], run.chat)
    named.update({name: role_specs.with_options(s, split[name]) for name, s in text.items()})
    return spec, named


def open_run(path: str | Path):
    """A finished run folder, read through its typed record (`store.finished.FinishedRun`): for
    commands that read runs outside econeval's own (a plugin's)."""
    from .store.finished import open_run as open_finished

    return open_finished(path)


def open_model(name: str, options: dict[str, Any] | None = None, seed: int = 0,
               flag: str = "--model") -> tuple[Any, config.ModelSpec]:
    """A loaded backend for a model named as `--model` names one (a model file, a models.toml name,
    PREFIX:NAME), with backend options (`-M`) checked by its backend; and its resolved spec. For
    commands that use a model outside a run (a plugin's own commands)."""
    options = dict(options or {})
    spec = role_specs.resolve(name)
    declared = role_specs.parse(spec)[0].Options.fields()
    unknown = sorted(set(options) - set(declared))
    if unknown:
        raise UsageError(f"{flag} {name}: its backend has no option {', '.join(unknown)}",
                         hint=f"its options: {', '.join(declared)}")
    spec = role_specs.with_options(spec, options)
    return role_specs.plan(spec, Settings(seed=seed)).build(), spec


def default_folder(spec: config.ModelSpec, tasks: list, preps: dict, ctx: RunContext, settings: Settings,
                   named: dict[str, config.ModelSpec], args: dict[str, str], new: bool,
                   shard: tuple[int, int] | None = None, epochs: int | None = None) -> Path:
    """The run's own folder under the data dir, named by what the run is: the model (and its
    options), the tasks, their options, the seed, the context length, the models named for roles
    (not --limit: a larger run extends a smaller one). `new`: a timestamped folder instead."""
    judge = named.get(JUDGE)
    others = {k: [s.name, s.options] for k, s in named.items() if k not in (JUDGE, EMBEDDER)}
    what = {"model": [spec.name, spec.kind, spec.chat, spec.options], "tasks": sorted(t.name for t in tasks),
            "options": {t.name: preps[t.name].options for t in tasks}, "seed": ctx.seed, "n_ctx": settings.n_ctx,
            # the judge and the embedder keep the keys folders were named by before roles were open
            "judge": [judge.name, judge.options] if judge else None, "embedder": args.get(EMBEDDER),
            "shard_count": (shard or (0, 0))[1], **({"roles": others} if others else {})}
    own = {t.name: ctx.seed_for(t) for t in tasks if ctx.seed_for(t) != ctx.seed}  # a protocol's seed (no --seed given)
    if own:
        what["seeds"] = own
    if epochs is not None:  # the parent of the epochs' folders: never a plain run's folder
        what["epochs"] = epochs
    names = sorted(t.name for t in tasks)
    label = next((s for s, members in registry.suites().items() if sorted(members) == names), None) or "+".join(names)
    folder = config.named_folder("runs", f"{spec.name}-{label}", what)
    return folder.with_name(f"{folder.name}-{datetime.now():%Y%m%d-%H%M%S}") if new else folder


def resume_hint(argv: list[str], out: Path) -> str:
    """How to resume: the same command (the program as it was invoked), with the folder named
    where the command made a new one (--new)."""
    cmd = [a for a in argv if a != "--new"]
    if "--new" in argv and "--out" not in argv and "-o" not in argv:
        cmd += ["--out", str(out)]
    return "resume with the same command: " + hide_credentials(shlex.join(cmd))


def program() -> list[str]:
    """The program as the user invoked it: `econeval` when that is what PATH finds, else the
    path they typed (`.venv/bin/econeval`), or `python -m econeval`."""
    import os
    import shutil

    arg0 = sys.argv[0] if sys.argv and sys.argv[0] else "econeval"
    if arg0.endswith("__main__.py") or arg0 == "-m":
        return [Path(sys.executable).name, "-m", "econeval"]
    name = Path(arg0).name
    found = shutil.which(name)
    if found and os.path.exists(arg0) and os.path.samefile(found, arg0):
        return [name]
    return [arg0]


def score_predictions(task: str, predictions: str | Path, seed: int | None = None, task_options: dict[str, Any] | None = None,
                      judge: str | None = None, embedder: str | None = None, out: str | Path | None = None,
                      bootstrap: int = 1000, argv: list[str] | None = None, roles: dict[str, str] | None = None) -> ResultsDoc:
    """Score answers produced elsewhere (a predictions file, or a run's samples.jsonl) with the
    task's own parser and metrics; the stages that need no evaluated model (the judge, the
    embedder) still run. With `out`, also write a run folder (for `compare` and `report`)."""
    t = registry.get_task(task)
    predictions = Path(predictions)
    seed, seed_given = given_seed(seed)
    check_bootstrap(bootstrap)
    ctx = RunContext(seed=seed, seed_given=seed_given, task_options=dict(task_options or {}))
    named = {name: role_specs.resolve(arg, name) for name, arg in role_args(roles, judge, embedder).items()}
    _role_factories(ctx, named, seed, model_fills=False)
    try:
        prep = runner.prepare([t], ctx, make_roles=False)[t.name]  # predictions are checked first
        by_id = {it["id"]: it for it in prep.items}
        items, outputs, seen = [], [], set()
        for n, row in enumerate(read_jsonl(predictions, "predictions file"), 1):
            if row.get("task", t.name) != t.name:
                continue  # a run's samples.jsonl holds other tasks too
            pid = row.get("id")
            if not isinstance(pid, str):
                raise UsageError(f"{predictions}: prediction {n} needs a string field 'id'")
            if pid not in by_id:
                raise UsageError(f"{predictions}: prediction {n} has unknown id '{pid}' for task {t.name}",
                                 hint=f"ids look like {prep.items[0]['id']}; `econeval data export` lists them")
            if pid in seen:
                raise UsageError(f"{predictions}: id '{pid}' appears twice")
            seen.add(pid)
            items.append(by_id[pid])
            outputs.append(prediction_outputs(row, n, predictions, t, by_id[pid], prep))
        if not items:
            raise UsageError(f"{predictions} holds no predictions for {t.name}")
        # the items as a run over exactly these ids had them (a task may balance over the items that run)
        final = {it["id"]: it for it in t.finalize_items([it for it in prep.items if it["id"] in seen], prep)}
        items = [final[it["id"]] for it in items]
        for start in range(0, len(items), CHUNK):  # the judge / embedder stages the task still needs
            runner.complete_outputs(t, items[start:start + CHUNK], outputs[start:start + CHUNK], prep, ctx)
        records = score_records(t, items, outputs, prep)
        doc: ResultsDoc = {"econeval_version": __version__, "model": None, "predictions": str(predictions),
                           "tasks": {t.name: aggregate(t, records, prep, n_boot=bootstrap, seed=seed)}}
        if out:
            used = task_roles(t, prep)
            infos = {role: role_entry(ctx.role(role).info(), role in ctx.given) for role in used if role != MODEL and ctx.made(role)}
            _write_scored_folder(Path(out), t, prep, (seed, seed_given), predictions, records, doc, infos, argv)
    finally:
        ctx.close()
    return doc


def _write_scored_folder(out: Path, task, prep, seed: tuple[int, bool], predictions: Path, records: list[dict], doc: Any,
                         infos: dict, argv: list[str] | None) -> None:
    folder = RunFolder.open(out)
    try:
        if folder.record is not None or folder.has(SAMPLES):
            raise UsageError(f"{out} already holds a run", hint="choose a new --out folder")
        record = scored_record(task, prep, seed=seed[0], seed_given=seed[1], predictions=str(predictions),
                               predictions_sha256=data.sha256_file(predictions), argv=argv, roles=infos)
        folder.write_complete(records, doc, record)
    finally:
        folder.close()


def export_prompts(task: str, seed: int | None = None, limit: int | None = None,
                   task_options: dict[str, Any] | None = None) -> list[dict]:
    """Each item's requests as econeval sends them (few-shot demonstrations included; a model's
    chat template is applied by the backend on top): id, prompts, request settings, and for a
    conversation its turns. Later stages are shown with a placeholder for the model's earlier
    text (`<reply to NAME>`), so a multi-turn protocol shows every turn."""
    from .types import Generate

    t = registry.get_task(task)
    run_seed, seed_given = given_seed(seed)
    ctx = RunContext(seed=run_seed, seed_given=seed_given, task_options=dict(task_options or {}))
    check_task_options([t], ctx.task_options)
    prep = ctx.prepare(t)
    rows = []
    for item in select_items(t, prep, limit):
        reqs: dict[str, Any] = {}
        outputs: dict[str, Any] = {}
        stage_of: dict[str, int] = {}
        for stage in range(prep.stages or t.stages):
            new = {k: r for k, r in t.requests(item, prep, outputs).items() if k not in reqs}
            if not new:
                break
            reqs.update(new)
            stage_of.update({k: stage + 1 for k in new})
            if any(not isinstance(r, Generate) for r in new.values()) and not t.stands_in_for_choices:
                break  # only a text reply can be stood in for
            outputs.update({k: f"<reply to {k}>" for k in new})
        rows.append({"id": item["id"], "task": t.name, "prompts": {k: r.prompt for k, r in reqs.items()},
                     **({"turns": {k: list(r.turns) for k, r in reqs.items() if getattr(r, "turns", ())}}
                        if any(getattr(r, "turns", ()) for r in reqs.values()) else {}),
                     "requests": {k: {"kind": type(r).__name__, "stage": stage_of[k],
                                      **{f: getattr(r, f) for f in ("options", "max_tokens", "stop") if hasattr(r, f)}}
                                  for k, r in reqs.items()}})
    return rows
