"""Pure metric functions: per-item results in, numbers out (re-runnable without a model)."""

from __future__ import annotations

from typing import Sequence


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0  # sklearn's zero_division=0


def classification_report(y_true: Sequence[int], y_pred: Sequence[int], labels: Sequence[int] = (0, 1)) -> dict:
    """Per-class precision / recall / F1 / support and their macro average, as sklearn's
    classification_report computes them (zero_division=0)."""
    out: dict = {}
    for c in labels:
        tp = sum(1 for t, p in zip(y_true, y_pred) if t == c and p == c)
        n_pred = sum(1 for p in y_pred if p == c)
        n_true = sum(1 for t in y_true if t == c)
        prec, rec = _ratio(tp, n_pred), _ratio(tp, n_true)
        out[c] = {"precision": prec, "recall": rec, "f1": _ratio(2 * prec * rec, prec + rec), "support": n_true}
    out["macro"] = {k: sum(out[c][k] for c in labels) / len(labels) for k in ("precision", "recall", "f1")}
    out["accuracy"] = _ratio(sum(1 for t, p in zip(y_true, y_pred) if t == p), len(y_true))
    return out


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
