"""Runs tasks: builds each item's requests, sends them to the role that serves them (the
evaluated model, the judge, the embedder) a chunk of items at a time, appends one sample line
per item, resumes what an earlier run into the same folder finished, writes the tables.

The run folder (`folder.py`) is locked for the whole run and its identity checked before
anything is written; SIGINT / SIGTERM / SIGHUP are acknowledged at once, finish the current
write, mark run.json `interrupted` and leave the folder resumable.

A deadline (`--budget`): a chunk starts only if the time it is expected to take (its task's
seconds per size unit measured on its chunks so far, else the projection's: `RunProgress.
chunk_seconds`) ends by the deadline; a task whose next chunk does not fit takes no more items
(its items run in their order), the others go on while theirs fit. The chunk in flight at the
deadline is cut off at the model's next step where the model allows it (an in-process engine between
decode steps, a stand-in between requests: `signals.until`), dropped whole, and runs again on resume.

Two chunks in flight (`_Run._overlapped`): where the evaluated model's backend `overlaps` (a served
model), the next chunk starts on a thread of its own once every request of the newest one is in flight, so
that the server never drains between chunks or tasks; at most WINDOW chunks, each saved whole in
the plan's order on the main thread, both stopped (nothing sent after) and dropped at an interrupt
or an error. Off (the chunks in turn) under a --budget, a selection that watches records (a gate),
interleaved tasks, and an evaluated model whose backend does not declare it (`_Run._window`); a
task with a role whose backend does not (an in-process embedder or judge) runs its chunks in turn.
"""

from __future__ import annotations

import dataclasses
import math
import queue
import resource
import signal
import threading
from collections import deque
from typing import Any, Callable, Iterator

from .. import registry
from ..backends.base import Overlap
from ..version import __version__
from ..context import RunContext, check_task_options
from ..errors import BudgetSpent, Interrupted, UsageError, saved_words
from ..signals import Guard, until
from ..store.folder import RunFolder
from ..metrics import logprob_problem
from .progress import RunProgress, TaskLine
from ..sampling import duration
from .projection import project, sample_chunks
from .projection import lines_of as projection_lines
from ..reasoning import THINKING
from ..store.record import RunRecord, merged_timing
from ..store.runfiles import PARTIAL, RESULTS
from ..store.runmeta import CHUNK, role_entry, run_record
from ..scoring import aggregate, score_records
from .selection import Selection
from ..types import MODEL, Completion, OptionScores, Prepared, Task, is_scored, task_roles


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
        return
    if res.reasoning is not None:  # saved beside the answer, never parsed
        out.setdefault(THINKING, {})[name] = res.reasoning
        calls[name].update(n_reasoning_tokens=res.n_reasoning_tokens, reasoning_ended=res.reasoning_ended)


OVER_CONTEXT = "longer than the model context (its prompt and generation budget)"
OVERRUN_SAID = 5.0  # seconds past a --budget after which the run says it ran over


def run_chunk(task: Task, items: list[dict], prep: Prepared, ctx: RunContext, outputs: list[dict] | None = None,
              skip_roles: tuple[str, ...] = (), progress: Callable[[float], None] | None = None,
              first: dict[str, dict] | None = None, refused: frozenset[str] = frozenset(),
              budget: int | None = None, overlap: Overlap | None = None) -> list[dict]:
    """Outputs of a chunk of items: each stage's requests of all the chunk's items go to their
    role together, in item order. Requests whose result is already in `outputs`, or whose role
    is in `skip_roles`, are not sent. `first`: item id → its first-stage requests, built already
    (for the run's estimate), taken from there instead of being built again. `refused`: the ids
    of items refused before the run (longer than the model context): skipped, never sent.
    `overlap` (a chunk in flight beside another: every role's backend `overlaps`): handed to each call, its `stop` ending them, its
    `sent` called when the last call's requests are all in flight (the next chunk may start)."""
    fresh = outputs is None
    outputs = outputs if outputs is not None else [{"skipped": OVER_CONTEXT} if it["id"] in refused else {} for it in items]
    stages = prep.stages or task.stages
    for stage in range(stages):
        pending: dict[str, list[tuple[int, str, Any]]] = {}
        for i, (item, out) in enumerate(zip(items, outputs)):
            if not is_scored(out):
                continue
            built = first.pop(item["id"], None) if first is not None and fresh and stage == 0 else None
            for name, req in (built if built is not None else _budgeted(task.requests(item, prep, out), budget)).items():
                if name not in out and req.role not in skip_roles:
                    pending.setdefault(req.role, []).append((i, name, req))
        n_reqs = sum(len(g) for g in pending.values())
        step = (len(items) / stages / n_reqs) if progress and n_reqs else 0.0
        for k, (role, group) in enumerate(pending.items()):
            server = ctx.role(role)
            reqs = [r for _, _, r in group]
            tick = (lambda _i: progress(step)) if progress and step else None
            if overlap is None:
                results = server.evaluate(reqs, on_done=tick)
            else:
                last = stage == stages - 1 and k == len(pending) - 1
                results = server.evaluate(reqs, on_done=tick, overlap=Overlap(overlap.stop, overlap.sent if last else None))
            for (i, name, req), res in zip(group, results):
                _store(outputs[i], name, req, res)
    return outputs


