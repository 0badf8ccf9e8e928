"""One-sided betting e-processes for a margin on the mean of bounded paired differences, sampled
without replacement (`econeval gate`).

One gated metric of one task: values in [lo, hi], direction s (+1 when larger is better), span
R = hi - lo. Each paired item gives w_i = s (c_i - b_i) / R in [-1, 1] (negative: the candidate
is worse); the margin is delta = max_drop / R; items come in a uniformly random order of the
baseline's N items; S_{i-1} = w_1 + ... + w_{i-1}.

- **pass** (null: the population mean of w is at most -delta). Under the null the conditional
  mean of draw i is at most m_i = (-N delta - S_{i-1}) / (N - i + 1) (sampling without
  replacement). The payoff u_i = (w_i - m_i) / (1 + m_i) is at least -1 and has conditional mean
  at most 0 under the null, so for every bet fraction f in [0, 1) the product of (1 + f u_i) is
  a non-negative supermartingale, and so is the average over a grid of fractions
  f_j = 0.95 j / J. By Ville's inequality the wealth ever reaches 1/alpha with probability at
  most alpha: "pass" is said once its running maximum does. If m_i < -1 the null cannot hold
  (even all remaining items at -1 would leave the mean above -delta): pass.
- **regression** (null: the mean is at least -delta): the same with w -> -w, -delta -> +delta.
- When every item is in the mean is known: pass if it lies above -delta, regression if below,
  neither at -delta itself (both nulls hold there: inconclusive, as `compare` says).

Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting" (JRSS-B 2024),
Sections 4 and 6 (the mixture of bets, sampling without replacement). The updates are
incremental (one pass over each new item) and vectorised over the bet grid, so a simulation
feeds a whole sequence at once and reads where a gate checking at chunk ends would have stopped.
A displayed interval inverts the same e-processes over a grid of margins (`Interval`).
"""

from __future__ import annotations

import math

import numpy as np

EXACT = 1e-12  # when every item is in, a mean within rounding of -delta is at the margin: a tie
GRID = 40  # bet fractions f_j = 0.95 j / GRID, j = 1..GRID
FRACTIONS = 0.95 * np.arange(1, GRID + 1) / GRID


