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
  population correction √(1 − n/N). A stratum sampled once adds no spread; the record says how
  many there are.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable

SCHEME = "stratified-webster/v1"  # recorded in every run's identity: a change of scheme is another run


def parse(spec: str | float | int | None) -> float | int | None:
    """`--sample` as given: a whole number ≥ 1 (items per task) or a fraction in (0, 1)."""
    if spec is None:
        return None
    try:
        value = float(spec)
    except (TypeError, ValueError):
        raise ValueError(f"--sample {spec!r}: give a number of items (e.g. 200) or a fraction (e.g. 0.1)") from None
    if value >= 1 and value == int(value):
        return int(value)
    if 0 < value < 1:
        return value
    raise ValueError(f"--sample {spec}: a whole number of items of at least 1, or a fraction between 0 and 1")


def size(spec: float | int, population: int) -> int:
    return min(population, spec if isinstance(spec, int) else max(1, math.ceil(spec * population)))


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Webster's divisor method, one seat at a time (ties: the stratum named first)."""
    got = {h: 0 for h in sizes}
    for _ in range(min(n, sum(sizes.values()))):
        h = max((h for h in sizes if got[h] < sizes[h]), key=lambda h: sizes[h] / (got[h] + 0.5))
        got[h] += 1
    return got


def stratified(items: list[dict], strata: Callable[[dict], str], spec: float | int, seed: int,
               task: str) -> tuple[list[dict], dict[str, Any]]:
    """The sample (in the items' order) and what run.json records of it."""
    groups: dict[str, list[dict]] = {}
    for it in items:
        groups.setdefault(str(strata(it)), []).append(it)
    n = size(spec, len(items))
    alloc = allocate({h: len(g) for h, g in groups.items()}, n)
    chosen: set[str] = set()
    for h, group in groups.items():
        order = sorted(group, key=lambda it: it["id"])
        random.Random(f"{seed}/{task}/sample/{h}").shuffle(order)
        chosen.update(it["id"] for it in order[: alloc[h]])
    record = {"scheme": SCHEME, "n": n, "population": len(items),
              "strata": {h: [alloc[h], len(g)] for h, g in groups.items()},
              "strata_sampled_once": sum(1 for h in groups if alloc[h] == 1)}
    return [it for it in items if it["id"] in chosen], record


def boot_indices(strata_of: list[str], rng: random.Random) -> list[int]:
    """One bootstrap replicate: within each stratum, as many draws with replacement as it holds."""
    by: dict[str, list[int]] = {}
    for i, h in enumerate(strata_of):
        by.setdefault(h, []).append(i)
    out: list[int] = []
    for idx in by.values():
        out += [idx[rng.randrange(len(idx))] for _ in idx]
    return out


def shrink(estimate: float, replicate: float, fraction: float) -> float:
    """A replicate's deviation from the estimate, scaled by the finite population correction."""
    return estimate + math.sqrt(max(0.0, 1.0 - fraction)) * (replicate - estimate)
