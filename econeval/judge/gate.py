"""`econeval gate`: a sequential release gate. The candidate model runs on a baseline run's scored
items in a seeded, uniformly random order (the tasks taking turns, a chunk each). After every
chunk the gate takes the next items of that order that the candidate has finished, pairs each
with the baseline's, and feeds two one-sided betting e-processes per item metric the task
declares (`Task.item_metrics`; sequential.py): one for "pass" (the mean paired difference lies
above -max_drop) and one for "regression" (below). A task stops taking items once its verdict is
known (each of its metrics passed, or one regressed), the gate once every task's is; at the budget
or the end of the items what is open is inconclusive.

- "pass" needs every gated metric to pass (an intersection-union test): each is tested at
  alpha. "regression" needs one metric: each is tested at alpha / (number of metrics). So the
  chance of a wrong verdict is at most alpha, however early the gate stops.
- A candidate item without a valid value (an error, a skip, no value for the metric) counts as
  the metric's worst value: a regression cannot hide its losses as failures. The output says
  how many there were.
- Every gated task's unanswered share (`tables.UNANSWERED`: unparsed, an error or skipped) is
  gated beside its item metrics, as compare holds it: a candidate whose unparsed answers rise
  beyond the margin does not pass, whatever its item metrics count an unparsed answer as.
- The items are taken strictly in the gate's order: a replayed folder that lacks the next item
  of the order is gated on what came before it (what a live gate would have seen), and what is
  still open then is inconclusive.
- Baseline and replayed candidate are read with every record re-derived from its stored
  response (verify.py), and the two must be comparable as `compare` requires.
Numbers that are not means over items (F1 of a class, ECE) are reported at the end with
compare's paired bootstrap, marked not gated; one that cannot be computed for a run says why.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .. import registry
from .compare import GATE_COLUMNS, Row, check_comparable, check_max_drop, check_prepared, check_reasoning, verdict_of
from ..errors import UsageError, counted
from ..store.finished import FinishedRun, open_checked
from .junit import Case, suite
from ..store.record import RunRecord, comparable
from ..store.runfiles import RUN_JSON
from ..store.runmeta import CHUNK
from ..run.spec import RunSpec
from .sequential import Interval, MarginPair
from ..store.items import ERROR, SKIPPED, unanswered
from ..tables import UNANSWERED
from ..types import Task, is_scored, task_roles
from ..store.verify import prepared_from

REPLAY_CHUNK = CHUNK  # items per step when a finished run is replayed: a run's smallest chunk


@dataclass
class Gated:
    """One item metric of one task: its pass / regression e-processes and the shown interval, in
    units of w = s (c - b) / R."""

    task: str
    metric: str
    direction: int
    lo: float
    hi: float
    population: int  # baseline items with a value
    max_drop: float
    alpha_pass: float
    alpha_regression: float
    show: bool = True  # keep the shown interval (a simulation of verdicts alone needs none)
    n: int = 0
    failed: int = 0  # candidate items without a valid value, counted as the worst value
    baseline_sum: float = 0.0
    candidate_sum: float = 0.0
    pair: MarginPair = field(init=False)
    shown: Interval = field(init=False)
    # after each step (a chunk): items paired so far, and the running maximum of each e-process's log wealth (None:
    # its null can no longer hold)
    trace: list[tuple[int, float | None, float | None]] = field(default_factory=list)

    def __post_init__(self):
        span = self.hi - self.lo
        self.pair = MarginPair(self.max_drop / span, self.population, self.alpha_pass, self.alpha_regression)
        self.shown = Interval(self.population, self.alpha_pass, self.alpha_regression)

    @property
    def worst(self) -> float:
        return self.lo if self.direction > 0 else self.hi

    def add(self, pairs: list[tuple[float, float | None]]) -> None:
        """Paired values (baseline, candidate; None: the candidate has no valid value)."""
        if not pairs:
            return
        span = self.hi - self.lo
        w = []
        for b, c in pairs:
            if c is None:
                self.failed += 1
                c = self.worst
            w.append(self.direction * (c - b) / span)
            self.baseline_sum += b
            self.candidate_sum += c
        arr = np.clip(np.array(w), -1.0, 1.0)
        self.pair.feed(arr)
        if self.show:
            self.shown.feed(arr)
        self.n += len(pairs)
        p, r = (float(b) if math.isfinite(b) else None for b in (self.pair.passing.best[0], self.pair.regressing.best[0]))
        self.trace.append((self.n, p, r))

    def progress(self) -> dict[str, Any]:
        """The e-processes step by step against their thresholds (log 1/alpha), for a plot."""
        return {"task": self.task, "metric": self.metric, "of": self.population, "verdict": self.verdict(final=True),
                "threshold_pass": self.pair.need_pass, "threshold_regression": self.pair.need_regression,
                "steps": [{"items": n, "log_wealth_pass": p, "log_wealth_regression": r} for n, p, r in self.trace]}

    def verdict(self, final: bool) -> str:
        return self.pair.verdict() or ("inconclusive" if final else "undecided")

    def row(self, final: bool) -> Row:
        n, span = self.n, self.hi - self.lo
        low, high = self.shown.bounds() if n else (None, None)
        to_diff = (lambda w: self.direction * span * w + 0.0)  # + 0.0: a zero of a lower-is-better metric is 0, not -0
        lo_hi = sorted((to_diff(low), to_diff(high))) if n else (None, None)
        verdict = self.verdict(final)
        return Row(self.task, self.metric, n, self.baseline_sum / n if n else None, self.candidate_sum / n if n else None,
                   (self.candidate_sum - self.baseline_sum) / n if n else None, lo_hi[0], lo_hi[1], None, verdict,
                   of=self.population, failed=self.failed,
                   further_items=self.further_items(low, high) if verdict == "inconclusive" else None)

    def further_items(self, low: float | None, high: float | None) -> int | None:
        """About how many more items a decision needs at the observed spread: the interval's
        half-width scaled by sqrt(n / n'), until it clears the margin; the task's items at most."""
        if self.n < 2 or low is None or high is None or self.n >= self.population:
            return None
        span = self.hi - self.lo
        mean = (self.candidate_sum - self.baseline_sum) / self.n / span * self.direction
        gap = abs(mean + self.max_drop / span)
        half = (high - low) / 2
        if gap <= 0:
            return self.population - self.n
        need = math.ceil(self.n * (half / gap) ** 2)
        return max(1, min(need, self.population) - self.n)


@dataclass
class TaskGate:
    """One task: the baseline's items in the gate's order, how far the candidate has been taken
    along it, and its gated metrics."""

    task: Task
    order: list[str]
    baseline: dict[str, dict[str, float | None]]  # item id → metric → value
    rows: list[Gated]
    taken: int = 0
    blocked: str | None = None  # a replay lacks the next item of the order
    received: dict[str, dict] = field(default_factory=dict)  # a live run's records so far, by item id

    def decided(self) -> bool:
        """Whether the task's verdict is known: every metric decided, or one regressed (no later
        item can make it pass; its other metrics stay open)."""
        verdicts = [g.verdict(final=False) for g in self.rows]
        return "regression" in verdicts or all(v == "pass" for v in verdicts)

    def feed(self, records: list[dict]) -> None:
        """A live run's new records (a chunk's, or those a resumed run finds saved): kept, and the
        next items of the order taken as far as they reach."""
        self.received.update((r["id"], r) for r in records)
        self.take(self.received)

    def take(self, records: dict[str, dict], upto: int | None = None) -> None:
        """Take the next items of the order that `records` holds (at most `upto` in all), stopping
        at the first one it lacks."""
        end = len(self.order) if upto is None else min(upto, len(self.order))
        new: list[tuple[dict[str, float | None], dict | None]] = []
        while self.taken < end:
            rec = records.get(self.order[self.taken])
            if rec is None:
                break
            new.append((self.baseline[self.order[self.taken]], rec))
            self.taken += 1
        for g in self.rows:
            g.add([(float(bv), _candidate_value(self.task, rec, g)) for b, rec in new if (bv := b.get(g.metric)) is not None])


def _candidate_value(task: Task, rec: dict | None, g: Gated) -> float | None:
    """The candidate's value of the metric for one record; None for an item without a valid one
    (an error, a skip, no value); a value outside the metric's bounds is refused."""
    if rec is None or not is_scored(rec):
        return None
    value = _item_values(task, rec).get(g.metric)
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    if not _in_range(value, g.lo, g.hi):
        raise UsageError(f"{g.task} item {rec.get('id')}: the candidate's {g.metric} is {value}, outside its range "
                         f"[{g.lo}, {g.hi}]", hint="the candidate folder was edited or written by another tool")
    return float(value)


