"""The paper's §5 figures for `econeval report`, each from the runs' results and samples: a table
of its numbers (the Markdown, CSV and JSON reports) with the figure beside it (the HTML report;
the JSON holds the figure's document too).

- Figs. 4, 5, 7, 9: normalised accuracy per element, one heatmap per setting of the taxonomy
  (the paper draws none for Foundations), the models largest first where the run says its size;
- Fig. 3: the Exponents element against the Cobb-Douglas − linear gap on the downstream elements,
  a point per (model, element) as the paper draws it, with Pearson's r;
- Fig. 8: exact match on Aggregation of Consumer Demand by the number of digits of the answer;
- Fig. 11: accuracy by functional family (the question's type) on the elements asked in several;
- Fig. 12: how often "No other option is correct" was chosen, where it was right and where not.

Fig. 14 pairs two adaptations by question: transitions.py. The paper draws its heatmaps and Figs.
3, 8 and 11 from 0-CoT shown without CAR (`steer-me-paper-shown`), Fig. 12 from shown with CAR: a
run's result in that configuration is drawn where it has one; a run without one is drawn with
what it ran, marked † and named by its adaptation.
"""

from __future__ import annotations

import statistics
from typing import Any, NamedTuple

from ...errors import UsageError
from ...intervals import wilson
from ...tables import Table, limit_notes
from ...types import is_scored

SHOWN = "cot-shown"  # the adaptation of the paper's heatmaps and Figs. 3, 8, 11 ("the shown adaptation and without CAR")
SHOWN_CAR = "cot-shown+car"  # Fig. 12's: CAR on the same configuration
MARK = "†"
EXPONENTS = "exponents"
FAMILIES = ("cobb-douglas", "leontief", "linear")  # the paper's functional families (§5.6.2), in its order
DIGITS_ELEMENT = "aggregation_of_consumer_demand"  # Fig. 8's element
FIG11_ELEMENTS = "Input Price Elasticity, Diminishing Marginal Products and Returns to Scale"
# the paper's heatmap of each setting, by the setting's number in the taxonomy (Foundations has Fig. 3 instead)
SETTING_FIGURES = {"2": "Fig. 4", "3": "Fig. 5", "4": "Fig. 7", "5": "Fig. 9"}


class Drawn(NamedTuple):
    """One result as a figure draws it: its run, task, result, label (marked † where it is not in
    the figure's configuration) and the model's parameter count (None: not known)."""

    run: Any
    task: str
    res: dict
    label: str
    marked: bool
    size: int | None


def drawn(mine: list[tuple[Any, str, dict, str, str | None]], configuration: str, car: bool | None = None) -> list[Drawn]:
    """Per run, its results in `configuration` where it has any, else all its results (only those
    with CAR, or only those without, where `car` says), marked; largest model first, ties and
    unknown sizes (last) in label order."""
    by_run: dict[int, list[tuple[Any, str, dict, str, str | None]]] = {}
    for m in mine:
        if car is None or _has_car(m[2]) == car:
            by_run.setdefault(id(m[0]), []).append(m)
    out = []
    for results in by_run.values():
        wanted = [m for m in results if m[2].get("adaptation") == configuration]
        for run, task, res, label, setting in wanted or results:
            if not wanted:
                adaptation = str(res.get("adaptation"))
                said = setting or f"adaptation {adaptation.split('+')[0]}" in label  # the label names what it ran
                label = f"{label} {MARK}" if said else f"{label} ({adaptation}) {MARK}"
            out.append(Drawn(run, task, res, label, not wanted, run.record.parameters))
    return sorted(out, key=lambda d: (d.size is None, -(d.size or 0), d.label))


def _has_car(res: dict) -> bool:
    return str(res.get("adaptation") or "").endswith("+car")


def records(run: Any, task: str) -> list[dict]:
    """The task's scored sample lines (every order of a permuted question: the results count them all)."""
    try:
        return [r for r in run.samples.get(task, {}).values() if is_scored(r)]
    except (OSError, UsageError):
        return []


def accuracy(recs: list[dict]) -> tuple[float | None, int, int]:
    """Exact-match accuracy over the answered records (as the results' `accuracy`): value, right, answered."""
    answered = [r for r in recs if r.get("answered")]
    right = sum(r.get("correct") is True for r in answered)
    return (right / len(answered) if answered else None), right, len(answered)


