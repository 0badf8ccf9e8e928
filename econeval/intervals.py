"""Seeded bootstrap intervals over items for a task's headline numbers (the paper's numbers
themselves are never changed: intervals sit beside them under `intervals`)."""

from __future__ import annotations

import math
import random
from typing import Any

from .types import Prepared, Task

LEVEL = 0.95


def percentile_interval(values: list[float]) -> tuple[float, float] | None:
    """The central 95% of `values` (percentile method)."""
    if not values:
        return None
    v = sorted(values)
    return v[int((1 - LEVEL) / 2 * (len(v) - 1))], v[int(math.ceil((1 + LEVEL) / 2 * (len(v) - 1)))]


def _numbers(task: Task, result: dict) -> dict[str, float]:
    return {k: float(v) for k, v in {**task.headline(result), **task.table_numbers(result)}.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def headline_intervals(task: Task, records: list[dict], prep: Prepared, n_boot: int, seed: int,
                       sample: tuple[dict[str, str], float] | None = None) -> dict[str, Any] | None:
    """Resample the scored items with replacement `n_boot` times (seeded), recompute the task's
    table and read its headline and table numbers; the 95% percentile interval of each.

    `sample` (a stratified sample: each item id's stratum, and n/N): resample within each
    stratum and shrink each replicate's deviation by √(1 − n/N), so the interval is that of the
    full-set number the sample estimates (sampling.py)."""
    if not n_boot or not records:
        return None
    from .sampling import boot_indices, shrink

    rng = random.Random(f"{seed}/{task.name}/bootstrap")
    draws: dict[str, list[float]] = {}
    n = len(records)
    fraction = sample[1] if sample else None
    strata = [sample[0].get(r["id"], "?") for r in records] if sample else None
    point = _numbers(task, task.aggregate(records, prep)) if fraction is not None else {}
    for _ in range(n_boot):
        idx = boot_indices(strata, rng) if strata else [rng.randrange(n) for _ in range(n)]
        for key, value in _numbers(task, task.aggregate([records[i] for i in idx], prep)).items():
            draws.setdefault(key, []).append(shrink(point[key], value, fraction) if key in point else value)
    method = (f"stratified bootstrap over the {n} scored items of a sample ({n_boot} resamples within strata, "
              f"finite-population corrected at n/N = {fraction:.3f}), 95% percentile interval" if fraction is not None else
              f"bootstrap over the {n} scored items, {n_boot} resamples, 95% percentile interval")
    out: dict[str, Any] = {"method": method, "seed": seed}
    for key, values in draws.items():
        iv = percentile_interval(values)
        out[key] = list(iv) if iv else None
    return out