@dataclass
class Gate:
    """The gate's state, fed chunk by chunk (a live run's watcher, or a replay)."""

    tasks: dict[str, TaskGate]
    max_drop: float
    alpha: float
    not_gated: dict[str, str]  # task or task:metric → why it is not gated
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def build(cls, seed: int, tasks: list[str], samples: dict[str, dict[str, dict]], max_drop: float, alpha: float,
              metrics: tuple[str, ...] = (), where: Path | None = None) -> "Gate":
        """The gate over the baseline's `tasks` and their records (`samples`: task → item id → record)."""
        plans: list[tuple[Task, dict[str, dict[str, float | None]], list[Any], dict[str, int]]] = []
        not_gated: dict[str, str] = {}
        every: set[str] = set()
        for t in tasks:
            task = registry.get_task(t)
            every |= {m.name for m in task.item_metrics}
            mine = [m for m in task.item_metrics if not metrics or m.name in metrics]
            if not mine:
                not_gated[t] = (f"no item metric {', '.join(map(repr, metrics))}" if metrics and task.item_metrics
                                else "no item metric")
                continue
            values = {i: _baseline_values(task, rec, [*mine, UNANSWERED], where) for i, rec in samples.get(t, {}).items()
                      if is_scored(rec)}
            if not values:
                raise UsageError(f"{where}: the baseline has no scored item of {t}")
            counts = {m.name: sum(1 for v in values.values() if v.get(m.name) is not None) for m in mine}
            for m in mine:
                if not counts[m.name]:
                    not_gated[f"{t} {m.name}"] = "the baseline has no value for it on any item"
            mine = [m for m in mine if counts[m.name]]
            if mine:  # with its unanswered share (unparsed, errors, skips), which every baseline item has
                plans.append((task, values, [*mine, UNANSWERED], {**counts, UNANSWERED.name: len(values)}))
        unknown = [m for m in metrics if m not in every]
        if unknown:
            raise UsageError(f"no gated task has the item metric {', '.join(map(repr, unknown))}",
                             hint=f"item metrics of these tasks: {', '.join(sorted(every)) or 'none'}")
        if not plans:
            raise UsageError("none of the baseline's tasks has an item-level metric to gate on",
                             hint="compare two full runs with `econeval compare` instead")
        k = sum(len(mine) for _, _, mine, _ in plans)
        for task, _, mine, _ in plans:
            for m in mine:
                span = m.bounds[1] - m.bounds[0]
                if max_drop >= span:
                    raise UsageError(f"--max-drop {max_drop} is not below the range of {task.name} {m.name} "
                                     f"([{m.bounds[0]}, {m.bounds[1]}]): every verdict would be pass",
                                     hint=f"a margin in the metric's units, below {span}")
        gated = {}
        for task, values, mine, counts in plans:
            rows = [Gated(task.name, m.name, m.direction, m.bounds[0], m.bounds[1], counts[m.name], max_drop, alpha, alpha / k)
                    for m in mine]
            gated[task.name] = TaskGate(task, gate_order(task.name, values, seed), values, rows)
        return cls(gated, max_drop, alpha, not_gated)

    def watch(self, task: Task, records: list[dict]) -> tuple[bool, str | None]:
        """After each chunk of a live run, its new records: take the task's next items (in the
        gate's order); (every metric of the task decided?, a progress note)."""
        tg = self.tasks.get(task.name)
        if tg is None:
            return True, None
        tg.feed(records)
        shown = [g.row(final=False) for g in tg.rows]
        note = "; ".join(f"Δ{r.metric} [{r.low:+.3f}, {r.high:+.3f}] {r.verdict}" for r in shown if r.n)
        return tg.decided(), note or None

    def received(self) -> dict[str, dict[str, dict]]:
        """A live run's records, task → item id → record: what the candidate's folder holds of the
        gated tasks (nothing is read back)."""
        return {t: dict(tg.received) for t, tg in self.tasks.items()}

    def replay(self, by_task: dict[str, dict[str, dict]]) -> None:
        """A finished candidate folder, as a run would have fed it: chunk by chunk, until decided
        or the folder lacks the next item of the order."""
        for tg in self.tasks.values():
            records = by_task.get(tg.task.name, {})
            while not tg.decided() and tg.taken < len(tg.order):
                before = tg.taken
                tg.take(records, upto=before + REPLAY_CHUNK)
                if tg.taken < min(before + REPLAY_CHUNK, len(tg.order)):
                    missing = tg.order[tg.taken]
                    tg.blocked = (f"the candidate folder lacks {missing}, item {tg.taken + 1} of the gate's order: gated on "
                                  f"the {tg.taken:,} before it")
                    break

    def rows(self) -> list[Row]:
        return [g.row(final=True) for tg in self.tasks.values() for g in tg.rows]

    def progress(self) -> list[dict[str, Any]]:
        return [g.progress() for tg in self.tasks.values() for g in tg.rows]


