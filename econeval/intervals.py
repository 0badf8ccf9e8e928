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


def headline_intervals(task: Task, records: list[dict], prep: Prepared, n_boot: int, seed: int) -> dict[str, Any] | None:
    """Resample the scored items with replacement `n_boot` times (seeded), recompute the task's
    table and read its headline and table numbers; the 95% percentile interval of each."""
    if not n_boot or not records:
        return None
    rng = random.Random(f"{seed}/{task.name}/bootstrap")
    draws: dict[str, list[float]] = {}
    n = len(records)
    for _ in range(n_boot):
        sample = [records[rng.randrange(n)] for _ in range(n)]
        result = task.aggregate(sample, prep)
        for key, value in {**task.headline(result), **task.table_numbers(result)}.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                draws.setdefault(key, []).append(float(value))
    out: dict[str, Any] = {"method": f"bootstrap over the {n} scored items, {n_boot} resamples, 95% percentile interval",
                           "seed": seed}
    for key, values in draws.items():
        iv = percentile_interval(values)
        out[key] = list(iv) if iv else None
    return out
