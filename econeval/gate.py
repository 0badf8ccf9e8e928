"""`econeval gate`: a sequential release gate. The candidate model runs on a baseline run's items
in a seeded, uniformly random order (the tasks taking turns, a chunk each); after every chunk each
task's finished items are paired with the baseline's and an anytime-valid confidence sequence
(sequential.py) is updated for the mean paired difference of every item metric the task declares
(`Task.item_metrics`). A task stops taking items once each of its metrics is decided, the gate
once every task is:

- pass: the whole interval lies above -max_drop; regression: it lies below;
- at the budget or the end of the items: inconclusive, with the interval reached and about how
  many more items a decision would need.

The error rate alpha is split evenly over the gated metrics (Bonferroni), so the chance that any
verdict is wrong is at most alpha, however early the gate stops. Numbers that are not means over
items (F1 of a class, ECE) are reported at the end with compare's paired bootstrap, not gated.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from xml.sax.saxutils import quoteattr

from . import registry
from .errors import UsageError
from .sequential import PairedSequence


REPLAY_CHUNK = 16  # items per step when a finished run is replayed


@dataclass
class Gated:
    task: str
    metric: str
    direction: int
    population: int  # baseline items with a value
    sequence: PairedSequence
    baseline_sum: float = 0.0
    candidate_sum: float = 0.0

    def row(self, max_drop: float, final: bool) -> dict[str, Any]:
        seq = self.sequence
        low, high = seq.interval()
        to_diff = (lambda w: w) if self.direction > 0 else (lambda w: -w)
        lo, hi = sorted((to_diff(low), to_diff(high)))
        verdict = seq.decision(max_drop, (low, high)) or ("inconclusive" if final else "undecided")
        n = seq.n
        return {"task": self.task, "metric": self.metric, "n": n, "of": self.population,
                "baseline": self.baseline_sum / n if n else None, "candidate": self.candidate_sum / n if n else None,
                "diff": to_diff(seq.mean_worse()) if n else None, "low": lo if n else None, "high": hi if n else None,
                "verdict": verdict, "further_items": seq.further_items(max_drop) if verdict == "inconclusive" else None}


@dataclass
class Gate:
    """The gate's state: the baseline's item values, one confidence sequence per gated metric."""

    baseline: dict[str, dict[str, dict[str, float | None]]]  # task → item id → metric → value
    max_drop: float
    alpha: float
    metrics: tuple[str, ...] = ()
    gated: dict[str, list[Gated]] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    not_gated: list[str] = field(default_factory=list)  # tasks with no item metric

    def __post_init__(self):
        specs = []
        for t, values in self.baseline.items():
            task = registry.get_task(t)
            mine = [m for m in task.item_metrics if not self.metrics or m.name in self.metrics]
            if not mine:
                self.not_gated.append(t)
            specs += [(t, m, sum(1 for v in values.values() if v.get(m.name) is not None)) for m in mine]
        unknown = [m for m in self.metrics if not any(s[1].name == m for s in specs)]
        if unknown:
            names = sorted({m.name for t in self.baseline for m in registry.get_task(t).item_metrics})
            raise UsageError(f"no gated task has the item metric {', '.join(map(repr, unknown))}",
                             hint=f"item metrics of these tasks: {', '.join(names) or 'none'}")
        if not specs:
            raise UsageError("none of the baseline's tasks has an item-level metric to gate on",
                             hint="compare two full runs with `econeval compare` instead")
        each = self.alpha / len(specs)
        for t, m, population in specs:
            lo, hi = m.bounds
            self.gated.setdefault(t, []).append(Gated(t, m.name, m.direction, population,
                                                      PairedSequence(m.direction, hi - lo, max(population, 1), each)))

    @property
    def tasks(self) -> list[str]:
        return list(self.gated)

    def watch(self, task, records: list[dict]) -> tuple[bool, str | None]:
        """After each chunk: pair the task's finished items (in run order) with the baseline's and
        update its sequences; (every metric of the task decided?, a progress note)."""
        rows = self.gated.get(task.name, [])
        base = self.baseline.get(task.name, {})
        for g in rows:
            g.sequence.x.clear()
            g.baseline_sum = g.candidate_sum = 0.0
        for rec in records:
            if rec.get("skipped") or rec.get("error") or rec["id"] not in base:
                continue
            mine = task.item_values(rec)
            for g in rows:
                b, c = base[rec["id"]].get(g.metric), mine.get(g.metric)
                if b is not None and c is not None and math.isfinite(b) and math.isfinite(c):
                    g.sequence.add(b, c)
                    g.baseline_sum += b
                    g.candidate_sum += c
        shown = [g.row(self.max_drop, final=False) for g in rows]
        note = "; ".join(f"Δ{r['metric']} [{r['low']:+.3f}, {r['high']:+.3f}] {r['verdict']}" for r in shown if r["n"])
        return all(r["verdict"] in ("pass", "regression") for r in shown), note or None

    def rows(self) -> list[dict[str, Any]]:
        return [g.row(self.max_drop, final=True) for rows in self.gated.values() for g in rows]

    @staticmethod
    def verdict_of(rows: list[dict]) -> str:
        verdicts = {r["verdict"] for r in rows}
        return "regression" if "regression" in verdicts else "inconclusive" if "inconclusive" in verdicts else "pass"


def baseline_values(base_dir: Path) -> tuple[dict, dict[str, dict[str, dict[str, float | None]]]]:
    """The baseline run's description and each scored item's item-metric values."""
    from .compare import _load, _ok

    meta, samples = _load(base_dir)
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for t in meta.get("tasks", {}):
        try:
            task = registry.get_task(t)
        except UsageError:
            raise UsageError(f"{base_dir}: the baseline has task {t!r}, which this econeval does not know") from None
        out[t] = {i: task.item_values(rec) for i, rec in samples.get(t, {}).items() if _ok(rec)}
        if not out[t]:
            raise UsageError(f"{base_dir}: the baseline has no scored item of {t}")
    return meta, out


def comparable(meta: dict) -> Callable[[list, dict], None]:
    """The check before the candidate's model loads: its tasks prepared as the baseline's were."""

    import orjson

    def plain(value):  # as run.json holds it
        return orjson.loads(orjson.dumps(value, default=str))

    def check(tasks, preps) -> None:
        from .runmeta import task_identity

        ids = task_identity(tasks, preps)
        for t in tasks:
            b, mine = meta["tasks"][t.name], ids[t.name]
            for key in ("dataset", "prompt_version", "settings", "options"):
                if key in b and plain(mine.get(key)) != b[key]:
                    raise UsageError(f"{t.name}: the candidate's {key} differs from the baseline's: their numbers are "
                                     "not comparable", hint="the baseline was made by another econeval or data package")
    return check


def render(rows: list[dict], extra: list, max_drop: float, line: str) -> str:
    cols = ("task", "metric", "n", "of", "baseline", "candidate", "diff", "low", "high", "verdict")
    fmt = (lambda v: "-" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v))
    table = [cols] + [tuple(fmt(r[c]) for c in cols) for r in rows]
    width = [max(len(x[i]) for x in table) for i in range(len(cols))]
    out = ["  ".join(x[i].ljust(width[i]) for i in range(len(cols))) for x in table]
    for r in rows:
        if r["verdict"] == "inconclusive" and r["further_items"] is not None:
            out.append(f"  {r['task']} {r['metric']}: about {r['further_items']:,} more item(s) would decide it at the "
                       "observed spread")
    if extra:
        out += ["", "not gated (paired bootstrap over the paired items; not means over items):"]
        out += [f"  {x.task} {x.metric}: baseline {fmt(x.baseline)}, candidate {fmt(x.candidate)}, diff {fmt(x.diff)} "
                f"[{fmt(x.low)}, {fmt(x.high)}]" for x in extra]
    return "\n".join(out + ["", line])


def junit(rows: list[dict], max_drop: float) -> str:
    fails = sum(r["verdict"] == "regression" for r in rows)
    skipped = sum(r["verdict"] == "inconclusive" for r in rows)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuite name="econeval gate" tests="{len(rows)}" failures="{fails}" skipped="{skipped}">']
    for r in rows:
        out.append(f"  <testcase classname={quoteattr(r['task'])} name={quoteattr(r['metric'])}>")
        what = (f"diff {r['diff']:+.4f}, anytime-valid interval [{r['low']:+.4f}, {r['high']:+.4f}], margin {max_drop}, "
                f"{r['n']} of {r['of']} items") if r["n"] else "no paired item"
        if r["verdict"] == "regression":
            out.append(f"    <failure message={quoteattr('regression: ' + what)}/>")
        elif r["verdict"] == "inconclusive":
            out.append(f"    <skipped message={quoteattr('inconclusive: ' + what)}/>")
        out.append("  </testcase>")
    return "\n".join(out + ["</testsuite>"]) + "\n"


def gate(baseline: str | Path, model: str | None = None, max_drop: float = 0.02, alpha: float = 0.05,
         budget: str | float | None = None, metrics: tuple[str, ...] = (), replay: str | Path | None = None,
         **run: Any) -> dict[str, Any]:
    """Run the gate; `run` passes on to api.evaluate (out, model_options, n_ctx, chat, embedder,
    judge, progress, argv, new, say). `replay`: a finished candidate run folder instead of a
    model, its items taken in the gate's order, chunk by chunk, until the gate decides (what the
    gate would have run). Returns the rows, what is not gated, the verdict and its line."""
    from . import api
    from .folder import read_samples

    if not (0 < alpha < 1):
        raise UsageError(f"--alpha must lie between 0 and 1, not {alpha}")
    if not (math.isfinite(max_drop) and max_drop >= 0):
        raise UsageError(f"--max-drop must be a finite number at least 0, not {max_drop}")
    base_dir = Path(baseline)
    meta, values = baseline_values(base_dir)
    g = Gate(values, max_drop, alpha, tuple(metrics))
    options = {t: meta["tasks"][t].get("options") or {} for t in g.tasks}
    if replay is None:
        doc = api.evaluate(model=model, tasks=g.tasks, seed=meta.get("seed", 1234), per_task_options=options, budget=budget,
                           order="random", watch=g.watch, check=comparable(meta),
                           only={t: set(values[t]) for t in g.tasks}, **run)
        folder = Path(doc["run_folder"])
        if folder.resolve() == base_dir.resolve():
            raise UsageError(f"the candidate's run folder is the baseline's ({folder}): the same model with the same "
                             "settings; there is nothing to gate", hint="name another --model, or --out a folder of its own")
    else:
        from .compare import _load

        folder = Path(replay)
        _, by_task = _load(folder)  # a run folder as econeval writes it, or one clear line
        lacking = [t for t in g.tasks if not set(by_task.get(t, {})) & set(values[t])]
        if lacking:
            raise UsageError(f"{folder} has no item of {', '.join(lacking)} that the baseline scored: a replay cannot gate it",
                             hint="replay a run of the baseline's tasks")
    done = read_samples(folder / "samples.jsonl")[0]
    used = 0  # candidate items paired with the baseline's
    for t in g.tasks:  # from the folder: a resumed gate counts what earlier runs of it finished
        task = registry.get_task(t)
        order = [done[(t, i)] for i in gate_order(t, values[t], meta.get("seed", 1234)) if (t, i) in done]
        seen = order
        if replay is None:
            g.watch(task, seen)
        else:  # as a run would have: chunk by chunk, until decided
            for k in range(REPLAY_CHUNK, len(order) + REPLAY_CHUNK, REPLAY_CHUNK):
                seen = order[:k]
                if g.watch(task, seen)[0]:
                    break
        used += len(seen)
    rows = g.rows()
    verdict = Gate.verdict_of(rows)
    extra = _not_gated(base_dir, folder, g, max_drop)
    total = sum(len(v) for t, v in values.items() if t in g.gated)
    took = time.monotonic() - g.started
    what = {"pass": "pass: every gated metric's interval lies above", "regression": "REGRESSION: an interval lies below",
            "inconclusive": "inconclusive: not every interval clears"}[verdict]
    line = (f"gate: {what} -{max_drop} (anytime-valid, alpha {alpha} over {len(rows)} metrics) after {used:,} of "
            f"{total:,} paired items ({used / total:.1%}) in {took:.0f} s")
    if g.not_gated:
        line += f"; not gated (no item metric): {', '.join(g.not_gated)}"
    return {"baseline": str(base_dir), "candidate": str(folder), "max_drop": max_drop, "alpha": alpha, "rows": rows,
            "not_gated": [x.as_dict() for x in extra], "tasks_not_gated": g.not_gated, "verdict": verdict,
            "verdict_line": line, "items_used": used, "items_total": total, "seconds": round(took, 1)}


def gate_order(task: str, ids, seed: int) -> list[str]:
    """The order in which the gate runs a task's baseline items (the runner's, for `only` these
    ids): a seeded uniformly random order of the ids."""
    from .sampling import random_order

    return [it["id"] for it in random_order([{"id": i} for i in ids], seed, task)]


def _not_gated(base_dir: Path, cand_dir: Path, g: Gate, max_drop: float) -> list:
    """compare's paired bootstrap rows for the headline numbers the gate does not decide."""
    from .compare import compare

    try:
        result = compare(base_dir, cand_dir, max_drop=max_drop, allow_missing=True)
    except UsageError:
        return []
    decided = {(x.task, x.metric) for rows in g.gated.values() for x in rows}
    return [r for r in result.rows if r.task in g.gated and (r.task, r.metric) not in decided and r.diff is not None]