def _in_range(value: float, lo: float, hi: float) -> bool:
    return lo - 1e-9 <= value <= hi + 1e-9  # a metric's bounds, give or take rounding


def _item_values(task: Task, rec: dict) -> dict[str, float | None]:
    """A scored record's item metrics, its unanswered share (1.0: unparsed) among them."""
    return {**task.item_values(rec), UNANSWERED.name: unanswered(task, rec)}


def _baseline_values(task: Task, rec: dict, metrics: list, where: Path | None) -> dict[str, float | None]:
    values = _item_values(task, rec)
    out: dict[str, float | None] = {}
    for m in metrics:
        v = values.get(m.name)
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and _in_range(v, *m.bounds)):
            raise UsageError(f"{where}: {task.name} item {rec.get('id')}: the baseline's {m.name} is {v!r}, outside its "
                             f"range [{m.bounds[0]}, {m.bounds[1]}]", hint="the baseline folder was edited or written by another tool")
        out[m.name] = None if v is None else float(v)
    return out


def gate_order(task: str, ids, seed: int) -> list[str]:
    """The order in which the gate runs a task's baseline items (the runner's, for `only` these
    ids): a seeded uniformly random order of the ids."""
    from ..sampling import random_order

    return [it["id"] for it in random_order([{"id": i} for i in ids], seed, task)]


