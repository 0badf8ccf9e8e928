"""The report as one self-contained HTML file: the tables, and plots drawn with matplotlib (the
optional extra `econeval[report]`) as inline SVG — no script, no stylesheet or font from the
network, so it opens offline. Without matplotlib the page holds the tables and says why the plots
are missing."""

from __future__ import annotations

import html
import io
from typing import Any

from .report import cell

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#222;padding:0 1rem}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2.2rem;border-bottom:1px solid #ccc;padding-bottom:.2rem}
table{border-collapse:collapse;font-size:.82rem;margin:.6rem 0;display:block;overflow-x:auto}
th,td{border:1px solid #ddd;padding:.25rem .45rem;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td.l{text-align:left}tr.run td{background:#eef5ff;font-weight:600}
.iv{color:#666;font-weight:400;font-size:.75rem}ul.notes{font-size:.85rem;color:#444}
figure{margin:1rem 0}figcaption{font-size:.85rem;color:#444}.muted{color:#777}
"""


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _plots(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(caption, inline svg) for each plot the report's data allows."""
    try:
        import matplotlib

        matplotlib.use("svg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError:
        return []
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text (no embedded glyph paths)
    out: list[tuple[str, str]] = []
    figs = doc.get("figures") or {}
    nli = figs.get("econnli_f1")
    if nli:
        fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(nli["rows"]) + 2), 3))
        x = np.arange(len(nli["rows"]))
        neg = [np.nan if v is None else v for v in nli["negative"]]
        pos = [np.nan if v is None else v for v in nli["positive"]]
        ax.bar(x - 0.2, neg, 0.4, label="Negative F1", color="#d95f02")
        ax.bar(x + 0.2, pos, 0.4, label="Positive F1", color="#1b9e77")
        ax.axhline(0.5, color="#888", lw=1, ls="--", label="random")
        ax.set_xticks(x, nli["rows"], rotation=20, ha="right")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=8)
        out.append(("EconNLI: F1 per class for each run and prompting method (dashed: random guessing).", _svg(fig)))
    heat = figs.get("steer_heatmap")
    if heat and heat["columns"]:
        vals = np.array([[np.nan if v is None else v for v in row] for row in heat["values"]], dtype=float)
        fig, ax = plt.subplots(figsize=(max(6, 0.18 * len(heat["columns"]) + 2), 0.5 * len(heat["rows"]) + 2.2))
        im = ax.imshow(vals, aspect="auto", cmap="viridis", vmin=min(0.0, np.nanmin(vals)) if np.isfinite(vals).any() else 0, vmax=1)
        ax.set_yticks(range(len(heat["rows"])), heat["rows"])
        ax.set_xticks(range(len(heat["columns"])), heat["columns"], rotation=90, fontsize=6)
        fig.colorbar(im, ax=ax, label="normalized accuracy")
        out.append(("STEER-ME: normalized accuracy, models × elements (empty cells: not run).", _svg(fig)))
    for rel in figs.get("reliability") or []:
        fig, ax = plt.subplots(figsize=(3.6, 3.4))
        ax.plot([0, 1], [0, 1], color="#888", ls="--", lw=1)
        conf = [b["confidence"] for b in rel["bins"]]
        acc = [b["accuracy"] for b in rel["bins"]]
        ax.plot(conf, acc, marker="o", color="#1f77b4")
        for b in rel["bins"]:
            ax.annotate(str(b["n"]), (b["confidence"], b["accuracy"]), fontsize=6, xytext=(3, 3), textcoords="offset points")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence (renormalised)")
        ax.set_ylabel("accuracy")
        out.append((f"STEER-ME reliability diagram, {rel['label']}: 10 confidence bins (labels: items per bin).", _svg(fig)))
    for comp in doc.get("compare") or []:
        rows = [r for r in comp.get("rows", []) if r.get("diff") is not None and r.get("low") is not None]
        if not rows:
            continue
        fig, ax = plt.subplots(figsize=(6, 0.32 * len(rows) + 1.2))
        y = np.arange(len(rows))[::-1]
        colors = ["#d62728" if r["verdict"] == "regression" else "#2ca02c" if r["verdict"] == "improvement" else "#444" for r in rows]
        for yi, r, c in zip(y, rows, colors):
            ax.plot([r["low"], r["high"]], [yi, yi], color=c, lw=2)
            ax.plot([r["diff"]], [yi], "o", color=c)
        ax.axvline(0, color="#888", lw=1)
        ax.set_yticks(y, [f"{r['task']} {r['metric']}" for r in rows], fontsize=7)
        ax.set_xlabel("candidate − baseline (95% paired bootstrap interval)")
        out.append((f"Compare: {comp['candidate']} against {comp['baseline']} (red: regression beyond the margin).", _svg(fig)))
    return out