def _iv(right: int, n: int) -> list | None:
    iv = wilson(right, n)
    return list(iv) if iv else None


SIZES_SAID = ("rows: the largest model first (its parameter count as run.json says: llama.cpp's n_params, else the GGUF's "
              "general.size_label), models of unknown size last in label order")


def _marked_said(rows: list[Drawn], paper: str) -> str:
    return (f" {MARK}: a run with no result in the paper's configuration ({paper}), drawn with what it ran." if
            any(d.marked for d in rows) else "")


def _family(t: Any) -> str:
    return str(t or "?").strip().lower().replace("_", "-").replace(" ", "-")


# ---- Figs. 4, 5, 7, 9: a heatmap per setting -------------------------------------------------------
def _taxonomy_order() -> dict[str, int]:
    from ... import data

    try:
        return {r["element"]: i for i, r in enumerate(data.load("steer-me", "taxonomy.jsonl"))}
    except (OSError, UsageError):
        return {}


def setting_heatmaps(mine: list[tuple[Any, str, dict, str, str | None]]) -> list[dict]:
    """Normalised accuracy of each setting's elements (its results' numbers), a heatmap per setting."""
    rows = drawn(mine, SHOWN)
    settings: dict[str, set[str]] = {}
    for d in rows:
        for r in records(d.run, d.task):
            settings.setdefault(str(r.get("setting") or "?"), set()).add(str(r.get("element")))
    order = _taxonomy_order()
    out = []
    for setting in sorted(settings):
        elements = sorted(settings[setting], key=lambda e: (order.get(e, len(order)), e))
        cells = [[(d.res["paper"]["element"].get(e) or {}) for e in elements] for d in rows]
        fig = SETTING_FIGURES.get(setting.split(" ", 1)[0])
        title = f"the paper's {fig}" if fig else "no heatmap in the paper"
        out.append({"kind": "heatmap", "setting": setting, "paper_figure": fig,
                    "caption": f"STEER-ME {setting} ({title}): normalized accuracy, models × elements; {SIZES_SAID}. "
                               "The paper's heatmaps are 0-CoT shown without CAR (the steer-me-paper-shown task, or "
                               "steer-me --adaptation cot-shown)." + _marked_said(rows, "0-CoT shown without CAR"),
                    "rows": [d.label for d in rows], "sizes": [d.size for d in rows], "marked": [d.marked for d in rows],
                    "columns": elements, "colorbar": "normalized accuracy",
                    "values": [[c.get("normalized_accuracy") for c in row] for row in cells],
                    "n": [[c.get("n") for c in row] for row in cells]})
    return out


# ---- Fig. 3: Exponents against the downstream gap ----------------------------------------------------
def pearson(xs: list[float], ys: list[float], models: int) -> float | None:
    """Pearson's r of the points; None with fewer than 3 models or points, or with no spread."""
    if models < 3 or len(xs) < 3:
        return None
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:
        return None


