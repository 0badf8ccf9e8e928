"""Runs tasks: builds each item's requests, sends them to the role that serves them (the
evaluated model, the judge, the embedder) a chunk of items at a time, appends one sample line
per item, resumes what an earlier run into the same folder finished, writes the tables.

The run folder (`folder.py`) is locked for the whole run and its identity checked before
anything is written; SIGINT / SIGTERM finish the current write, mark run.json `interrupted`
and leave the folder resumable.
"""

from __future__ import annotations

import hashlib
import math
import resource
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .errors import Interrupted, UsageError
from .folder import RunFolder
from .intervals import headline_intervals
from .metrics import logprob_problem
from .progress import Progress
from .runmeta import now, role_entry, run_meta
from .types import EMBEDDER, JUDGE, MODEL, Completion, OptionScores, Prepared, Task, TaskResult


@dataclass
class RunContext:
    """Run-level settings shared by the tasks: the seed, --limit, task options and the roles'
    factories (made on first use)."""

    seed: int = 1234
    limit: int | None = None
    bootstrap: int = 1000  # resamples for the headline numbers' intervals (0: none)
    task_options: dict[str, Any] = field(default_factory=dict)  # option name → value, for every task declaring it
    judge_given: bool = False  # a judge model was named (--judge); otherwise the judge role is the evaluated model
    shard: tuple[int, int] | None = None  # (K, N): run only the chunks whose index ≡ K-1 (mod N); shards.py
    factories: dict[str, Callable[[], Any]] = field(default_factory=dict)  # role → factory
    _made: dict[str, Any] = field(default_factory=dict)

    def options_for(self, task: Task) -> dict[str, Any]:
        """The task's option values: the ones given (parsed by the option), defaults for the rest."""
        out = {}
        for opt in task.options:
            if opt.name in self.task_options:
                try:
                    out[opt.name] = opt.parse(self.task_options[opt.name])
                except ValueError as exc:
                    raise UsageError(f"task option {opt.name} of {task.name}: {exc}") from None
            else:
                out[opt.name] = opt.default
        return out

    def role(self, name: str):
        if name not in self._made:
            if name not in self.factories:
                what = {JUDGE: ("a judge model", "pass --judge MODEL"), EMBEDDER: ("a sentence embedder", "pass --embedder NAME")}
                need, hint = what.get(name, (f"the role '{name}'", ""))
                raise UsageError(f"this task needs {need}", hint=hint or None)
            self._made[name] = self.factories[name]()
        return self._made[name]

    def role_made(self, name: str, backend):
        """Record a role's backend made elsewhere (the evaluated model); returns it."""
        self._made[name] = backend
        self.factories.setdefault(name, lambda: backend)
        return backend

    def made(self, name: str) -> bool:
        return name in self._made

    def close(self) -> None:
        """Close every backend this context made (each once: the judge may be the evaluated model)."""
        closed: set[int] = set()
        for obj in self._made.values():
            if id(obj) not in closed and hasattr(obj, "close"):
                closed.add(id(obj))
                obj.close()
        self._made.clear()


def in_shard(chunk_index: int, shard: tuple[int, int] | None) -> bool:
    """Whether a chunk belongs to shard (K, N): its index ≡ K-1 (mod N); every chunk without sharding."""
    return shard is None or chunk_index % shard[1] == shard[0] - 1


def check_task_options(tasks: list[Task], given: dict[str, Any]) -> None:
    """Every option given must be declared by at least one selected task, and parse there."""
    declared = {o.name for t in tasks for o in t.options}
    for name in given:
        if name not in declared:
            owners = sorted({f"{o.name} ({t.name})" for t in tasks for o in t.options}) or ["none"]
            raise UsageError(f"no selected task has the option '{name}'", hint=f"options of the selected tasks: {', '.join(owners)}")


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def select_items(task: Task, prep: Prepared, limit: int | None) -> list[dict]:
    return task.finalize_items(prep.items if limit is None else task.limit_items(prep.items, limit), prep)


# ---- one chunk -------------------------------------------------------------------------------
def _store(out: dict, name: str, req, res) -> None:
    """Put one request's result into an item's outputs (and its metadata under `calls`)."""
    calls = out.setdefault("calls", {})
    out.setdefault("prompts", {})[name] = req.prompt
    rendered = getattr(res, "rendered", None)
    if rendered:
        out.setdefault("rendered", {})[name] = rendered
    if isinstance(res, Completion):
        out[name] = res.text
        calls[name] = {"kind": "generate", "finish": res.finish, "n_prompt_tokens": res.n_prompt_tokens, "n_tokens": res.n_tokens}
        if res.error:
            out.setdefault("error", res.error)
        elif res.finish == "context":
            out.setdefault("skipped", "prompt longer than the model context" if not res.n_tokens else
                           "generation cut off by the model context")
    elif isinstance(res, OptionScores):
        problem = res.error or (f"the backend's {why}" if (why := logprob_problem(res.scores, res.top)) else None)
        out[name] = dict(res.scores) if problem is None else {}
        calls[name] = {"kind": "option_logprobs", "top_logprob": res.top if problem is None else None,
                       "n_prompt_tokens": res.n_prompt_tokens}
        if res.text is not None:
            calls[name]["text"] = res.text
        if problem:
            out.setdefault("error", problem)
        elif not res.fits:
            out.setdefault("skipped", "prompt longer than the model context")
    else:  # a similarity
        out[name] = res
        calls[name] = {"kind": "similarity"}
        if not (isinstance(res, float) and math.isfinite(res)):
            out[name] = None
            out.setdefault("error", "the embedder produced a non-finite similarity")


