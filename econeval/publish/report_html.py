"""The report as one self-contained HTML page (templates/report.html): the tables, and under each
its plots (figures.py: inline SVG, with what each rests on) — no script, no stylesheet or font
from the network, so it opens offline. Without matplotlib the page holds the tables and says why
the plots are missing. The numbers are the document's, formatted as the Markdown report formats
them (tables.cell, two-sided intervals at the table's decimals)."""

from __future__ import annotations

from typing import Any

from ..tables import cell, has_setting, interval_text
from . import figures, pages

WIDE = 6  # value columns above which a table with headline columns is shown in two parts
COMPARE = ("task", "metric", "n", "baseline", "candidate", "diff", "low", "high", "p_mcnemar", "detectable", "verdict")
COMPARE_TEXT = ("task", "metric", "verdict")  # the compare table's columns of words (the rest are numbers)


def _direction(row: dict) -> int:
    """+1 where larger is better, -1 where smaller is (the task's declared metric)."""
    from .. import registry

    try:
        return registry.get_task(str(row["task"])).metric(str(row["metric"])).direction or 1
    except Exception:  # noqa: BLE001 - a task this econeval does not know: drawn as it is
        return 1


def _parts(t: dict) -> list[dict[str, Any]]:
    """A table as the page shows it: one part, or (a wide table with headline columns) the other
    columns, then the headline ones, each beside the label columns."""
    cols = list(t["columns"])
    head = [c for c in t.get("headline") or [] if c in cols]
    split = bool(head) and len(cols) > WIDE
    shown_parts = [[c for c in cols if c not in head], head] if split else [cols]
    setting = has_setting(t)
    labels = ["source", t.get("row_label", "model"), *(["setting"] if setting else [])]
    out = []
    for k, shown in enumerate(shown_parts):
        idx = [cols.index(c) for c in shown]
        rows = []
        for row in t["rows"]:
            ivs = row.get("intervals") or [None] * len(row["values"])
            std = row.get("std") or [None] * len(row["values"])  # a mean over repeats (the paper's runs, --epochs)
            rows.append({"run": row["source"] == "run", "source": row["source"], "label": row["label"],
                         "setting": (row.get("setting") or "") if setting else None,
                         "cells": [{"text": cell(row["values"][i], t["decimals"]),
                                    "iv": f"± {std[i]:.{t['decimals']}f}" if std[i] is not None and row["values"][i] is not None
                                    else interval_text(ivs[i], row["values"][i], t["decimals"])} for i in idx],
                         "n": "" if row.get("n") is None else str(row["n"])})
        out.append({"caption": None if not split else "Per column" if k == 0 else "Headline: " + ", ".join(head),
                    "labels": labels, "columns": shown, "rows": rows})
    return out


def _forest_rows(c: dict) -> list[dict]:
    """The compared rows a forest plot draws: those with a difference and its interval."""
    return [r for r in c.get("rows") or [] if r.get("diff") is not None and r.get("low") is not None]


def _compare(c: dict) -> dict[str, Any]:
    entry: dict[str, Any] = {"title": f"Compare: {c['candidate']} against {c['baseline']}", "refused": c.get("refused")}
    if "refused" in c:
        return entry
    notes = [f"dropped: {t}: {d['missing']} of {d['of']} baseline items have no candidate score" for t, d in c["dropped"].items()]
    notes += [f"the runs differ in {d}" for d in c["differences"]]
    rows = _forest_rows(c)
    entry.update(
        columns=[{"name": k, "num": k not in COMPARE_TEXT} for k in COMPARE],
        rows=[[{"text": str(r[k]) if k in COMPARE_TEXT else cell(r[k], 4), "num": k not in COMPARE_TEXT} for k in COMPARE]
              for r in c["rows"]],
        notes=notes, verdict=c["verdict_line"],
        figure=figures.figure({"kind": "forest", "rows": [{**r, "direction": _direction(r)} for r in rows],
                               "max_drop": c.get("max_drop"),
                               "caption": f"Compare: {c['candidate']} against {c['baseline']}: better to the right (a "
                                          "lower-is-better metric negated); the dashed line is -max_drop; red: regression "
                                          "beyond the margin."}) if rows else None)
    return entry


def _estimates(est: dict) -> dict[str, Any]:
    rows = [{"task": r["task"], "metric": r["metric"], "value": cell(r["value"], 3),
             "iv": interval_text([r["low"], r["high"]], r["value"], 3) if r["low"] is not None else None,
             "from": r["from"], "of": r["of"]} for r in est["rows"]]
    return {"title": f"Estimates: {est['run']}", "rows": rows,
            "figure": figures.figure({"kind": "estimates", "rows": est["rows"],
                                      "caption": f"{est['run']}: each task's headline numbers estimated for the full set from a "
                                                 "stratified sample (--sample or --budget), with 95% intervals; (n of N): the "
                                                 "items run of the task's."})}


def render_html(doc: dict[str, Any]) -> str:
    """The report document (report.build) as the page."""
    tables = [{"id": t["id"], "title": t["title"], "parts": _parts(t), "notes": t["notes"],
               "figures": [f for f in map(figures.figure, t.get("figures") or []) if f]} for t in doc["tables"]]
    compare = list(doc.get("compare") or [])
    wanted = any(t.get("figures") for t in doc["tables"]) or bool(doc.get("estimates")) or any(map(_forest_rows, compare))
    runs = [{**r, "folder_name": pages.shown_path(r["folder"])} for r in doc["runs"]]
    return pages.render("report.html", title="econeval report", runs=runs, tables=tables, compares=list(map(_compare, compare)),
                        estimates=[_estimates(e) for e in doc.get("estimates") or []],
                        plots_missing=wanted and not figures.available())
