"""The econeval command line. User errors print one line and exit non-zero (no traceback
unless --debug); exit codes: 0 success, 1 runtime failure, 2 usage error."""

from __future__ import annotations

import math
import os
import signal
import sys
from pathlib import Path

import click

from . import __version__, config, data, registry
from .errors import EconevalError, Interrupted, UsageError
from .results import dumps, read_jsonl, write_atomic
from .types import EMBEDDER, JUDGE


def _echo_json(obj) -> None:
    click.echo(dumps(obj).decode())


def _fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _help() -> str:
    suites = registry.suites()
    lines = [f"  {name} ({', '.join(tasks)})" for name, tasks in suites.items() if name != "all"]
    return ("Evaluate language models on economics and finance reasoning, offline.\n\n\b\nSuites:\n"
            + "\n".join(lines) + "\n  all (every task)\nRun `econeval list --verbose` for tasks and their options.\n"
            "Quick start:  econeval data build && econeval run --suite all --limit 2")


def versions() -> dict:
    """econeval, the llama.cpp build and the data package (what `--version` prints and run.json records)."""
    from .backends.llamacpp import build_info

    llama = build_info()
    states = {b: data.status(b) for b in data.benchmarks()}
    built = all(st == "ok" for s in states.values() for st in s.values())
    where = sorted({str(data.files_dir(b).parent) for b in states})
    return {"econeval": __version__, "llama.cpp": llama,
            "data package": f"{data.package_version()} ({'complete' if built else 'NOT complete: econeval data build / data install'}"
                            f"; {', '.join(where)})"}


def _print_version(ctx, _param, value):
    if not value or ctx.resilient_parsing:
        return
    for k, v in versions().items():
        click.echo(f"{k}: {v}")
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, help=_help())
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the econeval version, the llama.cpp build and the data package, then exit.")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
def cli(debug: bool) -> None:
    pass


# Documented shortcuts for task options: each sets the option of that name on every selected task
# that declares it (the CLI does not know which task owns an option).
SHORTCUTS = {"adaptation": "adaptation", "car": "car", "questions": "questions", "cfbenchmark_decoding": "summary_decoding"}


def _task_options(fn):
    fn = click.option("--task-option", "-T", "task_option", multiple=True, metavar="NAME=VALUE",
                      help="Set a task option on every selected task that declares it (repeatable); "
                           "`econeval list --verbose` shows each task's options.")(fn)
    fn = click.option("--cfbenchmark-decoding", type=click.Choice(["released", "intended"]), default=None,
                      help="Shortcut for -T summary_decoding=... (CFBenchmark summary: released code's 64 tokens, or 512).")(fn)
    fn = click.option("--questions", type=click.Path(dir_okay=False, exists=True, path_type=Path),
                      help="Shortcut for -T questions=FILE (STEER-ME: a set from `econeval steer generate`).")(fn)
    fn = click.option("--car", is_flag=True, default=None, help="Shortcut for -T car=true (STEER-ME calibrated answer replacement).")(fn)
    fn = click.option("--adaptation", type=click.Choice(["direct", "cot-shown", "cot-hidden", "free-text"]), default=None,
                      help="Shortcut for -T adaptation=... (STEER-ME adaptation; default direct).")(fn)
    return fn


def _collect_options(task_option, **shortcuts) -> dict:
    out = {}
    for flag, name in SHORTCUTS.items():
        value = shortcuts.get(flag)
        if value is not None and value is not False:
            out[name] = str(value) if isinstance(value, Path) else value
    for pair in task_option:
        if "=" not in pair:
            raise UsageError(f"-T {pair}: expected NAME=VALUE")
        name, value = pair.split("=", 1)
        out[name.strip()] = value
    return out


# ---- run ---------------------------------------------------------------------------------
@cli.command()
@click.option("--model", "-m", help="Path to a .gguf file, a name from models.toml, openai:NAME with --base-url, or "
                                    "anthropic:NAME (default: the embedded Gemma 3 270M).")
