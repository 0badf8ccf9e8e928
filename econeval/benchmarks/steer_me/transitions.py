"""The paper's §5.3 transitions: one model's answers to the same questions under two adaptations,
paired by question (`econeval report` of runs of one model that differ only in adaptation, or of
one `--suite steer-me-paper` run).

- shown → hidden: accuracy with the options shown while reasoning, and hidden (gpt-4o 33.2% →
  27.1% on Profit Maximization);
- "No other option is correct": accuracy on the questions where CAR made it the right answer,
  against the same questions without CAR (claude-3-5-sonnet −20.5%, o1-preview −15.1%, gpt-4o
  −11.2%);
- hidden → free text, and the paper's Fig. 15: of the questions right when hidden and wrong in
  free text, the share whose free-text number lies closest to the right option — right when
  hidden only by picking the closest option;
- the paper's Fig. 14: hidden against free text on each of the four elements it names.

A question counts as right where it was answered and right (unanswered: not right) and is paired
where both runs scored it; only a question's original order counts (`-T permute`). Intervals:
Wilson for each accuracy and a share, Newcombe's paired interval (method 10) for a difference.
"""

from __future__ import annotations

from typing import Any

from ...errors import UsageError
from ...intervals import newcombe_paired, wilson
from ...tables import Table
from ...types import is_scored
from .values import option_values

ADAPTATION_KEYS = ("adaptation", "car", "scoring", "free_text_grading", "free_text_extractor", "evaluator_prompt",
                   "permute")  # the settings that say which adaptation ran: runs differing in these only are paired


def _setup(run: Any, task: str) -> str:
    """What must be the same for two results to be paired: the model and the task's settings but
    the adaptation's (the questions' source without what one adaptation leaves out)."""
    import json

    settings = {k: v for k, v in run.record.task(task).settings.items() if k not in ADAPTATION_KEYS}
    if isinstance(settings.get("source"), dict):
        settings["source"] = {k: v for k, v in settings["source"].items() if not k.startswith("not_run")}
    return json.dumps([run.record.model_identity, run.model, settings], sort_keys=True, default=str)


def _scored(run: Any, task: str) -> dict[str, dict]:
    try:
        lines = run.samples.get(task, {})
    except (OSError, UsageError):
        return {}
    return {i: r for i, r in lines.items() if is_scored(r) and "variant_of" not in r}


def _right(r: dict) -> bool:
    return bool(r.get("answered")) and r.get("correct") is True


def paired(before: dict[str, dict], after: dict[str, dict], only: set[str] | None = None) -> dict:
    """Accuracy of the questions both scored (of `only`, if given) before and after, and the
    difference before − after with its paired interval."""
    ids = [i for i in before if i in after and (only is None or i in only)]
    a = sum(_right(before[i]) and _right(after[i]) for i in ids)
    b = sum(_right(before[i]) and not _right(after[i]) for i in ids)
    c = sum(not _right(before[i]) and _right(after[i]) for i in ids)
    n = len(ids)
    return {"n": n, "before": (a + b) / n if n else None, "after": (a + c) / n if n else None,
            "drop": (b - c) / n if n else None, "right_then_wrong": b, "wrong_then_right": c,
            "intervals": [wilson(a + b, n), wilson(a + c, n), newcombe_paired(a, b, c, n - a - b - c)]}


def closest_option(hidden: dict[str, dict], free: dict[str, dict], items: dict[str, dict]) -> dict:
    """Fig. 15: of the questions right when hidden and not in free text, how many free-text
    numbers lie closest to the right option (ties: the first option)."""
    gap = [i for i in hidden if i in free and _right(hidden[i]) and not _right(free[i])]
    closest = 0
    for i in gap:
        value, item = free[i].get("parsed"), items.get(i) or {}
        values = option_values(item) if item else {}
        if isinstance(value, (int, float)) and values:
            closest += min(values, key=lambda k: (abs(value - values[k]), k)) == item.get("correct_index")
    return {"n_gap": len(gap), "n_closest": closest, "share": closest / len(gap) if gap else None,
            "interval": wilson(closest, len(gap))}


# Fig. 14's elements: "the largest gap in accuracy between hidden and shown adaptations" (§5.6.1)
FIG14_ELEMENTS = ("intertemporal_consumption_smoothing", "profit_maximization", "aggregation_of_consumer_demand",
                  "producer_surplus")


