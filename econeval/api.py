"""The Python API and the one orchestration layer (the CLI only parses arguments and prints):

- `evaluate(...)` runs tasks on a model and returns the results document, as `econeval run` does;
- `score_predictions(...)` scores answers produced elsewhere, as `econeval score` does;
- `export_prompts(...)` gives each item's prompts as econeval would send them.

The roles (the evaluated model, the judge, the embedder) are resolved and built by `roles.py`,
the same way for each.
"""

from __future__ import annotations

import shlex
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Sequence

from . import __version__, config, data, registry, roles, runner, shards
from .backends.base import Settings
from .errors import Interrupted, UsageError
from .folder import RunFolder
from .predictions import prediction_outputs
from .results import read_jsonl
from .runmeta import CHUNK, partial_identity, role_entry, scored_meta
from .types import EMBEDDER, JUDGE, MODEL, ResultsDoc


def _judge_and_embedder(ctx: runner.RunContext, judge_spec: config.ModelSpec | None, embedder: str | None, seed: int,
                        model_judges: bool = True) -> None:
    """Set the context's factories for the judge (default: the evaluated model, when
    `model_judges`) and the embedder."""
    if judge_spec is not None:
        roles.check(judge_spec, Settings(seed=seed), JUDGE)
        ctx.factories[JUDGE] = lambda: roles.build(judge_spec, Settings(seed=seed), JUDGE)
    elif model_judges:
        ctx.factories[JUDGE] = lambda: ctx.role(MODEL)
    ctx.factories[EMBEDDER] = lambda: roles.build(roles.resolve(embedder, EMBEDDER), Settings(seed=seed), EMBEDDER)
    ctx.judge_given = judge_spec is not None


def evaluate(model: str | config.ModelSpec | None = None, tasks: Sequence[str] = (), suite: str | None = None,
             limit: int | None = None, out: str | Path | None = None, seed: int = 1234,
             task_options: dict[str, Any] | None = None, model_options: dict[str, Any] | None = None,
             judge: str | None = None, embedder: str | None = None, n_ctx: int | None = None, chat: str | None = None,
             bootstrap: int = 1000, progress: bool = False, argv: list[str] | None = None,
             say: Callable[[str], None] | None = None, shard: tuple[int, int] | None = None) -> ResultsDoc:
    """Evaluate `model` (a model file, a models.toml name, `PREFIX:NAME` for a served model,
    a ModelSpec, or None for the default) on `tasks` (names) or a `suite` (default: all), write
    the run folder `out` (default: a new timestamped folder under the data dir; an existing
    folder of the same run is resumed) and return the results document.

    `task_options` maps option names to values for every selected task that declares them (e.g.
    {"adaptation": "cot-hidden"}); `model_options` likewise for the backends of the evaluated
    model and the judge (e.g. {"parallel": 4}, {"base_url": "http://127.0.0.1:8000/v1"}); an
    option nothing declares is refused. `chat` (auto, on, off) overrides the model's chat mode.
    `shard` (K, N) runs only the chunks of shard K of N into `out`/shard-K-of-N (`merge` joins them).

    Returns the results document with one key added: `run_folder`, the folder written."""
    selected = registry.select(suite, list(tasks))
    spec = model if isinstance(model, config.ModelSpec) else roles.resolve(model, MODEL)
    judge_spec = roles.resolve(judge, JUDGE) if judge else None
    split = roles.split_options(dict(model_options or {}), {MODEL: spec, **({JUDGE: judge_spec} if judge_spec else {})})
    spec = roles.with_options(spec, split[MODEL], chat)
    settings = Settings(seed=seed, n_ctx=n_ctx)
    roles.check(spec, settings)
    if shard is not None and out is None:
        raise UsageError("--shard needs --out DIR (a folder every shard can reach; each writes DIR/shard-K-of-N)")
    ctx = runner.RunContext(seed=seed, limit=limit, task_options=dict(task_options or {}), bootstrap=bootstrap, shard=shard)
    _judge_and_embedder(ctx, roles.with_options(judge_spec, split[JUDGE]) if judge_spec else None, embedder, seed)
    say = say or ((lambda msg: print(msg, file=sys.stderr, flush=True)) if progress else (lambda msg: None))
    try:
        preps = runner.prepare(selected, ctx)  # data, options and embedder problems show before a model loads
        out = Path(out) if out else config.data_home() / "runs" / f"{datetime.now():%Y%m%d-%H%M%S}-{spec.name}"
        if shard is not None:
            out = shards.folder_for(out, shard)
        folder = RunFolder.open(out)  # locked; refused now if it holds another run
        try:
            folder.check_identity(partial_identity(seed, selected, preps), partial=True)
            say(f"econeval: run folder {out}; loading model {spec.name} …")
            t0 = time.monotonic()
            backend = ctx.role_made(MODEL, roles.build(spec, settings))
            info = backend.info()
            say(f"econeval: model {spec.name} loaded in {time.monotonic() - t0:.1f} s on {info.device}"
                f" (parallel {info.parallel}, n_ctx {info.n_ctx}); tasks: {', '.join(t.name for t in selected)}")
            doc = runner.run(selected, backend, out, ctx, preps, argv=argv, show_progress=progress, folder=folder)
        except Interrupted as exc:
            if argv:
                cmd = argv if ("--out" in argv or "-o" in argv) else [*argv, "--out", str(out)]
                exc.hint = "resume with: " + shlex.join(cmd)
            raise
        finally:
            folder.close()
    finally:
        ctx.close()
    return {**doc, "run_folder": str(out)}


