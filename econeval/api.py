"""The Python API: `econeval.evaluate(...)` runs tasks on a model and returns the results
document (the content of results.json), as `econeval run` does — the CLI calls it."""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from . import config, registry, runner
from .backends import LoadOptions, check_model, make_backend
from .errors import Interrupted, UsageError
from .folder import RunFolder
from .types import EMBEDDER, JUDGE, MODEL


def _embedder_factory(name: str | None):
    def make():
        from .backends.onnx_embed import OnnxEmbedder

        return OnnxEmbedder(config.resolve_embedder(name))

    return make


def evaluate(model: str | config.ModelSpec | None = None, tasks: Sequence[str] = (), suite: str | None = None,
             limit: int | None = None, out: str | Path | None = None, seed: int = 1234,
             task_options: dict[str, Any] | None = None, judge: str | None = None, embedder: str | None = None,
             n_ctx: int | None = None, n_gpu_layers: int | None = None, threads: int | None = None,
             parallel: int | None = None, bootstrap: int = 1000, progress: bool = False,
             argv: list[str] | None = None, chat: str | None = None, base_url: str | None = None,
             api_key_env: str | None = None, concurrency: int | None = None, timeout: float | None = None,
             max_retries: int | None = None) -> dict:
    """Evaluate `model` (a .gguf path, a models.toml name, a ModelSpec, or None for the default)
    on `tasks` (names) or a `suite` (default: all), write the run folder `out` (default: a new
    timestamped folder under the data dir; an existing folder of the same run is resumed) and
    return the results document. `task_options` maps option names to values for every selected
    task that declares them (e.g. {"adaptation": "cot-hidden", "car": True}). `chat` (on, off,
    auto) overrides the model's chat mode; `base_url`, `api_key_env`, `concurrency`, `timeout`
    and `max_retries` concern served models (`model="openai:NAME"`).

    Returns the results document with one key added: `run_folder`, the folder written."""
    selected = registry.select(suite, list(tasks))
    spec = model if isinstance(model, config.ModelSpec) else config.resolve_model(model, base_url=base_url, api_key_env=api_key_env)
    if chat is not None:
        if chat not in ("auto", "on", "off"):
            raise UsageError(f"chat must be auto, on or off, not {chat!r}")
        spec = replace(spec, chat=chat)
    load = LoadOptions(n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, n_threads=threads, seed=seed, parallel=parallel,
                       concurrency=concurrency, timeout=timeout, max_retries=max_retries)
    check_model(spec, load)
    served_judge = bool(judge) and judge.split(":", 1)[0] in config.SERVED_PREFIXES
    judge_spec = config.resolve_model(judge, base_url=base_url if served_judge else None,
                                      api_key_env=api_key_env if served_judge else None) if judge else None
    if judge_spec:
        check_model(judge_spec, LoadOptions(seed=seed))
    ctx = runner.RunContext(seed=seed, limit=limit, task_options=dict(task_options or {}), bootstrap=bootstrap,
                            judge_given=judge_spec is not None)
    ctx.factories[EMBEDDER] = _embedder_factory(embedder)
    judge_load = LoadOptions(n_threads=threads, seed=seed, concurrency=concurrency, timeout=timeout, max_retries=max_retries) \
        if judge_spec and judge_spec.kind in config.SERVED_PREFIXES else LoadOptions(n_gpu_layers=n_gpu_layers, n_threads=threads, seed=seed)
    ctx.factories[JUDGE] = (lambda: make_backend(judge_spec, judge_load)) \
        if judge_spec else (lambda: ctx.role(MODEL))
    preps = runner.prepare(selected, ctx)  # data, options and embedder problems show before a model loads
    out = Path(out) if out else config.data_home() / "runs" / f"{datetime.now():%Y%m%d-%H%M%S}-{spec.name}"
    folder = RunFolder.open(out)  # locked; refused now if it holds another run
    try:
        folder.check_identity({"run_format": runner.RUN_FORMAT, "seed": seed,
                               "tasks": runner.task_identity(selected, preps, ctx)}, partial=True)
        say = (lambda msg: print(msg, file=sys.stderr, flush=True)) if progress else (lambda msg: None)
        say(f"econeval: run folder {out}; loading model {spec.name} …")
        t0 = time.monotonic()
        backend = make_backend(spec, load)
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
    return {**doc, "run_folder": str(out)}