def gate_folder(baseline: Path, run: RunSpec) -> Path:
    """The gate's own run folder under the data dir: named by the baseline and the candidate's
    settings, so the same gate resumes it and no ordinary run folder is taken over."""
    from .. import config

    what = {"baseline": str(baseline.resolve()), **run.identity()}
    return config.named_folder("gates", f"{Path(what['model'] or 'default').name}-vs-{baseline.name}", what)


def _check_roles(base: RunRecord, tasks: list[Task], preps: dict, named: dict[str, str]) -> None:
    """The roles the baseline named a model for are named for the candidate too (a judge that is
    the evaluated model, or another one, scores by another protocol), and no others."""
    from ..run import roles as role_specs

    used = {r for t in tasks for r in task_roles(t, preps[t.name])}
    theirs = base.named_roles & used
    for name in sorted(theirs):
        model = base.role(name).name or "?"
        flag = registry.role(name).flag
        if name not in named:
            raise UsageError(f"the baseline named {model} for the role {name}: the candidate needs it too",
                             hint=f"pass {flag} with the baseline's model")
        given = role_specs.resolve(named[name], name).name
        if given != model:
            raise UsageError(f"the role {name}: the baseline's model is {model}, the candidate's {given}; their numbers "
                             "are not comparable", hint=f"pass {flag} with the baseline's model")
    for name in sorted(set(named) & used - theirs):
        raise UsageError(f"the baseline named no model for the role {name}: the candidate's would score it otherwise",
                         hint=f"leave out the model named for {name}")