@click.option("--suite", "-s", default=None, help="Suite to run: " + ", ".join(registry.suites()) + " (default: all).")
@click.option("--task", "-t", "tasks", multiple=True, help="Run only this task (repeatable); instead of --suite.")
@click.option("--limit", "-n", type=click.IntRange(min=1, max=10**9),
              help="Evaluate only the first N items of each task (CFBenchmark: of each sub-task; STEER-ME: of each element).")
@click.option("--seed", type=click.IntRange(min=0, max=2**63 - 1), default=1234, show_default=True,
              help="Seed for few-shot draws (recorded in run.json).")
@click.option("--n-gpu-layers", type=click.IntRange(min=-1), help="Layers to offload to the GPU (-1: all). Default: the model's entry, all when offload is available.")
@click.option("--n-ctx", type=click.IntRange(min=256, max=2**20), help="Context length in tokens (default: the model's entry).")
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads for llama.cpp (default: all CPUs available to the process).")
@click.option("--parallel", "-P", type=click.IntRange(min=1),
              help="Sequences llama.cpp decodes together (default: 8 on a CPU, 32 with GPU offload; recorded in run.json). "
                   "1: one sequence at a time.")
@click.option("--chat", type=click.Choice(["auto", "on", "off"]),
              help="Chat template: auto (each task's default, as its paper's code did, when the model has a template), "
                   "on (every request), off (raw prompts). Default: the model's entry (auto). Recorded in run.json.")
@click.option("--base-url", help="Served models: the server's URL (with or without /v1), for --model openai:NAME.")
@click.option("--api-key-env", metavar="VAR", help="Served models: the environment variable holding the API key (default: OPENAI_API_KEY if set).")
@click.option("--concurrency", "-C", type=click.IntRange(min=1, max=1024),
              help="Served models: requests in flight at once (default 8; recorded in run.json).")
@click.option("--timeout", type=click.FloatRange(min=0.1), help="Served models: seconds to wait for one answer (default 120).")
@click.option("--max-retries", type=click.IntRange(min=0, max=100),
              help="Served models: retries of one request on 429/5xx/timeouts/dropped connections (default 5).")
@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path),
              help="Run folder (default: a new timestamped folder under the data dir). An existing folder of the same run is resumed.")
@click.option("--embedder", "-e", help="Sentence embedder for CFBenchmark generation scoring: a models.toml name or a folder (default: m3e-small).")
@_task_options
@click.option("--judge", help="Judge model for econnli-gen (a .gguf file or a models.toml name; default: the evaluated model).")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0, max=100000), default=1000, show_default=True,
              help="Bootstrap resamples for the 95% intervals of the headline numbers (0: none).")
@click.option("--json", "as_json", is_flag=True, help="Print results.json on stdout instead of the summary table.")
@click.option("--quiet", "-q", is_flag=True, help="No progress line.")
def run(model, suite, tasks, limit, seed, n_gpu_layers, n_ctx, threads, parallel, chat, base_url, api_key_env, concurrency,
        timeout, max_retries, out, embedder, task_option, adaptation, car, questions, cfbenchmark_decoding, judge, n_boot,
        as_json, quiet):
    """Evaluate a model and write run.json, samples.jsonl and results.json."""
    from .api import evaluate

    options = _collect_options(task_option, adaptation=adaptation, car=car, questions=questions,
                               cfbenchmark_decoding=cfbenchmark_decoding)
    argv = ["econeval", *sys.argv[1:]]
    doc = evaluate(model=model, tasks=tasks, suite=suite, limit=limit, out=out, seed=seed, task_options=options, judge=judge,
                   embedder=embedder, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, threads=threads, parallel=parallel,
                   bootstrap=n_boot, progress=not quiet, argv=argv, chat=chat, base_url=base_url, api_key_env=api_key_env,
                   concurrency=concurrency, timeout=timeout, max_retries=max_retries)
    folder = doc.pop("run_folder")
    if as_json:
        _echo_json(doc)
    else:
        click.echo(f"model: {doc['model']}   run folder: {folder}")
        for name, res in doc["tasks"].items():
            cells = "  ".join(f"{k} {_fmt(v)}" for k, v in registry.get_task(name).headline(res).items())
            click.echo(f"  {name:<22} n {res['n']:>5}  unparsed {res.get('n_unparsed', 0):>4}  skipped {res['n_skipped']:>3}  "
                       f"errors {res['n_errors']:>3}  {cells}")
    _check_outcome(doc)