def fig14_figure(rows: list[tuple[str, str, dict]]) -> dict:
    """The bars of Fig. 14: per element, each model's accuracy hidden and in free text over the
    questions both scored; `rows`: (model, element, paired numbers)."""
    elements = [e for e in FIG14_ELEMENTS if any(e == el for _, el, _ in rows)]
    models = list(dict.fromkeys(m for m, _, _ in rows))
    got = {(m, e): p for m, e, p in rows}
    series = []
    for m in models:
        for key, i, name in (("before", 0, "0-CoT hidden"), ("after", 1, "free text")):
            cells = [got.get((m, e)) for e in elements]
            series.append({"name": f"{m} {name}", "values": [c[key] if c else None for c in cells],
                           "intervals": [list(c["intervals"][i]) if c and c["intervals"][i] else None for c in cells],
                           "n": [c["n"] if c else None for c in cells]})
    return {"kind": "bars", "caption": "STEER-ME Fig. 14: accuracy with the options hidden while reasoning (0-CoT hidden) "
            "and in free text, on the questions both scored, per element (95% Wilson intervals).", "groups": elements,
            "series": series, "ylim": [0, 1],
            **({} if rows else {"not_drawn": "Not drawn: none of the paper's four elements (" + ", ".join(FIG14_ELEMENTS)
                                + ") is among the questions both adaptations scored."})}


def transitions_tables(mine: list[tuple[Any, str, dict, str, str | None]]) -> list[Table]:
    """The §5.3 transitions of every model whose results hold a pair of adaptations."""
    groups: dict[str, dict[str, tuple[Any, str]]] = {}
    for run, task, res, _, _ in mine:
        groups.setdefault(_setup(run, task), {}).setdefault(res.get("adaptation") or "?", (run, task))
    drops = Table("steer-me-transitions", "STEER-ME §5.3: the same questions under two adaptations",
                  ["accuracy before", "accuracy after", "before − after"], 3)
    fig14 = Table("steer-me-fig14", "STEER-ME Fig. 14: hidden against free text on the paper's four elements",
                  ["accuracy hidden", "accuracy in free text", "hidden − free text"], 3, row_label="model: element")
    fig14_rows: list[tuple[str, str, dict]] = []
    fig15 = Table("steer-me-fig15", "STEER-ME Fig. 15: right when hidden, wrong in free text, by the closest option",
                  ["hidden right, free text wrong", "of them, the free-text number closest to the right option", "share"], 3)
    paired_any = False
    for runs in groups.values():
        label = next(iter(runs.values()))[0].model  # the runs differ in adaptation only: their model names them

        def scored(adaptation: str) -> dict[str, dict] | None:
            return _scored(*runs[adaptation]) if adaptation in runs else None

        rows = []
        for car in ("", "+car"):
            shown, hidden = scored("cot-shown" + car), scored("cot-hidden" + car)
            if shown is not None and hidden is not None:
                rows.append((f"cot-shown{car} → cot-hidden{car}", paired(shown, hidden)))
        for adaptation in ("direct", "cot-shown", "cot-hidden"):
            plain, car_run = scored(adaptation), scored(adaptation + "+car")
            if plain is not None and car_run is not None:
                nota = {i for i, r in car_run.items() if r.get("nota_is_correct")}
                rows.append((f"{adaptation} → {adaptation}+car, where \"No other option\" is right", paired(plain, car_run, nota)))
        hidden, free = scored("cot-hidden"), scored("free-text")
        if hidden is not None and free is not None:
            rows.append(("cot-hidden → free-text", paired(hidden, free)))
            for element in FIG14_ELEMENTS:
                of = {i for i, r in hidden.items() if r.get("element") == element}
                p = paired(hidden, free, of)
                if p["n"]:
                    fig14_rows.append((label, element, p))
                    fig14.rows.append({"source": "run", "label": f"{label}: {element}", "values": [p["before"], p["after"], p["drop"]],
                                       "intervals": [list(iv) if iv else None for iv in p["intervals"]], "n": p["n"]})
            paired_any = True
            run, task = runs["free-text"]
            items = {it["id"]: it for it in run.preps[task].items}
            f = closest_option(hidden, free, items)
            fig15.rows.append({"source": "run", "label": label, "values": [f["n_gap"], f["n_closest"], f["share"]],
                               "intervals": [None, None, list(f["interval"]) if f["interval"] else None], "n": f["n_gap"]})
        for setting, p in rows:
            drops.rows.append({"source": "run", "label": label, "setting": setting, "values": [p["before"], p["after"], p["drop"]],
                               "intervals": [list(iv) if iv else None for iv in p["intervals"]], "n": p["n"]})
    notes = ["Pairs: one model's results that differ only in adaptation and CAR (a run of --suite steer-me-paper, or runs "
             "of steer-me); a question is paired where both scored it (its original order only); right: answered and "
             "right."]
    drops.notes = notes + ["Intervals: Wilson for each accuracy, Newcombe's paired interval (1998, method 10) for the "
                           "difference; the CAR rows keep the questions whose right answer became \"No other option is "
                           "correct\" (the paper's §5.3 drop)."]
    fig15.notes = notes + ["The paper's reading: these questions were right when hidden only by picking the option nearest "
                           "a wrong number. Interval: Wilson."]
    fig14.notes = notes + ["The paper's four elements (§5.6.1: the largest gap between hidden and shown); intervals: Wilson "
                           "for each accuracy, Newcombe's paired interval for the difference; n: questions both scored."]
    fig14.figures = [fig14_figure(fig14_rows)]
    return [t for t in (drops, fig15) if t.rows] + ([fig14] if paired_any else [])