def complete_outputs(task: Task, items: list[dict], outputs: list[dict], prep: Prepared, ctx: RunContext) -> list[dict]:
    """For answers produced elsewhere: run the stages that do not need the evaluated model (the
    judge, the embedder)."""
    return run_chunk(task, items, prep, ctx, outputs, skip_roles=(MODEL,))


# ---- a run -----------------------------------------------------------------------------------
def prepare(tasks: list[Task], ctx: RunContext, make_roles: bool = True,
            prepared: dict[str, Prepared] | None = None) -> dict[str, Prepared]:
    """Load each task's data and settle its options (and make the roles they use that the
    evaluated model does not fill: the embedder, a judge named): every input problem shows before
    the model is loaded. `prepared`: tasks prepared already (a gate's, as its baseline prepared
    them), taken as they are."""
    check_task_options(tasks, ctx.task_options)
    preps = {t.name: (prepared or {}).get(t.name) or ctx.prepare(t) for t in tasks}
    if make_roles:
        for role in dict.fromkeys(r for t in tasks for r in task_roles(t, preps[t.name]) if r != MODEL):
            if role in ctx.given or registry.role(role).fallback != "model":
                ctx.role(role)
    return preps


def role_infos(tasks: list[Task], preps: dict[str, Prepared], ctx: RunContext) -> dict[str, dict]:
    """run.json's `roles`: an entry for each role besides the model that these tasks use (made now)."""
    used = dict.fromkeys(r for t in tasks for r in task_roles(t, preps[t.name]) if r != MODEL)
    return {role: role_entry(ctx.role(role).info(), role in ctx.given) for role in used}


def _budgeted(reqs: dict[str, Any], budget: int | None) -> dict[str, Any]:
    """An item's requests, those to the evaluated model carrying its task's own reasoning budget
    (`--task-reasoning-tokens`) where one is given."""
    if budget is None:
        return reqs
    return {name: dataclasses.replace(r, reasoning_tokens=budget) if r.role == MODEL and hasattr(r, "reasoning_tokens") else r
            for name, r in reqs.items()}


def _sizes(task: Task, prep: Prepared, items: list[dict], built: dict[str, dict],
           reasoning: Callable[[Any], int], own: int | None = None) -> tuple[list[int], list[int]]:
    """Each item's first-stage prompt characters and generation budget, a reasoning model's
    reasoning budget included (the progress estimate and the projection); the requests are kept in
    `built` (item id → requests), so that no prompt is built twice."""
    chars, budget = [], []
    for item in items:
        reqs = built[item["id"]] = _budgeted(task.requests(item, prep, {}), own)
        chars.append(sum(len(str(r.prompt)) for r in reqs.values()))
        budget.append(sum((getattr(r, "max_tokens", 0) or 0) + (reasoning(r) if r.role == MODEL else 0) for r in reqs.values()))
    return chars, budget