def _check_outcome(doc: dict) -> None:
    """Items with errors, or a task with nothing scored, make the exit code non-zero."""
    problems = []
    for name, res in doc["tasks"].items():
        if res.get("n_errors"):
            problems.append(f"{name}: {res['n_errors']} item(s) with errors ({', '.join(res['error_reasons'])})")
        elif res["n"] and res["n_skipped"] == res["n"]:
            problems.append(f"{name}: all {res['n']} items skipped ({', '.join(res.get('skip_reasons', {}))}); no metric computed")
    if problems:
        raise EconevalError("; ".join(problems), hint="see samples.jsonl; the results are written")


# ---- score -------------------------------------------------------------------------------
MAX_RESPONSE = 1 << 20  # characters: a longer "response" is not a model answer


def _prediction_outputs(row: dict, n: int, where: Path, task, item, prep) -> dict:
    """A prediction line (or a line of a run's samples.jsonl) as the outputs a task scores."""
    if isinstance(row.get("calls"), dict):  # a run's own sample line: its outputs are the request results
        return {k: row[k] for k in row["calls"] if k in row} | {"calls": row["calls"]}
    resp = row.get("response")
    if not isinstance(resp, str):
        raise UsageError(f"{where}: prediction {n} needs a string field 'response'")
    if len(resp) > MAX_RESPONSE:
        raise UsageError(f"{where}: prediction {n}: response is longer than {MAX_RESPONSE} characters")
    out: dict = {"response": resp}
    if "option_logprobs" in row:
        lp = row["option_logprobs"]
        if not isinstance(lp, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in lp.values()):
            raise UsageError(f"{where}: prediction {n}: option_logprobs must map options to numbers")
        allowed = set(task.answer_options(item, prep) or ()) | {"<top>"}
        unknown = sorted(set(lp) - allowed)
        if unknown:
            raise UsageError(f"{where}: prediction {n}: option_logprobs has option(s) {', '.join(unknown)} that "
                             f"{task.name} does not ask for", hint=f"its options: {', '.join(sorted(allowed - {'<top>'}))}")
        if not all(math.isfinite(v) and v <= 1e-6 for v in lp.values()):
            raise UsageError(f"{where}: prediction {n}: log-probabilities must be finite and at most 0")
        if sum(math.exp(v) for k, v in lp.items() if k != "<top>") > 1 + 1e-3:
            raise UsageError(f"{where}: prediction {n}: the options' probabilities add up to more than 1")
        out["option_logprobs"] = {k: float(v) for k, v in lp.items() if k != "<top>"}
        out["calls"] = {"option_logprobs": {"kind": "option_logprobs", "top_logprob": lp.get("<top>")}}
    return out


@cli.command()
@click.option("--task", "-t", "task_name", required=True, help="Task whose parser and metrics to use, e.g. econnli-zero.")
@click.option("--predictions", "-p", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help='JSON Lines: {"id": "...", "response": "raw model text"} per item, optionally "option_logprobs"; '
                   "or a run's samples.jsonl (its lines of this task).")
@click.option("--seed", type=int, default=1234, show_default=True, help="Seed the predictions were made with (few-shot draws).")
@click.option("--embedder", "-e", help="Sentence embedder for CFBenchmark generation scoring (default: m3e-small).")
@click.option("--judge", help="Judge model for econnli-gen (a .gguf file or a models.toml name).")
@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path),
              help="Also write a run folder (run.json, samples.jsonl, results.json), e.g. for `econeval compare`.")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0, max=100000), default=1000, show_default=True,
              help="Bootstrap resamples for the 95% intervals of the headline numbers (0: none).")