def fig3(mine: list[tuple[Any, str, dict, str, str | None]]) -> Table:
    """For each model: its Exponents accuracy divided by its accuracy over all its questions (the
    paper's "calibrated" Exponents), and on each downstream element — one whose questions come in
    both Cobb-Douglas and linear forms — the Cobb-Douglas accuracy minus the linear; a point per
    (model, element), as the paper draws them, and Pearson's r over the points."""
    rows = drawn(mine, SHOWN)
    recs = {d.label: records(d.run, d.task) for d in rows}
    forms: dict[str, set[str]] = {}
    for rs in recs.values():
        for r in rs:
            forms.setdefault(str(r.get("element")), set()).add(_family(r.get("type")))
    downstream = sorted(e for e, f in forms.items() if e != EXPONENTS and {"cobb-douglas", "linear"} <= f)
    tab = Table("steer-me-fig3", "STEER-ME Fig. 3: the Exponents element against the Cobb-Douglas − linear gap downstream",
                ["Exponents accuracy", "accuracy overall", "calibrated Exponents", "Cobb-Douglas accuracy", "linear accuracy",
                 "gap (Cobb-Douglas − linear)"], 3, row_label="model: element")
    series: list[dict[str, Any]] = []
    for d in rows:
        rs = recs[d.label]
        exp, exp_right, n_exp = accuracy([r for r in rs if r.get("element") == EXPONENTS])
        overall, _, _ = accuracy(rs)
        calibrated = exp / overall if exp is not None and overall else None
        points: list[dict[str, Any]] = []
        for e in downstream:
            of_e = [r for r in rs if r.get("element") == e]
            cd, cd_right, n_cd = accuracy([r for r in of_e if _family(r.get("type")) == "cobb-douglas"])
            lin, lin_right, n_lin = accuracy([r for r in of_e if _family(r.get("type")) == "linear"])
            gap = cd - lin if cd is not None and lin is not None else None
            tab.rows.append({"source": "run", "label": f"{d.label}: {e}", "values": [exp, overall, calibrated, cd, lin, gap],
                             "intervals": [_iv(exp_right, n_exp), None, None, _iv(cd_right, n_cd), _iv(lin_right, n_lin), None],
                             "n": f"{n_exp}/{n_cd}/{n_lin}"})
            if gap is not None and calibrated is not None:
                points.append({"x": gap, "y": calibrated, "label": e, "n": min(n_exp, n_cd, n_lin)})
        series.append({"name": d.label, "points": points})
    xs = [p["x"] for s in series for p in s["points"]]
    ys = [p["y"] for s in series for p in s["points"]]
    models = sum(bool(s["points"]) for s in series)
    coefficient = pearson(xs, ys, models)
    why = None
    if not any(d.res["paper"]["element"].get(EXPONENTS) for d in rows):
        why = "Not drawn: no run has questions of the Exponents element."
    elif not downstream:
        why = "Not drawn: no element's questions come in both Cobb-Douglas and linear forms (the downstream elements)."
    elif not xs:
        why = "Not drawn: no model has an answered question of both forms and of Exponents (or its accuracy overall is 0)."
    said = (f"Pearson r = {coefficient:.3f} over {len(xs)} points of {models} models" if coefficient is not None else
            f"Pearson r: not computed ({len(xs)} points of {models} models; it needs 3 models and points that vary)")
    tab.figures = [{"kind": "scatter", "caption": "STEER-ME Fig. 3: the calibrated Exponents accuracy (Exponents accuracy / "
                    "the model's accuracy overall) against the gap on each downstream element (Cobb-Douglas accuracy − "
                    f"linear accuracy; elements: {', '.join(downstream) or 'none'}), a point per (model, element) as the paper "
                    f"draws them. {said}. The paper: 0-CoT shown without CAR." + _marked_said(rows, "0-CoT shown without CAR"),
                    "xlabel": "gap: Cobb-Douglas − linear accuracy", "ylabel": "Exponents accuracy / accuracy overall",
                    "series": series, "pearson": {"r": coefficient, "n_points": len(xs), "n_models": models},
                    **({"not_drawn": why} if why else {})}]
    tab.notes = ["Calibrated Exponents: the model's Exponents accuracy divided by its accuracy over all its questions "
                 "(the paper's \"normalizing it relative to the average accuracy across the benchmark\"); gap: the paper's "
                 "text's difference (its caption says a quotient); accuracies over the answered questions, 95% Wilson "
                 "intervals; n: answered Exponents / Cobb-Douglas / linear questions.", said + "."] + \
        limit_notes([(d.run, d.res) for d in rows])
    return tab


# ---- Fig. 8: exact match by the answer's digits ------------------------------------------------------
def digits(value: float) -> int:
    """The digits of a number's integer part (32,000 and 12,345.6: 5; 0.4: 1)."""
    return len(str(int(abs(value))))


