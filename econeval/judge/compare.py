"""Paired comparison of two run folders (a release gate): the same tasks and items, each task's
headline metrics recomputed by the task itself on the items both runs scored, the difference
with a seeded paired bootstrap interval, McNemar's exact test where items are right or wrong,
and a verdict per metric.

A metric regresses when the candidate is worse by more than the margin, the interval of the
difference excludes zero, and an exact paired (sign-flip) test of the difference shows it at 5%:
a bootstrap interval over a few items is degenerate (two items give a point), so with too few
items to show any change (five or fewer) the metric is inconclusive, "too few items", never a
regression or an improvement. A gate cannot pass by omission: a candidate that lacks a task or
items the baseline scored is refused (exit 2) unless `allow_missing`, and then the comparison
says how many were dropped. Nor can it pass on what it could not compute or read: each task's
unanswered share (unparsed, errors, skips; `tables.UNANSWERED`) is decided as a metric of its own,
a headline metric the candidate cannot compute is inconclusive, saying why, and a comparison
that decides no headline metric is inconclusive. What else differs between the runs (their schedules, settings,
data package, econeval version) is named beside the rows. Which way is worse, whether a metric is a count, and whether McNemar's
test applies, each task declares in its `metrics`. Runs whose tasks differ in dataset, prompt version, settings or options
are refused (the numbers would not be comparable).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .. import registry
from .junit import Case, suite
from ..errors import UsageError, counted
from ..store.finished import FinishedRun, open_checked
from ..intervals import percentile_interval
from ..store.record import RunRecord, identity_differences, plain_json
from ..store.items import unanswered
from ..tables import UNANSWERED, Metric
from ..types import is_scored

COLUMNS = ("task", "metric", "n", "baseline", "candidate", "diff", "low", "high", "p_mcnemar", "verdict", "detectable", "p_paired",
           "note")
GATE_COLUMNS = ("task", "metric", "n", "of", "failed", "baseline", "candidate", "diff", "low", "high", "verdict", "further_items")


@dataclass
class Row:
    """One metric of one task, baseline against candidate: compare's paired bootstrap, or the gate's
    anytime-valid interval (`of`, `failed`, `further_items`)."""

    task: str
    metric: str
    n: int
    baseline: float | None
    candidate: float | None
    diff: float | None
    low: float | None
    high: float | None
    p_mcnemar: float | None
    verdict: str  # ok | pass | regression | improvement | inconclusive | undecided | n/a
    # the smallest drop detectable at 80% power with these items (2.80 bootstrap SEs); None where it is more than the
    # metric can drop from the baseline's value within its bounds
    detectable: float | None = None
    of: int | None = None  # the gate: the baseline's items with a value
    failed: int | None = None  # the gate: candidate items without a valid value, counted as the worst value
    further_items: int | None = None  # the gate: about how many more items would decide an inconclusive metric
    p_paired: float | None = None  # compare: the exact paired (sign-flip) test's two-sided p, where the bootstrap saw a change
    note: str | None = None  # why a metric is inconclusive where the bootstrap alone would have decided it

    def as_dict(self, columns: tuple[str, ...] = COLUMNS) -> dict[str, Any]:
        return {c: getattr(self, c) for c in columns}


def verdict_of(verdicts) -> str:
    """The verdict of a set of metrics' verdicts (compare's and the gate's): regression if any
    metric regressed, else inconclusive if any is open, else pass."""
    seen = set(verdicts)
    return "regression" if "regression" in seen else "inconclusive" if "inconclusive" in seen else "pass"


BOOTSTRAP = 1000  # paired resamples (compare and the report's comparison use the same, so they agree)
SEED = 0


@dataclass
class Comparison:
    rows: list[Row]
    dropped: dict[str, dict]  # task → {"missing": items the candidate lacks, "of": items the baseline scored}
    differences: list[str]  # what else differs between the runs (settings, schedule, versions)
    max_drop: float

    @property
    def verdict(self) -> str:
        """regression (exit 1) if any metric regressed (the unanswered share included), else
        inconclusive (exit 3) if any metric's interval reaches below -max_drop (too few items to
        rule such a drop out), a metric cannot be computed for the candidate, or no headline
        metric was decided at all; else pass."""
        verdict = verdict_of(r.verdict for r in self.rows)
        return "inconclusive" if verdict == "pass" and not self.decided() else verdict

    def decided(self) -> list[Row]:
        """The headline metrics with a verdict (not a count, not one neither run can compute)."""
        return [r for r in self.rows if r.metric != UNANSWERED.name and r.verdict != "n/a"]

    def verdict_line(self) -> str:
        rows = self.rows
        bad = [f"{r.task} {r.metric}" for r in rows if r.verdict == "regression"]
        gated = [r for r in rows if r.verdict != "n/a"]
        uncomputed = [r for r in rows if r.verdict == "inconclusive" and r.diff is None]  # the candidate's cannot be
        open_ = [r for r in rows if r.verdict == "inconclusive" and r.diff is not None]
        tasks = sorted({r.task for r in rows})
        n_items = sum({r.task: r.n for r in rows if r.metric != UNANSWERED.name}.values())
        dropped = sum(d["missing"] for d in self.dropped.values())
        tail = f"; {counted(dropped, 'baseline item')} dropped (--allow-missing)" if dropped else ""
        grouped: dict[tuple[str, str | None], list[str]] = {}
        for r in uncomputed:
            grouped.setdefault((r.task, r.note), []).append(r.metric)
        failed = "; ".join(f"{t} {', '.join(ms)} {note}" for (t, note), ms in grouped.items())
        if bad:
            return (f"verdict: REGRESSION in {len(bad)} of {counted(len(gated), 'metric')} ({', '.join(bad)})"
                    f"{'; ' + failed if failed else ''}{tail}")
        if not self.decided():
            why = "; ".join(f"{r.task} {r.metric}: {r.note or 'a count (no better direction)'}" for r in rows
                            if r.metric != UNANSWERED.name)
            return f"verdict: inconclusive: no metric could be decided ({why}){tail}"
        if failed and not open_:
            return f"verdict: inconclusive: {failed}{tail}"
        lead = f"verdict: inconclusive: {failed}; and " if failed else "verdict: inconclusive: "
        few = [r for r in open_ if r.note and r.note.startswith(TOO_FEW)]
        if open_ and len(few) == len(open_):
            return (f"{lead}too few items: {len(few)} of {counted(len(gated), 'metric')} rest on so few paired items that "
                    f"no outcome could show a change ({', '.join(f'{r.task} {r.metric} (n {r.n})' for r in few)}): run more "
                    f"items{tail}")
        if open_:
            need = [r.detectable for r in open_ if r.detectable is not None]
            beyond = [f"{r.task} {r.metric}" for r in open_ if r.detectable is None]
            detect = [f"a drop must be about {max(need):.3f} to be detected at 80% power"] if need else []
            detect += [f"no drop that {', '.join(beyond)} can make from the baseline's value (within the metric's bounds) "
                       "could be detected at 80% power"] if beyond else []
            return (f"{lead}{len(open_)} of {counted(len(gated), 'metric')} cannot rule out a drop of {self.max_drop} "
                    f"({', '.join(f'{r.task} {r.metric}' for r in open_)}); with {counted(n_items, 'paired item')} "
                    f"{' and '.join(detect)}: run more items{tail}")
        return (f"verdict: pass: no metric worse by more than {self.max_drop}, every interval above -{self.max_drop} "
                f"({counted(len(gated), 'metric')}, {counted(len(tasks), 'task')}, {counted(n_items, 'paired item')}){tail}")

    def as_dict(self) -> dict[str, Any]:
        return {"max_drop": self.max_drop, "verdict": self.verdict, "verdict_line": self.verdict_line(),
                "rows": [r.as_dict() for r in self.rows], "dropped": self.dropped, "differences": self.differences}


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (b: only baseline right,
    c: only candidate right)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def compare(base_dir: Path | FinishedRun, cand_dir: Path | FinishedRun, max_drop: float = 0.02, metrics: tuple[str, ...] = (),
            n_boot: int = BOOTSTRAP, seed: int = SEED, allow_missing: bool = False) -> Comparison:
    """The comparison of two run folders (or of runs already opened, finished.py); a folder that
    is not as econeval writes it, or a candidate lacking what the baseline has (unless
    `allow_missing`), is a usage error (exit 2), never a regression (exit 1)."""
    try:
        base = base_dir if isinstance(base_dir, FinishedRun) else open_checked(base_dir)
        cand = cand_dir if isinstance(cand_dir, FinishedRun) else open_checked(cand_dir)
        return _compare(base, cand, max_drop, metrics, n_boot, seed, allow_missing)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        where = [getattr(d, "path", d) for d in (base_dir, cand_dir)]
        raise UsageError(f"{where[0]} and {where[1]}: the run folders are not as econeval writes them "
                         f"({type(exc).__name__}: {exc})", hint="the folder was edited or written by another tool") from None


def check_prepared(base: RunRecord, identities: dict[str, dict | None]) -> None:
    """Refuse a candidate whose tasks are prepared otherwise than the baseline's (data, prompt
    version, settings, options): `identities` is task → what makes its numbers comparable
    (TaskEntry.identity). A live gate checks its candidate's tasks so before a model loads."""
    for t, c in identities.items():
        if not c:
            raise UsageError(f"the candidate has no task {t}, which the baseline ran", hint="run the candidate on the baseline's tasks")
        b = base.task(t).identity() or {}
        for key, value in c.items():
            if b.get(key) != value:
                raise UsageError(f"{t}: the runs differ in {key}; their numbers are not comparable",
                                 hint="gate or compare runs of the same tasks, data, options and econeval")