def baseline_population(base: FinishedRun) -> dict[str, dict]:
    """Each task's baseline population, stated and checked: the items its results count, the
    sample lines there are, and how many are errors or skipped (left out of the gate). A baseline
    whose lines fall short of what its results count, whose errors or skips exceed what its results
    record, or whose results count fewer items than a complete, unlimited run has, is refused:
    the gate never passes on what is left of a narrowed baseline."""
    from ..scoring import select_items

    out: dict[str, dict] = {}
    for t, prep in base.preps.items():
        recs = base.samples.get(t, {})
        outcomes = [view.outcome for view in base.items(t)]
        errors, skipped = outcomes.count(ERROR), outcomes.count(SKIPPED)
        got = base.results.get(t)
        res: dict = got if isinstance(got, dict) else {}
        n, n_err, n_skip = (res.get(k) for k in ("n", "n_errors", "n_skipped"))
        counts = [x if isinstance(x, int) and not isinstance(x, bool) else None for x in (n, n_err, n_skip)]
        where = f"{base.path}: {t}"
        if counts[0] is not None and len(recs) < counts[0]:
            raise UsageError(f"{where}: the baseline has {len(recs):,} sample lines of the {counts[0]:,} items its results "
                             "count: lines are missing, and a gate on what is left would not be the baseline's",
                             hint="rerun the baseline (the same command resumes it) or gate on another one")
        if (counts[1] is not None and errors > counts[1]) or (counts[2] is not None and skipped > counts[2]):
            raise UsageError(f"{where}: the baseline marks {errors:,} items errors and {skipped:,} skipped, its results "
                             f"{counts[1]} and {counts[2]}: the folder contradicts itself",
                             hint="the samples were edited or written by another tool; rerun the baseline")
        if base.record.whole and counts[0] is not None and not res.get("estimate"):
            full = len(select_items(registry.get_task(t), prep, None))
            if counts[0] < full:
                raise UsageError(f"{where}: run.json says the run is complete and unlimited, yet its results count "
                                 f"{counts[0]:,} of the task's {full:,} items: the folder contradicts itself",
                                 hint="rerun the baseline (the same command resumes it) or gate on another one")
        usable = len(recs) - errors - skipped
        note = (f"baseline {t}: {usable:,} of its {len(recs):,} items gated; {errors:,} errors and {skipped:,} skipped "
                "left out" if errors or skipped else None)
        out[t] = {"items": len(recs), "usable": usable, "errors": errors, "skipped": skipped, "note": note}
    return out


def _differences(base: FinishedRun, cand: FinishedRun) -> list[str]:
    """What `compare` lists as differing between the runs besides their items, or, where nothing
    differs, that the candidate is the baseline's own run (its folder renamed or copied): the gate
    then measures nothing about a new model."""
    from .compare import run_differences

    differ = run_differences(base.record, cand.record)
    if differ:
        return [f"differs: {d}" for d in differ]
    if base.samples == cand.samples:
        return ["the candidate is the baseline's own run (the same model, settings and answers): nothing new is gated"]
    return ["the candidate has the baseline's model and settings (a rerun): the gate measures run-to-run variation"]


def _check_asked_reasoning(base: RunRecord, run: RunSpec) -> None:
    """Before the candidate loads: the reasoning mode it asks for (and its budget, where the baseline
    reasoned) is the baseline's."""
    mode, tokens = run.asked_reasoning()
    key = base.reasoning_key()
    if mode != key.mode or (key.reasons and tokens is not None and tokens != str(key.tokens)):
        asked = f"reasoning {mode}" + (f", {tokens} reasoning tokens" if tokens is not None else "")
        raise UsageError(f"the runs differ in reasoning ({key.describe()} in the baseline, {asked} for the "
                         "candidate); their numbers are not comparable",
                         hint="run the candidate with the baseline's --reasoning and --reasoning-tokens")


def _check_own_folder(out: Path, base_dir: Path) -> None:
    """Refused before anything is written: the baseline's folder, or an ordinary run's."""
    if out.resolve() == base_dir.resolve():
        raise UsageError(f"the candidate's run folder is the baseline's ({out}): the gate would write into its baseline",
                         hint="name another --out (or none: the gate's own folder)")
    if (out / RUN_JSON).exists() and not RunRecord.read(out).gate:
        raise UsageError(f"{out} holds an ordinary run: its items ran in the dataset's order, not the gate's",
                         hint="the gate needs a folder of its own: name another --out (or none)")


@dataclass
class GateResult:
    """What a gate decided: the gated rows (compare's `Row`, the anytime-valid interval), compare's
    paired bootstrap rows of the numbers it does not gate, the verdict by compare's rule, its line."""

    baseline: str
    candidate: str
    max_drop: float
    alpha: float
    rows: list[Row]
    not_gated: list[Row]
    tasks_not_gated: dict[str, str]
    notes: list[str]
    verdict: str
    verdict_line: str
    items_used: int
    items_total: int
    candidate_failed: int
    baseline_population: dict[str, dict]
    seconds: float
    progress: list[dict[str, Any]] = field(default_factory=list)  # each gated metric's e-processes, step by step

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["rows"] = [r.as_dict(GATE_COLUMNS) for r in self.rows]
        out["not_gated"] = [r.as_dict() for r in self.not_gated]
        return out