def _log_mean_exp(logs: np.ndarray, axis: int = -1) -> np.ndarray:
    top = np.max(logs, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return np.squeeze(top, axis=axis) + np.log(np.mean(np.exp(logs - top), axis=axis))


class MarginTest:
    """The e-process of one null "the population mean of x is at most `bound`" for x in [-1, 1],
    several bounds at once (a vector: the interval's grid), fed in the gate's order."""

    def __init__(self, bounds: np.ndarray | float, population: int):
        self.bounds = np.atleast_1d(np.asarray(bounds, dtype=float))
        self.population = population
        self.n = 0
        self.total = 0.0
        self.log_wealth = np.zeros((len(self.bounds), GRID))  # per bound, per bet fraction
        self.best = np.full(len(self.bounds), -np.inf)  # the running maximum of the mixture's log wealth
        self.impossible = np.zeros(len(self.bounds), dtype=bool)  # the null cannot hold any more

    def feed(self, x: np.ndarray) -> np.ndarray:
        """Add the next items; returns, for each of them, the running maximum of the log wealth
        after it (shape: items x bounds; inf where the null became impossible)."""
        x = np.asarray(x, dtype=float)
        block = max(1, 2_000_000 // (len(self.bounds) * GRID))  # items x bounds x fractions held at once
        if len(x) > block:
            return np.concatenate([self.feed(x[s:s + block]) for s in range(0, len(x), block)])
        k = len(x)
        if not k:
            return np.empty((0, len(self.bounds)))
        i = self.n + np.arange(1, k + 1)  # the draws' positions 1..N
        before = self.total + np.concatenate(([0.0], np.cumsum(x)[:-1]))  # S_{i-1}
        left = np.maximum(self.population - i + 1, 1)
        m = (self.population * self.bounds[None, :] - before[:, None]) / left[:, None]  # items x bounds
        gone = np.logical_or.accumulate(m < -1, axis=0) | self.impossible[None, :]
        safe = np.where(gone, 0.0, m)
        with np.errstate(divide="ignore", invalid="ignore"):  # m = -1: only x = -1 is possible (no bet), any other disproves
            u = np.nan_to_num((x[:, None] - safe) / (1 + safe), nan=0.0, posinf=np.inf)
        steps = np.log1p(FRACTIONS[None, None, :] * u[:, :, None])  # items x bounds x fractions
        logs = self.log_wealth[None, :, :] + np.cumsum(steps, axis=0)
        mixture = _log_mean_exp(logs, axis=2)
        path = np.maximum.accumulate(np.concatenate((self.best[None, :], mixture), axis=0), axis=0)[1:]
        path = np.where(gone, np.inf, path)
        self.log_wealth = logs[-1]
        self.best = path[-1]
        self.impossible = gone[-1]
        self.n += k
        self.total += float(x.sum())
        return path


class MarginPair:
    """One gated metric: the pass and the regression e-processes at the margin, and the verdict
    they give. `alpha_pass` and `alpha_regression`: each verdict's error rate."""

    def __init__(self, delta: float, population: int, alpha_pass: float, alpha_regression: float):
        self.delta, self.population = delta, population
        self.need_pass, self.need_regression = math.log(1 / alpha_pass), math.log(1 / alpha_regression)
        self.passing = MarginTest(-delta, population)  # null: mean w <= -delta
        self.regressing = MarginTest(delta, population)  # null: mean (-w) <= delta

    def _known(self) -> str | None:
        """Every item is in: the mean is known, and "pass" if it lies above the margin, "regression"
        if below, "tie" at it (within rounding): there both nulls hold, so neither is rejected, as
        `compare` calls such a pair inconclusive. None before every item is in."""
        t = self.passing
        if t.n < self.population:
            return None
        mean = t.total / self.population
        return "pass" if mean > -self.delta + EXACT else "regression" if mean < -self.delta - EXACT else "tie"

    def feed(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Add the next items: for each, whether pass / regression has been reached by then."""
        w = np.asarray(w, dtype=float)
        p = self.passing.feed(w)[:, 0] >= self.need_pass
        r = self.regressing.feed(-w)[:, 0] >= self.need_regression
        known = self._known()
        if known is not None and len(w):
            p[-1], r[-1] = known == "pass", known == "regression"
        return p, r

    def verdict(self) -> str | None:
        known = self._known()
        if known is not None:
            return None if known == "tie" else known
        if self.passing.best[0] >= self.need_pass:
            return "pass"
        if self.regressing.best[0] >= self.need_regression:
            return "regression"
        return None


class Interval:
    """The interval shown beside a verdict: the lower bound is the largest mean that the pass-side
    e-processes (at alpha_low) have rejected as an upper limit, the upper bound likewise from the
    regression side (at alpha_high), over a grid of candidate means in [-1, 1]."""

    STEPS = 200

    def __init__(self, population: int, alpha_low: float, alpha_high: float):
        self.grid = np.linspace(-1.0, 1.0, self.STEPS + 1)
        self.need_low, self.need_high = math.log(1 / alpha_low), math.log(1 / alpha_high)
        self.low_side = MarginTest(self.grid, population)  # null: mean w <= c
        self.high_side = MarginTest(-self.grid, population)  # null: mean w >= c, i.e. mean (-w) <= -c

    def feed(self, w: np.ndarray) -> None:
        w = np.asarray(w, dtype=float)
        if len(w):
            self.low_side.feed(w)
            self.high_side.feed(-w)

    def bounds(self) -> tuple[float, float]:
        seen = self.low_side
        if seen.n >= seen.population and seen.n:  # every item is in: the mean is known
            m = seen.total / seen.population
            return m, m
        low_rejected = self.low_side.best >= self.need_low  # the means c the data rule out from above
        high_rejected = self.high_side.best >= self.need_high
        low = float(self.grid[low_rejected].max()) if low_rejected.any() else -1.0
        high = float(self.grid[high_rejected].min()) if high_rejected.any() else 1.0
        return low, max(low, high)


def first_decision(pair_passes: np.ndarray, pair_regresses: np.ndarray, chunk: int) -> tuple[str, int]:
    """Where a gate checking at the ends of `chunk`-item steps stops on these flags: (verdict,
    items used); the running maxima make a flag stay set, so the first chunk end at or after the
    first flag decides."""
    n = len(pair_passes)
    ends = np.minimum(np.arange(chunk, n + chunk, chunk), n) - 1
    for end in ends:
        if pair_regresses[end]:
            return "regression", int(end + 1)
        if pair_passes[end]:
            return "pass", int(end + 1)
    return "inconclusive", n
