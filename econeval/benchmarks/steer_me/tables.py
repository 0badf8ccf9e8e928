"""STEER-ME's tables for `econeval report`: overall, by module / setting / element, and the
paper's Table 2 (CAR) when a run has it; the models × elements heatmap and a reliability
diagram per run as figures beside them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...tables import Table, interval, limit_notes, published, published_rows

PUBLISHED = Path(__file__).resolve().parent.parent.parent / "published" / "steer_me.json"
TASK = "steer-me"
NOTE = ("STEER-ME is an econeval re-implementation: the questions come from econeval's own generator (no STEER-ME "
        "data was released in reach), so the published numbers are not directly comparable.")


def reliability(run: Any, bins: int = 10) -> dict | None:
    """Confidence (the chosen option's renormalised probability) against accuracy, in 10 bins,
    from the run's samples."""
    try:
        samples = run.samples.get(TASK, {}).values()
    except (OSError, UsageError):
        return None
    pts = [(max(s["p_renormalized"]), bool(s.get("correct"))) for s in samples
           if s.get("answered") and isinstance(s.get("p_renormalized"), list) and s["p_renormalized"]]
    if not pts:
        return None
    out: dict[str, Any] = {"kind": "reliability", "caption": f"STEER-ME reliability diagram, {run.label}: 10 confidence bins (labels: items "
                                             "per bin).", "label": run.label, "bins": []}
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(c, ok) for c, ok in pts if lo <= c < hi or (b == bins - 1 and c == 1.0)]
        if inside:
            out["bins"].append({"low": lo, "high": hi, "n": len(inside), "confidence": sum(c for c, _ in inside) / len(inside),
                                "accuracy": sum(ok for _, ok in inside) / len(inside)})
    return out


def paper_tables(runs: list[Any]) -> list[Table]:
    mine = [(r, r.results[TASK]) for r in runs if TASK in r.results]
    if not mine:
        return []
    cols = ["accuracy", "normalized accuracy", "ECE", "Brier", "EPA", "no-answer rate"]
    overall = Table("steer-me-overall", "STEER-ME overall", cols, 3)
    for run, res in mine:
        o = res["paper"]["overall"]
        ren = o.get("renormalized") or {}
        overall.rows.append({"source": "run", "label": run.label, "setting": res.get("adaptation"),
                             "values": [o["accuracy"], o["normalized_accuracy"], ren.get("ece"), ren.get("brier"),
                                        ren.get("epa"), o.get("no_answer_rate")],
                             "intervals": [interval(res, k) for k in ("acc", "norm acc", "ECE", "Brier", "EPA")] + [None],
                             "n": o.get("n")})
    overall.notes = [NOTE, "ECE, Brier and EPA use the option probabilities renormalised over the options; "
                     "empty where the backend gave no log-probabilities."] + limit_notes(mine)
    overall.figures = [f for f in (reliability(r) for r, _ in mine) if f]
    out = [overall]
    for group, title in (("module", "STEER-ME by module (normalized accuracy)"), ("setting", "STEER-ME by setting (normalized accuracy)"),
                         ("element", "STEER-ME by element (normalized accuracy)")):
        keys = sorted({k for _, res in mine for k in res["paper"].get(group, {})})
        tab = Table(f"steer-me-{group}", title, [run.label for run, _ in mine], 3, row_label=group)
        for k in keys:
            cells = [res["paper"].get(group, {}).get(k) or {} for _, res in mine]
            tab.rows.append({"source": "run", "label": k, "values": [c.get("normalized_accuracy") for c in cells],
                             "intervals": None, "n": "/".join(str(c.get("n", "-")) for c in cells)})
        tab.notes = [NOTE, "Rows are the groups, columns the runs; n: items per run."]
        if group == "element" and keys:
            tab.figures = [{"kind": "heatmap", "caption": "STEER-ME: normalized accuracy, models × elements (empty cells: not run).",
                            "rows": [run.label for run, _ in mine], "columns": keys, "colorbar": "normalized accuracy",
                            "values": [[(res["paper"]["element"].get(e) or {}).get("normalized_accuracy") for e in keys]
                                       for _, res in mine],
                            "n": [[(res["paper"]["element"].get(e) or {}).get("n") for e in keys] for _, res in mine]}]
        out.append(tab)
    pub = published(PUBLISHED)["tables"]["table2"]
    car = [(r, res) for r, res in mine if res["paper"]["overall"].get("car")]
    if car:
        tab = Table("steer-me-table2", "STEER-ME Table 2: choosing \"No other option is correct\" under CAR", pub["columns"], 3)
        tab.rows = published_rows(pub)
        for run, res in car:
            c = res["paper"]["overall"]["car"]
            tab.rows.append({"source": "run", "label": run.label, "values": [c.get("recall"), c.get("precision"), c.get("f1")],
                             "intervals": None, "n": c.get("n")})
        tab.notes = [NOTE, "Published: aggregated over 20 elements; random guessing gives 0.25."]
        out.append(tab)
    return out