def check_seed(base: RunRecord, seed) -> None:
    """Refuse a candidate run with another seed than the baseline's."""
    if base.seed != seed:
        raise UsageError(f"the runs used different seeds ({base.seed} and {seed}): few-shot "
                         "draws and option orders differ, so their numbers are not comparable")


def check_comparable(base: RunRecord, cand: RunRecord, tasks: list[str]) -> None:
    """Refuse two finished runs whose numbers are not comparable: a task prepared differently,
    another reasoning, another model in a role, or another seed (few-shot draws, option orders
    differ). `compare` and `gate --replay` pass through here; a live gate checks its candidate's
    tasks with check_prepared before the model loads, and its reasoning after the run."""
    check_prepared(base, {t: cand.task(t).identity() for t in tasks})
    check_reasoning(base, cand)
    check_roles(base, cand, tasks)
    check_seed(base, cand.seed)


def check_roles(base: RunRecord, cand: RunRecord, tasks: list[str]) -> None:
    """Refuse two runs whose tasks' roles were filled by different models (another judge, another
    embedder or the same weights pooled otherwise): the same answers would score differently."""
    b, c = base.role_identities(), cand.role_identities()
    named = base.named_roles | cand.named_roles
    used = {r for t in tasks if t in registry.tasks() for r in registry.get_task(t).roles} | (set(b) & set(c))
    for role in sorted(used - {"model"}):
        # a role each run's own evaluated model filled (a judge by default) is that model: not compared
        try:
            own = role not in named and registry.role(role).fallback == "model"
        except UsageError:  # a role this econeval does not know: compared as recorded
            own = False
        if not own and plain_json(b.get(role)) != plain_json(c.get(role)):
            raise UsageError(f"the runs differ in the role {role} (another model, or the same one set up otherwise); "
                             "their numbers are not comparable",
                             hint=f"score both runs with the same {role} (econeval score --out rescores answers)")


