"""Runs tasks: builds each item's requests, sends them to the role that serves them (the
evaluated model, the judge, the embedder) a chunk of items at a time, appends one sample line
per item, resumes what an earlier run into the same folder finished, writes the tables.

The run folder (`folder.py`) is locked for the whole run and its identity checked before
anything is written; SIGINT / SIGTERM / SIGHUP are acknowledged at once, finish the current
write, mark run.json `interrupted` and leave the folder resumable.
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
from .folder import RunFolder, merged_identity
from .intervals import headline_intervals
from .metrics import logprob_problem
from .progress import RunProgress, TaskLine
from .runmeta import now, role_entry, run_meta
from .types import EMBEDDER, JUDGE, MODEL, Completion, OptionScores, Prepared, Task, TaskResult


@dataclass
class RunContext:
    """Run-level settings shared by the tasks: the seed, --limit, task options and the roles'
    factories (made on first use)."""

    seed: int = 1234
    limit: int | None = None
    sample: float | int | None = None  # --sample: items per task, or a fraction (sampling.py)
    bootstrap: int = 1000  # resamples for the headline numbers' intervals (0: none)
    task_options: dict[str, Any] = field(default_factory=dict)  # option name → value, for every task declaring it
    per_task: dict[str, dict[str, Any]] = field(default_factory=dict)  # task → its own option values (a gate's baseline)
    judge_given: bool = False  # a judge model was named (--judge); otherwise the judge role is the evaluated model
    shard: tuple[int, int] | None = None  # (K, N): run only the chunks whose index ≡ K-1 (mod N); shards.py
    # --budget and `econeval gate`: the items in a seeded order ("nested": stratified samples that
    # grow; "random": a uniformly random order), the tasks' chunks interleaved; no new chunk after
    # `deadline` (time.monotonic()); `watch(task, records so far)` after each chunk: (no more items
    # for this task?, a note for its progress line)
    order: str | None = None
    deadline: float | None = None
    watch: Callable[[Task, list[dict]], tuple[bool, str | None]] | None = None
    only: dict[str, set[str]] | None = None  # task → the item ids to run (a gate: those its baseline scored)
    factories: dict[str, Callable[[], Any]] = field(default_factory=dict)  # role → factory
    _made: dict[str, Any] = field(default_factory=dict)

    def options_for(self, task: Task) -> dict[str, Any]:
        """The task's option values: the ones given (parsed by the option), defaults for the rest."""
        out = {}
        given = {**self.task_options, **self.per_task.get(task.name, {})}
        for opt in task.options:
            if opt.name in given:
                try:
                    out[opt.name] = opt.parse(given[opt.name])
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
            from .registry import did_you_mean

            owners = sorted({f"{o.name} ({t.name})" for t in tasks for o in t.options}) or ["none"]
            raise UsageError(f"no selected task has the option '{name}'",
                             hint=did_you_mean(name, declared) or f"options of the selected tasks: {', '.join(owners)}")


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
    stages = prep.stages or task.stages
    for _stage in range(stages):
        pending: dict[str, list[tuple[int, str, Any]]] = {}
        for i, (item, out) in enumerate(zip(items, outputs)):
            if out.get("skipped") or out.get("error"):
                continue
            for name, req in task.requests(item, prep, out).items():
                if name not in out and req.role not in skip_roles:
                    pending.setdefault(req.role, []).append((i, name, req))
        n_reqs = sum(len(g) for g in pending.values())
        step = (len(items) / stages / n_reqs) if progress and n_reqs else 0.0
        for role, group in pending.items():
            server = ctx.role(role)
            reqs = [r for _, _, r in group]
            tick = (lambda _i: progress(step)) if progress and step else None
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


def aggregate(task: Task, records: list[dict], prep: Prepared, n_boot: int = 0, seed: int = 0,
              sample: dict | None = None) -> TaskResult:
    """A task's result; `sample` (a stratified sample's record): its numbers are estimates of the
    full set's, with intervals that account for the strata and the finite population."""
    kept = [r for r in records if not r.get("skipped") and not r.get("error")]
    out: TaskResult = task.aggregate(kept, prep)  # type: ignore[assignment]  # a task's table is its own shape
    design = None
    if sample:
        from .sampling import RANDOM_SCHEME

        one = sample["scheme"] == RANDOM_SCHEME
        strata = {it["id"]: "all" if one else str(task.strata(it)) for it in prep.items}
        design = (strata, sample["n"] / sample["population"])
        how = "a simple random sample" if one else f"a stratified sample over {len(sample['strata'])} strata"
        out["estimate"] = {"from": sample["n"], "of": sample["population"], "scheme": sample["scheme"],
                           "strata": len(sample["strata"]), "strata_sampled_once": sample["strata_sampled_once"],
                           "note": f"estimated from {sample['n']:,} of {sample['population']:,} items ({how})"}
    intervals = headline_intervals(task, kept, prep, n_boot, seed, design)
    if intervals:
        out["intervals"] = intervals
    out["n"] = len(records)
    for key in ("skipped", "error"):
        bad = [r[key] for r in records if r.get(key)]
        reasons: dict[str, int] = {}
        for why in bad:
            reasons[why] = reasons.get(why, 0) + 1
        if key == "skipped":
            out["n_skipped"] = len(bad)
            if bad:
                out["skip_reasons"] = reasons
        else:
            out["n_errors"] = len(bad)
            if bad:
                out["error_reasons"] = reasons
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


HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill, a closed terminal window


class _Signals:
    """SIGINT / SIGTERM / SIGHUP raise Interrupted, except inside a write (deferred until it is
    done). A watcher thread acknowledges the signal at once, while the main thread may still be
    inside the model's decode step (the exception is raised as soon as that step returns)."""

    def __init__(self, ack: Callable[[int, bool], None] | None = None):
        self.critical = False
        self.pending: int | None = None
        self.old: dict[int, Any] = {}
        self.ack = ack
        self._pipe: tuple[int, int] | None = None
        self._old_fd = -1

    def _handler(self, signum, _frame):
        if self.critical:
            self.pending = signum
        else:
            raise Interrupted(signum)

    def __enter__(self):
        import os
        import threading

        for s in HANDLED:
            try:
                self.old[s] = signal.signal(s, self._handler)
            except ValueError:  # not the main thread: no handlers
                pass
        if self.old and self.ack:
            r, w = os.pipe()
            os.set_blocking(w, False)
            self._pipe = (r, w)
            self._old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
            threading.Thread(target=self._watch, args=(r,), daemon=True, name="econeval-signals").start()
        return self

    def _watch(self, r: int) -> None:
        import os

        while True:
            try:
                got = os.read(r, 16)
            except OSError:
                return
            if not got:
                return
            for signum in got:
                if signum in HANDLED and self.ack:
                    self.ack(signum, self.critical)  # critical: a write is in progress and will finish

    def __exit__(self, *exc):
        import os

        if self._pipe:
            signal.set_wakeup_fd(self._old_fd)
            for fd in self._pipe:
                os.close(fd)
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


def _sizes(task: Task, prep: Prepared, items: list[dict]) -> tuple[list[int], list[int]]:
    """Each item's first-stage prompt characters and generation budget (the progress estimate)."""
    chars, budget = [], []
    for item in items:
        reqs = task.requests(item, prep, {}).values()
        chars.append(sum(len(str(r.prompt)) for r in reqs))
        budget.append(sum(getattr(r, "max_tokens", 0) or 0 for r in reqs))
    return chars, budget


def run(tasks: list[Task], backend, out_dir: Path, ctx: RunContext, preps: dict[str, Prepared] | None = None,
        argv: list[str] | None = None, show_progress: bool = True, folder: RunFolder | None = None,
        say: Callable[[str], None] | None = None, on_progress: Callable[[dict], None] | None = None,
        config: dict | None = None) -> dict:
    """Run `tasks` with `backend` as the evaluated model into `out_dir`. `folder` may be a
    RunFolder opened (locked and checked) before the model was loaded; `on_progress` gets the
    progress figures (progress.py) after every chunk and step."""
    preps = preps or prepare(tasks, ctx)
    ctx.role_made(MODEL, backend)
    info = backend.info()
    meta = run_meta(tasks, preps, info, role_infos(tasks, preps, ctx), seed=ctx.seed, limit=ctx.limit,
                    bootstrap=ctx.bootstrap, argv=argv, shard=ctx.shard)
    if config:
        meta["config"] = config
    own = folder is None
    folder = folder or RunFolder.open(out_dir)
    try:
        return _run_locked(tasks, backend, folder, ctx, preps, meta, show_progress, say or (lambda _m: None), on_progress)
    finally:
        if own:
            folder.close()


def _plan(tasks: list[Task], preps: dict[str, Prepared], ctx: RunContext,
          size: int) -> tuple[dict[str, list[list[dict]]], dict[str, dict]]:
    """Each task's chunks of this run (this shard's): fixed chunks of its item list, so batches
    are reproducible; and with --sample, each task's sample design (sampling.py)."""
    from .sampling import nested_order, random_order, stratified

    out, designs = {}, {}
    for task in tasks:
        prep = preps[task.name]
        if ctx.order:  # every item, settled as in a full run, in the seeded order
            everything = select_items(task, prep, None)
            if ctx.only is not None:
                everything = [it for it in everything if it["id"] in ctx.only.get(task.name, ())]
            everything = (nested_order(everything, task.strata, ctx.seed, task.name) if ctx.order == "nested"
                          else random_order(everything, ctx.seed, task.name))
        elif ctx.sample is not None:
            picked, designs[task.name] = stratified(prep.items, task.strata, ctx.sample, ctx.seed, task.name)
            everything = task.finalize_items(picked, prep)
        else:
            everything = select_items(task, prep, ctx.limit)
        chunks = [everything[start:start + size] for start in range(0, len(everything), size)]
        out[task.name] = [ch for c, ch in enumerate(chunks) if in_shard(c, ctx.shard)]
    return out, designs


