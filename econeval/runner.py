"""Runs tasks against a backend: builds each item's requests (one batch method per request kind),
appends one sample line per item, resumes what an earlier run into the same folder finished,
writes the tables."""

from __future__ import annotations

import hashlib
import os
import platform
import resource
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from . import __version__, data
from .errors import UsageError
from .progress import Progress
from .results import SampleLog, read_json, write_json
from .types import Generate, OptionLogprobs, Prepared, Task

CHUNK = 16  # items scored and appended to samples.jsonl together


@dataclass
class RunContext:
    seed: int = 1234
    limit: int | None = None
    options: dict[str, Any] = field(default_factory=dict)  # task options (e.g. STEER-ME adaptation)
    embedder_factory: Callable[[], Any] | None = None
    judge_factory: Callable[[], Any] | None = None  # a Backend that labels generations (EconNLI Table 6)
    _embedder: Any = None
    _judge: Any = None

    def _lazy(self, attr: str, factory, what: str, hint: str):
        if getattr(self, attr) is None:
            if factory is None:
                raise UsageError(f"this task needs {what}", hint=hint)
            setattr(self, attr, factory())
        return getattr(self, attr)

    @property
    def embedder(self):
        return self._lazy("_embedder", self.embedder_factory, "a sentence embedder", "pass --embedder NAME")

    @property
    def judge(self):
        return self._lazy("_judge", self.judge_factory, "a judge model", "pass --judge MODEL (a .gguf file or a models.toml name)")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _prompt_hash(reqs: dict) -> str:
    first = next(iter(reqs.values()))
    return hashlib.sha256(first.prompt.encode("utf-8")).hexdigest()[:16]


def select_items(task: Task, prep: Prepared, limit: int | None) -> list[dict]:
    return prep.items if limit is None else task.limit_items(prep.items, limit)


def score_records(task: Task, items: list[dict], outputs: list[dict], prep: Prepared, ctx: RunContext) -> list[dict]:
    """Per-item records from raw outputs (shared by `run` and `score`)."""
    records = []
    for item, out in zip(items, outputs):
        rec = {"id": item["id"], "task": task.name, **out}
        if out.get("skipped"):
            records.append(rec)
            continue
        rec.update(task.score(item, out, prep))
        records.append(rec)
    task.finalize([r for r in records if not r.get("skipped")], ctx)
    return records


def aggregate(task: Task, records: list[dict], prep: Prepared) -> dict:
    kept = [r for r in records if not r.get("skipped")]
    out = task.aggregate(kept, prep)
    skipped = [r for r in records if r.get("skipped")]
    out["n"] = len(records)
    out["n_skipped"] = len(skipped)
    if skipped:
        reasons: dict[str, int] = {}
        for r in skipped:
            reasons[r["skipped"]] = reasons.get(r["skipped"], 0) + 1
        out["skip_reasons"] = reasons
    return out


def _run_chunk(task: Task, backend, items: list[dict], prep: Prepared) -> list[dict]:
    """Each item's requests go to the backend together, option scores before generation, so a
    backend can reuse the item's evaluated prompt for both."""
    outputs: list[dict] = [{} for _ in items]
    for _stage in range(task.stages):
        for item, out in zip(items, outputs):
            if out.get("skipped"):
                continue
            reqs = task.requests(item, prep, out)
            if not reqs:
                continue
            out.setdefault("prompt_hash", _prompt_hash(reqs))
            lps = [(k, r) for k, r in reqs.items() if isinstance(r, OptionLogprobs)]
            gen = [(k, r) for k, r in reqs.items() if isinstance(r, Generate)]
            if lps:
                for (k, _), lp in zip(lps, backend.option_logprobs([r for _, r in lps])):
                    if lp:
                        out[k] = lp
                    else:
                        out["skipped"] = "prompt longer than the model context"
            if gen and not out.get("skipped"):
                for (k, _), c in zip(gen, backend.generate([r for _, r in gen])):
                    out[k] = c.text
                    out.setdefault("generation", {})[k] = {"finish": c.finish, "n_prompt_tokens": c.n_prompt_tokens,
                                                           "n_tokens": c.n_tokens}
                    if c.finish == "context" and not c.text:
                        out["skipped"] = f"prompt longer than the model context ({c.n_prompt_tokens} tokens)"
    return outputs


