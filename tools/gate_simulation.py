"""Items the release gate spends to a decision, by seeded simulation: the betting e-processes of
econeval/judge/sequential.py beside the rule they replaced (the two-sided predictable plug-in
empirical-Bernstein confidence sequence, alpha split over verdicts; kept here only to measure
against) and a one-sided fixed-sample test at the true discordance with 80% power.

    python tools/gate_simulation.py [--trials 400] [--chunk 16] [--seed 0]

Populations of paired 0/1 accuracy differences (w in {-1, 0, 1}): N items, a share of discordant
pairs, a true drop; margin 0.05, alpha 0.05, one metric. Prints a Markdown table: mean items to
a pass at no drop, the ratio new / previous, the false-pass rate at a true drop exactly equal to
the margin, and the baseline against itself."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from econeval.judge.sequential import MarginPair, first_decision

MARGIN, ALPHA = 0.05, 0.05


def previous_lower_bounds(x: np.ndarray, alpha: float, population: int) -> np.ndarray:
    """The previous rule's one-sided bound (Waudby-Smith & Ramdas' PrPl-EB for sampling without
    replacement, bets capped at 1/2, on x in [0, 1])."""
    t = np.arange(1, len(x) + 1, dtype=float)
    total = np.cumsum(x)
    before = np.concatenate(([0.0], total[:-1]))
    reg_mean = np.minimum((0.5 + total) / (t + 1), 1.0)
    reg_var = (0.25 + np.cumsum((x - reg_mean) ** 2)) / (t + 1)
    var_before = np.concatenate(([0.25], reg_var[:-1]))
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.sqrt(2 * math.log(1 / alpha) / (t * np.log1p(t) * var_before))
    lam = np.minimum(np.nan_to_num(lam, nan=0.0), 0.5)
    mean_before = np.concatenate(([0.0], (total / t)[:-1]))
    psi = -np.log1p(-lam) - lam
    left = population - t + 1
    z, w = before / left, (t - 1) / left
    low = (np.cumsum(lam * (x + z)) - math.log(1 / alpha) - np.cumsum((x - mean_before) ** 2 * psi)) / np.cumsum(lam * (1 + w))
    return np.maximum.accumulate(np.maximum(low, 0.0))


def previous_rule(w: np.ndarray, chunk: int) -> tuple[str, int]:
    x = (w + 1) / 2
    n = len(x)
    low = 2 * previous_lower_bounds(x, ALPHA / 2, n) - 1
    high = 1 - 2 * previous_lower_bounds(1 - x, ALPHA / 2, n)
    low[-1] = high[-1] = w.mean()
    return first_decision(low > -MARGIN, high < -MARGIN, chunk)


def new_rule(w: np.ndarray, chunk: int) -> tuple[str, int]:
    pair = MarginPair(MARGIN, len(w), ALPHA, ALPHA)
    return first_decision(*pair.feed(w), chunk)


def population(n: int, discordant: float, drop: float) -> np.ndarray:
    """N paired differences: a share `discordant` of them ±1, the mean exactly 0 at no drop and
    -drop or below otherwise (rounded towards a larger drop, so that "a drop equal to the margin"
    is never a smaller one)."""
    lose = math.ceil(n * (discordant + drop) / 2 - 1e-9)
    win = lose - math.ceil(n * drop - 1e-9)
    w = np.zeros(n)
    w[:lose], w[lose:lose + win] = -1.0, 1.0
    return w


def fixed_n(discordant: float, n: int) -> int:
    """A one-sided z-test of "mean <= -margin" at alpha with 80% power when the true mean is 0 and
    the discordance is known, drawn without replacement from N items (finite-population corrected)."""
    infinite = ((1.644854 + 0.841621) * math.sqrt(discordant) / MARGIN) ** 2
    return math.ceil(infinite / (1 + infinite / n))


def mean_items(rule, w: np.ndarray, trials: int, chunk: int, rng) -> tuple[float, float]:
    runs = [rule(rng.permutation(w), chunk) for _ in range(trials)]
    return float(np.mean([n for _, n in runs])), float(np.mean([v == "pass" for v, _ in runs]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--chunk", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"margin {MARGIN}, alpha {ALPHA}, one metric, verdicts at {args.chunk}-item chunk ends, {args.trials} random "
          f"orders per cell, seed {args.seed}\n")
    print("| N | discordant | previous rule | betting e-process | new / previous | fixed-n at the true discordance "
          "| new / fixed-n | new / fixed-n planned for 30% | false pass at a drop = margin (new) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in (1026, 6400):
        for d in (0.05, 0.15, 0.30):
            w = population(n, d, 0.0)
            old, _ = mean_items(previous_rule, w, args.trials, args.chunk, rng)
            new, passed = mean_items(new_rule, w, args.trials, args.chunk, rng)
            at_margin = [new_rule(rng.permutation(population(n, d, MARGIN)), args.chunk)[0] == "pass"
                         for _ in range(args.trials)]
            fixed, planned = fixed_n(d, n), fixed_n(0.30, n)
            print(f"| {n:,} | {d:.0%} | {old:.0f} | {new:.0f} (pass {passed:.1%}) | {new / old:.2f} | {fixed} "
                  f"| {new / fixed:.2f} | {new / planned:.2f} | {np.mean(at_margin):.1%} |")
    same = np.zeros(1026)
    print(f"\nthe baseline against itself (N 1,026): previous rule {previous_rule(same, args.chunk)[1]} items, "
          f"betting e-process {new_rule(same, args.chunk)[1]} items")
    return 0


if __name__ == "__main__":
    sys.exit(main())