def run(tasks: list[Task], backend, folder: RunFolder, ctx: RunContext, preps: dict[str, Prepared], selection: Selection,
        *, argv: list[str] | None = None, config: dict | None = None, show_progress: bool = True,
        say: Callable[[str], None] | None = None, on_progress: Callable[[dict], None] | None = None) -> dict:
    """Run `tasks` (prepared: `preps`) with `backend` as the evaluated model into `folder` (opened:
    locked, and checked as far as it could be before the model loaded), taking the items
    `selection` names. run.json records `argv` and a --config file's `config`; `on_progress` gets
    the progress figures (progress.py) after every chunk and step."""
    ctx.role_made(MODEL, backend)
    info = backend.info()
    say = say or (lambda _m: None)
    tasks, not_run = _applicable(tasks, preps, info.details.get("reasoning") or {}, say)
    record = run_record(tasks, preps, info, role_infos(tasks, preps, ctx), seed=ctx.seed, limit=selection.limit,
                        bootstrap=ctx.bootstrap, argv=argv, shard=selection.shard(), seed_given=ctx.seed_given,
                        config=config, not_run=not_run)
    folder.check_identity(record.identity)
    return _Run(tasks, backend, folder, ctx, selection, preps, record, say, show_progress, on_progress).go()


def _applicable(tasks: list[Task], preps: dict[str, Prepared], reasoning: dict,
                say: Callable[[str], None]) -> tuple[list[Task], dict[str, str]]:
    """The tasks whose protocol applies to this model (a benchmark may decline a protocol for a
    reasoning model, Task.not_for), and why the others do not; none left is a usage error."""
    not_run = {t.name: why for t in tasks if (why := t.not_for(preps[t.name], reasoning))}
    if not_run and len(not_run) == len(tasks):
        raise UsageError("; ".join(f"{k}: {v}" for k, v in not_run.items()))
    for name, why in not_run.items():
        say(f"econeval: {name} not run: {why}")
    return [t for t in tasks if t.name not in not_run], not_run


def _plan(tasks: list[Task], preps: dict[str, Prepared], selection: Selection, seed: int,
          size: int) -> dict[str, list[list[dict]]]:
    """Each task's chunks of this run (this shard's): fixed chunks of the selection's items, so
    batches are reproducible."""
    out = {}
    for task in tasks:
        everything = selection.items(task, preps[task.name], seed)
        chunks = [everything[start:start + size] for start in range(0, len(everything), size)]
        out[task.name] = [ch for c, ch in enumerate(chunks) if selection.owns(c)]
    return out


def _schedule(tasks: list[Task], plan: dict[str, list[list[dict]]], interleave: bool,
              cost: Callable[[Task], float] | None = None) -> list[tuple[Task, list[dict]]]:
    """The chunks in the order they run: task after task, or (interleave) one chunk of each task
    in turn, the tasks whose items cost least first (`cost`: the projected seconds per item, or
    without a projection their size), so that a short budget reaches as many tasks as it can."""
    if not interleave:
        return [(t, ch) for t in tasks for ch in plan[t.name]]
    if cost:
        tasks = sorted(tasks, key=cost)
    out = []
    for k in range(max((len(plan[t.name]) for t in tasks), default=0)):
        out += [(t, plan[t.name][k]) for t in tasks if k < len(plan[t.name])]
    return out


def _item_cost(line: TaskLine, n: int = 16) -> float:
    """A task's estimated cost per item over its next n items, where the run has no projection:
    prompt tokens (4 characters each) plus the generation budget."""
    k = min(n, len(line.chars))
    return line.units(4.0, 0, k) / k if k else 0.0


def _projected_per_item(projection: dict) -> dict[str, float]:
    """Each projected task's seconds per item (the order of a budget's tasks): its likely time, else
    the middle of its range."""
    out = {}
    for name, t in projection["tasks"].items():
        s = t["seconds"]
        if t["items"]:
            out[name] = (s["likely"] if s["likely"] is not None else (s["low"] + s["high"]) / 2) / t["items"]
    return out


def _prior(projection: dict, lines: list[TaskLine], chars_per_token: float) -> dict[str, float]:
    """Each projected task's seconds per size unit of its remaining items: the likely time where the
    folder's items gave generated lengths, else the low end (every answer stopping after a token: a
    --budget refuses no chunk that could end in time; one that runs longer is cut off at the deadline)."""
    out = {}
    for line in lines:
        seconds = (projection["tasks"].get(line.name) or {}).get("seconds") or {}
        best = seconds.get("likely") if seconds.get("likely") is not None else seconds.get("low")
        units = line.units(chars_per_token, line.items_done)
        if best is not None and units > 0:
            out[line.name] = best / units
    return out


def _segment_end(acc: dict, backend, prog: RunProgress) -> None:
    """A task's run of consecutive chunks ended: add its seconds and counters to the task's."""
    c1 = backend.counters()
    acc["seconds"] += prog.clock() - acc["t0"]
    for k, v in c1.items():
        acc["counters"][k] = acc["counters"].get(k, 0) + v - acc["c0"].get(k, 0)
    prog.end()


