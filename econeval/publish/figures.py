"""The pages' plots, drawn with matplotlib (the optional extra `econeval[report]`) as inline SVG,
each with what it rests on said in words: a figure with nothing but zeros (or nothing computed)
is not drawn and says so, and one resting on single items (a heatmap cell, a reliability bin, a
compared row) or on zero-width intervals names them under it.

A figure document is {"kind", "caption", ...data} (`not_drawn`: why its maker has nothing to
draw); `figure(doc)` gives what a page places:
{"svg" (None: not drawn), "caption", "caveats" (sentences), "skipped" (why not drawn, or None)}."""

from __future__ import annotations

import io
import math
import textwrap
from typing import Any, Callable

from .pages import svg

LEGEND_WRAP = 48  # characters of a series name a line: a long run label wraps within the figure
LIST_AT_MOST = 8  # names listed in a caveat; the rest counted


def _matplotlib():
    try:
        import matplotlib

        matplotlib.use("svg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError:
        return None
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text (no embedded glyph paths)
    if "text.parse_math" in matplotlib.rcParams:
        matplotlib.rcParams["text.parse_math"] = False  # a model named "$x$" is a name, not math
    return plt, np


def available() -> bool:
    return _matplotlib() is not None


def _svg(plt, fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _nan(values):
    return [float("nan") if v is None else v for v in values]


def _wrap(text: str) -> str:
    return "\n".join(textwrap.wrap(str(text), LEGEND_WRAP, break_long_words=True)) or str(text)


def listed(names: list[str]) -> str:
    """Names in a sentence: the first LIST_AT_MOST, then how many more."""
    names = [str(n) for n in names]
    if len(names) <= LIST_AT_MOST:
        return ", ".join(names)
    return ", ".join(names[:LIST_AT_MOST]) + f" and {len(names) - LIST_AT_MOST:,} more"


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _nothing_but_zeros(values: list) -> str | None:
    """Why a figure of these values would be empty (every one 0 or not computed), or None."""
    if any(_number(v) and v != 0 for v in values):
        return None
    if not any(_number(v) for v in values):
        return "Not drawn: no value was computed (the table above says –)."
    return "Not drawn: every value is 0" + (" or not computed" if any(not _number(v) for v in values) else "") + \
        " (the table above holds the numbers)."


# ---- each kind: what it rests on, and its drawing ------------------------------------------------
def _bars_rest(doc: dict) -> tuple[str | None, list[str]]:
    series = doc["series"]
    skipped = _nothing_but_zeros([v for s in series for v in s["values"]])
    if skipped:
        return skipped, []
    bare = [g for i, g in enumerate(doc["groups"]) if not any(_number(s["values"][i]) and s["values"][i] != 0 for s in series)]
    out = [f"No bar for {listed(bare)}: 0 or not computed in every series."] if bare else []
    # a series may say the items each bar rests on (`n`)
    ones = [f"{s['name']}: {g}" for s in series for g, v, n in zip(doc["groups"], s["values"], s.get("n") or [])
            if n == 1 and _number(v)]
    if ones:
        out.append(f"Bars resting on one item (each that item's 0 or 1): {listed(ones)}.")
    return None, out


GROUP_WRAP = 16  # characters of a bar group's name a line, where one is longer


def _group_names(groups: list) -> tuple[list[str], int]:
    """Bar groups' names as ticks: wrapped (at spaces and after underscores) where one is longer
    than GROUP_WRAP, so that no name runs into its neighbour or the legend; and the most lines."""
    names = [str(g) for g in groups]
    if all(len(n) <= GROUP_WRAP for n in names):
        return names, 0
    wrapped = ["\n".join(line.replace("_ ", "_") for line in textwrap.wrap(n.replace("_", "_ "), GROUP_WRAP)) or n for n in names]
    return wrapped, max(w.count("\n") + 1 for w in wrapped)


def _bars(plt, np, fig_doc):
    groups = fig_doc["groups"]
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(groups) + 2), 3))
    x = np.arange(len(groups))
    k = len(fig_doc["series"])
    width = 0.8 / max(k, 1)
    colors = ["#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]
    for i, ser in enumerate(fig_doc["series"]):
        pos = x - 0.4 + width * (i + 0.5)
        vals = _nan(ser["values"])
        ivs = ser.get("intervals") or [None] * len(vals)
        lo = [v - iv[0] if iv and v == v else 0 for v, iv in zip(vals, ivs)]
        hi = [iv[1] - v if iv and v == v else 0 for v, iv in zip(vals, ivs)]
        ax.bar(pos, vals, width, label=_wrap(ser["name"]), color=colors[i % len(colors)], yerr=[lo, hi], capsize=2,
               error_kw={"lw": 0.8})
    for m, (mark, style) in enumerate(zip(fig_doc.get("marks") or [], ("_", "x", "+", "1"))):
        xs, ys = [], []
        for g, vals in enumerate(mark["values"]):
            for i, v in enumerate(vals):
                if v is not None:
                    xs.append(x[g] - 0.4 + width * (i + 0.5))
                    ys.append(v)
        ax.scatter(xs, ys, marker=style, s=160 if style == "_" else 40, color="#222", linewidths=1.6, zorder=3, label=mark["name"])
    ref = fig_doc.get("reference")
    if ref:
        ax.axhline(ref["value"], color="#888", lw=1, ls="--", label=ref.get("label"))
    names, lines = _group_names(groups)
    if lines:
        ax.set_xticks(x, names, fontsize=8)
    else:
        ax.set_xticks(x, names, rotation=20, ha="right")
    if fig_doc.get("ylim"):
        ax.set_ylim(*fig_doc["ylim"])
    # below the axes (and below wrapped group names), wrapped: a legend of long labels never widens the figure past the page
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.3 if not lines else -0.08 - 0.075 * lines),
              ncol=1 if k > 2 or any(len(s["name"]) > 30 for s in fig_doc["series"]) else 2, frameon=False)
    return fig