@_task_options
def score(task_name, predictions, seed, embedder, judge, out, n_boot, task_option, adaptation, car, questions,
          cfbenchmark_decoding):
    """Score predictions made elsewhere; print the results JSON on stdout."""
    from . import runner
    from .api import _embedder_factory
    from .backends import LoadOptions, check_model, make_backend

    task = registry.get_task(task_name)
    options = _collect_options(task_option, adaptation=adaptation, car=car, questions=questions,
                               cfbenchmark_decoding=cfbenchmark_decoding)
    ctx = runner.RunContext(seed=seed, task_options=options, judge_given=bool(judge))
    ctx.factories[EMBEDDER] = _embedder_factory(embedder)
    if judge:
        judge_spec = config.resolve_model(judge)
        check_model(judge_spec)
        ctx.factories[JUDGE] = lambda: make_backend(judge_spec, LoadOptions(seed=seed))
    prep = runner.prepare([task], ctx, make_embedder=False)[task.name]  # predictions are checked first
    by_id = {it["id"]: it for it in prep.items}
    items, outputs, seen = [], [], set()
    for n, row in enumerate(read_jsonl(predictions, "predictions file"), 1):
        if row.get("task", task.name) != task.name:
            continue  # a run's samples.jsonl holds other tasks too
        pid = row.get("id")
        if not isinstance(pid, str):
            raise UsageError(f"{predictions}: prediction {n} needs a string field 'id'")
        if pid not in by_id:
            raise UsageError(f"{predictions}: prediction {n} has unknown id '{pid}' for task {task_name}",
                             hint=f"ids look like {prep.items[0]['id']}; `econeval data export` lists them")
        if pid in seen:
            raise UsageError(f"{predictions}: id '{pid}' appears twice")
        seen.add(pid)
        items.append(by_id[pid])
        outputs.append(_prediction_outputs(row, n, predictions, task, by_id[pid], prep))
    if not items:
        raise UsageError(f"{predictions} holds no predictions for {task_name}")
    # the items as a run over exactly these ids had them (STEER-ME's CAR is balanced over the items that run)
    final = {it["id"]: it for it in task.finalize_items([it for it in prep.items if it["id"] in seen], prep)}
    items = [final[it["id"]] for it in items]
    for start in range(0, len(items), runner.CHUNK):  # the judge / embedder stages the task still needs
        runner.complete_outputs(task, items[start:start + runner.CHUNK], outputs[start:start + runner.CHUNK], prep, ctx)
    records = runner.score_records(task, items, outputs, prep)
    doc = {"econeval_version": __version__, "model": None, "predictions": str(predictions),
           "tasks": {task.name: runner.aggregate(task, records, prep, n_boot=n_boot, seed=seed)}}
    if out:
        _write_scored_folder(out, task, prep, ctx, predictions, records, doc)
    _echo_json(doc)


def _write_scored_folder(out: Path, task, prep, ctx, predictions: Path, records: list[dict], doc: dict) -> None:
    """A run folder for answers scored here: the same files as `run` writes; the model is the
    predictions file (its sha256 is the identity)."""
    from . import runner
    from .folder import RunFolder

    folder = RunFolder.open(out)
    try:
        if folder.meta is not None or (out / "samples.jsonl").exists():
            raise UsageError(f"{out} already holds a run", hint="choose a new --out folder")
        digest = data.sha256_file(predictions)
        prep.options = ctx.options_for(task)
        tasks = runner.task_identity([task], {task.name: prep}, ctx)
        meta = {"run_format": runner.RUN_FORMAT, "econeval_version": __version__, "command": ["econeval", *sys.argv[1:]],
                "started": runner.now(), "finished": runner.now(), "status": "complete", "seed": ctx.seed, "limit": None,
                "options": {task.name: prep.options},
                "tasks": {task.name: {**tasks[task.name], "description": task.description}},
                "backend": {"kind": "predictions", "model": {"name": None, "predictions": str(predictions), "sha256": digest}},
                "identity": {"run_format": runner.RUN_FORMAT, "model": {"predictions_sha256": digest}, "seed": ctx.seed,
                             "tasks": tasks}}
        log = folder.samples()
        try:
            log.append(records)
        finally:
            log.close()
        folder.write_results("results.json", doc)
        folder.write_meta(meta)
    finally:
        folder.close()


