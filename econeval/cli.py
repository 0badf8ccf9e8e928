"""The econeval command line. User errors print one line and exit non-zero (no traceback
unless --debug); exit codes: 0 success, 1 runtime failure, 2 usage error."""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path

import click

from . import __version__, benchmarks, config, data
from .errors import EconevalError, UsageError
from .results import dumps, read_jsonl, write_atomic


def _echo_json(obj) -> None:
    click.echo(dumps(obj).decode())


def _fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="econeval")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
def cli(debug: bool) -> None:
    """Evaluate language models on economics and finance reasoning, offline.

    \b
    Suites: econnli (EconNLI, Tables 4 and 6), econlogicqa (EconLogicQA, Table 2),
    cfbenchmark (CFBenchmark-Basic, Table 2), steer-me (STEER-ME re-implementation).
    Run `econeval list` for tasks.
    Quick start:  econeval data build && econeval run --suite all --limit 2
    """


def _steer_options(fn):
    fn = click.option("--questions", type=click.Path(dir_okay=False, exists=True, path_type=Path),
                      help="STEER-ME: a question set from `econeval steer generate` instead of the bundled one.")(fn)
    fn = click.option("--car", is_flag=True, help='STEER-ME: calibrated answer replacement ("No other option is correct.").')(fn)
    fn = click.option("--adaptation", type=click.Choice(["direct", "cot-shown", "cot-hidden", "free-text"]), default="direct",
                      show_default=True, help="STEER-ME adaptation.")(fn)
    return fn


def _steer(adaptation, car, questions) -> dict:
    out = {"steer_adaptation": adaptation, "steer_car": car}
    if questions:
        out["steer_questions"] = str(Path(questions).resolve())
    return out


def _embedder_factory(name):
    def make():
        from .backends.onnx_embed import OnnxEmbedder

        return OnnxEmbedder(config.resolve_embedder(name))

    return make


# ---- run ---------------------------------------------------------------------------------
@cli.command()
@click.option("--model", "-m", help="Path to a .gguf file or a name from models.toml (default: the embedded Gemma 3 270M).")
@click.option("--suite", "-s", default=None, help="Suite to run: econnli, econlogicqa, cfbenchmark, steer-me, or all (default).")
@click.option("--task", "-t", "tasks", multiple=True, help="Run only this task (repeatable); overrides --suite.")
@click.option("--limit", "-n", type=click.IntRange(min=1),
              help="Evaluate only the first N items of each task (CFBenchmark: of each sub-task; STEER-ME: of each element).")
@click.option("--seed", type=int, default=1234, show_default=True, help="Seed for few-shot draws (recorded in run.json).")
@click.option("--n-gpu-layers", type=int, help="Layers to offload to the GPU (-1: all). Default: the model's entry, all when offload is available.")
@click.option("--n-ctx", type=click.IntRange(min=256), help="Context length in tokens (default: the model's entry).")
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads for llama.cpp (default: all CPUs available to the process).")
@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path),
              help="Run folder (default: a new timestamped folder under the data dir). An existing folder of the same run is resumed.")
@click.option("--embedder", "-e", help="Sentence embedder for CFBenchmark generation scoring: a models.toml name or a folder (default: m3e-small).")
@click.option("--cfbenchmark-decoding", type=click.Choice(["released", "intended"]), default="released", show_default=True,
              help="CFBenchmark summary decoding: as the released code ran it (64 tokens) or as intended (512).")