def _heatmap_rest(doc: dict) -> tuple[str | None, list[str]]:
    if not any(_number(v) for row in doc["values"] for v in row):
        return "Not drawn: no value was computed (the table above says –).", []
    counts = doc.get("n") or []
    ones = [(label, sum(c == 1 for c in row), sum(c is not None for c in row)) for label, row in zip(doc["rows"], counts)]
    ones = [(label, k, of) for label, k, of in ones if k]
    if not ones:
        return None, []
    return None, ["Cells resting on one item (dotted: each is that one item's score): " +
                  "; ".join(f"{label}: {k:,} of {of:,}" for label, k, of in ones) + "."]


ANNOTATED = 24  # rows and columns at most of a heatmap whose cells show their numbers


def _heatmap(plt, np, fig_doc):
    vals = np.array([_nan(row) for row in fig_doc["values"]], dtype=float)
    few = len(fig_doc["columns"]) <= ANNOTATED and len(fig_doc["rows"]) <= ANNOTATED
    fig, ax = plt.subplots(figsize=(max(6, (0.45 if few else 0.18) * len(fig_doc["columns"]) + 2), 0.5 * len(fig_doc["rows"]) + 2.2))
    im = ax.imshow(vals, aspect="auto", cmap="viridis", vmin=min(0.0, np.nanmin(vals)) if np.isfinite(vals).any() else 0, vmax=1)
    ones = [(c, r) for r, row in enumerate(fig_doc.get("n") or []) for c, n in enumerate(row) if n == 1]
    if ones:  # the dot in the cell's corner where its number is written in it
        dx, dy = (0.32, -0.3) if few else (0, 0)
        ax.scatter([c + dx for c, _ in ones], [r + dy for _, r in ones], s=6, color="#fff", edgecolors="#222", linewidths=0.4)
    if few:  # each cell's number in it, as a heatmap of a setting's elements has room for
        for r, row in enumerate(vals):
            for c, v in enumerate(row):
                if np.isfinite(v):
                    ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=6.5, color="#fff" if v < 0.5 else "#000")
    ax.set_yticks(range(len(fig_doc["rows"])), fig_doc["rows"])
    ax.set_xticks(range(len(fig_doc["columns"])), fig_doc["columns"], rotation=90, fontsize=8 if few else 6)
    fig.colorbar(im, ax=ax, label=fig_doc.get("colorbar", ""))
    return fig