def _table(t: dict) -> str:
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in ["source", t.get("row_label", "model"), "setting", *t["columns"], "n"])
    rows = []
    for row in t["rows"]:
        ivs = row.get("intervals") or [None] * len(row["values"])
        cells = []
        for v, iv in zip(row["values"], ivs):
            text = e(cell(v, t["decimals"]))
            if iv and v is not None:
                text += f'<br><span class="iv">[{iv[0]:.{t["decimals"]}f}, {iv[1]:.{t["decimals"]}f}]</span>'
            cells.append(f"<td>{text}</td>")
        cls = ' class="run"' if row["source"] == "run" else ""
        n = "" if row.get("n") is None else e(str(row["n"]))
        rows.append(f"<tr{cls}><td class=l>{e(row['source'])}</td><td class=l>{e(row['label'])}</td>"
                    f"<td class=l>{e(row.get('setting') or '')}</td>{''.join(cells)}<td>{n}</td></tr>")
    notes = "".join(f"<li>{e(n)}</li>" for n in t["notes"])
    return (f'<h2 id="{e(t["id"])}">{e(t["title"])}</h2><table class="results"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table><ul class="notes">{notes}</ul>')


def render_html(doc: dict[str, Any]) -> str:
    e = html.escape
    parts = ["<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>econeval report</title>",
             f"<style>{CSS}</style></head><body><h1>econeval report</h1>",
             "<p>Runs: " + "; ".join(f"<b>{e(r['label'])}</b> ({e(', '.join(r['tasks']))}; seed {r['seed']}; "
                                       f"econeval {e(str(r['econeval_version']))}; data {e(str(r['data_package']))}"
                                       f"{'; --limit ' + str(r['limit']) if r['limit'] else ''})" for r in doc["runs"]) + "</p>",
             '<p class="muted">Highlighted rows are this report\'s runs (value, then the 95% bootstrap interval over items); '
             "the others are the papers' published rows. n: the items a row rests on; –: not computed.</p>"]
    parts += [_table(t) for t in doc["tables"]]
    for c in doc.get("compare") or []:
        parts.append(f"<h2>Compare: {e(c['candidate'])} against {e(c['baseline'])}</h2>")
        if "refused" in c:
            parts.append(f"<p>Not comparable: {e(c['refused'])}</p>")
            continue
        cols = ("task", "metric", "n", "baseline", "candidate", "diff", "low", "high", "p_mcnemar", "verdict")
        body = "".join("<tr>" + "".join(f"<td class=l>{e(str(r[k]))}</td>" if k in ("task", "metric", "verdict")
                                        else f"<td>{e(cell(r[k], 4))}</td>" for k in cols) + "</tr>" for r in c["rows"])
        parts.append(f"<table class=compare><thead><tr>{''.join(f'<th>{k}</th>' for k in cols)}</tr></thead><tbody>{body}</tbody></table>")
    plots = _plots(doc)
    parts.append("<h2>Plots</h2>")
    if plots:
        parts += [f'<figure class="plot">{svg}<figcaption>{e(cap)}</figcaption></figure>' for cap, svg in plots]
    elif doc.get("figures"):
        parts.append('<p class="muted">Plots need matplotlib: pip install "econeval[report]".</p>')
    else:
        parts.append('<p class="muted">No plot applies to these runs.</p>')
    parts.append("</body></html>")
    return "\n".join(parts)
