"""review.html: one static page of a writer folder's templates for a person to decide on: the
flagged ones first, each with the template it was rewritten from, its questions, the closed-form
answers and the checker's replies, and the command that records a decision. The page is
econeval's page layout (publish/pages.py, templates/review.html): every value on it is escaped
where it is placed (numbers included: a hand-edited check.json is input)."""

from __future__ import annotations

import shlex
from typing import Any

from ...benchmarks.steer_me import LETTERS
from ...publish import pages
from .written import WrittenSet


def pct(x: object) -> str:
    return f"{100 * x:.0f}%" if isinstance(x, (int, float)) and not isinstance(x, bool) else "n/a"


def _question(q: dict) -> dict[str, Any]:
    return {"text": q["question"], "options": [{"letter": LETTERS[i], "text": o, "right": i == q["correct_index"]}
                                               for i, o in enumerate(q["options"])],
            "value": format(q["solution"]["value"], ",.6g"), "formula": q["solution"].get("formula") or "",
            "chose": "none" if q["mc_choice"] is None else LETTERS[q["mc_choice"]], "mc_agrees": q["mc_agrees"],
            "mc_reply": q.get("mc_reply") or "", "ft_value": q["ft_value"], "ft_agrees": q["ft_agrees"], "ft_reply": q.get("ft_reply") or ""}


def render(ws: WrittenSet, sources: dict[str, str] | None = None) -> str:
    """The page; `sources`: template id → the text the writer rewrote into it (the writer run's)."""
    sources = sources or {}
    by_id = ws.by_id()
    entries = {tid: ws.verdict(tid) for tid in by_id}
    order = sorted(by_id, key=lambda tid: ({"flagged": 0, "unchecked": 1}.get(ws.state(tid), 2),
                                            (entries[tid] or {}).get("agreement", 0), tid))
    folder = shlex.quote(str(ws.folder))
    templates = []
    for tid in order:
        t, ent = by_id[tid], entries[tid]
        templates.append({"id": tid, "state": ws.state(tid), "agreement": f"{ent['agreement']:.2f}" if ent else None,
                          "domain": t["domains"][0], "perspective": t["perspectives"][0], "stage": t.get("stage") or "-",
                          "gold": t.get("gold") or "-", "source": sources.get(tid), "text": t["text"],
                          "accept": f"econeval steer review {folder} --accept {shlex.quote(tid)}", "reject": f"--reject {shlex.quote(tid)}",
                          "questions": [_question(q) for q in ent["questions"]] if ent else None})
    check = None
    c = ws.check
    if c is not None:
        w, g = c.summary["written"], c.summary["gold"]
        check = {"checker": c.checker, "threshold": c.threshold, "flagged": sum(ws.state(tid) == "flagged" for tid in by_id),
                 "of": len(by_id), "complete": c.complete, "written": pct(w["agreement"]), "mc": pct(w["mc_agreement"]),
                 "ft": pct(w["ft_agreement"]), "gold": pct(g["agreement"])}
    return pages.render("review.html", title="Written templates: review", body_class="prose", check=check, templates=templates)
