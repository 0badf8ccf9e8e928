"""The report as one self-contained HTML file: the tables, and plots drawn with matplotlib (the
optional extra `econeval[report]`) as inline SVG — no script, no stylesheet or font from the
network, so it opens offline. Without matplotlib the page holds the tables and says why the plots
are missing."""

from __future__ import annotations

import html
import io
from typing import Any

from ..tables import cell, has_setting

LEGEND_WRAP = 48  # characters of a series name a line: a long run label wraps within the figure

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;max-width:1360px;color:#222;padding:0 1rem}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2.2rem;border-bottom:1px solid #ccc;padding-bottom:.2rem}
table{border-collapse:collapse;font-size:.82rem;margin:.6rem 0;display:block;overflow-x:auto}
th,td{border:1px solid #ddd;padding:.25rem .45rem;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td.l{text-align:left}tr.run td{background:#eef5ff;font-weight:600}
.iv{color:#666;font-weight:400;font-size:.75rem}ul.notes{font-size:.85rem;color:#444}
p.part{font-size:.8rem;color:#555;margin:.8rem 0 0}td.l{max-width:22rem;overflow:hidden;text-overflow:ellipsis}
th:first-child,td:first-child{position:sticky;left:0;background:#fff}tr.run td:first-child{background:#eef5ff}
figure{margin:1rem 0;max-width:100%;overflow-x:auto}figure svg{max-width:100%;height:auto}
figcaption{font-size:.85rem;color:#444}.muted{color:#777}
"""


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


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


def _nan(values):
    return [float("nan") if v is None else v for v in values]


def _bars(plt, np, fig_doc):
    groups = fig_doc["groups"]
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(groups) + 2), 3))
    x = np.arange(len(groups))
    k = len(fig_doc["series"])
    width = 0.8 / max(k, 1)
    colors = ["#d95f02", "#1b9e77", "#7570b3", "#e7298a"]
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
    ax.set_xticks(x, groups, rotation=20, ha="right")
    if fig_doc.get("ylim"):
        ax.set_ylim(*fig_doc["ylim"])
    # below the axes, wrapped: a legend of long labels never widens the figure past the page
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=1 if k > 2 or any(len(s["name"]) > 30 for s in
                                                                                                   fig_doc["series"]) else 2,
              frameon=False)
    return fig


def _wrap(text: str) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(str(text), LEGEND_WRAP, break_long_words=True)) or str(text)


def _heatmap(plt, np, fig_doc):
    vals = np.array([_nan(row) for row in fig_doc["values"]], dtype=float)
    fig, ax = plt.subplots(figsize=(max(6, 0.18 * len(fig_doc["columns"]) + 2), 0.5 * len(fig_doc["rows"]) + 2.2))
    im = ax.imshow(vals, aspect="auto", cmap="viridis", vmin=min(0.0, np.nanmin(vals)) if np.isfinite(vals).any() else 0, vmax=1)
    ax.set_yticks(range(len(fig_doc["rows"])), fig_doc["rows"])
    ax.set_xticks(range(len(fig_doc["columns"])), fig_doc["columns"], rotation=90, fontsize=6)
    fig.colorbar(im, ax=ax, label=fig_doc.get("colorbar", ""))
    return fig


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


def _gate_progress(plt, np, fig_doc):
    """A gate's e-processes, one panel per gated metric: the log wealth of "pass" and of "regression"
    against the paired items spent, each reaching its dashed threshold log(1/alpha) decides."""
    metrics = fig_doc["metrics"]
    fig, axes = plt.subplots(len(metrics), 1, figsize=(6, 2.1 * len(metrics) + 0.4), squeeze=False)
    for ax, m in zip(axes[:, 0], metrics):
        x = [s["items"] for s in m["steps"]]
        for key, colour, need, label in (("log_wealth_pass", "#2ca02c", m["threshold_pass"], "pass"),
                                         ("log_wealth_regression", "#d62728", m["threshold_regression"], "regression")):
            # None: that null can no longer hold (decided by arithmetic): drawn at its threshold
            y = [need if s[key] is None else max(s[key], -1.0) for s in m["steps"]]
            ax.plot(x, y, "-o", color=colour, ms=3, lw=1.5, label=label)
            ax.axhline(need, color=colour, lw=1, ls="--")
        ax.set_xlim(0, max(m["of"], max(x, default=0)) * 1.02 or 1)
        ax.set_title(f"{m['task']} {m['metric']}: {m['verdict']} after {x[-1] if x else 0:,} of {m['of']:,} items", fontsize=8)
        ax.set_ylabel("log wealth", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="upper left")
    axes[-1, 0].set_xlabel("paired items spent (the gate's order)")
    fig.tight_layout()
    return fig


def plots_available() -> bool:
    return _matplotlib() is not None


def figure_page(fig_doc: dict[str, Any], title: str) -> str | None:
    """One figure as a page of its own (HTML with the inline SVG), None without matplotlib."""
    mpl = _matplotlib()
    if mpl is None:
        return None
    e = html.escape
    return (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title><style>{CSS}</style></head>"
            f"<body><h1>{e(title)}</h1>{''.join(_figures([fig_doc], mpl))}</body></html>")


def _direction(row: dict) -> int:
    """+1 where larger is better, -1 where smaller is (the task's declared metric)."""
    from .. import registry

    try:
        return registry.get_task(str(row["task"])).metric(str(row["metric"])).direction or 1
    except Exception:  # noqa: BLE001 - a task this econeval does not know: drawn as it is
        return 1


KINDS = {"bars": _bars, "heatmap": _heatmap, "reliability": _reliability, "forest": _forest, "estimates": _estimates,
         "gate-progress": _gate_progress}


def _figures(figs: list[dict], mpl) -> list[str]:
    """Each figure as a <figure> with inline SVG (a kind this page cannot draw is skipped)."""
    if not figs or mpl is None:
        return []
    plt, np = mpl
    out = []
    for f in figs:
        draw = KINDS.get(str(f.get("kind")))
        if draw:
            out.append(f'<figure class="plot">{_svg(draw(plt, np, f))}<figcaption>{html.escape(f.get("caption", ""))}'
                       "</figcaption></figure>")
    return out


WIDE = 6  # value columns above which a table with headline columns is shown in two parts


def _table(t: dict) -> str:
    e = html.escape
    cols = list(t["columns"])
    head = [c for c in t.get("headline") or [] if c in cols]
    parts = [cols] if not head or len(cols) <= WIDE else [[c for c in cols if c not in head], head]
    out = [f'<h2 id="{e(t["id"])}">{e(t["title"])}</h2>']
    for k, shown in enumerate(parts):
        idx = [cols.index(c) for c in shown]
        if len(parts) > 1:
            out.append(f'<p class="part">{"Per column" if k == 0 else "Headline: " + ", ".join(map(e, head))}</p>')
        setting = has_setting(t)
        header = "".join(f"<th>{e(c)}</th>" for c in ["source", t.get("row_label", "model"), *(["setting"] if setting else []),
                                                      *shown, "n"])
        rows = []
        for row in t["rows"]:
            ivs = row.get("intervals") or [None] * len(row["values"])
            std = row.get("std") or [None] * len(row["values"])
            cells = []
            for i in idx:
                v, iv = row["values"][i], ivs[i]
                text = e(cell(v, t["decimals"]))
                if std[i] is not None and v is not None:  # a mean over repeats (the paper's runs, --epochs)
                    text += f' <span class="iv">± {std[i]:.{t["decimals"]}f}</span>'
                elif iv and v is not None:
                    text += f'<br><span class="iv">[{iv[0]:.{t["decimals"]}f}, {iv[1]:.{t["decimals"]}f}]</span>'
                cells.append(f"<td>{text}</td>")
            cls = ' class="run"' if row["source"] == "run" else ""
            n = "" if row.get("n") is None else e(str(row["n"]))
            where = f"<td class=l>{e(row.get('setting') or '')}</td>" if setting else ""
            rows.append(f"<tr{cls}><td class=l>{e(row['source'])}</td><td class=l>{e(row['label'])}</td>"
                        f"{where}{''.join(cells)}<td>{n}</td></tr>")
        out.append(f'<table class="results"><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    notes = "".join(f"<li>{e(n)}</li>" for n in t["notes"])
    return "".join(out) + f'<ul class="notes">{notes}</ul>'


def render_html(doc: dict[str, Any]) -> str:
    e = html.escape
    mpl = _matplotlib()
    parts = ["<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>econeval report</title>",
             f"<style>{CSS}</style></head><body><h1>econeval report</h1>",
             "<p>Runs: " + "; ".join(f"<b>{e(r['label'])}</b> ({e(', '.join(r['tasks']))}; seed {e(str(r['seed']))}; "
                                       f"econeval {e(str(r['econeval_version']))}; data {e(str(r['data_package']))}"
                                       f"{'; --limit ' + e(str(r['limit'])) if r['limit'] else ''})" for r in doc["runs"]) + "</p>",
             '<p class="muted">Highlighted rows are this report\'s runs (value, then the 95% bootstrap interval over items); '
             "the others are the papers' published rows. n: the items a row rests on; –: not computed.</p>"]
    wanted = False
    for t in doc["tables"]:
        parts.append(_table(t))
        parts += _figures(t.get("figures") or [], mpl)
        wanted = wanted or bool(t.get("figures"))
    for c in doc.get("compare") or []:
        parts.append(f"<h2>Compare: {e(c['candidate'])} against {e(c['baseline'])}</h2>")
        if "refused" in c:
            parts.append(f"<p>Not comparable: {e(c['refused'])}</p>")
            continue
        cols = ("task", "metric", "n", "baseline", "candidate", "diff", "low", "high", "p_mcnemar", "detectable", "verdict")
        body = "".join("<tr>" + "".join(f"<td class=l>{e(str(r[k]))}</td>" if k in ("task", "metric", "verdict")
                                        else f"<td>{e(cell(r[k], 4))}</td>" for k in cols) + "</tr>" for r in c["rows"])
        parts.append(f"<table class=compare><thead><tr>{''.join(f'<th>{k}</th>' for k in cols)}</tr></thead><tbody>{body}</tbody></table>")
        notes = [f"dropped: {t}: {d['missing']} of {d['of']} baseline items have no candidate score" for t, d in c["dropped"].items()]
        notes += [f"the runs differ in {d}" for d in c["differences"]]
        if notes:
            parts.append("<ul class=notes>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
        parts.append(f"<p class=verdict><b>{e(c['verdict_line'])}</b></p>")
        rows = [r for r in c["rows"] if r.get("diff") is not None and r.get("low") is not None]
        if rows:
            wanted = True
            parts += _figures([{"kind": "forest", "rows": [{**r, "direction": _direction(r)} for r in rows], "max_drop": c.get("max_drop"),
                                "caption": f"Compare: {c['candidate']} against {c['baseline']}: better to the right (a "
                                           "lower-is-better metric negated); the dashed line is -max_drop; red: regression "
                                           "beyond the margin."}], mpl)
    for est in doc.get("estimates") or []:
        parts.append(f"<h2>Estimates: {e(est['run'])}</h2>")
        wanted = True
        parts += _figures([{"kind": "estimates", "rows": est["rows"],
                            "caption": f"{est['run']}: each task's headline numbers estimated for the full set from a "
                                       "stratified sample (--sample or --budget), with 95% intervals; (n of N): the items "
                                       "run of the task's."}], mpl)
    if wanted and mpl is None:
        parts.append('<p class="muted">Plots need matplotlib: pip install "econeval[report]".</p>')
    parts.append("</body></html>")
    return "\n".join(parts)