def _schedule(tasks: list[Task], plan: dict[str, list[list[dict]]], interleave: bool,
              cost: Callable[[Task], float] | None = None) -> list[tuple[Task, list[dict]]]:
    """The chunks in the order they run: task after task, or (interleave) one chunk of each task
    in turn, the tasks whose chunks cost least first (`cost`), so that a short budget reaches as
    many tasks as it can."""
    if not interleave:
        return [(t, ch) for t in tasks for ch in plan[t.name]]
    if cost:
        tasks = sorted(tasks, key=cost)
    out = []
    for k in range(max((len(plan[t.name]) for t in tasks), default=0)):
        out += [(t, plan[t.name][k]) for t in tasks if k < len(plan[t.name])]
    return out


def _item_cost(line: TaskLine, n: int = 16) -> float:
    """A task's estimated cost per item over its next n items: prompt tokens (4 characters
    each) plus the generation budget."""
    k = min(n, len(line.chars))
    return line.units(4.0, 0, k) / k if k else 0.0


def _segment_end(acc: dict, backend, prog: RunProgress) -> None:
    """A task's run of consecutive chunks ended: add its seconds and counters to the task's."""
    c1 = backend.counters()
    acc["seconds"] += time.monotonic() - acc["t0"]
    for k, v in c1.items():
        acc["counters"][k] = acc["counters"].get(k, 0) + v - acc["c0"].get(k, 0)
    prog.end()