def check_reasoning(base: RunRecord, cand: RunRecord) -> None:
    """Refuse two runs whose reasoning differs (the mode; where the model reasoned, the budget and
    effort; whether it reasoned at all): a thinking run is not paired with one that did not think."""
    b, c = base.reasoning_key(), cand.reasoning_key()
    if b != c:
        raise UsageError(f"the runs differ in reasoning ({b.describe()} in the baseline, "
                         f"{c.describe()} in the candidate); their numbers are not comparable",
                         hint="run the candidate with the baseline's --reasoning and --reasoning-tokens")


_ok = is_scored


def _dropped(base: dict, cand: dict, tasks: list[str]) -> dict[str, dict]:
    """Per task: the baseline's scored items the candidate has no score for."""
    out = {}
    for t in tasks:
        scored = [i for i, r in base.get(t, {}).items() if _ok(r)]
        missing = [i for i in scored if not (i in cand.get(t, {}) and _ok(cand[t][i]))]
        if missing:
            out[t] = {"missing": len(missing), "of": len(scored), "task_missing": t not in cand}
    return out


def run_differences(base: RunRecord, cand: RunRecord) -> list[str]:
    """What differs between two runs besides their items: identity (model, settings, schedule),
    econeval version, data package."""
    bi, ci = base.identity, cand.identity
    out = identity_differences({k: v for k, v in bi.items() if k != "tasks"}, {k: v for k, v in ci.items() if k != "tasks"},
                               sides=("in the baseline", "in the candidate"))
    for label, get in (("econeval version", lambda r: r.econeval_version), ("data package", lambda r: r.data_version),
                       ("schedule", lambda r: r.backend_schedule)):
        if get(base) != get(cand):
            out.append(f"{label}: {get(base)} in the baseline, {get(cand)} in the candidate")
    return out