# ---- report ------------------------------------------------------------------------------
@cli.command("report")
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["md", "csv", "json", "html"]), default="md", show_default=True)
@click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Write the report to this file (default: stdout).")
def report_cmd(runs, fmt, out):
    """Each suite's table in its paper's layout: the runs' rows (with 95% intervals and item
    counts) beside the papers' published rows, deviations under each table. With several runs,
    each later run is also compared with the first. html: one self-contained file with plots
    (plots need the `report` extra: matplotlib)."""
    from .report import build, render

    text = render(build(list(runs)), fmt)
    if out:
        write_atomic(out, text.encode("utf-8"))
        click.echo(f"econeval: report written to {out}", err=True)
    else:
        click.echo(text)


# ---- compare -----------------------------------------------------------------------------
@cli.command("compare")
@click.argument("baseline", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.argument("candidate", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--max-drop", type=click.FloatRange(min=0), default=0.02, show_default=True,
              help="A metric regresses when it gets worse by more than this and the 95% interval excludes zero.")
@click.option("--metric", "metrics", multiple=True, help="Only these headline metrics (repeatable; default: all).")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=100), default=1000, show_default=True,
              help="Paired bootstrap resamples for the intervals.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), help="Also write JUnit XML (one test case per task and metric).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md"]), default="text", show_default=True)
def compare_cmd(baseline, candidate, max_drop, metrics, n_boot, seed, junit, fmt):
    """Compare two runs item by item; exit 1 when a metric regresses (a release gate)."""
    from .compare import compare, junit as junit_xml, render

    rows = compare(baseline, candidate, max_drop=max_drop, metrics=metrics, n_boot=n_boot, seed=seed)
    if junit:
        write_atomic(junit, junit_xml(rows, max_drop).encode())
    if fmt == "json":
        _echo_json({"baseline": str(baseline), "candidate": str(candidate), "max_drop": max_drop,
                    "rows": [r.as_dict() for r in rows]})
    else:
        click.echo(render(rows, fmt))
    bad = [f"{r.task} {r.metric}" for r in rows if r.verdict == "regression"]
    if bad:
        click.echo(f"econeval: regression: {', '.join(bad)}", err=True)
        sys.exit(1)


# ---- list / models -----------------------------------------------------------------------
@cli.command("list")
@click.option("--verbose", "-v", is_flag=True, help="Also show each task's options (set with -T NAME=VALUE).")
@click.option("--json", "as_json", is_flag=True)
def list_cmd(verbose, as_json):
    """Show suites, their tasks and the tasks' options."""
    s = registry.suites()
    tasks = registry.tasks()
    if as_json:
        _echo_json({"suites": s, "tasks": {n: {"suite": t.suite, "prompt_version": t.prompt_version, "description": t.description,
                                               "options": [{"name": o.name, "default": o.default, "choices": o.choices,
                                                            "kind": o.kind, "help": o.help} for o in t.options]}
                                           for n, t in tasks.items()}})
        return
    for suite, names in s.items():
        if suite == "all":
            continue
        click.echo(f"{suite}")
        for n in names:
            click.echo(f"  {n:<22} {tasks[n].description}")
            for o in tasks[n].options if verbose else ():
                choices = f" [{'|'.join(o.choices)}]" if o.choices else ""
                click.echo(f"      -T {o.name}=...{choices} (default {o.default}): {o.help}")
    click.echo("all: every task above")


@cli.group()
def models():
    """The model registry (models.toml)."""