def run_chunk(task: Task, items: list[dict], prep: Prepared, ctx: RunContext, outputs: list[dict] | None = None,
              skip_roles: tuple[str, ...] = (), progress: Callable[[float], None] | None = None) -> list[dict]:
    """Outputs of a chunk of items: each stage's requests of all the chunk's items go to their
    role together, in item order. Requests whose result is already in `outputs`, or whose role
    is in `skip_roles`, are not sent."""
    outputs = outputs if outputs is not None else [{} for _ in items]
    for _stage in range(task.stages):
        pending: dict[str, list[tuple[int, str, Any]]] = {}
        for i, (item, out) in enumerate(zip(items, outputs)):
            if out.get("skipped") or out.get("error"):
                continue
            for name, req in task.requests(item, prep, out).items():
                if name not in out and req.role not in skip_roles:
                    pending.setdefault(req.role, []).append((i, name, req))
        n_reqs = sum(len(g) for g in pending.values())
        step = (len(items) / task.stages / n_reqs) if progress and n_reqs else 0.0
        for role, group in pending.items():
            server = ctx.role(role)
            reqs = [r for _, _, r in group]
            tick = (lambda _i: progress(step)) if step else None
            results = server.evaluate(reqs, on_done=tick)
            for (i, name, req), res in zip(group, results):
                _store(outputs[i], name, req, res)
    return outputs


def complete_outputs(task: Task, items: list[dict], outputs: list[dict], prep: Prepared, ctx: RunContext) -> list[dict]:
    """For answers produced elsewhere: run the stages that do not need the evaluated model (the
    judge, the embedder)."""
    return run_chunk(task, items, prep, ctx, outputs, skip_roles=(MODEL,))


def score_records(task: Task, items: list[dict], outputs: list[dict], prep: Prepared) -> list[dict]:
    """Sample records from outputs (shared by `run` and `score`): skipped and errored items are
    recorded as such and never scored."""
    records = []
    for item, out in zip(items, outputs):
        rec = {"id": item["id"], "task": task.name, **out}
        if out.get("prompts"):
            rec["prompt_hash"] = prompt_hash(next(iter(out["prompts"].values())))
        if not out.get("skipped") and not out.get("error"):
            rec.update(task.score(item, out, prep))
        records.append(rec)
    return records


def aggregate(task: Task, records: list[dict], prep: Prepared, n_boot: int = 0, seed: int = 0) -> TaskResult:
    kept = [r for r in records if not r.get("skipped") and not r.get("error")]
    out = task.aggregate(kept, prep)
    intervals = headline_intervals(task, kept, prep, n_boot, seed)
    if intervals:
        out["intervals"] = intervals
    out["n"] = len(records)
    for key, label in (("skipped", "n_skipped"), ("error", "n_errors")):
        bad = [r[key] for r in records if r.get(key)]
        out[label] = len(bad)
        if bad:
            reasons: dict[str, int] = {}
            for why in bad:
                reasons[why] = reasons.get(why, 0) + 1
            out["skip_reasons" if key == "skipped" else "error_reasons"] = reasons
    out.setdefault("n_scored", len(kept))
    return out


# ---- a run -----------------------------------------------------------------------------------
def prepare(tasks: list[Task], ctx: RunContext, make_embedder: bool = True) -> dict[str, Prepared]:
    """Load each task's data and settle its options (and make the embedder, if one is needed):
    every input problem shows before a model is loaded."""
    check_task_options(tasks, ctx.task_options)
    preps = {}
    for t in tasks:
        prep = t.prepare(ctx)
        prep.options = ctx.options_for(t)
        preps[t.name] = prep
    if make_embedder and any(EMBEDDER in task_roles(t, preps[t.name]) for t in tasks):
        ctx.role(EMBEDDER)
    return preps


def task_roles(task: Task, prep: Prepared) -> tuple[str, ...]:
    return prep.roles if prep.roles is not None else task.roles


def role_infos(tasks: list[Task], preps: dict[str, Prepared], ctx: RunContext) -> dict[str, dict | None]:
    """run.json's entries for the judge and the embedder: the roles these tasks use (made now)."""
    return {role: role_entry(ctx.role(role).info()) if any(role in task_roles(t, preps[t.name]) for t in tasks) else None
            for role in (JUDGE, EMBEDDER)}