def check_max_drop(max_drop: float) -> None:
    """--max-drop: a finite number at least 0 (compare and gate; the command line's range says the same)."""
    if not (isinstance(max_drop, (int, float)) and not isinstance(max_drop, bool) and math.isfinite(max_drop) and max_drop >= 0):
        raise UsageError(f"--max-drop must be a finite number at least 0, not {max_drop!r}")


def _compare(loaded: FinishedRun, other: FinishedRun, max_drop: float, metrics: tuple[str, ...], n_boot: int, seed: int,
             allow_missing: bool) -> Comparison:
    check_max_drop(max_drop)
    base_rec, base = loaded.record, loaded.samples
    cand_rec, cand = other.record, other.samples
    common = [t for t in base_rec.tasks if t in cand_rec.tasks]
    if not common:
        raise UsageError("the two runs have no task in common")
    dropped = _dropped(base, cand, base_rec.task_names)
    if dropped and not allow_missing:
        what = [f"task {t} ({d['of']:,} items)" if t not in cand_rec.tasks else f"{t}: {d['missing']:,} of {d['of']:,} items"
                for t, d in dropped.items()]
        raise UsageError(f"the candidate lacks what the baseline scored ({'; '.join(what)}): a gate over the rest "
                         "could pass by omission", hint="finish the candidate run, or pass --allow-missing to compare what both have")
    check_comparable(base_rec, cand_rec, common)
    rows: list[Row] = []
    available: set[str] = set()
    rng = random.Random(seed)
    for t in common:
        task = registry.get_task(t)
        prep = loaded.preps[t]
        ids = [i for i in base.get(t, {}) if i in cand.get(t, {}) and _ok(base[t][i]) and _ok(cand[t][i])]
        if not ids:
            raise UsageError(f"{t}: the runs have no scored item in common")
        pb, pc = [base[t][i] for i in ids], [cand[t][i] for i in ids]
        hb, hc = task.headline_of(pb, prep), task.headline_of(pc, prep)
        rb, rc = task.resampler(pb, prep), task.resampler(pc, prep)  # numbers_of a resample: the headline's among them
        boots: list[tuple[dict, dict]] = []
        for _ in range(n_boot):
            idx = [rng.randrange(len(ids)) for _ in ids]
            boots.append((rb(idx), rc(idx)))
        available |= set(hb)
        chosen = [m for m in hb if not metrics or m in metrics]
        for m in chosen:
            spec = task.metric(m)
            vb, vc = hb.get(m), hc.get(m)
            draws = [y[m] - x[m] for x, y in boots if x.get(m) is not None and y.get(m) is not None]
            p = None
            if spec.paired_exact and all(isinstance(r.get("correct"), bool) for r in pb + pc):
                p = mcnemar_exact(sum(x["correct"] and not y["correct"] for x, y in zip(pb, pc)),
                                  sum(y["correct"] and not x["correct"] for x, y in zip(pb, pc)))
            row = _decided(Row(t, m, len(ids), vb, vc, None, None, None, p, "n/a"), spec, draws, max_drop,
                           lambda: task.resampler(pb + pc, prep), n_boot, seed)
            if row.diff is None and spec.direction:
                row.note = _not_computed(task, pb, pc, vb, vc)
            rows.append(row)
        if chosen:  # with the task's unanswered share, whatever --metric chose
            rows.append(_unanswered_row(task, base.get(t, {}), cand.get(t, {}), max_drop, n_boot, seed))
    unknown = [m for m in metrics if m not in available]
    if unknown:
        raise UsageError(f"no task of these runs has the metric {', '.join(repr(m) for m in unknown)}",
                         hint=f"their metrics: {', '.join(sorted(available))}")
    return Comparison(rows, dropped, run_differences(base_rec, cand_rec), max_drop)