def _run_locked(tasks, backend, folder: RunFolder, ctx, preps, meta, show_progress, say, on_progress) -> dict:
    folder.check_identity(meta["identity"])
    old = folder.meta or {}
    if old:  # the same run, or some or more of its tasks: the folder describes all of them
        meta["started"] = old.get("started", meta["started"])
        meta["resumed"] = old.get("resumed", 0) + 1
        meta["identity"] = merged_identity(old.get("identity"), meta["identity"])
        for key in ("tasks", "options"):
            meta[key] = {**(old.get(key) or {}), **meta[key]}
    if ctx.order == "random" or old.get("gate"):  # a gate's folder: its items in the gate's order (gate.py refuses others)
        from .sampling import RANDOM_SCHEME

        meta["gate"] = {"order": RANDOM_SCHEME}
    plan, designs = _plan(tasks, preps, ctx, meta["schedule"]["chunk_items"])
    if ctx.sample is not None:  # a stratified sample: its own results file, never results.json
        results_name = f"results-sample-{ctx.sample}.json"
        meta["limit"] = old.get("limit")
        meta["samples"] = {**old.get("samples", {}), results_name: {"sample": ctx.sample, "seed": ctx.seed, "tasks": designs}}
        meta["partial_results"] = {**old.get("partial_results", {}), results_name: {"sample": ctx.sample}}
    else:
        results_name = folder.results_name(ctx.limit)
        if results_name != "results.json":
            meta["limit"] = old.get("limit")
            meta["partial_results"] = {**old.get("partial_results", {}), results_name: ctx.limit}
    results: dict[str, Any] = {}
    timing: dict[str, Any] = {}
    chunk_no = 0
    log = folder.samples()
    lines = []
    for task in tasks:
        items = [it for ch in plan[task.name] for it in ch]
        todo = [it for it in items if (task.name, it["id"]) not in log.done]
        lines.append(TaskLine(task.name, len(items), len(items) - len(todo), *_sizes(task, preps[task.name], todo)))
    saved, total = sum(x.saved for x in lines), sum(x.total for x in lines)
    if saved:
        say(f"econeval: resuming {folder.path}: {saved:,} of {total:,} items done, {total - saved:,} to run")
    prog = RunProgress(lines, counters=backend.counters, show=show_progress, callback=on_progress)

    def ack(signum: int, writing: bool) -> None:
        doing = (f"finishing the write of chunk {chunk_no}" if writing else
                 f"the model stops at its next step; chunk {chunk_no} (in progress) is dropped and runs again on resume")
        prog.say(f"econeval: {signal.Signals(signum).name}: stopping: {doing}; "
                 f"{prog.snapshot()['saved']:,} of {total:,} items are saved")

    with _Signals(ack) as sig:
        sig.write(folder.write_meta, meta)
        stopped: set[str] = set()  # tasks the watcher needs no more items of
        budget_spent = False
        spent: dict[str, dict] = {}  # task → its seconds and counters so far, and where its current segment began
        try:
            current = None
            by_name = {x.name: x for x in lines}
            for task, whole in _schedule(tasks, plan, interleave=ctx.order is not None, cost=lambda t: _item_cost(by_name[t.name])):
                chunk = [it for it in whole if (task.name, it["id"]) not in log.done]
                if not chunk or task.name in stopped:
                    continue
                if ctx.deadline is not None and time.monotonic() >= ctx.deadline:
                    budget_spent = True  # no chunk starts after the budget: the one in flight is the overshoot
                    break
                if current != task.name:
                    if current:
                        _segment_end(spent[current], backend, prog)
                    prog.begin(task.name)
                    spent.setdefault(task.name, {"seconds": 0.0, "counters": {}}).update(c0=backend.counters(), t0=time.monotonic())
                    current = task.name
                chunk_no += 1
                prep = preps[task.name]
                outputs = run_chunk(task, chunk, prep, ctx, progress=prog.advance)
                sig.write(log.append, score_records(task, chunk, outputs, prep))
                prog.saved(len(chunk), sum(len(str(p)) for o in outputs for p in (o.get("prompts") or {}).values()))
                if ctx.watch:
                    done = [log.done[k] for ch in plan[task.name] for it in ch if (k := (task.name, it["id"])) in log.done]
                    enough, note = ctx.watch(task, done)
                    prog.note(task.name, note)
                    if enough:
                        stopped.add(task.name)
            if current:
                _segment_end(spent[current], backend, prog)
            not_reached: list[str] = []  # a --budget spent before the task's first chunk
            for task in tasks:
                prep = preps[task.name]
                items = [it for ch in plan[task.name] for it in ch]
                line = next(x for x in lines if x.name == task.name)
                used = spent.get(task.name, {"seconds": 0.0, "counters": {}})
                seconds = used["seconds"]
                timing[task.name] = {"items_run": line.items_done, "seconds": round(seconds, 3),
                                     "items_per_s": round(line.items_done / seconds, 3) if line.items_done and seconds else None,
                                     **used["counters"]}
                kept = [log.done[(task.name, it["id"])] for it in items if (task.name, it["id"]) in log.done]
                partial = ctx.order is not None and len(kept) < len(items)
                design = designs.get(task.name)
                if partial:
                    from .sampling import RANDOM_SCHEME, SCHEME, design as sample_design

                    design = sample_design(items, {r["id"] for r in kept}, task.strata if ctx.order == "nested" else None,
                                           SCHEME if ctx.order == "nested" else RANDOM_SCHEME)
                if kept or not partial:
                    results[task.name] = aggregate(task, kept, prep, n_boot=ctx.bootstrap, seed=ctx.seed, sample=design)
                else:
                    not_reached.append(task.name)
            if ctx.order is not None and (budget_spent or stopped):
                meta["stopped_early"] = {"why": "budget spent" if budget_spent else "decided", "at": now(),
                                         "tasks_stopped": sorted(stopped), "tasks_not_reached": not_reached}
                if any(r.get("estimate") for r in results.values()) or not results:
                    results_name = "results-partial.json"
                    meta["partial_results"] = {**meta.get("partial_results", {}), results_name: {"order": ctx.order}}
        except Interrupted as exc:
            prog.close()
            meta.update(status="interrupted", interrupted=now(), timing=timing)
            folder.write_meta(meta)
            exc.marked = True  # the CLI says run.json is marked interrupted only when it is
            exc.saved = (prog.snapshot()["saved"], total)
            raise
        except BaseException as exc:  # an error: the folder says why it stopped (what was written stays)
            prog.close()
            meta.update(status="failed", failed=now(), error=f"{type(exc).__name__}: {exc}"[:500], timing=timing)
            try:
                folder.write_meta(meta)
            except OSError:
                pass  # the disk that failed the samples may fail this too: run.json then says "running"
            raise
        finally:
            log.close()
        prog.close()
        earlier = folder.read_results(results_name)  # the folder's other tasks keep their numbers
        doc = {"econeval_version": __version__, "model": meta["backend"]["model"]["name"], "limit": ctx.limit,
               **({"not_reached": meta["stopped_early"]["tasks_not_reached"]}
                  if (meta.get("stopped_early") or {}).get("tasks_not_reached") else {}),
               **({"sample": ctx.sample} if ctx.sample is not None else {}),
               "tasks": {**{k: v for k, v in earlier.items() if k not in results}, **results}}
        sig.write(folder.write_results, results_name, doc)
        meta.update(status="complete", finished=now(), timing=timing, backend=backend.info().to_json(),
                    peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))
        sig.write(folder.write_meta, meta)
    return {**doc, "tasks": results}
