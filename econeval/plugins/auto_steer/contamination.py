"""`econeval steer contamination BUNDLED_RUN WRITTEN_RUN`: the same model on the bundled question
set and on a set generated from written templates (`steer generate --templates`), accuracy per
element and over the elements both hold, with the difference's 95% interval (Newcombe's hybrid
score interval from two Wilson intervals, the two sets' questions independent).

Both runs are read through the verified reader, as the gate reads a baseline: an edited sample,
an interrupted or failed run, runs of two models or of other settings are refused in one line
naming why. Each accuracy is STEER-ME's own (`steer_me.metrics`: over the answered questions,
by the run's answer rule), so a run's per-element accuracy here is the one its results.json
holds; the unanswered questions are counted beside it.

What a difference means: accuracy on the bundled wording above the written wording's, with an
interval that excludes 0, is what a model that has seen econeval's bundled wording would show; it
is also what written wording that is harder or less clear would show (the written set's checker
agreement and review state say how far to trust its wording). An interval that holds 0 is no
evidence either way at that many questions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...benchmarks.steer_me import BENCHMARK, metrics
from ...benchmarks.steer_me.tables import NOTE as REIMPLEMENTED
from ...errors import UsageError
from ...intervals import newcombe, wilson
from ...store.finished import FinishedRun, open_run
from ...tables import Table

NOTE = ("bundled − written accuracy, with a 95% interval (Newcombe). Above 0 beyond the interval: what a model that "
        "has seen the bundled wording shows, and also what harder or less clear written wording shows (see the written "
        "set's checker agreement and review state); an interval holding 0: no evidence either way at this n. Accuracy is "
        "over the answered questions, as STEER-ME's own.")


def template_set(run: FinishedRun) -> dict | None:
    """The written set a STEER-ME run ran (run.json's `settings.source.template_set`); None: the
    bundled set. A record of another shape is refused."""
    settings = run.record.task(BENCHMARK).settings
    source = settings.get("source") if isinstance(settings, dict) else None
    ts = source.get("template_set") if isinstance(source, dict) else None
    if ts is None:
        return None
    writer = ts.get("writer") if isinstance(ts, dict) else None
    if not (isinstance(ts, dict) and isinstance(ts.get("sha256"), str) and isinstance(writer, dict)
            and isinstance(ts.get("review"), dict) and isinstance(ts.get("checker"), (dict, type(None)))):
        raise UsageError(f"{run.path}: its question set's template_set is not one `econeval steer generate` writes",
                         hint="the questions file or run.json was edited; generate the set again and rerun")
    return ts


def _settings(run: FinishedRun) -> dict:
    return {k: v for k, v in run.record.task(BENCHMARK).settings.items() if k != "source"}


def verified(run: FinishedRun) -> FinishedRun:
    """A finished STEER-ME run, its samples re-derived (or one line saying why not)."""
    if BENCHMARK not in run.record.tasks:
        raise UsageError(f"{run.path} is not a steer-me run")
    if run.record.status != "complete":
        raise UsageError(f"{run.path} is a run that did not finish (run.json: {run.record.status})",
                         hint="finish it with the same command first; its numbers are not the set's")
    run.checked()
    if not any("correct" in r for r in run.samples.get(BENCHMARK, {}).values()):
        raise UsageError(f"{run.path} holds no scored steer-me question")
    return run


def _scored(run: FinishedRun) -> list[dict]:
    return [r for r in run.samples.get(BENCHMARK, {}).values() if "correct" in r]


def _side(recs: list[dict]) -> dict:
    answered = [r for r in recs if r["answered"]]
    k, n = sum(bool(r["correct"]) for r in answered), len(answered)
    interval = wilson(k, n)
    return {"n": n, "k": k, "n_items": len(recs), "n_unanswered": len(recs) - n,
            "accuracy": metrics(recs)["accuracy"], "interval": list(interval) if interval else None}


def _row(a: list[dict], b: list[dict]) -> dict:
    sa, sb = _side(a), _side(b)
    both = newcombe(sa["k"], sa["n"], sb["k"], sb["n"])
    if both is None:
        return {"bundled": sa, "written": sb, "difference": None, "interval": None, "excludes_zero": None}
    lo, hi = both
    return {"bundled": sa, "written": sb, "difference": sa["accuracy"] - sb["accuracy"], "interval": [lo, hi],
            "excludes_zero": lo > 0 or hi < 0}


def pair(a: FinishedRun, b: FinishedRun) -> tuple[FinishedRun, FinishedRun, dict]:
    """(bundled, written, the written set) of two verified runs, or one line saying why not a pair."""
    sets = [template_set(a), template_set(b)]
    if sum(s is not None for s in sets) != 1:
        raise UsageError("give one run of a written set (`steer generate --templates`, run with -T questions=) and one of "
                         f"the bundled set; {'both' if all(sets) else 'neither'} of these ran a written set")
    bundled, written = (a, b) if sets[1] is not None else (b, a)
    if bundled.record.model != written.record.model:
        raise UsageError("the two runs are of different models: contamination compares one model on both sets")
    if _settings(bundled) != _settings(written):
        diff = sorted(k for k in set(_settings(bundled)) | set(_settings(written))
                      if _settings(bundled).get(k) != _settings(written).get(k))
        raise UsageError(f"the two runs differ in {', '.join(diff)}: run both sets with the same options")
    return bundled, written, sets[0] or sets[1]  # type: ignore[return-value]


def report(run_a: Path, run_b: Path) -> dict:
    bundled, written, ts = pair(verified(open_run(run_a)), verified(open_run(run_b)))
    doc = between(_scored(bundled), _scored(written))
    if doc is None:
        raise UsageError("the two runs share no element")
    return {"what": "STEER-ME contamination check: one model on the bundled set and on a set from written templates",
            "note": NOTE, "model": bundled.record.model, "bundled_run": str(bundled.path), "written_run": str(written.path),
            "template_set": ts, **doc}


def between(bundled: list[dict], written: list[dict]) -> dict | None:
    """Per element both sets hold, and over those elements: accuracies and their difference."""
    by_a: dict[str, list[dict]] = {}
    by_b: dict[str, list[dict]] = {}
    for r in bundled:
        by_a.setdefault(r["element"], []).append(r)
    for r in written:
        by_b.setdefault(r["element"], []).append(r)
    shared = sorted(set(by_a) & set(by_b))
    if not shared:
        return None
    return {"elements": {el: _row(by_a[el], by_b[el]) for el in shared},
            "overall": _row([r for el in shared for r in by_a[el]], [r for el in shared for r in by_b[el]])}


def _num(x: Any, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def table(doc: dict) -> str:
    def cell(x: dict) -> str:
        return f"{_num(x['accuracy'], '.3f')} (n {x['n']}" + (f", {x['n_unanswered']} unanswered)" if x["n_unanswered"] else ")")
    lines = ["| element | bundled | written | bundled − written [95%] |", "|---|---|---|---|"]
    for el, r in [*doc["elements"].items(), ("**overall**", doc["overall"])]:
        diff = "-" if r["difference"] is None else \
            f"{r['difference']:+.3f} [{r['interval'][0]:+.3f}, {r['interval'][1]:+.3f}]{' *' if r['excludes_zero'] else ''}"
        lines.append(f"| {el} | {cell(r['bundled'])} | {cell(r['written'])} | {diff} |")
    ts = doc["template_set"]
    return "\n".join(lines) + (f"\n\nwritten set {ts['sha256'][:12]} (writer {ts['writer'].get('name')}, checker "
                               f"{(ts.get('checker') or {}).get('name') or 'none'}, review {ts.get('review')}); * marks an "
                               f"interval that excludes 0; n: answered questions.\n{doc['note']}\n")


def pairs(runs: list[FinishedRun]) -> tuple[list[tuple[FinishedRun, FinishedRun]], list[str]]:
    """The report's pairs among finished runs (each run of a written set with the first run of the
    bundled set of the same model and settings), and why a run could not be read as one."""
    usable, why = [], []
    for r in runs:
        if BENCHMARK not in r.record.tasks:
            continue
        try:
            usable.append((verified(r), template_set(r)))
        except UsageError as exc:
            why.append(f"{r.label or r.path}: not in the contamination check ({exc.one_line()})")
    out = []
    for w, ts in usable:
        if ts is None:
            continue
        match = next((b for b, bts in usable if bts is None and b.record.model == w.record.model and _settings(b) == _settings(w)),
                     None)
        if match is not None:
            out.append((match, w))
    return out, why


def _states(review: Any) -> str:
    """A written set's review state as words: "6 passed, 2 accepted" (the counts of each state)."""
    if not isinstance(review, dict) or not review:
        return "none"
    return ", ".join(f"{n:,} {state}" if isinstance(n, int) else f"{state} {n}" for state, n in review.items())