def _judge_info(judge) -> dict:
    d = judge.describe()
    return {"model": d["model"]["name"], "sha256": d["model"]["sha256"], "chat_template_applied": d["chat_template_applied"]}


def run_identity(meta: dict) -> dict:
    """What must match for a folder to be resumed (everything that changes the numbers)."""
    b = meta["backend"]
    return {"model_sha256": b["model"]["sha256"], "n_ctx": b["n_ctx"], "chat": b["chat_template_applied"],
            "schedule": b["schedule"], "seed": meta["seed"], "options": meta["options"],
            "tasks": {k: {kk: v[kk] for kk in ("prompt_version", "settings", "dataset")} for k, v in meta["tasks"].items()},
            "embedder": (meta.get("embedder") or {}).get("sha256"), "judge": (meta.get("judge") or {}).get("sha256")}


def prepare(tasks: list[Task], ctx: RunContext) -> dict[str, Prepared]:
    """Load each task's data (and the embedder, if one is needed): every input problem shows
    before a model is loaded."""
    preps = {t.name: t.prepare(ctx) for t in tasks}
    if any(t.needs_embedder for t in tasks):
        ctx.embedder
    return preps


def run(tasks: list[Task], backend, out_dir: Path, ctx: RunContext, preps: dict[str, Prepared] | None = None,
        argv: list[str] | None = None, show_progress: bool = True) -> dict:
    preps = preps or prepare(tasks, ctx)
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {
        "econeval_version": __version__,
        "command": argv or sys.argv,
        "started": now(),
        "status": "running",
        "seed": ctx.seed,
        "limit": ctx.limit,
        "options": ctx.options,
        "tasks": {t.name: {"prompt_version": t.prompt_version, "description": t.description,
                           "settings": preps[t.name].settings, "dataset": data.fingerprint(t.benchmark)} for t in tasks},
        "backend": backend.describe(),
        "embedder": ctx.embedder.describe() if any(t.needs_embedder for t in tasks) else None,
        "judge": _judge_info(ctx.judge) if any(t.needs_judge for t in tasks) else None,
        "environment": {"python": sys.version.split()[0], "platform": platform.platform(),
                        "machine": platform.machine(), "cpu_count": os.cpu_count()},
    }
    run_json = out_dir / "run.json"
    if run_json.exists():
        old = read_json(run_json)
        try:
            same = run_identity(old) == run_identity(meta)
        except KeyError:
            same = False
        if not same:
            raise UsageError(f"{out_dir} holds a different run (model, data, prompts, seed or settings differ)",
                             hint="choose a new --out folder, or rerun with the same settings to resume")
        meta["started"] = old.get("started", meta["started"])
        meta["resumed"] = old.get("resumed", 0) + 1
    write_json(run_json, meta)

    log = SampleLog(out_dir / "samples.jsonl")
    results: dict[str, Any] = {}
    timing: dict[str, Any] = {}
    try:
        for task in tasks:
            prep = preps[task.name]
            items = select_items(task, prep, ctx.limit)
            todo = [it for it in items if (task.name, it["id"]) not in log.done]
            prog = Progress(task.name, len(todo), enabled=show_progress)
            t0, evaluated0 = time.monotonic(), getattr(backend, "n_evaluated", 0)
            for start in range(0, len(todo), CHUNK):
                chunk = todo[start:start + CHUNK]
                outputs = _run_chunk(task, backend, chunk, prep)
                log.append(score_records(task, chunk, outputs, prep, ctx))
                prog.update(len(chunk))
            elapsed = time.monotonic() - t0
            timing[task.name] = {"items_run": len(todo), "seconds": round(elapsed, 3),
                                 "items_per_s": round(len(todo) / elapsed, 3) if todo and elapsed else None,
                                 "tokens_evaluated": getattr(backend, "n_evaluated", 0) - evaluated0}
            results[task.name] = aggregate(task, [log.done[(task.name, it["id"])] for it in items], prep)
    finally:
        log.close()
    doc = {"econeval_version": __version__, "model": meta["backend"]["model"]["name"], "tasks": results}
    write_json(out_dir / "results.json", doc)
    meta.update(status="complete", finished=now(), timing=timing,
                peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))
    write_json(run_json, meta)
    return doc
