"""`econeval steer contamination BUNDLED_RUN WRITTEN_RUN`: the same model on the bundled question
set and on a set generated from written templates (`steer generate --templates`), accuracy per
element and over the elements both hold, with the difference's 95% interval (Newcombe's hybrid
score interval from two Wilson intervals, the two sets' questions independent).

What a difference means: accuracy on the bundled wording above the written wording's, with an
interval that excludes 0, is what a model that has seen econeval's bundled wording would show; it
is also what written wording that is harder or less clear would show (the written set's checker
agreement and review state say how far to trust its wording). An interval that holds 0 is no
evidence either way at that many questions.
"""

from __future__ import annotations

import math
from pathlib import Path

from ...errors import UsageError
from ...tables import Table
from .tables import NOTE as REIMPLEMENTED
from .tables import TASK as BENCHMARK

Z = 1.959963984540054
NOTE = ("bundled − written accuracy, with a 95% interval (Newcombe). Above 0 beyond the interval: what a model that "
        "has seen the bundled wording shows, and also what harder or less clear written wording shows (see the written "
        "set's checker agreement and review state); an interval holding 0: no evidence either way at this n.")


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """The 95% interval of p1 − p2 (Newcombe 1998, method 10)."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1)
    l2, u2 = wilson(k2, n2)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def _run(folder: Path):
    """The run (its typed record) and its scored STEER-ME lines."""
    from ... import api

    run = api.open_run(folder)
    if BENCHMARK not in run.record.tasks:
        raise UsageError(f"{folder} is not a steer-me run")
    return run, scored(run, folder)


def scored(run, name) -> list[dict]:
    records = [r for r in run.samples.get(BENCHMARK, {}).values() if "correct" in r]
    if not records:
        raise UsageError(f"{name} holds no scored steer-me question")
    return records


def _template_set(run) -> dict | None:
    settings = run.record.task(BENCHMARK).settings  # the benchmark's own part of the record
    return (settings.get("source") or {}).get("template_set")


def _settings(run) -> dict:
    return {k: v for k, v in run.record.task(BENCHMARK).settings.items() if k != "source"}


def _row(a: list[dict], b: list[dict]) -> dict:
    k1, n1 = sum(bool(r["correct"]) for r in a), len(a)
    k2, n2 = sum(bool(r["correct"]) for r in b), len(b)
    lo, hi = newcombe(k1, n1, k2, n2)
    return {"bundled": {"n": n1, "accuracy": k1 / n1, "interval": list(wilson(k1, n1))},
            "written": {"n": n2, "accuracy": k2 / n2, "interval": list(wilson(k2, n2))},
            "difference": k1 / n1 - k2 / n2, "interval": [lo, hi], "excludes_zero": lo > 0 or hi < 0}


def report(run_a: Path, run_b: Path) -> dict:
    (ma, ra), (mb, rb) = _run(run_a), _run(run_b)
    written = [i for i, m in enumerate((ma, mb)) if _template_set(m)]
    if len(written) != 1:
        raise UsageError("give one run of a written set (`steer generate --templates`, run with -T questions=) and one of "
                         f"the bundled set; {'both' if len(written) == 2 else 'neither'} of these ran a written set")
    if written[0] == 0:
        (ma, ra, run_a), (mb, rb, run_b) = (mb, rb, run_b), (ma, ra, run_a)
    if ma.record.model != mb.record.model:
        raise UsageError("the two runs are of different models: contamination compares one model on both sets")
    if _settings(ma) != _settings(mb):
        diff = sorted(k for k in set(_settings(ma)) | set(_settings(mb)) if _settings(ma).get(k) != _settings(mb).get(k))
        raise UsageError(f"the two runs differ in {', '.join(diff)}: run both sets with the same options")
    doc = between(ra, rb)
    if doc is None:
        raise UsageError("the two runs share no element")
    return {"what": "STEER-ME contamination check: one model on the bundled set and on a set from written templates",
            "note": NOTE, "model": ma.record.model, "bundled_run": str(run_a), "written_run": str(run_b),
            "template_set": _template_set(mb) or {}, **doc}


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


def pairs(runs: list) -> list[tuple]:
    """The report's pairs among finished runs: each run of a written set with the first run of the
    bundled set of the same model and settings."""
    bundled = [r for r in runs if not _template_set(r)]
    out = []
    for w in runs:
        if not _template_set(w):
            continue
        match = next((b for b in bundled if b.record.model == w.record.model and _settings(b) == _settings(w)), None)
        if match is not None:
            out.append((match, w))
    return out


def table(doc: dict) -> str:
    def cell(x: dict) -> str:
        return f"{x['accuracy']:.3f} (n {x['n']})"
    lines = ["| element | bundled | written | bundled − written [95%] |", "|---|---|---|---|"]
    for el, r in [*doc["elements"].items(), ("**overall**", doc["overall"])]:
        lo, hi = r["interval"]
        lines.append(f"| {el} | {cell(r['bundled'])} | {cell(r['written'])} | {r['difference']:+.3f} [{lo:+.3f}, {hi:+.3f}]"
                     f"{' *' if r['excludes_zero'] else ''} |")
    ts = doc["template_set"]
    return "\n".join(lines) + (f"\n\nwritten set {ts['sha256'][:12]} (writer {ts['writer']['name']}, checker "
                               f"{(ts.get('checker') or {}).get('name') or 'none'}, review {ts.get('review')}); * marks an "
                               f"interval that excludes 0.\n{doc['note']}\n")


def report_table(runs: list) -> Table | None:
    """Beside the paper's tables, where the report holds one model's runs on the bundled set and on
    a written set (`steer generate --templates`): `econeval steer contamination`'s numbers."""
    tab = Table("steer-me-contamination", "STEER-ME contamination check: bundled against written wording",
                ["bundled accuracy", "written accuracy", "bundled − written"], 3, row_label="element")
    tab.notes = [REIMPLEMENTED, "Rows: the elements both sets hold, then all of them; intervals: Wilson for each accuracy, "
                                "Newcombe for the difference; n: bundled/written questions. " + NOTE]
    for bundled, written in pairs(runs):
        doc = between(scored(bundled, bundled.label), scored(written, written.label))
        if doc is None:
            continue
        for element, row in [*doc["elements"].items(), ("all elements", doc["overall"])]:
            b, w = row["bundled"], row["written"]
            tab.rows.append({"source": "run", "label": element, "setting": written.label,
                             "values": [b["accuracy"], w["accuracy"], row["difference"]],
                             "intervals": [b["interval"], w["interval"], row["interval"]], "n": f"{b['n']}/{w['n']}"})
        ts = _template_set(written) or {}
        tab.notes.append(f"{written.label} against {bundled.label}: written set {str(ts.get('sha256', ''))[:12]} (writer "
                         f"{(ts.get('writer') or {}).get('name')}, checker {(ts.get('checker') or {}).get('name') or 'none'}, "
                         f"review {ts.get('review')}).")
    return tab if tab.rows else None
