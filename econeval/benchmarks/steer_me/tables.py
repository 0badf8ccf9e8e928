"""STEER-ME's tables for `econeval report`: overall, by module / setting / element, and the
paper's Table 2 (CAR) when a run has it; the models × elements heatmap, a heatmap per setting
and a reliability diagram per run as figures beside them; the paper's other §5 figures
(paper_figures.py), the mistakes, the options' order and the transitions (transitions.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...tables import Table, interval, limit_notes, published, published_rows
from .paper_figures import figure_tables, setting_heatmaps
from .transitions import transitions_tables

PUBLISHED = Path(__file__).resolve().parent.parent.parent / "published" / "steer_me.json"
TASK = "steer-me"
NOTE = ("STEER-ME is an econeval re-implementation: the questions come from econeval's own generator (no STEER-ME "
        "data was released in reach), so the published numbers are not directly comparable.")


def reliability(run: Any, bins: int = 10, task: str = TASK, label: str | None = None) -> dict | None:
    """Confidence (the chosen option's renormalised probability) against accuracy, in 10 bins,
    from the run's samples of the task."""
    try:
        samples = run.samples.get(task, {}).values()
    except (OSError, UsageError):
        return None
    pts = [(max(s["p_renormalized"]), bool(s.get("correct"))) for s in samples
           if s.get("answered") and isinstance(s.get("p_renormalized"), list) and s["p_renormalized"]]
    if not pts:
        return None
    label = label or run.label
    out: dict[str, Any] = {"kind": "reliability", "caption": f"STEER-ME reliability diagram, {label}: 10 confidence bins (labels: items "
                                             "per bin).", "label": label, "bins": []}
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(c, ok) for c, ok in pts if lo <= c < hi or (b == bins - 1 and c == 1.0)]
        if inside:
            out["bins"].append({"low": lo, "high": hi, "n": len(inside), "confidence": sum(c for c, _ in inside) / len(inside),
                                "accuracy": sum(ok for _, ok in inside) / len(inside)})
    return out


def results(runs: list[Any]) -> list[tuple[Any, str, dict, str, str | None]]:
    """Every STEER-ME result of the runs (the public task's and the paper matrix's,
    steer_me_paper.py): (run, task, result, its column label, its setting). A run with one STEER-ME task
    is labelled as itself; a run with several, as itself and the adaptation."""
    from ... import registry

    names = [n for n, t in registry.tasks().items() if t.benchmark == TASK]
    out = []
    for run in runs:
        mine = [(n, run.results[n]) for n in names if n in run.results]
        for name, res in mine:
            setting = res.get("adaptation") if len(mine) > 1 else None
            out.append((run, name, res, f"{run.label} {setting}" if setting else run.label, setting))
    return out


def paper_tables(runs: list[Any]) -> list[Table]:
    mine = results(runs)
    if not mine:
        return []
    cols = ["accuracy", "normalized accuracy", "ECE", "Brier", "EPA", "no-answer rate"]
    overall = Table("steer-me-overall", "STEER-ME overall", cols, 3)
    for run, _, res, _, _ in mine:
        o = res["paper"]["overall"]
        ren = o.get("renormalized") or {}
        overall.rows.append({"source": "run", "label": run.label, "setting": res.get("adaptation"),
                             "values": [o["accuracy"], o["normalized_accuracy"], ren.get("ece"), ren.get("brier"),
                                        ren.get("epa"), o.get("no_answer_rate")],
                             "intervals": [interval(res, k) for k in ("acc", "norm acc", "ECE", "Brier", "EPA")] + [None],
                             "n": o.get("n")})
    overall.notes = [NOTE, "ECE, Brier and EPA use the option probabilities renormalised over the options; "
                     "empty where the backend gave no log-probabilities."] + limit_notes([(r, res) for r, _, res, _, _ in mine])
    overall.figures = [f for f in (reliability(r, task=t, label=lab) for r, t, _, lab, _ in mine) if f]
    out = [overall]
    shown = [lab for _, t, _, lab, _ in mine if t == "steer-me-paper-shown"]
    for group, title in (("module", "STEER-ME by module (normalized accuracy)"), ("setting", "STEER-ME by setting (normalized accuracy)"),
                         ("element", "STEER-ME by element (normalized accuracy)")):
        keys = sorted({k for _, _, res, _, _ in mine for k in res["paper"].get(group, {})})
        tab = Table(f"steer-me-{group}", title, [lab for _, _, _, lab, _ in mine], 3, row_label=group)
        for k in keys:
            cells = [res["paper"].get(group, {}).get(k) or {} for _, _, res, _, _ in mine]
            tab.rows.append({"source": "run", "label": k, "values": [c.get("normalized_accuracy") for c in cells],
                             "intervals": None, "n": "/".join(str(c.get("n", "-")) for c in cells)})
        tab.notes = [NOTE, "Rows are the groups, columns the runs; n: items per run."]
        if group == "setting" and keys:
            tab.figures = setting_heatmaps(mine)
        if group == "element" and keys:
            caption = "STEER-ME: normalized accuracy, models × elements (empty cells: not run)."
            if shown:
                caption += (" The paper's heatmaps (Figs. 4, 5, 7, 9) are 0-CoT shown without CAR: the rows "
                            f"{', '.join(shown)}.")
            tab.figures = [{"kind": "heatmap", "caption": caption,
                            "rows": [lab for _, _, _, lab, _ in mine], "columns": keys, "colorbar": "normalized accuracy",
                            "values": [[(res["paper"]["element"].get(e) or {}).get("normalized_accuracy") for e in keys]
                                       for _, _, res, _, _ in mine],
                            "n": [[(res["paper"]["element"].get(e) or {}).get("n") for e in keys] for _, _, res, _, _ in mine]}]
        out.append(tab)
    pub = published(PUBLISHED)["tables"]["table2"]
    car = [(r, res, setting) for r, _, res, _, setting in mine if res["paper"]["overall"].get("car")]
    if car:
        tab = Table("steer-me-table2", "STEER-ME Table 2: choosing \"No other option is correct\" under CAR", pub["columns"], 3)
        tab.rows = published_rows(pub)
        for run, res, setting in car:
            c = res["paper"]["overall"]["car"]
            tab.rows.append({"source": "run", "label": run.label, **({"setting": setting} if setting else {}),
                             "values": [c.get("recall"), c.get("precision"), c.get("f1")], "intervals": None, "n": c.get("n")})
        tab.notes = [NOTE, "Published: aggregated over 20 elements; random guessing gives 0.25."]
        out.append(tab)
    return out + figure_tables(mine) + [t for t in (mistakes_table(mine), orders_table(mine)) if t] + transitions_tables(mine)


