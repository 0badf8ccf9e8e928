"""Stratified random samples of a task's items (`--sample N` per task, or `--sample 0.1` a
fraction), and the intervals of numbers estimated from them.

- Strata are declared by each task (`Task.strata`: EconNLI's gold label, CFBenchmark's
  sub-task, STEER-ME's element; one stratum otherwise).
- Sizes per stratum follow Webster's divisor method, seat by seat (priority N_h / (n_h + ½)):
  proportional to the strata's sizes, and *nested*, so a larger sample holds every item of a
  smaller one.
- Items within a stratum come in a seeded order (seed, task, stratum), so a folder extends from
  a sample to a larger one, or to the full set, without re-running anything.
- The sampled items keep the dataset's order (the run's chunks stay reproducible).
- Intervals: a bootstrap that resamples within each stratum, the spread shrunk by the finite
  population correction √(1 − n/N). Strata sampled once are resampled together (collapsed
  strata), so one item per stratum still gets a spread; the record says how
  many there are.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable

from .types import is_scored

RANDOM_SCHEME = "random-order/v1"  # econeval gate's order: a simple random sample at every point
SCHEME = "stratified-webster/v1"  # recorded in every run's identity: a change of scheme is another run


MAX_SAMPLE = 10**9  # items per task, as --limit's bound


def parse(spec: str | float | int | None) -> float | int | None:
    """`--sample` as given: a whole number ≥ 1 (items per task) or a fraction in (0, 1)."""
    if spec is None:
        return None
    if isinstance(spec, bool):  # a config file's `sample = true`
        raise ValueError(f"--sample {spec!r}: give a number of items (e.g. 200) or a fraction (e.g. 0.1)")
    try:
        value = float(spec)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"--sample {spec!r}: give a number of items (e.g. 200) or a fraction (e.g. 0.1)") from None
    written = str(spec).strip().lower()
    whole = isinstance(spec, int) or written.lstrip("+").isdigit()  # 200, not 200.0, 2e2 or 1.0
    if whole and 1 <= value <= MAX_SAMPLE:
        return int(value)
    if 0 < value < 1:
        return value
    if not whole and value == 1:
        raise ValueError(f"--sample {spec}: a fraction below 1 (the whole set: leave --sample out; one item: --sample 1)")
    raise ValueError(f"--sample {spec}: a whole number of items from 1 to {MAX_SAMPLE:,}, or a fraction between 0 and 1")


def parse_duration(spec: str | float | int) -> float:
    """`--budget` as given: seconds, or a number with s, m or h ("90s", "10m", "1.5h")."""
    text = str(spec).strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1:], None)
    try:
        value = float(text[:-1] if scale else text) * (scale or 1)
    except ValueError:
        raise ValueError(f"--budget {spec!r}: give a duration such as 300, 90s, 10m or 1h") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"--budget {spec}: a finite duration above 0")
    return value


def duration(seconds: float) -> str:
    """A duration in words' units: 42 s, 12 min, 3 h 05 min, 3 d 18 h."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


class WidthNote:
    """A budget run's progress note, fed each chunk's new records: the half-width of a normal 95%
    interval of the task's first item metric over the items so far (a display; the results carry
    the stratified bootstrap). It keeps each task's values: each record is fed once."""

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}

    def __call__(self, task, records: list[dict]) -> tuple[bool, str | None]:
        if not task.item_metrics:
            return False, None
        metric = task.item_metrics[0]
        scored = [task.item_values(r).get(metric.name) for r in records if is_scored(r)]
        values = self.values.setdefault(task.name, [])
        values += [v for v in scored if v is not None]
        if len(values) < 2:
            return False, None
        m = sum(values) / len(values)
        var = sum((v - m) ** 2 for v in values) / (len(values) - 1)
        return False, f"{metric.name} {m:.3f} ±{1.96 * math.sqrt(var / len(values)):.3f}"


def size(spec: float | int, population: int) -> int:
    return min(population, spec if isinstance(spec, int) else max(1, math.ceil(spec * population)))