@_steer_options
@click.option("--judge", help="Judge model for econnli-gen (a .gguf file or a models.toml name; default: the evaluated model).")
@click.option("--json", "as_json", is_flag=True, help="Print results.json on stdout instead of the summary table.")
@click.option("--quiet", "-q", is_flag=True, help="No progress line.")
def run(model, suite, tasks, limit, seed, n_gpu_layers, n_ctx, threads, out, embedder, cfbenchmark_decoding,
        adaptation, car, questions, judge, as_json, quiet):
    """Evaluate a model and write run.json, samples.jsonl and results.json."""
    from . import runner
    from .backends import make_backend
    from .backends.llamacpp import check_gguf

    selected = benchmarks.select(suite, tasks)
    spec = config.resolve_model(model)
    judge_spec = config.resolve_model(judge) if judge else None
    for m in (spec, judge_spec):
        if m and m.path:
            check_gguf(Path(m.path))
    if spec.base_url and n_gpu_layers is not None:
        raise UsageError("--n-gpu-layers applies to local GGUF models only")
    options = {}
    if any(t.suite == "cfbenchmark" for t in selected):
        options["cfbenchmark_decoding"] = cfbenchmark_decoding
    if any(t.suite == "steer-me" for t in selected):
        options.update(_steer(adaptation, car, questions))
    ctx = runner.RunContext(seed=seed, limit=limit, embedder_factory=_embedder_factory(embedder), options=options)
    preps = runner.prepare(selected, ctx)  # fails on missing data or embedder before a model loads
    out = out or config.data_home() / "runs" / f"{datetime.now():%Y%m%d-%H%M%S}-{spec.name}"
    backend = make_backend(spec, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, seed=seed, n_threads=threads)
    ctx.judge_factory = (lambda: make_backend(judge_spec, n_gpu_layers=n_gpu_layers, seed=seed, n_threads=threads)) \
        if judge_spec else (lambda: backend)
    doc = runner.run(selected, backend, out, ctx, preps, argv=["econeval", *sys.argv[1:]], show_progress=not quiet)
    if as_json:
        _echo_json(doc)
        return
    click.echo(f"model: {spec.name}   run folder: {out}")
    for t in selected:
        res = doc["tasks"][t.name]
        cells = "  ".join(f"{k} {_fmt(v)}" for k, v in t.headline(res).items())
        click.echo(f"  {t.name:<22} n {res['n']:>5}  unparsed {res.get('n_unparsed', 0):>4}  skipped {res['n_skipped']:>3}  {cells}")


# ---- score -------------------------------------------------------------------------------
@cli.command()
@click.option("--task", "-t", "task_name", required=True, help="Task whose parser and metrics to use, e.g. econnli-zero.")
@click.option("--predictions", "-p", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help='JSON Lines: {"id": "...", "response": "raw model text"} per item, optionally "option_logprobs".')
@click.option("--seed", type=int, default=1234, show_default=True, help="Seed the predictions were made with (few-shot draws).")
@click.option("--embedder", "-e", help="Sentence embedder for CFBenchmark generation scoring (default: m3e-small).")
@click.option("--judge", help="Judge model for econnli-gen (a .gguf file or a models.toml name).")
@_steer_options
def score(task_name, predictions, seed, embedder, judge, adaptation, car, questions):
    """Score predictions made elsewhere; print the results JSON on stdout."""
    from . import runner

    task = benchmarks.get_task(task_name)
    ctx = runner.RunContext(seed=seed, embedder_factory=_embedder_factory(embedder), options=_steer(adaptation, car, questions))
    if judge:
        from .backends import make_backend

        judge_spec = config.resolve_model(judge)
        ctx.judge_factory = lambda: make_backend(judge_spec, seed=seed)
    prep = task.prepare(ctx)
    by_id = {it["id"]: it for it in prep.items}
    items, outputs, seen = [], [], set()
    for n, row in enumerate(read_jsonl(predictions, "predictions file"), 1):
        pid, resp = row.get("id"), row.get("response")
        if not isinstance(pid, str) or not isinstance(resp, str):
            raise UsageError(f"{predictions}: prediction {n} needs string fields 'id' and 'response'")
        if pid not in by_id:
            raise UsageError(f"{predictions}: prediction {n} has unknown id '{pid}' for task {task_name}",
                             hint=f"ids look like {prep.items[0]['id']}; `econeval data export` lists them")
        if pid in seen:
            raise UsageError(f"{predictions}: id '{pid}' appears twice")
        seen.add(pid)
        out = {"response": resp}
        if "option_logprobs" in row:
            lp = row["option_logprobs"]
            if not isinstance(lp, dict) or not all(isinstance(v, (int, float)) for v in lp.values()):
                raise UsageError(f"{predictions}: prediction {n}: option_logprobs must map options to numbers")
            out["option_logprobs"] = {k: float(v) for k, v in lp.items()}
        items.append(by_id[pid])
        outputs.append(out)
    if not items:
        raise UsageError(f"{predictions} holds no predictions")
    records = runner.score_records(task, items, outputs, prep, ctx)
    _echo_json({"econeval_version": __version__, "model": None, "predictions": str(predictions),
                "tasks": {task.name: runner.aggregate(task, records, prep)}})


