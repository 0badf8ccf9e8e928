"""Pure metric functions: per-item results in, numbers out (re-runnable without a model)."""

from __future__ import annotations

import math

from typing import Sequence


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0  # sklearn's zero_division=0


def classification_report(y_true: Sequence[int], y_pred: Sequence[int], labels: Sequence[int] = (0, 1)) -> dict:
    """Per-class precision / recall / F1 / support and their macro average, as sklearn's
    classification_report computes them (zero_division=0). Over zero items nothing is computed:
    every metric is None (the supports say 0)."""
    out: dict = {}
    if not y_true:
        for c in labels:
            out[c] = {"precision": None, "recall": None, "f1": None, "support": 0}
        out["macro"] = {"precision": None, "recall": None, "f1": None}
        out["accuracy"] = None
        return out
    from collections import Counter

    pairs = Counter(zip(y_true, y_pred))  # one pass: the confusion counts
    for c in labels:
        tp = pairs[c, c]
        n_pred = sum(k for (_, p), k in pairs.items() if p == c)
        n_true = sum(k for (t, _), k in pairs.items() if t == c)
        prec, rec = _ratio(tp, n_pred), _ratio(tp, n_true)
        out[c] = {"precision": prec, "recall": rec, "f1": _ratio(2 * prec * rec, prec + rec), "support": n_true}
    out["macro"] = {k: sum(out[c][k] for c in labels) / len(labels) for k in ("precision", "recall", "f1")}
    out["accuracy"] = _ratio(sum(k for (t, p), k in pairs.items() if t == p), len(y_true))
    return out


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def brier(p: Sequence[float], gold: int) -> float:
    """Σ over options of (1[o = gold] − p(o))²."""
    return sum(((1.0 if i == gold else 0.0) - q) ** 2 for i, q in enumerate(p))


def ece(confidences: Sequence[float], correct: Sequence[bool], bins: int = 10) -> float | None:
    """Expected calibration error: equal-width bins [i/b, (i+1)/b), confidence 1.0 in the top bin;
    Σ_bins |Σ correct − Σ confidence| / n."""
    return binned_ece([(ece_bin(c, bins), float(ok), c) for c, ok in zip(confidences, correct)])


def ece_bin(confidence: float, bins: int = 10) -> int:
    """The calibration bin of a confidence: [i/b, (i+1)/b), 1.0 in the top bin."""
    return min(int(confidence * bins), bins - 1)


def binned_ece(items: Sequence[tuple[int, float, float]]) -> float | None:
    """ECE of (bin, correct as 0.0/1.0, confidence) triples, in their order."""
    if not items:
        return None
    sums: dict[int, list[float]] = {}
    for b, ok, c in items:
        s = sums.setdefault(b, [0.0, 0.0])
        s[0] += ok
        s[1] += c
    return sum(abs(a - c) for a, c in sums.values()) / len(items)


def normalized_accuracy(correct: Sequence[bool], k: Sequence[int], penalty: Sequence[float | None] | None = None) -> float | None:
    """Mean of +1 (correct) and −1/(K−1) (wrong), or −penalty where one is given (a question
    group's): random guessing scores 0."""
    pen = penalty or [None] * len(k)
    return mean([1.0 if ok else -(p if p is not None else 1.0 / (kk - 1)) for ok, kk, p in zip(correct, k, pen)])


def spread(values: dict[str, float | None]) -> dict | None:
    """min / max / max − min of a metric over groups (robustness across domains or types)."""
    vals = {k: v for k, v in values.items() if v is not None}
    if not vals:
        return None
    lo, hi = min(vals.values()), max(vals.values())
    return {"min": lo, "max": hi, "spread": hi - lo, "worst": min(vals, key=lambda k: vals[k]), "by_group": vals}


LOGPROB_ABOVE_ZERO = 1e-6  # float error a log-probability may carry above 0
PROB_SUM_TOLERANCE = 1e-3  # and the options' probabilities above 1


def logprob_problem(scores: dict, top=None) -> str | None:
    """Why log-probabilities cannot be scored, or None: each must be a number, not NaN or +inf,
    at most 0 (-inf is probability 0), and the options' probabilities add up to at most 1. The
    runner makes an item with such values an error; `score` refuses such a predictions line."""
    values = list(scores.values()) + ([] if top is None else [top])
    for v in values:
        if not isinstance(v, (int, float)) or isinstance(v, bool) or math.isnan(v) or v == math.inf:
            return "log-probabilities must be finite numbers and at most 0 (one is not a number)"
        if v > LOGPROB_ABOVE_ZERO:
            return "log-probabilities must be finite and at most 0 (one is above 0: a probability above 1)"
    if sum(math.exp(v) for v in scores.values()) > 1 + PROB_SUM_TOLERANCE:
        return "the options' probabilities add up to more than 1"
    return None