@models.command("list")
@click.option("--json", "as_json", is_flag=True)
def models_list(as_json):
    """Show registered models and embedders."""
    reg = config.load_registry()
    if as_json:
        from dataclasses import asdict

        _echo_json({"default": reg.default_model, "default_embedder": reg.default_embedder,
                    "models": {k: asdict(v) for k, v in reg.models.items()},
                    "embedders": {k: asdict(v) for k, v in reg.embedders.items()}})
        return
    click.echo("models:")
    for name, m in reg.models.items():
        mark = "*" if name == reg.default_model else " "
        where = m.path or (f"package {m.package}" if m.package else f"API {m.base_url} model {m.api_model}")
        click.echo(f" {mark} {name:<20} {where}  ({m.kind}; n_ctx {m.n_ctx}, chat {m.chat}, gpu layers {m.n_gpu_layers})")
        if m.description:
            click.echo(f"      {m.description}")
    if reg.embedders:
        click.echo("embedders:")
    for name, e in reg.embedders.items():
        mark = "*" if name == reg.default_embedder else " "
        built = "built" if (Path(e.path) / "model.onnx").is_file() else "not built"
        click.echo(f" {mark} {name:<20} {e.path}  (pooling {e.pooling}, {built})")
        if e.licence:
            click.echo(f"      licence: {e.licence}")
        if e.description:
            click.echo(f"      {e.description}")
    click.echo("registry files: " + (", ".join(map(str, config.registry_paths())) or "none"))


@models.command("check")
@click.argument("name")
@click.option("--base-url", help="For NAME = openai:MODEL: the server's URL.")
@click.option("--api-key-env", metavar="VAR", help="The environment variable holding the API key.")
@click.option("--timeout", type=click.FloatRange(min=0.1), help="Seconds to wait for the server.")
def models_check(name, base_url, api_key_env, timeout):
    """Check that a model can be used: a served model's server answers and serves it (asks
    /v1/models); a GGUF file is readable. Prints what identifies it."""
    from .backends import LoadOptions, check_model, make_backend

    spec = config.resolve_model(name, base_url=base_url, api_key_env=api_key_env)
    if spec.kind not in config.SERVED_PREFIXES:
        check_model(spec)
        click.echo(f"{spec.name}: {spec.kind} model, {spec.path or 'package ' + str(spec.package)}: ok")
        return
    backend = make_backend(spec, LoadOptions(timeout=timeout))
    info = backend.info()
    served = info.model.get("served")
    click.echo(f"{spec.name}: {info.model['base_url']} serves '{spec.api_model}'"
               + (f" ({', '.join(f'{k} {v}' for k, v in served.items() if k != 'id')})" if served else
                  " (the server lists no models: not verified beyond reachability)")
               + f"; repetition penalty sent as {info.details['repeat_penalty_param']}")
    backend.close()


# ---- steer ----
@cli.group()
def steer():
    """STEER-ME question generator (econeval's re-implementation of auto-STEER)."""


@steer.command("generate")
@click.option("--elements", default="all", show_default=True, help="Comma-separated element slugs, or all covered ones.")
@click.option("--per-element", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--seed", type=int, default=2025, show_default=True)
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="JSONL file to write.")
def steer_generate(elements, per_element, seed, out):
    """Write a fresh question set (same seed and version: byte-identical file)."""
    from .benchmarks.steer_me import BENCHMARK
    from .benchmarks.steer_me.generator import covered, generate

    tax = {r["element"]: r for r in data.load(BENCHMARK, "taxonomy.jsonl")}
    names = covered() if elements == "all" else [e.strip() for e in elements.split(",") if e.strip()]
    unknown = [e for e in names if e not in tax]
    if unknown:
        raise UsageError(f"unknown element(s): {', '.join(unknown)}", hint="`econeval steer elements` lists them")
    missing = [e for e in names if e not in covered()]
    if missing:
        raise UsageError(f"element(s) without templates yet: {', '.join(missing)}", hint="`econeval steer elements` shows coverage")
    names = [r for r in tax if r in names]  # taxonomy order
    items = generate(names, per_element, seed, tax)
    write_atomic(out, data.jsonl_bytes(items))
    click.echo(f"wrote {len(items)} questions ({len(names)} elements × {per_element}) to {out}", err=True)