# ---- list / models -----------------------------------------------------------------------
@cli.command("list")
@click.option("--json", "as_json", is_flag=True)
def list_cmd(as_json):
    """Show suites and their tasks."""
    s = benchmarks.suites()
    if as_json:
        _echo_json({"suites": s, "tasks": {n: {"suite": t.suite, "prompt_version": t.prompt_version, "description": t.description}
                                           for n, t in benchmarks.TASKS.items()}})
        return
    for suite, names in s.items():
        if suite == "all":
            continue
        click.echo(f"{suite}")
        for n in names:
            click.echo(f"  {n:<22} {benchmarks.TASKS[n].description}")
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
        click.echo(f" {mark} {name:<20} {where}  (n_ctx {m.n_ctx}, chat {m.chat}, gpu layers {m.n_gpu_layers})")
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
    from .steer.generator import covered, generate

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
    from .steer.generator import combos, covered, templates

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
        counts = data.build(name, source)
        click.echo(f"{name}: " + ", ".join(f"{f} {n} rows" for f, n in counts.items()))


@data_group.command("list")
@click.option("--json", "as_json", is_flag=True)
def data_list(as_json):
    """Show benchmarks, versions, row counts, licences and build state."""
    rows = []
    for name in data.benchmarks():
        m = data.manifest(name)
        st = data.status(name)
        rows.append({"benchmark": name, "version": m["version"], "licence": m["licence"],
                     "files": {f: {"rows": i["rows"], "state": st[f]} for f, i in m["files"].items()},
                     "known_defects": m.get("known_defects", [])})
    if as_json:
        _echo_json(rows)
        return
    for r in rows:
        built = "built" if all(f["state"] == "ok" for f in r["files"].values()) else "NOT BUILT (econeval data build)"
        click.echo(f"{r['benchmark']} {r['version']}  [{built}]  licence: {r['licence']}")
        for f, i in r["files"].items():
            click.echo(f"    {f:<28} {i['rows']:>6} rows  {i['state']}")
        for d in r["known_defects"]:
            click.echo(f"    note: {d}")


@data_group.command("verify")
def data_verify():
    """Re-hash every built file; name any that does not match its manifest."""
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
@click.argument("benchmark")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="JSONL file to write.")
@click.option("--file", "file_name", help="Which file of the benchmark (default: its evaluation items).")
def data_export(benchmark, out, file_name):
    """Write a benchmark's normalised items (ids included) as JSON Lines."""
    m = data.manifest(benchmark)
    names = [file_name] if file_name else m.get("export", next(iter(m["files"])))
    rows = [row for name in ([names] if isinstance(names, str) else names) for row in data.load(benchmark, name)]
    write_atomic(out, data.jsonl_bytes(rows))
    click.echo(f"wrote {len(rows)} items to {out}", err=True)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or bool(os.environ.get("ECONEVAL_DEBUG"))
    try:
        cli.main(args=argv, prog_name="econeval", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("econeval: aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        if debug:
            raise
        msg = " ".join(exc.format_message().split())
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            msg += f" (see: {exc.ctx.command_path} --help)"
        click.echo(f"econeval: error: {msg}", err=True)
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
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