def gate(baseline: str | Path, run: RunSpec | None = None, max_drop: float = 0.02, alpha: float = 0.05,
         budget: str | float | None = None, metrics: tuple[str, ...] = (), replay: str | Path | None = None,
         out: str | Path | None = None) -> GateResult:
    """Run the gate: the candidate is `run` (the model and how it runs, handed on to api.evaluate
    unchanged) into `out` (default: the gate's own folder). `replay`: a finished candidate run
    folder instead of a model, its items taken in the gate's order, chunk by chunk, until the gate
    decides (what the gate would have run)."""
    if not (0 < alpha < 1):
        raise UsageError(f"--alpha must lie between 0 and 1, not {alpha}")
    check_max_drop(max_drop)
    base = open_checked(baseline)
    population = baseline_population(base)
    g = Gate.build(base.record.run_seed, base.record.task_names, base.samples, max_drop, alpha, tuple(metrics), base.path)
    if replay is None:
        cand = _run_candidate(base, g, run or RunSpec(), budget, out)
    else:
        cand = open_checked(replay)
        check_comparable(base.record, cand.record, list(g.tasks))
        lacking = [t for t, tg in g.tasks.items() if not set(cand.samples.get(t, {})) & set(tg.order)]
        if lacking:
            raise UsageError(f"{cand.path} has no item of {', '.join(lacking)} that the baseline scored: a replay cannot gate it",
                             hint="replay a run of the baseline's tasks")
        g.replay(cand.samples)
    return _result(base, cand, g, population)


def _run_candidate(base: FinishedRun, g: Gate, run: RunSpec, budget: str | float | None, out_arg: str | Path | None) -> FinishedRun:
    """The candidate run on the baseline's tasks as the baseline prepared them (each prepared once),
    its items in the gate's order, each chunk's records fed to the gate; what it returns is the
    candidate as the gate received it (its samples are not read back)."""
    from .. import api
    from ..store.runmeta import task_identity
    from ..run.selection import Ordered, deadline_of

    record = base.record
    deadline = deadline_of(budget, g.started)
    out = Path(out_arg or gate_folder(base.path, run))
    _check_own_folder(out, base.path)
    tasks = [tg.task for tg in g.tasks.values()]
    preps = {t.name: base.preps[t.name] for t in tasks}
    named = run.named
    _check_roles(record, tasks, preps, named)
    if frozenset(named) != record.named_roles:  # its roles may settle its tasks otherwise: prepared as its run would
        preps = {t.name: prepared_from(record, t, given=frozenset(named)) for t in tasks}
    # the candidate's tasks as this econeval prepares them are the baseline's: comparable before a model loads
    check_prepared(record, {t: comparable(entry) for t, entry in task_identity(tasks, preps).items()})
    _check_asked_reasoning(record, run)
    selection = Ordered("random", deadline=deadline, watcher=g.watch, only={t: set(tg.order) for t, tg in g.tasks.items()})
    seed = record.run_seed if record.seed_was_given else None  # None: the tasks' protocol seeds again
    doc = api.evaluate(run, list(g.tasks), seed=seed, selection=selection, out=out, prepared=preps)
    folder = Path(str(doc.get("run_folder")))
    cand = FinishedRun(folder, RunRecord.read(folder), samples=g.received(), preps=preps)
    check_reasoning(record, cand.record)  # whether the candidate reasoned is known after its run
    return cand