def _reliability_rest(doc: dict) -> tuple[str | None, list[str]]:
    ones = [b for b in doc["bins"] if b["n"] == 1]
    return None, [f"{len(ones)} of {len(doc['bins'])} bins rest on one item (labelled 1)."] if ones else []


def _reliability(plt, np, fig_doc):
    fig, ax = plt.subplots(figsize=(3.6, 3.4))
    ax.plot([0, 1], [0, 1], color="#888", ls="--", lw=1)
    ax.plot([b["confidence"] for b in fig_doc["bins"]], [b["accuracy"] for b in fig_doc["bins"]], marker="o", color="#1f77b4")
    for b in fig_doc["bins"]:
        ax.annotate(str(b["n"]), (b["confidence"], b["accuracy"]), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence (renormalised)")
    ax.set_ylabel("accuracy")
    return fig


def _points(doc: dict) -> list[tuple[str, dict]]:
    return [(str(s["name"]), p) for s in doc["series"] for p in s["points"]]


def _scatter_rest(doc: dict) -> tuple[str | None, list[str]]:
    points = _points(doc)
    if not points:
        return "Not drawn: no point was computed (the table above says –).", []
    ones = [f"{name}: {p.get('label')}" for name, p in points if p.get("n") == 1]
    return None, [f"Points resting on one item (ringed): {listed(ones)}."] if ones else []


def _scatter(plt, np, fig_doc):
    """Points (x, y), a colour and marker per series; those resting on one item ringed."""
    fig, ax = plt.subplots(figsize=(6, 4))
    markers = "osD^v<>ph*"
    for i, ser in enumerate(fig_doc["series"]):
        pts = ser["points"]
        ax.scatter([p["x"] for p in pts], [p["y"] for p in pts], marker=markers[i % len(markers)], s=28, label=_wrap(ser["name"]))
    ones = [p for _, p in _points(fig_doc) if p.get("n") == 1]
    if ones:
        ax.scatter([p["x"] for p in ones], [p["y"] for p in ones], s=110, facecolors="none", edgecolors="#222", linewidths=0.8)
    ax.axvline(0, color="#888", lw=0.8, ls=":")
    ax.set_xlabel(fig_doc.get("xlabel", ""))
    ax.set_ylabel(fig_doc.get("ylabel", ""))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1 if len(fig_doc["series"]) > 2 else 2,
              frameon=False)
    return fig


def _name(row: dict) -> str:
    return f"{row['task']} {row['metric']}"


def _flat(rows: list[dict]) -> list[str]:
    """The rows whose value and interval are all 0."""
    return [_name(r) for r in rows if all(_number(r.get(k)) and r[k] == 0 for k in ("low", "high"))
            and (r.get("diff", r.get("value")) == 0)]


def _forest_rest(doc: dict) -> tuple[str | None, list[str]]:
    rows, out = doc["rows"], []
    flat = _flat(rows)
    if flat and len(flat) == len(rows):
        out.append("Every difference and its interval is 0 (every resample of the paired items gives 0).")
    elif flat:
        out.append(f"A difference and its interval of 0 (every resample of the paired items gives 0): {listed(flat)}.")
    one = [_name(r) for r in rows if r.get("n") == 1]
    if one:
        out.append(f"Resting on one paired item: {listed(one)}.")
    return None, out


