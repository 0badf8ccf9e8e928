"""review.html: one static page of a writer folder's templates for a person to decide on: the
flagged ones first, each with the template it was rewritten from, its questions, the closed-form
answers and the checker's replies, and the command that records a decision. Every value on the
page is escaped where it is placed (numbers included: a hand-edited check.json is input)."""

from __future__ import annotations

import html
import shlex

from ...benchmarks.steer_me import LETTERS
from .written import WrittenSet

STYLE = ("body{font:14px sans-serif;max-width:60em;margin:auto;padding:0 1em} section{border-top:1px solid #ccc;padding:.5em 0} "
         ".flagged h2{color:#b00} .rejected{opacity:.5} .state{font-size:70%;border:1px solid;padding:0 .3em} "
         "pre{white-space:pre-wrap;background:#f6f6f6;padding:.4em} .right{font-weight:bold} .tpl{background:#ffd} "
         ".src{background:#eef} code{word-break:break-all} .opts{list-style:none}")


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def pct(x: object) -> str:
    return f"{100 * x:.0f}%" if isinstance(x, (int, float)) and not isinstance(x, bool) else "n/a"


def _question(q: dict) -> str:
    opts = "".join(f"<li{' class=right' if i == q['correct_index'] else ''}>{e(LETTERS[i])}. {e(o)}</li>"
                   for i, o in enumerate(q["options"]))
    chosen = "none" if q["mc_choice"] is None else LETTERS[q["mc_choice"]]
    return (f"<div class=q><p>{e(q['question'])}</p><ul class=opts>{opts}</ul>"
            f"<p>closed form: <b>{e(q['solution']['value'])}</b> <code>{e(q['solution'].get('formula') or '')}</code></p>"
            f"<p>multiple choice: chose <b>{e(chosen)}</b> ({'agrees' if q['mc_agrees'] else 'disagrees'})</p>"
            f"<pre>{e(q.get('mc_reply') or '')}</pre>"
            f"<p>free text: read <b>{e(q['ft_value'])}</b> ({'agrees' if q['ft_agrees'] else 'disagrees'})</p>"
            f"<pre>{e(q.get('ft_reply') or '')}</pre></div>")


def render(ws: WrittenSet, sources: dict[str, str] | None = None) -> str:
    """The page; `sources`: template id → the text the writer rewrote into it (the writer run's)."""
    sources = sources or {}
    by_id = ws.by_id()
    entries = {tid: ws.verdict(tid) for tid in by_id}
    order = sorted(by_id, key=lambda tid: ({"flagged": 0, "unchecked": 1}.get(ws.state(tid), 2),
                                            (entries[tid] or {}).get("agreement", 0), tid))
    folder = shlex.quote(str(ws.folder))
    rows = []
    for tid in order:
        t, ent, state = by_id[tid], entries[tid], ws.state(tid)
        agreement = f" agreement {ent['agreement']:.2f}" if ent else ""
        src = sources.get(tid)
        qs = "".join(_question(q) for q in ent["questions"]) if ent else ""
        rows.append(
            f"<section class='{e(state)}' id='{e(tid)}'><h2>{e(tid)} <span class=state>{e(state)}</span>{e(agreement)}</h2>"
            f"<p class=meta>{e(t['domains'][0])} · {e(t['perspectives'][0])} · stage {e(t.get('stage') or '-')} · from gold "
            f"{e(t.get('gold') or '-')}</p>"
            + (f"<p>rewritten from:</p><p class=src>{e(src)}</p>" if src else "")
            + f"<p>template:</p><p class=tpl>{e(t['text'])}</p>"
            f"<p class=cmd><code>econeval steer review {e(folder)} --accept {e(shlex.quote(tid))}</code> or "
            f"<code>--reject {e(shlex.quote(tid))}</code></p>"
            + (f"<details{' open' if state == 'flagged' else ''}><summary>{len(ent['questions'])} questions</summary>{qs}</details>"
               if ent else "")
            + "</section>")
    head = "<p>No double-check yet: run <code>econeval steer check</code> on this folder.</p>"
    c = ws.check
    if c is not None:
        w, g = c.summary["written"], c.summary["gold"]
        flagged = sum(ws.state(tid) == "flagged" for tid in by_id)
        head = (f"<p>checker <b>{e(c.checker)}</b>; threshold {e(c.threshold)}; {e(flagged)} of {e(len(by_id))} templates "
                f"flagged{'' if c.complete else ' (the check did not finish: the rest are unchecked)'}. Agreement with the "
                f"closed forms: written templates {pct(w['agreement'])} (multiple choice {pct(w['mc_agreement'])}, free text "
                f"{pct(w['ft_agreement'])}); the gold templates of the same elements {pct(g['agreement'])}: a checker that "
                "disagrees with the gold templates as often flags wording it cannot solve, not wording that is wrong.</p>")
    head += ("<p>Decisions are saved in review.json (edit it, or run the command under a template); a rejected template is "
             "never used, a flagged one only once accepted. A template edited after the check is unchecked.</p>")
    return (f"<!doctype html><html><head><meta charset=utf-8><meta name=viewport content='width=device-width'>"
            f"<title>STEER-ME written templates: review</title><style>{STYLE}</style></head><body>"
            f"<h1>Written templates: review</h1>{head}{''.join(rows)}</body></html>\n")