def seats(sizes: dict[str, int], n: int) -> list[str]:
    """Webster's divisor method, one seat at a time (ties: the stratum named first): the stratum
    of each of the first n seats."""
    got = {h: 0 for h in sizes}
    out = []
    for _ in range(min(n, sum(sizes.values()))):
        h = max((h for h in sizes if got[h] < sizes[h]), key=lambda h: sizes[h] / (got[h] + 0.5))
        got[h] += 1
        out.append(h)
    return out


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    got = {h: 0 for h in sizes}
    for h in seats(sizes, n):
        got[h] += 1
    return got


def _groups(items: list[dict], strata: Callable[[dict], str], seed: int, task: str) -> dict[str, list[dict]]:
    """Each stratum's items in their seeded order."""
    groups: dict[str, list[dict]] = {}
    for it in items:
        groups.setdefault(str(strata(it)), []).append(it)
    for h, group in groups.items():
        group.sort(key=lambda it: it["id"])
        random.Random(f"{seed}/{task}/sample/{h}").shuffle(group)
    return groups


def nested_order(items: list[dict], strata: Callable[[dict], str], seed: int, task: str) -> list[dict]:
    """All items in the order in which nested samples take them (`--budget`): its first k items
    are exactly the `--sample k` sample."""
    groups = _groups(items, strata, seed, task)
    taken = {h: 0 for h in groups}
    out = []
    for h in seats({h: len(g) for h, g in groups.items()}, len(items)):
        out.append(groups[h][taken[h]])
        taken[h] += 1
    return out


def random_order(items: list[dict], seed: int, task: str) -> list[dict]:
    """All items in a seeded, uniformly random order (`econeval gate`: its confidence sequences
    assume each next item is drawn at random from those not yet run)."""
    out = sorted(items, key=lambda it: it["id"])
    random.Random(f"{seed}/{task}/gate-order").shuffle(out)
    return out


def design(items: list[dict], done: set[str], strata: Callable[[dict], str] | None, scheme: str = SCHEME) -> dict[str, Any]:
    """What run.json records of the `done` items as a sample of `items` (strata None: one)."""
    groups: dict[str, list[int]] = {}
    for it in items:
        g = groups.setdefault(str(strata(it)) if strata else "all", [0, 0])
        g[1] += 1
        g[0] += it["id"] in done
    return {"scheme": scheme, "n": sum(g[0] for g in groups.values()), "population": len(items), "strata": groups,
            "strata_sampled_once": sum(1 for g in groups.values() if g[0] == 1)}


def stratified(items: list[dict], strata: Callable[[dict], str], spec: float | int, seed: int,
               task: str) -> tuple[list[dict], dict[str, Any]]:
    """The sample (in the items' order) and what run.json records of it."""
    groups = _groups(items, strata, seed, task)
    alloc = allocate({h: len(g) for h, g in groups.items()}, size(spec, len(items)))
    chosen = {it["id"] for h, group in groups.items() for it in group[: alloc[h]]}
    return [it for it in items if it["id"] in chosen], design(items, chosen, strata)


def boot_indices(strata_of: list[str], rng: random.Random) -> list[int]:
    """One bootstrap replicate: within each stratum, as many draws with replacement as it holds.
    Strata sampled once are resampled together, as one (collapsed strata: alone, each would add
    no spread, and a sample of one item per stratum would get an interval of width zero)."""
    by: dict[str, list[int]] = {}
    for i, h in enumerate(strata_of):
        by.setdefault(h, []).append(i)
    groups = [idx for idx in by.values() if len(idx) > 1]
    singles = [idx[0] for idx in by.values() if len(idx) == 1]
    if singles:
        groups.append(singles)
    out: list[int] = []
    for idx in groups:
        out += [idx[rng.randrange(len(idx))] for _ in idx]
    return out


def shrink(estimate: float, replicate: float, fraction: float) -> float:
    """A replicate's deviation from the estimate, scaled by the finite population correction."""
    return estimate + math.sqrt(max(0.0, 1.0 - fraction)) * (replicate - estimate)