def _forest(plt, np, fig_doc):
    """Each metric's change, better to the right: a lower-is-better metric's (ECE, Brier) drawn
    negated, so that left of the dashed line at -max_drop is a drop beyond the margin for every row."""
    rows = fig_doc["rows"]
    fig, ax = plt.subplots(figsize=(6, 0.32 * len(rows) + 1.2))
    y = np.arange(len(rows))[::-1]
    for yi, r in zip(y, rows):
        c = {"regression": "#d62728", "improvement": "#2ca02c", "inconclusive": "#e6a100"}.get(r["verdict"], "#444")
        sign = -1 if r.get("direction", 1) < 0 else 1
        ax.plot([sign * r["low"], sign * r["high"]], [yi, yi], color=c, lw=2)
        ax.plot([sign * r["diff"]], [yi], "o", color=c)
    ax.axvline(0, color="#888", lw=1)
    max_drop = fig_doc.get("max_drop")
    if isinstance(max_drop, (int, float)):
        ax.axvline(-max_drop, color="#d62728", lw=1, ls="--", label=f"-max_drop ({-max_drop:g})")
        ax.legend(fontsize=7, loc="lower right")
    labels = [f"{r['task']} {r['metric']}" + (" (lower is better: negated)" if r.get("direction", 1) < 0 else "") for r in rows]
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel("change, better → (candidate − baseline; 95% paired bootstrap interval)")
    return fig


def _estimates_rest(doc: dict) -> tuple[str | None, list[str]]:
    flat = _flat(doc["rows"])
    return None, [f"0, with an interval of zero width (every resample of the items run gives 0): {listed(flat)}."] if flat else []


def _estimates(plt, np, fig_doc):
    """A run's estimates of the full sets' numbers: each task's headline number and its 95% interval
    (a --sample or --budget run), the items it rests on beside the label."""
    rows = fig_doc["rows"]
    fig, ax = plt.subplots(figsize=(6, 0.32 * len(rows) + 1.2))
    y = np.arange(len(rows))[::-1]
    for yi, r in zip(y, rows):
        if r.get("low") is not None and r.get("high") is not None:
            ax.plot([r["low"], r["high"]], [yi, yi], color="#1f77b4", lw=2)
        ax.plot([r["value"]], [yi], "o", color="#1f77b4" if r.get("low") is not None else "#999")
    labels = [f"{r['task']} {r['metric']}" + (f" ({r['from']:,} of {r['of']:,})" if isinstance(r.get("from"), int)
                                              and isinstance(r.get("of"), int) else "") for r in rows]
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel("estimate of the full set's number (95% interval; grey: none)")
    return fig


KINDS: dict[str, tuple[Callable, Callable[[dict], tuple[str | None, list[str]]]]] = {
    "bars": (_bars, _bars_rest), "heatmap": (_heatmap, _heatmap_rest), "reliability": (_reliability, _reliability_rest),
    "forest": (_forest, _forest_rest), "estimates": (_estimates, _estimates_rest), "scatter": (_scatter, _scatter_rest)}


def figure(doc: dict[str, Any], draw: Callable | None = None, rests: Callable | None = None) -> dict[str, Any] | None:
    """A figure document as a page places it (None: a kind no page draws, or no matplotlib);
    `draw` and `rests` stand in for a kind of the page's own (the gate's). A document whose
    maker knows there is nothing to draw says why in `not_drawn`."""
    mpl = _matplotlib()
    if mpl is None:
        return None
    if draw is None or rests is None:
        if str(doc.get("kind")) not in KINDS:
            return None
        draw, rests = KINDS[str(doc["kind"])]
    skipped, caveats = (str(doc["not_drawn"]), []) if doc.get("not_drawn") else rests(doc)
    plt, np = mpl
    return {"svg": None if skipped else svg(_svg(plt, draw(plt, np, doc))), "caption": str(doc.get("caption", "")),
            "caveats": caveats, "skipped": skipped}