def fig8(mine: list[tuple[Any, str, dict, str, str | None]]) -> Table:
    """Exact match on Aggregation of Consumer Demand by the digits of the correct answer (its
    solution's value), per model."""
    from .values import free_text_gold

    rows = drawn(mine, SHOWN)
    per: list[tuple[Drawn, dict[int, tuple[int, int]]]] = []
    for d in rows:
        try:
            items = {it["id"]: it for it in d.run.preps[d.task].items}
        except (OSError, UsageError, KeyError):
            items = {}
        counts: dict[int, list[int]] = {}
        for r in records(d.run, d.task):
            item = items.get(r.get("id")) or items.get(r.get("variant_of")) or {}
            gold = free_text_gold(item) if item and r.get("element") == DIGITS_ELEMENT else None
            if gold is not None and r.get("answered"):
                tally = counts.setdefault(digits(gold), [0, 0])
                tally[0] += r.get("correct") is True
                tally[1] += 1
        per.append((d, {k: (v[0], v[1]) for k, v in counts.items()}))
    columns = sorted({k for _, c in per for k in c})
    names = [f"{k} digit{'s' if k > 1 else ''}" for k in columns]
    tab = Table("steer-me-fig8", "STEER-ME Fig. 8: exact match on Aggregation of Consumer Demand by the answer's digits",
                names, 3)
    for d, c in per:
        if c:
            tab.rows.append({"source": "run", "label": d.label,
                             "values": [c[k][0] / c[k][1] if k in c else None for k in columns],
                             "intervals": [_iv(*c[k]) if k in c else None for k in columns],
                             "n": "/".join(str(c[k][1]) if k in c else "-" for k in columns)})
    shown = [(d, c) for d, c in per if c]
    tab.figures = [{"kind": "bars", "caption": "STEER-ME Fig. 8: exact-match accuracy on Aggregation of Consumer Demand "
                    "against the number of digits of the correct answer (95% Wilson intervals). The paper: 0-CoT shown."
                    + _marked_said([d for d, _ in shown], "0-CoT shown without CAR"),
                    "groups": names, "ylim": [0, 1],
                    "series": [{"name": d.label, "values": [c[k][0] / c[k][1] if k in c else None for k in columns],
                                "intervals": [_iv(*c[k]) if k in c else None for k in columns],
                                "n": [c[k][1] if k in c else None for k in columns]} for d, c in shown],
                    **({} if shown else {"not_drawn": "Not drawn: no run has an answered question of Aggregation of Consumer "
                                                      f"Demand ({DIGITS_ELEMENT}) with a numeric answer."})}]
    tab.notes = ["Digits: of the correct answer's integer part (its solution's value; 32,000: 5); accuracy over the "
                 "answered questions, 95% Wilson intervals; n: answered questions per column."] + \
        limit_notes([(d.run, d.res) for d, _ in shown])
    return tab


# ---- Fig. 11: accuracy by functional family ----------------------------------------------------------
def fig11(mine: list[tuple[Any, str, dict, str, str | None]]) -> Table:
    """Accuracy per (element, type) on the elements whose questions come in two or more types,
    one of them a functional family of the paper's (Cobb-Douglas, Leontief, linear); a column
    per model, a bar chart per element."""
    rows = drawn(mine, SHOWN)
    recs = {d.label: records(d.run, d.task) for d in rows}
    types: dict[str, dict[str, str]] = {}  # element: {family key: the type as the questions name it}
    for rs in recs.values():
        for r in rs:
            types.setdefault(str(r.get("element")), {}).setdefault(_family(r.get("type")), str(r.get("type")))
    elements = sorted(e for e, t in types.items() if len(t) > 1 and set(t) & set(FAMILIES))
    tab = Table("steer-me-fig11", "STEER-ME Fig. 11: accuracy by functional family", [d.label for d in rows], 3,
                row_label="element: type")
    figures = []
    for e in elements:
        fams = sorted(types[e], key=lambda f: (FAMILIES.index(f) if f in FAMILIES else len(FAMILIES), f))
        cells = {}
        for d in rows:
            for f in fams:
                cells[d.label, f] = accuracy([r for r in recs[d.label] if r.get("element") == e and _family(r.get("type")) == f])
        for f in fams:
            tab.rows.append({"source": "run", "label": f"{e}: {types[e][f]}", "values": [cells[d.label, f][0] for d in rows],
                             "intervals": [_iv(*cells[d.label, f][1:]) for d in rows],
                             "n": "/".join(str(cells[d.label, f][2]) for d in rows)})
        ks = {r.get("k") for d in rows for r in recs[d.label] if r.get("element") == e and r.get("answered")}
        k = next(iter(ks)) if len(ks) == 1 else None
        chance = 1 / k if isinstance(k, int) and k > 1 else None  # the paper's dashed line
        figures.append({"kind": "bars", "element": e, "caption": f"STEER-ME Fig. 11, {e}: exact-match accuracy by functional "
                        "family (the question's type; 95% Wilson intervals)" + (", dashed: random guessing" if chance else "")
                        + ". The paper: 0-CoT shown." + _marked_said(rows, "0-CoT shown without CAR"),
                        "groups": [types[e][f] for f in fams], "ylim": [0, 1],
                        "series": [{"name": d.label, "values": [cells[d.label, f][0] for f in fams],
                                    "intervals": [_iv(*cells[d.label, f][1:]) for f in fams],
                                    "n": [cells[d.label, f][2] for f in fams]} for d in rows],
                        **({"reference": {"value": chance, "label": f"random guessing ({chance:.2f})"}} if chance else {})})
    tab.figures = figures or [{"kind": "bars", "caption": "STEER-ME Fig. 11: accuracy by functional family.", "groups": [],
                               "series": [], "not_drawn": "Not drawn: no element's questions come in two or more types of "
                                                         "which one is Cobb-Douglas, Leontief or linear."}]
    tab.notes = [f"The paper draws three elements ({FIG11_ELEMENTS}) in Cobb-Douglas, Leontief and linear forms; here every "
                 "element whose questions come in two or more types, one of them such a family. Accuracy over the answered "
                 "questions, 95% Wilson intervals; n: answered questions per column."] + \
        limit_notes([(d.run, d.res) for d in rows])
    return tab