def _next(events: queue.Queue) -> tuple:
    """The next event of the chunks in flight, waited for a tick at a time: a signal the kernel gave
    to another thread is handled only when this (the main) thread runs Python again, so it never
    blocks for long (a Ctrl-C once waited here until the next answer: 30 s on a slow server)."""
    while True:
        try:
            return events.get(timeout=TICK_S)
        except queue.Empty:
            continue


TICK_S = 0.1  # seconds the run's thread waits for a chunk's event at a time
WINDOW = 2  # chunks in flight at once on a backend that overlaps (memory: two chunks' requests and outputs)
JOIN_S = 5.0  # seconds a stopped chunk's thread is waited for (it sends nothing more; a request in flight may hold it)


class _Flight:
    """A chunk in flight on its own thread: whether all its requests went out (`sent`), its outputs
    or error once `done`, the progress it ticked, whether it became the oldest (`begun`)."""

    def __init__(self, task: Task, chunk: list[dict]):
        self.task, self.chunk = task, chunk
        self.sent = self.done = self.begun = False
        self.outputs: list[dict] = []
        self.error: BaseException | None = None
        self.ticked = 0.0
        self.thread: threading.Thread | None = None


class _Run:
    """One run into a locked folder whose identity was checked: the chunks of the plan not yet
    saved, each written whole, then the results and the record's end."""

    def __init__(self, tasks: list[Task], backend, folder: RunFolder, ctx: RunContext, selection: Selection,
                 preps: dict[str, Prepared], record: RunRecord, say: Callable[[str], None], show_progress: bool = False,
                 on_progress: Callable[[dict], None] | None = None):
        self.tasks, self.backend, self.folder, self.ctx = tasks, backend, folder, ctx
        task_budgets = getattr(getattr(backend, "options", None), "task_budgets", None)
        self.budgets: dict[str, int] = task_budgets() if task_budgets else {}  # task → its own reasoning budget
        unknown = sorted(set(self.budgets) - set(registry.tasks()))
        if unknown:
            raise UsageError(f"task_reasoning_tokens names no task {unknown[0]!r}", hint=registry.did_you_mean(unknown[0], registry.tasks()))
        self.selection, self.preps, self.say = selection, preps, say
        self.old: RunRecord | None = folder.record
        if self.old is not None:  # the same run, or some or more of its tasks: the folder describes all of them
            record = record.continuing(self.old)
        self.plan: dict[str, list[list[dict]]] = _plan(tasks, preps, selection, ctx.seed, record.chunk_items)
        notes = selection.notes(folder.has(RESULTS), self.old, record.run_seed)
        self.record: RunRecord = record.noted(notes)
        self.results_name: str = notes.results
        self.timing: dict[str, dict] = {}
        self.stopped: set[str] = set()  # tasks the watcher needs no more items of
        self.budget_spent = False
        self.late: set[str] = set()  # tasks whose next chunk would not end by the deadline
        self.cut = False  # the chunk in flight at the deadline was cut off
        self.chunk_no = 0
        self.running: list[int] = []  # the chunks in progress (their numbers), oldest first
        self.log = folder.samples()  # what the folder holds already
        self.built: dict[str, dict[str, dict]] = {}  # task → item id → its first-stage requests (built once)
        self.lines: list[TaskLine] = [self._line(task) for task in tasks]
        saved, self.total = sum(x.saved for x in self.lines), sum(x.total for x in self.lines)
        self.saved_before = saved
        if saved:
            say(f"econeval: resuming {folder.path}: {saved:,} of {self.total:,} items done, {self.total - saved:,} to run")
        self.refused: dict[str, frozenset[str]] = {}  # items longer than the context, by task (found when the run starts)
        self.per_item: dict[str, float] = {}  # task → its projected seconds per item (none: no projection)
        self.clock = selection.clock
        self.prog = RunProgress(self.lines, counters=backend.counters, show=show_progress, callback=on_progress, clock=self.clock)

    def items(self, task: Task) -> list[dict]:
        return [it for ch in self.plan[task.name] for it in ch]

    def saved(self, task: Task) -> list[dict]:
        """The task's records in the folder, in the plan's order."""
        return [self.log.done[k] for it in self.items(task) if (k := (task.name, it["id"])) in self.log.done]

    def go(self) -> dict:
        saved = self.saved_before
        with Guard(self._ack) as sig:
            sig.write(self.folder.write_record, self.record)
            try:
                # before the first item: what does not fit the context, and what the rest will cost
                # (a template that cannot be rendered fails here, run.json saying why)
                self.refused = self._over_context()
                if self.total > saved:
                    self._project(self.prog.show)
                sig.write(self.folder.write_record, self.record)
                self._chunks(sig)
                results = self._aggregate()
            except Interrupted as exc:
                self.prog.close()
                self.record = self.record.as_interrupted(merged_timing(self.old, self.timing))
                self.folder.write_record(self.record)
                exc.marked = True  # the CLI says run.json is marked interrupted only when it is
                exc.saved = (self.prog.snapshot()["saved"], self.total)
                raise
            except BaseException as exc:  # an error: the folder says why it stopped (what was written stays)
                self.prog.close()
                self.record = self.record.as_failed(f"{type(exc).__name__}: {exc}", merged_timing(self.old, self.timing))
                try:
                    self.folder.write_record(self.record)
                except OSError:
                    pass  # the disk that failed the samples may fail this too: run.json then says "running"
                raise
            finally:
                self.log.close()
            self.prog.close()
            doc = self._doc(results)
            sig.write(self.folder.write_results, self.results_name, doc)
            self.record = self.record.as_complete(merged_timing(self.old, self.timing), self.backend.info().to_json(),
                                                  round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))
            sig.write(self.folder.write_record, self.record)
        return {**doc, "tasks": results}

    def _line(self, task: Task) -> TaskLine:
        items = self.items(task)
        todo = [it for it in items if (task.name, it["id"]) not in self.log.done]
        self.built[task.name] = {}
        reasoning = getattr(self.backend, "reasoning_tokens_for", lambda r: 0)
        return TaskLine(task.name, len(items), len(items) - len(todo), *_sizes(task, self.preps[task.name], todo,
                                                                              self.built[task.name], reasoning,
                                                                              self.budgets.get(task.name)))

    def _over_context(self) -> dict[str, frozenset[str]]:
        """The items to run whose first-stage prompt and generation budget do not fit the model's
        context: said now, with their count and why, recorded, and skipped without being sent
        (a later stage that outgrows the context is cut off and skipped when it happens)."""
        refused: dict[str, frozenset[str]] = {}
        found: dict[str, dict] = {}
        for task in self.tasks:
            pairs = [(item_id, req) for item_id, reqs in self.built[task.name].items() for req in reqs.values() if req.role == MODEL]
            needs: dict[str, int] = {}
            for (item_id, _), need in zip(pairs, self.backend.over_context([r for _, r in pairs])):
                if need:
                    needs[item_id] = max(needs.get(item_id, 0), need)
            if needs:
                refused[task.name] = frozenset(needs)
                found[task.name] = {"items": len(needs), "longest": max(needs.values()), "n_ctx": self.record.n_ctx}
        if found:
            self.record = self.record.refusing(found)
            n_ctx, trained = self.record.n_ctx or 0, self.record.trained_context
            more = (f"; --n-ctx up to the model's trained context ({trained:,}) holds more" if trained and n_ctx and trained > n_ctx
                    else "")
            self.say(f"econeval: {sum(f['items'] for f in found.values()):,} items need more than the model context of "
                     f"{n_ctx:,} tokens (their prompt and generation budget; longest {max(f['longest'] for f in found.values()):,}): "
                     f"{', '.join(t + ' ' + format(f['items'], ',') for t, f in found.items())}; they are recorded as skipped, "
                     f"not run{more}")
        return refused

    def _ack(self, signum: int, writing: bool) -> None:
        running = list(self.running)
        if not running:  # before the first chunk, between chunks or after the last one
            doing = "finishing a write to the run folder" if writing else "no chunk is in progress"
        else:
            dropped = running[1:] if writing else running
            doing = f"finishing the write of chunk {running[0]}" if writing else "the model stops within its current step"
            if dropped:
                doing += (f"; chunk {dropped[0]} (in progress) is dropped and runs again on resume" if len(dropped) == 1 else
                          f"; chunks {' and '.join(map(str, dropped))} (in progress) are dropped and run again on resume")
        self.prog.say(f"econeval: {signal.Signals(signum).name}: stopping: {doing}; "
                      f"{saved_words(self.prog.snapshot()['saved'], self.total)}")

    def _project(self, show_progress: bool) -> None:
        """What the rest will cost, at the rates this device has now."""
        items: dict[str, int] = {}
        sampled: dict[str, list[list]] = {}
        lengths: dict[str, list[int]] = {}
        for task in self.tasks:
            refused, built = self.refused.get(task.name, frozenset()), self.built[task.name]
            chunks = [[it["id"] for it in ch if it["id"] in built and it["id"] not in refused] for ch in self.plan[task.name]]
            chunks = [ch for ch in chunks if ch]
            items[task.name] = sum(map(len, chunks))
            sampled[task.name] = [[r for i in ch for r in built[i].values() if r.role == MODEL] for ch in sample_chunks(chunks)]
            lengths[task.name] = [c["n_tokens"] for rec in self.saved(task) if not rec.get("skipped")
                                  for c in (rec.get("calls") or {}).values()
                                  if isinstance(c, dict) and c.get("kind") == "generate" and isinstance(c.get("n_tokens"), int)]
        if (projection := project(items, sampled, lengths, self.backend, self.ctx.seed)) is not None:
            self.record = self.record.projected(projection)
            self.prog.prior = _prior(projection, self.lines, self.prog.chars_per_token())
            self.per_item = _projected_per_item(projection)
            left = None if self.selection.deadline is None else max(0.0, self.selection.deadline - self.clock())
            for text in projection_lines(projection, self.record.device or "this machine", budget_left=left):
                if show_progress:
                    self.prog.say(text)  # beside the live display on a terminal

    def _window(self) -> int:
        """How many chunks may be in flight at once: WINDOW where the evaluated model's backend
        `overlaps` (a served model: its server batches the next chunk's requests with this one's
        last ones) and nothing is decided between chunks; else one (the chunks in turn). One under a
        --budget (a chunk starts only if it is projected to end by the deadline, measured on the
        chunks before it), a selection that watches records (a gate's or a budget's decisions after
        each chunk) and interleaved tasks. A task with a role whose backend does not overlap (an
        in-process embedder or judge) runs its chunks in turn: `_alone`."""
        sel = self.selection
        if sel.deadline is not None or sel.watches or sel.interleave:
            return 1
        return WINDOW if getattr(self.backend, "overlaps", False) else 1

    def _alone(self, task: Task) -> bool:
        """Whether the task uses a role whose backend does not overlap (an in-process embedder or
        judge): its chunks run in turn on the run's thread, none other in
        flight, as every chunk of an in-process engine does (its signals, its one thread)."""
        return not all(getattr(self.ctx.role(r), "overlaps", False) for r in task_roles(task, self.preps[task.name]))

    def _todo(self) -> Iterator[tuple[Task, list[dict]]]:
        """The plan's chunks not saved yet, in the selection's order, each decided when it is asked
        for: none of a task the watcher stopped, none past the budget."""
        selection, prog = self.selection, self.prog
        by_name = {x.name: x for x in self.lines}
        for task, whole in _schedule(self.tasks, self.plan, interleave=selection.interleave,
                                     cost=(lambda t: self.per_item.get(t.name, 0.0)) if self.per_item else
                                     (lambda t: _item_cost(by_name[t.name]))):
            chunk = [it for it in whole if (task.name, it["id"]) not in self.log.done]
            if not chunk or task.name in self.stopped or task.name in self.late:
                continue
            if selection.deadline is not None:
                now, need = self.clock(), prog.chunk_seconds(task.name, len(chunk))
                if now >= selection.deadline:
                    self.budget_spent = True
                    return
                if need is not None and now + need > selection.deadline:  # it would not end by the deadline
                    self.budget_spent = True
                    self.late.add(task.name)  # nor its later items (they run in their order); other tasks go on
                    continue
            yield task, chunk

    def _chunks(self, sig) -> None:
        """Run the plan's chunks not saved yet, in the selection's order, until the budget or the
        watcher stops them; the watcher sees each task's saved records first, then each chunk's.

        The run's time is partitioned: each moment belongs to the oldest unfinished chunk's task (so
        the tasks' seconds sum to the time the chunks took), and so are the backend's counters
        (tokens, requests, retries) counted meanwhile: with two chunks in flight, what the newer one
        did before the older was saved counts for the older one's task."""
        selection, backend = self.selection, self.backend
        if selection.watches:
            for task in self.tasks:
                if (done := self.saved(task)):
                    self._watch(task, done)
        self.spent: dict[str, dict] = {}  # task → its seconds and counters so far, and where its current segment began
        self.current: str | None = None  # the task of the oldest unfinished chunk
        try:
            if self._window() > 1:
                self._overlapped(self._todo(), sig)
            else:
                for task, chunk in self._todo():
                    if not self._in_turn(task, chunk, sig):
                        break
        finally:  # an interrupted or failed run keeps the seconds and counters of what it ran (the chunks in flight too)
            if self.current:
                _segment_end(self.spent[self.current], backend, self.prog)
            self._time(self.spent)
        if self.cut or self.late:
            said = (["the chunk in flight at its end was cut off (it runs again when the folder is resumed)"] if self.cut else [])
            said += [f"the next chunk of {', '.join(sorted(self.late))} did not start (projected to end after it)"] if self.late else []
            self.say("econeval: the --budget is spent: " + "; ".join(said))
        over = self.clock() - selection.deadline if selection.deadline is not None else 0.0
        if over >= OVERRUN_SAID:
            self.prog.say(f"econeval: the --budget ran out {duration(over)} before the run ended: the chunk then in flight "
                          f"could not be stopped before its end (this model stops only between chunks; a chunk holds "
                          f"max({CHUNK}, 2 x parallel) items)")

    def _in_turn(self, task: Task, chunk: list[dict], sig) -> bool:
        """A chunk on this thread, no other in flight: run, saved whole; False when a --budget's
        deadline cut it off (dropped whole: it runs again on resume)."""
        self._oldest(task, chunk)
        self.chunk_no += 1
        self.running = [self.chunk_no]
        try:
            with until(self.selection.deadline, self.clock):  # past it, the model stops at its next step
                outputs = run_chunk(task, chunk, self.preps[task.name], self.ctx, progress=self.prog.advance,
                                    first=self.built[task.name], refused=self.refused.get(task.name, frozenset()),
                                    budget=self.budgets.get(task.name))
        except BudgetSpent:
            self.running, self.budget_spent, self.cut = [], True, True
            self.prog.dropped()
            return False
        self._save(task, chunk, outputs, sig)
        return True

    def _oldest(self, task: Task, chunk: list[dict]) -> None:
        """A chunk of `task` is now the oldest unfinished one: the time and counters from here on are its task's."""
        if self.current != task.name:
            if self.current:
                _segment_end(self.spent[self.current], self.backend, self.prog)
            self.prog.begin(task.name)
            self.spent.setdefault(task.name, {"seconds": 0.0, "counters": {}}).update(c0=self.backend.counters(), t0=self.clock())
            self.current = task.name
        self.prog.starting(len(chunk))

    def _save(self, task: Task, chunk: list[dict], outputs: list[dict], sig, ticked: float | None = None) -> None:
        """The oldest chunk is done: its records scored and written whole, then shown to the watcher."""
        records = score_records(task, chunk, outputs, self.preps[task.name])
        sig.write(self.log.append, records)
        self.running = self.running[1:]
        self.prog.saved(len(chunk), sum(len(str(p)) for o in outputs for p in (o.get("prompts") or {}).values()), ticked)
        if self.selection.watches:  # a budget's progress note, a gate's verdicts
            self._watch(task, records)

    def _overlapped(self, todo: Iterator[tuple[Task, list[dict]]], sig) -> None:
        """The chunks with up to WINDOW in flight, each on a thread of its own: the next starts once
        every request of the newest one is in flight (its tail), so that the server is never left to
        drain between chunks or tasks; each is saved whole in the plan's order, on this thread,
        once it and the chunks before it are done. On an error or an interrupt (raised here,
        where the signal arrives) the chunks in flight are stopped (no request is sent after it) and
        dropped: they run again on resume, as a chunk in flight always has."""
        events: queue.Queue = queue.Queue()  # (flight, outputs, error): done; (flight, None, None) with .sent: its tail
        stop = threading.Event()
        flights: deque[_Flight] = deque()
        nxt = next(todo, None)
        try:
            while True:
                while nxt is not None and len(flights) < WINDOW and (not flights or flights[-1].sent):
                    if self._alone(nxt[0]):  # on this thread, once the chunks in flight are saved
                        if flights:
                            break
                        self._in_turn(*nxt, sig)
                    else:
                        self.chunk_no += 1
                        self.running.append(self.chunk_no)
                        flights.append(self._launch(*nxt, stop, events))
                    nxt = next(todo, None)
                if not flights:
                    if nxt is None:
                        return
                    continue
                head = flights[0]
                if not head.begun:
                    head.begun = True
                    self._oldest(head.task, head.chunk)
                flight, done, outputs, error = _next(events)
                flight.sent = True
                if done:
                    flight.done, flight.outputs, flight.error = True, outputs, error
                while flights and flights[0].done:
                    oldest = flights.popleft()
                    if oldest.error is not None:
                        raise oldest.error
                    if not oldest.begun:
                        self._oldest(oldest.task, oldest.chunk)
                    self._save(oldest.task, oldest.chunk, oldest.outputs, sig, oldest.ticked)
        finally:
            stop.set()  # the chunks still in flight end: their calls raise, their workers send nothing more
            for flight in flights:
                if flight.thread is not None:
                    flight.thread.join(timeout=JOIN_S)

    def _launch(self, task: Task, chunk: list[dict], stop: threading.Event, events: queue.Queue) -> _Flight:
        flight = _Flight(task, chunk)
        prog, name = self.prog, task.name

        def tick(fraction: float) -> None:
            flight.ticked += fraction
            prog.advance(fraction, name)

        def fly() -> None:
            try:
                outputs = run_chunk(task, chunk, self.preps[name], self.ctx, progress=tick, first=self.built[name],
                                    refused=self.refused.get(name, frozenset()), budget=self.budgets.get(name),
                                    overlap=Overlap(stop, lambda: events.put((flight, False, None, None))))
                events.put((flight, True, outputs, None))
            except BaseException as exc:  # raised on the run's thread when this chunk is the oldest
                events.put((flight, True, None, exc))

        flight.thread = threading.Thread(target=fly, daemon=True, name="econeval-chunk")
        flight.thread.start()
        return flight

    def _time(self, spent: dict[str, dict]) -> None:
        for line in self.lines:
            used = spent.get(line.name, {"seconds": 0.0, "counters": {}})
            seconds = used["seconds"]
            self.timing[line.name] = {"items_run": line.items_done, "seconds": round(seconds, 3),
                                      "items_per_s": round(line.items_done / seconds, 3) if line.items_done and seconds else None,
                                      **used["counters"]}

    def _watch(self, task: Task, records: list[dict]) -> None:
        enough, note = self.selection.watch(task, records)
        self.prog.note(task.name, note)
        if enough:
            self.stopped.add(task.name)

    def _aggregate(self) -> dict[str, Any]:
        """Each task's result over its saved items; what stopped early noted in the record (its
        estimates go to results-partial.json)."""
        results: dict[str, Any] = {}
        not_reached: list[str] = []  # a --budget spent before the task's first chunk
        selection, ctx = self.selection, self.ctx
        for task in self.tasks:
            items, kept = self.items(task), self.saved(task)
            partial = selection.interleave and len(kept) < len(items)
            if kept or not partial:
                results[task.name] = aggregate(task, kept, self.preps[task.name], n_boot=ctx.bootstrap, seed=ctx.seed,
                                               sample=selection.design(task, items, kept))
            else:
                not_reached.append(task.name)
        if selection.interleave and (self.budget_spent or self.stopped):
            partial = any(r.get("estimate") for r in results.values()) or not results  # its estimates: results-partial.json
            if partial:
                self.results_name = PARTIAL
            self.record = self.record.stopped("budget spent" if self.budget_spent else "decided", sorted(self.stopped), not_reached,
                                              (PARTIAL, selection.stopped_note()) if partial else None)
        return results

    def _doc(self, results: dict[str, Any]) -> dict[str, Any]:
        """The results document: this run's tasks, the folder's other tasks as they were."""
        earlier = self.folder.read_results(self.results_name)  # the folder's other tasks keep their numbers
        record = self.record
        return {"econeval_version": __version__, "model": record.model_name, "limit": self.selection.limit,
                **({"not_reached": record.tasks_not_reached} if record.tasks_not_reached else {}),
                **({"not_run": record.not_run} if record.not_run else {}),
                **self.selection.doc(),
                "tasks": {**{k: v for k, v in earlier.items() if k not in results}, **results}}