def mistakes_table(mine: list[tuple[Any, str, dict, str, str | None]]) -> Table | None:
    """The share of each element's wrong answers that make each mistake (Fig. 10, §5.2), a column
    per run and task, with their Wilson intervals; n: the wrong answers per column."""
    have = [(lab, res["mistakes"]["element"]) for _, _, res, lab, _ in mine if res.get("mistakes")]
    if not have:
        return None
    rows: dict[tuple[str, str], None] = {}
    for _, per in have:
        for element in sorted(per):
            for m in per[element]["mistakes"]:
                rows[(element, m)] = None
    tab = Table("steer-me-mistakes", "STEER-ME mistakes: the share of wrong answers making each (Fig. 10, §5.2)",
                [lab for lab, _ in have], 3, row_label="element: mistake")
    for element, m in rows:
        cells = [((per.get(element) or {}).get("mistakes") or {}).get(m) or {} for _, per in have]
        tab.rows.append({"source": "run", "label": f"{element}: {m}", "values": [c.get("share") for c in cells],
                         "intervals": [c.get("interval") for c in cells],
                         "n": "/".join(str((per.get(element) or {}).get("n_wrong", "-")) for _, per in have)})
    tab.notes = [NOTE, "A wrong answer's mistake is the label of the option it chose (free text: of the wrong option whose "
                 "value its number is, within the grading's rule); intervals: 95% Wilson; n: wrong answers per column "
                 "(– where none: a share over no wrong answer is not computed)."]
    return tab


def orders_table(mine: list[tuple[Any, str, dict, str, str | None]]) -> Table | None:
    """Accuracy across the options' orders (-T permute): the original order, all orders, circular,
    and each letter's rate of being chosen minus its rate of being right."""
    have = [(run, res, res["orders"]) for run, _, res, _, _ in mine if res.get("orders")]
    if not have:
        return None
    letters = sorted({L for _, _, o in have for L in o["letters"]})
    tab = Table("steer-me-orders", "STEER-ME and the options' order (-T permute)",
                ["original order", "all orders", "circular"] + [f"{L} bias" for L in letters], 3)
    for run, res, o in have:
        tab.rows.append({"source": "run", "label": run.label, "setting": res.get("adaptation"),
                         "values": [o["original"]["accuracy"], o["all_orders"]["accuracy"], o["circular"]["accuracy"]]
                         + [(o["letters"].get(L) or {}).get("bias") for L in letters],
                         "intervals": [o["original"]["interval"], None, o["circular"]["interval"]] + [None] * len(letters),
                         "n": o["n_questions"]})
    tab.notes = [NOTE, "Each question asked in its original order and in seeded permutations of its options; circular: "
                 "right in every order; a letter's bias: the rate it was chosen minus the rate it was right (0: no "
                 "preference for its position); n: questions."]
    return tab