@steer.command("elements")
@click.option("--json", "as_json", is_flag=True)
def steer_elements(as_json):
    """The taxonomy, with templates, types, domains and perspectives per element, and coverage."""
    from .benchmarks.steer_me import BENCHMARK
    from .benchmarks.steer_me.generator import combos, covered, templates

    rows = []
    for r in data.load(BENCHMARK, "taxonomy.jsonl"):
        el = r["element"]
        cs = combos(el) if el in covered() else []
        rows.append({**r, "covered": bool(cs), "templates": len(templates().get(el, [])),
                     "types": sorted({t["type"] for t, _, _ in cs}), "domains": len({d for _, d, _ in cs}),
                     "perspectives": len({p for _, _, p in cs})})
    if as_json:
        _echo_json(rows)
        return
    setting = None
    for r in rows:
        if r["setting"] != setting:
            setting = r["setting"]
            click.echo(setting)
        mark = f"{r['templates']} templates, types: {', '.join(r['types'])}; {r['domains']} domains × {r['perspectives']} perspectives" \
            if r["covered"] else "not covered yet"
        click.echo(f"  {r['element']:<34} {mark}")
    n = sum(r["covered"] for r in rows)
    click.echo(f"covered: {n} of {len(rows)} elements")


# ---- data --------------------------------------------------------------------------------
@cli.group("data")
def data_group():
    """The bundled, versioned benchmark data."""


@data_group.command("build")
@click.argument("names", nargs=-1)
@click.option("--source", type=click.Path(file_okay=False, path_type=Path),
              help="Folder with the upstream benchmark folders (default: ../shared/datasets beside the repository).")
def data_build(names, source):
    """Build the normalised JSONL files from the upstream files."""
    source = source or data.default_source()
    if not source.is_dir():
        raise UsageError(f"source folder not found: {source}", hint="pass --source DIR")
    for name in names or data.benchmarks():
        counts = data.build(name, source, registry.builder(name))
        click.echo(f"{name}: " + ", ".join(f"{f} {n} rows" for f, n in counts.items()))


@data_group.command("list")
@click.option("--json", "as_json", is_flag=True)
def data_list(as_json):
    """Show benchmarks, versions, row counts, licences and build state."""
    rows = []
    for name in data.benchmarks():
        m = data.manifest(name)
        st = data.status(name)
        rows.append({"benchmark": name, "version": m["version"], "licence": m["licence"], "location": str(data.files_dir(name)),
                     "files": {f: {"rows": i["rows"], "state": st[f]} for f, i in m["files"].items()},
                     "known_defects": m.get("known_defects", [])})
    if as_json:
        _echo_json(rows)
        return
    for r in rows:
        built = "built" if all(f["state"] == "ok" for f in r["files"].values()) else "NOT BUILT (econeval data build)"
        click.echo(f"{r['benchmark']} {r['version']}  [{built}]  licence: {r['licence']}")
        click.echo(f"    location: {r['location']}")
        for f, i in r["files"].items():
            click.echo(f"    {f:<28} {i['rows']:>6} rows  {i['state']}")
        for d in r["known_defects"]:
            click.echo(f"    note: {d}")


@data_group.command("pack")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="The archive to write (.tar).")
def data_pack(out):
    """Write the built data of all benchmarks as one checksummed archive (for machines without the upstream files)."""
    index = data.pack(out)
    digest = data.sha256_file(out)
    write_atomic(out.with_name(out.name + ".sha256"), f"{digest}  {out.name}\n".encode())
    click.echo(f"wrote data package {index['package_version']} ({', '.join(f'{b} {v}' for b, v in index['benchmarks'].items())}) "
               f"to {out}, sha256 {digest}", err=True)


@data_group.command("install")
@click.argument("archive", type=click.Path(dir_okay=False, exists=True, path_type=Path))
def data_install(archive):
    """Install a data package from `econeval data pack`, verifying every file's hash."""
    sidecar = archive.with_name(archive.name + ".sha256")
    if sidecar.is_file() and sidecar.read_text().split()[0] != data.sha256_file(archive):
        raise EconevalError(f"{archive} does not match {sidecar}", hint="the archive is corrupted or not the one published")
    index = data.install(archive)
    click.echo(f"installed data package {index['package_version']} into {data.installed_dir()}", err=True)