def _result(base: FinishedRun, cand: FinishedRun, g: Gate, population: dict[str, dict]) -> GateResult:
    max_drop, alpha = g.max_drop, g.alpha
    rows = g.rows()
    verdict = verdict_of(r.verdict for r in rows)
    extra, extra_note = _not_gated(base, cand, g, max_drop)
    used = sum(tg.taken for tg in g.tasks.values())
    total = sum(len(tg.order) for tg in g.tasks.values())
    failed = sum(max((r.failed for r in tg.rows), default=0) for tg in g.tasks.values())
    took = time.monotonic() - g.started
    k = len(rows)
    what = {"pass": "pass: every gated metric's interval lies above", "regression": "REGRESSION: an interval lies below",
            "inconclusive": "inconclusive: not every interval clears"}[verdict]
    line = (f"gate: {what} -{max_drop} (anytime-valid; pass at alpha {alpha} per metric, regression at {alpha / k:.4g} "
            f"over {counted(k, 'metric')}) after {used:,} of {counted(total, 'paired item')} ({used / total:.1%}) in {took:.0f} s")
    if failed:
        line += f"; {counted(failed, 'candidate item')} without a valid value counted as the worst value"
    blocked = [f"{t}: {tg.blocked}" for t, tg in g.tasks.items() if tg.blocked]
    notes = (blocked + [f"not gated: {what_}: {why}" for what_, why in g.not_gated.items()] + ([extra_note] if extra_note else [])
             + [p["note"] for t, p in population.items() if t in g.tasks and p["note"]] + _differences(base, cand))
    return GateResult(str(base.path), str(cand.path), max_drop, alpha, rows, extra, g.not_gated, notes, verdict, line, used,
                      total, failed, {t: {k: v for k, v in p.items() if k != "note"} for t, p in population.items()},
                      round(took, 1), g.progress())


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)


def terminal(result: GateResult) -> Callable[[int], list]:
    """The text output for a console of a given width (judge/terminal.py lays it out): the gated
    rows as a table that fits (the interval's ends are the means it rules out, at or beyond them:
    shown as "above" and "below"), the items that would decide an open metric, the notes, the
    numbers not gated (each with why, where it cannot be computed), the verdict line."""
    from .terminal import Col, lines, table, verdict

    cols = [Col("task", "task", number=False), Col("metric", "metric", number=False), Col("n", "n"), Col("of", "of", drop=1),
            Col("failed", "failed", drop=2), *(Col(c, c) for c in ("baseline", "candidate", "diff")), Col("low", "above"),
            Col("high", "below"), Col("verdict", "verdict", number=False)]

    def build(width: int) -> list:
        parts = table(cols, [{c.key: _fmt(getattr(r, c.key)) for c in cols} for r in result.rows], width)
        notes = [f"{r.task} {r.metric}: about {counted(r.further_items, 'more item')} would decide it at the observed "
                 "spread" for r in result.rows if r.verdict == "inconclusive" and r.further_items is not None]
        parts += lines(notes + result.notes)
        if result.not_gated:
            parts += [None, "not gated (paired bootstrap over the paired items; not means over items):"]
            parts += lines([f"{x.task} {x.metric}: {x.note}" if x.diff is None else
                            f"{x.task} {x.metric}: baseline {_fmt(x.baseline)}, candidate {_fmt(x.candidate)}, diff "
                            f"{_fmt(x.diff)} [{_fmt(x.low)}, {_fmt(x.high)}]" for x in result.not_gated])
        return parts + [None, verdict(result.verdict_line, result.verdict)]
    return build


def junit(rows: list[Row], max_drop: float) -> str:
    """JUnit XML (junit.py): a regression a failure, an undecided metric a skipped case."""
    cases = []
    for r in rows:
        what = (f"diff {r.diff:+.4f}, anytime-valid interval [{r.low:+.4f}, {r.high:+.4f}], margin {max_drop}, "
                f"{r.n} of {r.of} items, {r.failed} without a valid value") if r.n else "no paired item"
        cases.append(Case(r.task, r.metric, failure="regression: " + what if r.verdict == "regression" else None,
                          skipped="inconclusive: " + what if r.verdict == "inconclusive" else None))
    return suite("econeval gate", cases)


def _not_gated(base: FinishedRun, cand: FinishedRun, g: Gate, max_drop: float) -> tuple[list[Row], str | None]:
    """compare's paired bootstrap rows for the headline numbers the gate does not decide (and why
    there are none, where compare cannot give them)."""
    from .compare import compare

    try:
        result = compare(base, cand, max_drop=max_drop, allow_missing=True)
    except UsageError as exc:
        return [], f"no paired bootstrap of the other headline numbers: {exc}"
    decided = {(x.task, x.metric) for tg in g.tasks.values() for x in tg.rows}
    return [r for r in result.rows if r.task in g.tasks and (r.task, r.metric) not in decided and (r.diff is not None or r.note)], None