def _decided(row: Row, spec: Metric, draws: list[float], max_drop: float, numbers, n_boot: int, seed: int) -> Row:
    """The row's difference, interval, detectable drop and verdict from its values and paired
    bootstrap draws; a change the bootstrap sees is checked by the exact paired test over
    `numbers()` (a resampler over the baseline's records then the candidate's). A metric the
    candidate cannot compute where the baseline can is inconclusive (never a pass)."""
    vb, vc, n = row.baseline, row.candidate, row.n
    row.diff = vc - vb if vb is not None and vc is not None else None
    iv = percentile_interval(draws)
    row.low, row.high = iv if iv else (None, None)
    row.detectable = _detectable(draws, n, _room(spec, vb)) if spec.direction else None
    verdict = _verdict(spec, row.diff, row.low, row.high, max_drop, n)
    if verdict in ("regression", "improvement"):  # the bootstrap saw a change: an exact test must show it too
        row.p_paired = paired_p(numbers(), n, spec.name, row.diff, n_boot, seed)
        if row.p_paired >= ALPHA:
            row.note = None if exact_floor(n) >= ALPHA else (
                f"the exact paired test does not show the {verdict} (p {row.p_paired:.3g}); the bootstrap interval is "
                "too narrow with so few items")
            verdict = "inconclusive"
    elif spec.direction and vb is not None and vc is None:
        verdict = "inconclusive"
    if verdict == "inconclusive" and row.diff is not None and exact_floor(n) >= ALPHA:
        row.note = (f"{TOO_FEW}: no outcome of {n} paired items reaches p < {ALPHA} in an exact paired test "
                    f"(the smallest p is {exact_floor(n):.3g})")
    row.verdict = verdict
    return row


def _not_computed(task, pb: list[dict], pc: list[dict], vb, vc) -> str:
    """Why a metric has no value on one side or both: the unparsed answers among the paired items
    (a paper's number over the parsed answers has none when none parsed)."""
    def why(records: list[dict]) -> str:
        k = sum(task.unparsed(r) for r in records)
        return (f"{k:,} of its {counted(len(records), 'paired answer')} {'is' if k == 1 else 'are'} unparsed" if k else
                f"the task computes none from its {counted(len(records), 'paired answer')}")
    if vb is None and vc is None:
        return f"cannot be computed for either run (the baseline: {why(pb)}; the candidate: {why(pc)})"
    return f"cannot be computed for the {'baseline' if vb is None else 'candidate'}: {why(pb if vb is None else pc)}"


def _unanswered_row(task, base: dict[str, dict], cand: dict[str, dict], max_drop: float, n_boot: int, seed: int) -> Row:
    """The task's unanswered share (tables.UNANSWERED: unparsed, errors, skips) over the items both
    runs have a line for, decided as a metric: McNemar's exact test on the pairs, a seeded paired
    bootstrap of its own (the headline's draws stay as they were)."""
    import numpy as np

    ids = [i for i in base if i in cand]
    ub = np.array([unanswered(task, base[i]) for i in ids])
    uc = np.array([unanswered(task, cand[i]) for i in ids])
    n = len(ids)
    if not n:
        return Row(task.name, UNANSWERED.name, 0, None, None, None, None, None, None, "n/a")
    idx = np.random.default_rng([seed, n]).integers(0, n, size=(n_boot, n))
    draws = (uc[idx] - ub[idx]).mean(axis=1).tolist()
    both = np.concatenate([ub, uc])
    p = mcnemar_exact(int(((ub == 0) & (uc == 1)).sum()), int(((ub == 1) & (uc == 0)).sum()))
    row = Row(task.name, UNANSWERED.name, n, float(ub.mean()), float(uc.mean()), None, None, None, p, "n/a")
    return _decided(row, UNANSWERED, draws, max_drop, lambda: (lambda at: {UNANSWERED.name: float(both[at].mean())}),
                    n_boot, seed)


POWER_Z = 1.959964 + 0.841621  # two-sided 5% test at 80% power: z(0.975) + z(0.80)
ALPHA = 0.05  # the exact paired test's level (two-sided), as the bootstrap interval's 95%
TOO_FEW = "too few items"
EXACT_ALL = 4096  # up to this many sign assignments the paired test enumerates them all (n <= 12 items)