@data_group.command("verify")
def data_verify():
    """Re-hash every built file; name any that does not match its manifest."""
    if not data.benchmarks():
        raise EconevalError(f"no benchmark manifests found in {data.data_dir()}", hint="the installation is incomplete")
    bad = []
    for name in data.benchmarks():
        for f, state in data.status(name).items():
            if state != "ok":
                bad.append(f"{name}/{f}: {state}")
    if bad:
        for b in bad:
            click.echo(b, err=True)
        raise EconevalError(f"{len(bad)} data file(s) missing or not matching the manifest", hint="run: econeval data build")
    click.echo("all data files match their manifests")


@data_group.command("export")
@click.argument("name")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="JSONL file to write.")
@click.option("--file", "file_name", help="Which file of the benchmark (default: its evaluation items).")
@click.option("--prompts", is_flag=True, help="NAME is a task: write each item's prompt(s) as econeval sends them "
              "(seeded few-shot demonstrations included; a model's chat template is applied by the backend on top).")
@click.option("--seed", type=int, default=1234, show_default=True, help="With --prompts: the seed of the few-shot draws.")
@click.option("--limit", "-n", type=click.IntRange(min=1, max=10**9), help="With --prompts: the items `run --limit N` would run.")
@_task_options
def data_export(name, out, file_name, prompts, seed, limit, task_option, adaptation, car, questions, cfbenchmark_decoding):
    """Write a benchmark's normalised items (ids included), or with --prompts a task's prompts, as JSON Lines."""
    if prompts:
        from . import runner

        task = registry.get_task(name)
        ctx = runner.RunContext(seed=seed, limit=limit, task_options=_collect_options(
            task_option, adaptation=adaptation, car=car, questions=questions, cfbenchmark_decoding=cfbenchmark_decoding))
        runner.check_task_options([task], ctx.task_options)
        prep = task.prepare(ctx)
        rows = []
        for item in runner.select_items(task, prep, limit):
            reqs = task.requests(item, prep, {})
            rows.append({"id": item["id"], "task": task.name, "prompts": {k: r.prompt for k, r in reqs.items()},
                         "requests": {k: {"kind": type(r).__name__, **{f: getattr(r, f) for f in ("options", "max_tokens", "stop")
                                                                       if hasattr(r, f)}} for k, r in reqs.items()}})
        if task.stages > 1:
            click.echo(f"note: {task.name} has {task.stages} stages; later stages' prompts depend on the answers", err=True)
    else:
        m = data.manifest(name)
        names = [file_name] if file_name else m.get("export", next(iter(m["files"])))
        rows = [row for f in ([names] if isinstance(names, str) else names) for row in data.load(name, f)]
    write_atomic(out, data.jsonl_bytes(rows))
    click.echo(f"wrote {len(rows)} {'prompts' if prompts else 'items'} to {out}", err=True)


def _interrupt(signum, _frame):
    raise Interrupted(signum)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or bool(os.environ.get("ECONEVAL_DEBUG"))
    for sig in (signal.SIGINT, signal.SIGTERM):  # a run refines this: writes in progress finish first
        signal.signal(sig, _interrupt)
    try:
        cli.main(args=argv, prog_name="econeval", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:  # click turned an interrupt at a prompt into Abort
        click.echo("econeval: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        if debug:
            raise
        msg = " ".join(exc.format_message().split())
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            msg += f" (see: {exc.ctx.command_path} --help)"
        click.echo(f"econeval: error: {msg}", err=True)
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
    except Interrupted as exc:
        click.echo(f"\neconeval: {exc}; run.json is marked interrupted" + (f"; {exc.hint}" if exc.hint else ""), err=True)
        sys.exit(exc.exit_code)
    except EconevalError as exc:
        if debug:
            raise
        click.echo(f"econeval: error: {exc.one_line()}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("\neconeval: interrupted; rerun the same command with the same --out to resume", err=True)
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the last line of defence for a clean CLI
        if debug:
            raise
        click.echo(f"econeval: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
