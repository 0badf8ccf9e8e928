"""Seeded bootstrap intervals over items for a task's headline numbers (the paper's numbers
themselves are never changed: intervals sit beside them under `intervals`), the Wilson interval
of a share (a task's breakdowns: the share of wrong answers that make one mistake) and Newcombe's
interval of a difference of paired shares (one question under two protocols)."""

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


Z = 1.959963984540054  # the standard normal's 97.5% point: 95% two-sided


def wilson(k: int, n: int) -> tuple[float, float] | None:
    """The 95% Wilson score interval of a proportion k/n (a share of n independent answers);
    None over none."""
    if n <= 0:
        return None
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return 0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half)


def newcombe(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float] | None:
    """The 95% interval of p1 − p2 for two independent proportions k1/n1 and k2/n2 (Newcombe
    1998's hybrid score interval, method 10, from their Wilson intervals); None over none."""
    w1, w2 = wilson(k1, n1), wilson(k2, n2)
    if w1 is None or w2 is None:
        return None
    (l1, u1), (l2, u2) = w1, w2
    p1, p2 = k1 / n1, k2 / n2
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def newcombe_paired(a: int, b: int, c: int, d: int) -> tuple[float, float] | None:
    """The 95% interval of p1 − p2 for paired answers (Newcombe 1998, method 10: Wilson intervals
    of both, their correlation φ corrected as the paper does): a right in both, b right only in
    the first, c only in the second, d in neither; None over no pair."""
    n = a + b + c + d
    w1, w2 = wilson(a + b, n), wilson(a + c, n)
    if w1 is None or w2 is None:
        return None
    (l1, u1), (l2, u2) = w1, w2
    p1, p2 = (a + b) / n, (a + c) / n
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    corrected = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0)
    phi = corrected / math.sqrt(margins) if margins else 0.0
    low = p1 - p2 - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = p1 - p2 + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return low, high


def finite_numbers(task: Task, records: list[dict], prep: Prepared) -> dict[str, float]:
    return finite(task.numbers_of(records, prep))