def score_predictions(task: str, predictions: str | Path, seed: int = 1234, task_options: dict[str, Any] | None = None,
                      judge: str | None = None, embedder: str | None = None, out: str | Path | None = None,
                      bootstrap: int = 1000, argv: list[str] | None = None) -> ResultsDoc:
    """Score answers produced elsewhere (a predictions file, or a run's samples.jsonl) with the
    task's own parser and metrics; the stages that need no evaluated model (the judge, the
    embedder) still run. With `out`, also write a run folder (for `compare` and `report`)."""
    t = registry.get_task(task)
    predictions = Path(predictions)
    ctx = runner.RunContext(seed=seed, task_options=dict(task_options or {}))
    _judge_and_embedder(ctx, roles.resolve(judge, JUDGE) if judge else None, embedder, seed, model_judges=False)
    try:
        prep = runner.prepare([t], ctx, make_embedder=False)[t.name]  # predictions are checked first
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
        records = runner.score_records(t, items, outputs, prep)
        doc: ResultsDoc = {"econeval_version": __version__, "model": None, "predictions": str(predictions),
                           "tasks": {t.name: runner.aggregate(t, records, prep, n_boot=bootstrap, seed=seed)}}
        if out:
            used = runner.task_roles(t, prep)
            infos = {role: role_entry(ctx.role(role).info()) if role in used and ctx.made(role) else None
                     for role in (JUDGE, EMBEDDER)}
            _write_scored_folder(Path(out), t, prep, seed, predictions, records, doc, infos, argv)
    finally:
        ctx.close()
    return doc


def _write_scored_folder(out: Path, task, prep, seed: int, predictions: Path, records: list[dict], doc: dict,
                         infos: dict, argv: list[str] | None) -> None:
    folder = RunFolder.open(out)
    try:
        if folder.meta is not None or (out / "samples.jsonl").exists():
            raise UsageError(f"{out} already holds a run", hint="choose a new --out folder")
        meta = scored_meta(task, prep, seed=seed, predictions=str(predictions), predictions_sha256=data.sha256_file(predictions),
                           argv=argv, roles=infos)
        folder.write_complete(records, doc, meta)
    finally:
        folder.close()


def export_prompts(task: str, seed: int = 1234, limit: int | None = None,
                   task_options: dict[str, Any] | None = None) -> list[dict]:
    """Each item's first-stage requests as econeval sends them (few-shot demonstrations included;
    a model's chat template is applied by the backend on top): id, prompts, request settings."""
    t = registry.get_task(task)
    ctx = runner.RunContext(seed=seed, limit=limit, task_options=dict(task_options or {}))
    runner.check_task_options([t], ctx.task_options)
    prep = t.prepare(ctx)
    rows = []
    for item in runner.select_items(t, prep, limit):
        reqs = t.requests(item, prep, {})
        rows.append({"id": item["id"], "task": t.name, "prompts": {k: r.prompt for k, r in reqs.items()},
                     "requests": {k: {"kind": type(r).__name__, **{f: getattr(r, f) for f in ("options", "max_tokens", "stop")
                                                                   if hasattr(r, f)}} for k, r in reqs.items()}})
    return rows