# ---- Fig. 12: choosing "No other option is correct" ---------------------------------------------------
def fig12(mine: list[tuple[Any, str, dict, str, str | None]]) -> Table | None:
    """Per result with CAR: the rate of choosing "No other option is correct" over the answered
    questions, where it was the right answer and where it was not, and its true rate."""
    rows = drawn(mine, SHOWN_CAR, car=True)
    if not rows:
        return None
    tab = Table("steer-me-fig12", "STEER-ME Fig. 12: choosing \"No other option is correct\" under CAR",
                ["chose it", "it was right", "chose it where right", "chose it where not right"], 3)
    series: list[dict] = [{"name": n, "values": [], "intervals": [], "n": []} for n in
                          ("chose it (all answered)", "where it was right", "where it was not right")]
    truth: list[list[float | None]] = []
    for d in rows:
        answered = [r for r in records(d.run, d.task) if r.get("answered") and "chose_nota" in r]
        parts = [answered, [r for r in answered if r.get("nota_is_correct")], [r for r in answered if not r.get("nota_is_correct")]]
        counts = [(sum(bool(r["chose_nota"]) for r in p), len(p)) for p in parts]
        rates = [k / n if n else None for k, n in counts]
        true_rate = sum(bool(r.get("nota_is_correct")) for r in answered) / len(answered) if answered else None
        tab.rows.append({"source": "run", "label": d.label, "values": [rates[0], true_rate, rates[1], rates[2]],
                         "intervals": [_iv(*counts[0]), _iv(counts[1][1], counts[0][1]), _iv(*counts[1]), _iv(*counts[2])],
                         "n": f"{counts[0][1]}/{counts[1][1]}/{counts[2][1]}"})
        for s, (k, n), rate in zip(series, counts, rates):
            s["values"].append(rate)
            s["intervals"].append(_iv(k, n))
            s["n"].append(n)
        truth.append([true_rate, None, None])
    tab.figures = [{"kind": "bars", "caption": "STEER-ME Fig. 12: the rate of choosing \"No other option is correct\" per "
                    "model over its answered questions, where it was the right answer and where it was not (95% Wilson "
                    "intervals); tick: how often it was right. The paper: 0-CoT shown with CAR."
                    + _marked_said(rows, "0-CoT shown with CAR"),
                    "groups": [d.label for d in rows], "series": series, "ylim": [0, 1],
                    "marks": [{"name": "it was right (the true rate)", "values": truth}]}]
    tab.notes = ["Over the answered questions (the results' nota_selection_rate and nota_correct_rate); Table 2's recall "
                 "counts an unanswered question as not choosing it. n: answered / where it was right / where not."] + \
        limit_notes([(d.run, d.res) for d in rows])
    return tab


def figure_tables(mine: list[tuple[Any, str, dict, str, str | None]]) -> list[Table]:
    """The tables of Figs. 3, 8, 11 and 12 (12 where a result has CAR)."""
    if not mine:
        return []
    return [t for t in (fig3(mine), fig8(mine), fig11(mine), fig12(mine)) if t is not None]