def report_table(runs: list[FinishedRun]) -> Table | None:
    """Beside the paper's tables, where the report holds one model's runs on the bundled set and on
    a written set (`steer generate --templates`): `econeval steer contamination`'s numbers."""
    tab = Table("steer-me-contamination", "STEER-ME contamination check: bundled against written wording",
                ["bundled accuracy", "written accuracy", "bundled − written"], 3, row_label="element")
    tab.notes = [REIMPLEMENTED, "Rows: the elements both sets hold, then all of them; intervals: Wilson for each accuracy, "
                                "Newcombe for the difference; n: bundled/written answered questions. " + NOTE]
    found, why = pairs(runs)
    for bundled, written in found:
        doc = between(_scored(bundled), _scored(written))
        if doc is None:
            continue
        label, base = written.label or str(written.path), bundled.label or str(bundled.path)
        for element, row in [*doc["elements"].items(), ("all elements", doc["overall"])]:
            b, w = row["bundled"], row["written"]
            tab.rows.append({"source": "run", "label": element, "setting": label,
                             "values": [b["accuracy"], w["accuracy"], row["difference"]],
                             "intervals": [b["interval"], w["interval"], row["interval"]], "n": f"{b['n']}/{w['n']}"})
        ts = template_set(written) or {}
        tab.notes.append(f"{label} against {base}: written set {str(ts.get('sha256', ''))[:12]} (writer "
                         f"{(ts.get('writer') or {}).get('name')}, checker {(ts.get('checker') or {}).get('name') or 'none'}, "
                         f"review: {_states(ts.get('review'))}).")
    if tab.rows:
        tab.notes += why
    return tab if tab.rows else None