class _Signals:
    """SIGINT / SIGTERM raise Interrupted, except inside a write (deferred until it is done)."""

    def __init__(self):
        self.critical = False
        self.pending: int | None = None
        self.old: dict[int, Any] = {}

    def _handler(self, signum, _frame):
        if self.critical:
            self.pending = signum
        else:
            raise Interrupted(signum)

    def __enter__(self):
        for s in (signal.SIGINT, signal.SIGTERM):
            try:
                self.old[s] = signal.signal(s, self._handler)
            except ValueError:  # not the main thread: no handlers
                pass
        return self

    def __exit__(self, *exc):
        for s, h in self.old.items():
            signal.signal(s, h)

    def write(self, fn, *args):
        self.critical = True
        try:
            fn(*args)
        finally:
            self.critical = False
        if self.pending is not None:
            raise Interrupted(self.pending)


def run(tasks: list[Task], backend, out_dir: Path, ctx: RunContext, preps: dict[str, Prepared] | None = None,
        argv: list[str] | None = None, show_progress: bool = True, folder: RunFolder | None = None) -> dict:
    """Run `tasks` with `backend` as the evaluated model into `out_dir`. `folder` may be a
    RunFolder opened (locked and checked) before the model was loaded."""
    preps = preps or prepare(tasks, ctx)
    ctx.role_made(MODEL, backend)
    info = backend.info()
    meta = run_meta(tasks, preps, info, role_infos(tasks, preps, ctx), seed=ctx.seed, limit=ctx.limit,
                    bootstrap=ctx.bootstrap, argv=argv, shard=ctx.shard)
    own = folder is None
    folder = folder or RunFolder.open(out_dir)
    try:
        return _run_locked(tasks, backend, folder, ctx, preps, meta, show_progress)
    finally:
        if own:
            folder.close()


def _run_locked(tasks, backend, folder: RunFolder, ctx, preps, meta, show_progress) -> dict:
    folder.check_identity(meta["identity"])
    old = folder.meta or {}
    if old:
        meta["started"] = old.get("started", meta["started"])
        meta["resumed"] = old.get("resumed", 0) + 1
    results_name = folder.results_name(ctx.limit)
    if results_name != "results.json":
        meta["limit"] = old.get("limit")
        meta["partial_results"] = {**old.get("partial_results", {}), results_name: ctx.limit}
    results: dict[str, Any] = {}
    timing: dict[str, Any] = {}
    with _Signals() as sig:
        sig.write(folder.write_meta, meta)
        log = folder.samples()
        try:
            for task in tasks:
                prep = preps[task.name]
                size = meta["schedule"]["chunk_items"]
                everything = select_items(task, prep, ctx.limit)
                chunks = [everything[start:start + size] for start in range(0, len(everything), size)]
                chunks = [ch for c, ch in enumerate(chunks) if in_shard(c, ctx.shard)]  # fixed chunks: reproducible batches
                items = [it for ch in chunks for it in ch]
                todo = [it for it in items if (task.name, it["id"]) not in log.done]
                prog = Progress(task.name, len(todo), enabled=show_progress, counters=backend.counters)
                t0, c0 = time.monotonic(), backend.counters()
                for whole in chunks:
                    chunk = [it for it in whole if (task.name, it["id"]) not in log.done]
                    if not chunk:
                        continue
                    outputs = run_chunk(task, chunk, prep, ctx, progress=prog.advance)
                    sig.write(log.append, score_records(task, chunk, outputs, prep))
                    prog.set(prog.done_items + len(chunk))
                elapsed = time.monotonic() - t0
                c1 = backend.counters()
                timing[task.name] = {"items_run": len(todo), "seconds": round(elapsed, 3),
                                     "items_per_s": round(len(todo) / elapsed, 3) if todo and elapsed else None,
                                     **{k: c1[k] - c0.get(k, 0) for k in c1}}
                results[task.name] = aggregate(task, [log.done[(task.name, it["id"])] for it in items], prep,
                                               n_boot=ctx.bootstrap, seed=ctx.seed)
        except Interrupted as exc:
            meta.update(status="interrupted", interrupted=now(), timing=timing)
            folder.write_meta(meta)
            exc.marked = True  # the CLI says run.json is marked interrupted only when it is
            raise
        except BaseException as exc:  # an error: the folder says why it stopped (what was written stays)
            meta.update(status="failed", failed=now(), error=f"{type(exc).__name__}: {exc}"[:500], timing=timing)
            try:
                folder.write_meta(meta)
            except OSError:
                pass  # the disk that failed the samples may fail this too: run.json then says "running"
            raise
        finally:
            log.close()
        doc = {"econeval_version": __version__, "model": meta["backend"]["model"]["name"], "limit": ctx.limit, "tasks": results}
        sig.write(folder.write_results, results_name, doc)
        meta.update(status="complete", finished=now(), timing=timing, backend=backend.info().to_json(),
                    peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))
        sig.write(folder.write_meta, meta)
    return doc
