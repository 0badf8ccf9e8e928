"""`econeval gate --plot FILE.html`: a gate's progress as a page (templates/gate.html). Per gated
metric a panel of its two e-processes by paired items spent — the evidence for "pass" (the
candidate is no worse than -max_drop) and for "regression" (worse by more than that), each against
its dashed threshold log(1/alpha) — one legend for all panels below them (never on a line), and
under the plot the same numbers as a table: where each metric ended and what decided it, and its
steps one by one. A panel of one step (every item in one chunk) says so.

The progress is the gate's `progress` (judge/gate.py's `Metric.progress`): each metric's task,
metric, population, verdict, thresholds and steps ({items, log_wealth_pass,
log_wealth_regression}; None: that verdict's null can no longer hold, decided by arithmetic)."""

from __future__ import annotations

from typing import Any

from . import figures, pages

PASS = "the candidate is no worse than −max_drop"  # what the pass e-process gathers evidence for
REGRESSION = "the candidate is worse by more than max_drop"


def _panels(plt, np, doc: dict):
    """A panel a gated metric, stacked; one legend for all, below the last (never on a line)."""
    metrics = doc["metrics"]
    fig, axes = plt.subplots(len(metrics), 1, figsize=(8.5, 2.0 * len(metrics) + 0.8), squeeze=False)
    handles: list[Any] = []
    for ax, m in zip(axes[:, 0], metrics):
        x = [s["items"] for s in m["steps"]]
        for key, colour, need in (("log_wealth_pass", "#2ca02c", m["threshold_pass"]),
                                  ("log_wealth_regression", "#d62728", m["threshold_regression"])):
            # None: that null can no longer hold (decided by arithmetic): drawn at its threshold
            y = [need if s[key] is None else max(s[key], -1.0) for s in m["steps"]]
            line, = ax.plot(x, y, "-o", color=colour, ms=3, lw=1.5)
            dashed = ax.axhline(need, color=colour, lw=1, ls="--")
            if len(handles) < 4:
                handles += [line, dashed]
        ax.set_xlim(0, max(m["of"], max(x, default=0)) * 1.02 or 1)
        ax.set_title(f"{m['task']} {m['metric']}: {m['verdict']} after {x[-1] if x else 0:,} of {m['of']:,} items", fontsize=8)
        ax.set_ylabel("evidence\n(log wealth)", fontsize=7)
        ax.tick_params(labelsize=7)
    axes[-1, 0].set_xlabel("paired items spent (the gate's order)", fontsize=8)
    labels = [f"pass: evidence that {PASS}", "pass threshold: log(1/alpha), where pass is decided",
              f"regression: evidence that {REGRESSION}", "regression threshold: log(1/alpha), where regression is decided"]
    fig.tight_layout(rect=(0, 0.6 / (2.0 * len(metrics) + 0.8), 1, 1))
    # columns fill first: the two e-processes on the left, their thresholds on the right
    fig.legend(handles[0::2] + handles[1::2], labels[0::2] + labels[1::2], loc="lower center", ncol=2, fontsize=7, frameon=False)
    return fig


def _one_step(doc: dict) -> tuple[str | None, list[str]]:
    single = [f"{m['task']} {m['metric']}" for m in doc["metrics"] if len(m["steps"]) == 1]
    if not single:
        return None, []
    return None, [f"One step, drawn as a point: {figures.listed(single)} (every item came in one chunk; "
                  "the gate checks at the end of each chunk)."]


def _wealth(value: float | None) -> str:
    text = "–" if value is None else f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def _decided(m: dict) -> str:
    """What ended a metric's e-processes, in words (the gate's rule: judge/sequential.py)."""
    if not m["steps"]:
        return "no item paired"
    last = m["steps"][-1]
    impossible = {"pass": "a drop beyond max_drop could no longer happen", "regression": "no drop beyond max_drop could happen"}
    for verdict, key, need in (("pass", "log_wealth_pass", m["threshold_pass"]),
                               ("regression", "log_wealth_regression", m["threshold_regression"])):
        if m["verdict"] == verdict and last[key] is None:
            return f"arithmetic at {last['items']:,} items: {impossible[verdict]}"
        if m["verdict"] == verdict and last[key] >= need:
            return f"its evidence reached the threshold at {last['items']:,} items"
    if last["items"] >= m["of"]:
        return ("every item spent: the mean difference is known" if m["verdict"] in impossible
                else "every item spent: the mean difference lies at the margin")
    return "neither threshold reached when the gate stopped"


def render(progress: list[dict[str, Any]], verdict: str, verdict_line: str) -> str:
    """The page (its plot left out where matplotlib is missing: the command refuses --plot then)."""
    doc = {"kind": "gate-progress", "metrics": progress,
           "caption": "Solid: each e-process's running maximum log wealth (its evidence) after each step; dashed: its "
                      "threshold log(1/alpha), where that verdict is reached; a line that ends on its threshold was "
                      "decided by arithmetic (the other verdict could no longer hold)."}
    rows = [{"task": m["task"], "metric": m["metric"], "verdict": m["verdict"],
             "items": m["steps"][-1]["items"] if m["steps"] else 0, "of": m["of"],
             "pass": _wealth(m["steps"][-1]["log_wealth_pass"]) if m["steps"] else "–", "pass_need": f"{m['threshold_pass']:.2f}",
             "regression": _wealth(m["steps"][-1]["log_wealth_regression"]) if m["steps"] else "–",
             "regression_need": f"{m['threshold_regression']:.2f}", "decided": _decided(m),
             "steps": [{"items": s["items"], "pass": _wealth(s["log_wealth_pass"]), "regression": _wealth(s["log_wealth_regression"])}
                       for s in m["steps"]]} for m in progress]
    return pages.render("gate.html", title=f"econeval gate: {verdict}", verdict_line=verdict_line,
                        plot=figures.figure(doc, draw=_panels, rests=_one_step) if progress else None, rows=rows,
                        pass_means=PASS, regression_means=REGRESSION)