def finite(numbers: dict[str, Any]) -> dict[str, float]:
    """The numbers that are numbers (not None, a flag or a non-finite value)."""
    return {k: float(v) for k, v in numbers.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def headline_intervals(task: Task, records: list[dict], prep: Prepared, n_boot: int, seed: int,
                       sample: tuple[dict[str, str], float] | None = None) -> dict[str, Any] | None:
    """Resample the scored items with replacement `n_boot` times (seeded), recompute the task's
    table and read its headline and table numbers; the 95% percentile interval of each.

    `sample` (a stratified sample: each item id's stratum, and n/N): resample within each
    stratum and shrink each replicate's deviation by √(1 − n/N), so the interval is that of the
    full-set number the sample estimates (sampling.py); a task that declares its confusion cells
    (`Task.sample_cells`) gets the Pólya interval for the numbers they determine instead."""
    if not n_boot or not records:
        return None
    # a count over no parsed item (all unparsed: EconNLI-gen's judge labels none) rests on no answer: a resample of
    # unparsed items is unparsed again, so its interval would be a point; it gets none (other numbers are null then)
    counts = {m.name for m in task.metrics if m.count}
    unanchored = counts if counts and task.aggregate(records, prep).get("n_scored") == 0 else set()
    from .sampling import boot_indices, shrink

    polya = polya_intervals(task, records, prep, n_boot, seed, sample[0]) if sample and task.sample_cells else {}
    if polya and set(finite_numbers(task, records, prep)) <= set(polya):
        return {"method": _POLYA_METHOD.format(n=len(records), draws=n_boot, which=", ".join(sorted(polya))), "seed": seed,
                **{k: list(v) for k, v in polya.items()}}

    rng = random.Random(f"{seed}/{task.name}/bootstrap")
    draws: dict[str, list[float]] = {}
    n = len(records)
    fraction = sample[1] if sample else None
    strata = [sample[0].get(r["id"], "?") for r in records] if sample else None
    point = finite_numbers(task, records, prep) if fraction is not None else {}
    numbers = task.resampler(records, prep)
    # Python's seeded stream, not numpy's: numpy draws 1,000 resamples of 6,400 items in 0.04 s where this takes
    # 1.4 s (measured 2026-12-04; STEER-ME's whole 1,000-resample interval 1.9 s), but a new stream would move every
    # interval a seed has given so far, a resumed folder's included, to save seconds of a run of minutes or hours
    for _ in range(n_boot):
        idx = boot_indices(strata, rng) if strata else [rng.randrange(n) for _ in range(n)]
        for key, value in finite(numbers(idx)).items():
            draws.setdefault(key, []).append(shrink(point[key], value, fraction) if fraction is not None and key in point else value)
    method = (f"stratified bootstrap over the {n} scored items of a sample ({n_boot} resamples within strata, "
              f"finite-population corrected at n/N = {fraction:.3f}), 95% percentile interval" if fraction is not None else
              f"bootstrap over the {n} scored items, {n_boot} resamples, 95% percentile interval")
    out: dict[str, Any] = {"method": method, "seed": seed}
    for key, values in draws.items():
        iv = polya.get(key) or percentile_interval(values)
        out[key] = list(iv) if iv and key not in unanchored else None
    if unanchored & set(draws):
        out["method"] += (f"; none for {', '.join(sorted(unanchored & set(draws)))}: counts over no parsed item (all "
                          f"{n} unparsed), a resample of which is a point")
    if polya:
        out["method"] = (_POLYA_METHOD.format(n=n, draws=n_boot, which=", ".join(sorted(polya)))
                         + ("; the rest: " + method if set(draws) - set(polya) else ""))
    return out


_POLYA_METHOD = ("finite-population Bayesian (Pólya) interval over the {n} scored items of a sample: per stratum, "
                 "confusion-cell probabilities from a Dirichlet with ½ added to each cell, the unseen items drawn, the "
                 "numbers recomputed ({draws} draws), 95% central interval; for {which}")
POLYA_PRIOR = 0.5  # Jeffreys: ½ added to every cell's count (without it, or with ¼, rare cells undercover)


def polya_intervals(task: Task, records: list[dict], prep: Prepared, n_draws: int, seed: int,
                    strata_of: dict[str, str]) -> dict[str, tuple[float, float]]:
    """A finite-population Bayesian (Pólya) interval for the numbers a sample estimates, by the
    task's confusion cells (`Task.sample_cells`): per stratum, the cell probabilities drawn from a
    Dirichlet with ½ added to each cell's observed count, the stratum's unseen items drawn from
    them, the numbers recomputed on the completed population; the central 95% of the draws.
    A rare cell seen 0-3 times still gets its share of uncertainty, where a bootstrap over the
    sample would see none (it then behaves like a Wald interval)."""
    import hashlib

    import numpy as np

    population: dict[str, int] = {}
    for h in strata_of.values():
        population[h] = population.get(h, 0) + 1
    by: dict[str, list[dict]] = {}
    for r in records:
        by.setdefault(strata_of.get(r["id"], "?"), []).append(r)
    rng = np.random.default_rng(int(hashlib.sha256(f"{seed}/{task.name}/polya".encode()).hexdigest()[:16], 16))
    claimed = {n for v in task.sample_cells if v.numbers for n in v.numbers}
    draws: dict[str, list[float]] = {}
    for view in task.sample_cells:
        if not any(view.field in r for r in records):
            continue  # the sample has no such field (e.g. no log-probabilities): nothing to draw
        cells = {h: (population.get(h, len(rs)) - len(rs),
                     np.array([sum(1 for r in rs if r.get(view.field) == v) for v in view.values], dtype=float),
                     [{**rs[0], view.field: v} for v in view.values])  # a record of each cell of the stratum
                 for h, rs in by.items()}
        for _ in range(n_draws):
            completed = list(records)
            for unseen, counts, made in cells.values():
                if unseen > 0:
                    extra = rng.multinomial(unseen, rng.dirichlet(counts + POLYA_PRIOR))
                    for rec, k in zip(made, extra):
                        completed += [rec] * int(k)
            for key, value in finite_numbers(task, completed, prep).items():
                mine = key in view.numbers if view.numbers else key not in claimed
                if mine:
                    draws.setdefault(key, []).append(value)
    return {k: iv for k, v in draws.items() if (iv := percentile_interval(v))}