def exact_floor(n: int) -> float:
    """The smallest two-sided p-value an exact paired sign-flip test can reach with n pairs: the
    observed assignment and its mirror out of 2^n (n <= 5 can never reach 0.05)."""
    return 2.0 ** (1 - n) if n else 1.0


def paired_p(numbers, n: int, metric: str, observed: float | None, n_draws: int, seed: int) -> float:
    """The two-sided p-value of a paired randomization (sign-flip) test of the difference in
    `metric`: under no difference, each item's baseline and candidate records are exchangeable,
    so the difference is recomputed (by the task's own `numbers`, a resampler over the baseline's
    records then the candidate's) with each pair's two records swapped or not; all 2^n
    assignments where that is at most EXACT_ALL (exact), else n_draws seeded random ones (a
    Monte Carlo p, (1 + hits) / (1 + draws)). Valid at any n, unlike a bootstrap interval,
    which at 2 items collapses to a point."""
    import numpy as np

    if observed is None or n == 0:
        return 1.0
    if 2 ** n <= EXACT_ALL:
        flips = (np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1
        exact = True
    else:
        flips = np.random.default_rng(seed).integers(0, 2, size=(n_draws, n))
        exact = False
    base = np.arange(n)[None, :] + n * flips  # a swapped pair takes the candidate's record as the baseline's
    cand = np.arange(n)[None, :] + n * (1 - flips)
    hits = 0
    for b, c in zip(base.tolist(), cand.tolist()):
        vb, vc = numbers(b).get(metric), numbers(c).get(metric)
        if vb is not None and vc is not None and abs(vc - vb) >= abs(observed) - 1e-12:
            hits += 1
    return hits / len(flips) if exact else (1 + hits) / (1 + len(flips))


def resolution(n: int) -> float:
    """The drop n paired items cannot rule out even when every pair agrees: with no discordant
    pair in n, a discordance rate up to -ln(0.025)/n (about 3.7/n) is still consistent with the
    data at 97.5% (the exact zero-event bound), and a mean of [0, 1] scores can move that much.
    The bootstrap, which sees no variance then, would call such a run a pass."""
    return -math.log(0.025) / n if n else math.inf


def _room(metric: Metric, baseline: float | None) -> float:
    """The largest drop the metric can make from the baseline's value within its bounds (its
    whole range where the baseline has none)."""
    lo, hi = metric.bounds
    if baseline is None:
        return hi - lo
    return max(0.0, baseline - lo if metric.direction > 0 else hi - baseline)


def _detectable(draws: list[float], n: int, room: float = math.inf) -> float | None:
    """The smallest true drop a test of these items would detect at 80% power: (z_0.975 + z_0.8)
    standard errors (the bootstrap draws' standard deviation), and never below the resolution of
    n items; None where that exceeds `room`, the most the metric can drop (no drop it can make is
    detectable with these items), or there are no draws."""
    if len(draws) < 2:
        return None
    mean = sum(draws) / len(draws)
    need = max(POWER_Z * (sum((d - mean) ** 2 for d in draws) / (len(draws) - 1)) ** 0.5, resolution(n))
    return need if need <= room else None


def _verdict(metric: Metric, diff, low, high, max_drop: float, n: int) -> str:
    """regression: worse by more than the margin, the interval excluding zero; improvement: the
    mirror; inconclusive: neither, and a drop beyond the margin is not ruled out (the interval
    reaches below -margin, or n items cannot resolve the margin at all); ok: it is ruled out."""
    if diff is None or low is None or metric.direction == 0:
        return "n/a"
    sign = metric.direction  # worse = sign * diff < 0
    worse, lo, hi = sign * diff, sign * (low if sign > 0 else high), sign * (high if sign > 0 else low)
    if worse < -max_drop and hi < 0:
        return "regression"
    if worse > max_drop and lo > 0:
        return "improvement"
    return "inconclusive" if lo < -max_drop or resolution(n) > max_drop else "ok"


def _fmt(v) -> str:
    return "-" if v is None else (f"{v:.4f}" if isinstance(v, float) else str(v))


SHOWN = ("task", "metric", "n", "baseline", "candidate", "diff", "low", "high", "p_mcnemar", "detectable", "verdict")


def _cells(r: Row) -> dict[str, str]:
    """A row's shown cells: "none" as the detectable drop where no drop the metric can make is
    detectable with its items."""
    cells = {c: _fmt(getattr(r, c)) for c in SHOWN}
    if r.detectable is None and r.diff is not None and r.verdict in ("inconclusive", "ok"):
        cells["detectable"] = "none"
    return cells


def _notes(comparison: Comparison) -> list[str]:
    """What was dropped, what else differs between the runs, and each row's note."""
    notes = [f"dropped: {t}: {d['missing']:,} of {d['of']:,} baseline items {'has' if d['missing'] == 1 else 'have'} no candidate score"
             + (" (task not run)" if d.get("task_missing") else "") for t, d in comparison.dropped.items()]
    notes += [f"the runs differ in {d}" for d in comparison.differences]
    return notes + [f"{r.task} {r.metric}: {r.note}" for r in comparison.rows if r.note]


def render(comparison: Comparison) -> str:
    """Markdown (`--format md`, a report's comparison): the rows, the notes, the closing verdict line."""
    lines = ["| " + " | ".join(SHOWN) + " |", "|" + "---|" * len(SHOWN)]
    lines += ["| " + " | ".join(_cells(r).values()) + " |" for r in comparison.rows]
    notes = _notes(comparison)
    if notes:
        lines += [""] + ["- " + n for n in notes]
    return "\n".join(lines + ["", comparison.verdict_line()])


def terminal(comparison: Comparison) -> Callable[[int], list]:
    """The text output for a console of a given width (judge/terminal.py lays it out): the rows as
    a table that fits, the notes, the verdict line in the verdict's colour."""
    from .terminal import Col, lines, table, verdict

    cols = [Col("task", "task", number=False), Col("metric", "metric", number=False), Col("n", "n", drop=1),
            *(Col(c, c) for c in ("baseline", "candidate", "diff", "low", "high")), Col("p_mcnemar", "p_mcnemar", drop=2),
            Col("detectable", "detectable", drop=3), Col("verdict", "verdict", number=False)]

    def build(width: int) -> list:
        parts = table(cols, [_cells(r) for r in comparison.rows], width)
        notes = _notes(comparison)
        if notes:
            parts += [None, *lines(notes)]
        return parts + [None, verdict(comparison.verdict_line(), comparison.verdict)]
    return build


def junit(comparison: Comparison) -> str:
    """JUnit XML (junit.py): a regression is a failure carrying the numbers, an inconclusive
    metric a skipped case, and a task the candidate lacks (with --allow-missing) a skipped case."""
    max_drop = comparison.max_drop
    cases = []
    for r in comparison.rows:
        skipped = failure = None
        if r.verdict == "inconclusive" and r.note:
            skipped = f"inconclusive: {r.note} (diff {_fmt(r.diff)}, 95% interval [{_fmt(r.low)}, {_fmt(r.high)}], n {r.n})"
        elif r.verdict == "inconclusive":
            skipped = (f"inconclusive: a drop beyond {max_drop} is not ruled out (diff {_fmt(r.diff)}, 95% interval "
                       f"[{_fmt(r.low)}, {_fmt(r.high)}], detectable at 80% power {_fmt(r.detectable)}, n {r.n})")
        if r.verdict == "regression":
            failure = (f"{r.metric} dropped from {_fmt(r.baseline)} to {_fmt(r.candidate)} (diff {_fmt(r.diff)}, 95% "
                       f"interval [{_fmt(r.low)}, {_fmt(r.high)}], margin {max_drop}, n {r.n})")
        cases.append(Case(r.task, r.metric, failure, skipped))
    cases += [Case(t, "dropped items", skipped=f"{d['missing']} of {d['of']} baseline items have no candidate score (--allow-missing)")
              for t, d in comparison.dropped.items()]
    return suite("econeval compare", cases)


def report_entry(baseline: Path, candidate: Path) -> dict[str, Any]:
    """A report's comparison of a later run with its first (`econeval report RUN RUN...`):
    `compare`'s defaults (the same intervals), a task missing from either side left out."""
    return compare(baseline, candidate, allow_missing=True).as_dict()


def render_entry(entry: dict[str, Any]) -> str:
    """A report's comparison entry (report_entry's dict) as Markdown."""
    rows = [Row(**r) for r in entry["rows"]]
    return render(Comparison(rows, entry["dropped"], entry["differences"], entry["max_drop"]))
