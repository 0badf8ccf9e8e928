"""`econeval steer check DIR --checker MODEL`: auto-STEER's AI double-check (the paper's Figure 1),
re-implemented: each kept template of a writer folder is filled with drawn values (the same
solvers as every question), a checker model solves each question twice, as multiple choice and as
free text, and its answers are compared with the closed-form answer; a template whose agreement
falls below the threshold is flagged for a person (review.html, review.json).

The checker's agreement on the gold templates of the same elements (filled the same way) is
measured beside it: a weak checker disagrees with good templates too, and that rate says how much
a flag means. check.json holds every question, reply and verdict; the same command continues it.
"""

from __future__ import annotations

import html
import re
import sys
import time
from pathlib import Path
from typing import Callable

from ... import data
from ...errors import UsageError
from ...results import dumps, write_atomic
from ...types import CHUNK, Generate
from . import BENCHMARK, LETTERS, free_text_correct, letter_of, marked_letter, number_from_text
from .generator import combos, generate
from .written import CHECK_FILE, REVIEW_PAGE, WrittenSet

CHECK_VERSION = "steer-check/1"
MC_PROMPT = ("Solve this economics question. Work it out briefly, then give the letter of the correct option after "
             "'ANSWER:'.\n\nQuestion: {question}\n{options}")
FT_PROMPT = ("Solve this economics question. Work it out step by step, then give the final answer as a number after "
             "'ANSWER:'.\n\nQuestion: {question}")


def mc_letter(text: str, k: int) -> int | None:
    """The letter after the reply's last ANSWER marker, else the one letter_of reads."""
    letter = marked_letter(text, LETTERS[:k]) or letter_of(text or "", LETTERS[:k])
    return None if letter is None else LETTERS.index(letter)


def _questions(element: str, template: dict, domain: str, perspective: str, n: int, seed: int, tax: dict) -> list[dict]:
    return generate([element], n, seed, tax, combos_of=lambda _e: [(template, domain, perspective)])


def _requests(q: dict, tokens: int) -> list[Generate]:
    opts = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(q["options"]))
    return [Generate(prompt=MC_PROMPT.format(question=q["question"], options=opts), max_tokens=tokens, chat=True),
            Generate(prompt=FT_PROMPT.format(question=q["question"]), max_tokens=tokens, chat=True)]


def _verdict(q: dict, mc, ft) -> dict:
    k = len(q["options"])
    chosen = mc_letter(mc.text or "", k)
    value = number_from_text(ft.text or "")
    gold = q["solution"]["value"]
    others = [float(o.replace(",", "")) for i, o in enumerate(q["options"]) if i != q["correct_index"]]
    return {"question": q["question"], "options": q["options"], "correct_index": q["correct_index"], "answer": gold,
            "formula": q["solution"].get("formula"), "mc_reply": mc.text, "mc_choice": chosen,
            "mc_agrees": chosen == q["correct_index"], "ft_reply": ft.text, "ft_value": value,
            "ft_agrees": free_text_correct(value, gold, others)}


def _summary(entries: list[dict]) -> dict:
    qs = [q for e in entries for q in e["questions"]]
    if not qs:
        return {"templates": len(entries), "questions": 0, "agreement": None}
    mc = sum(q["mc_agrees"] for q in qs) / len(qs)
    ft = sum(q["ft_agrees"] for q in qs) / len(qs)
    return {"templates": len(entries), "questions": len(qs), "agreement": (mc + ft) / 2, "mc_agreement": mc, "ft_agreement": ft}


def run(backend, checker: dict, ws: WrittenSet, n_questions: int, threshold: float, tokens: int, seed: int,
        say: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True)) -> dict:
    ident = {"version": CHECK_VERSION, "checker": checker.get("identity", checker), "questions_per_template": n_questions,
             "tokens": tokens, "seed": seed,
             "prompts": {"multiple_choice": MC_PROMPT, "free_text": FT_PROMPT}}
    prior = ws.check or {}  # the folder's check.json, if checked before
    done: dict[str, dict] = dict(prior.get("templates") or {}) if prior.get("identity") == ident else {}
    gold_done: dict[str, dict] = dict(prior.get("gold") or {}) if prior.get("identity") == ident else {}
    if prior and prior.get("identity") != ident:
        say(f"econeval steer check: {ws.folder / CHECK_FILE} was made by another checker or settings: checking again")
    tax = {r["element"]: r for r in data.load(BENCHMARK, "taxonomy.jsonl")}
    todo: list[tuple[str, str, list[dict]]] = []  # (kind, id, questions)
    for el, ts in ws.templates.items():
        for t in ts:
            if t["id"] not in done:
                todo.append(("written", t["id"], _questions(el, t, t["domains"][0], t["perspectives"][0], n_questions, seed, tax)))
        if el not in gold_done:
            todo.append(("gold", el, generate([el], n_questions, seed, tax, combos_of=combos)))
    element_of = {t["id"]: el for el, ts in ws.templates.items() for t in ts}
    doc: dict = {}

    def save() -> None:
        nonlocal doc
        for e in done.values():
            e["flagged"] = e["agreement"] < threshold
        written = list(done.values())
        doc = {"about": "auto-STEER's AI double-check re-implemented: each kept template filled and solved by the checker, "
                        "compared with the closed-form answer; flagged below the threshold",
               "identity": ident, "checker": checker, "threshold": threshold,
               "summary": {"written": _summary(written), "gold": _summary(list(gold_done.values())),
                           "flagged": sum(e["flagged"] for e in written)},
               "templates": done, "gold": gold_done}
        write_atomic(ws.folder / CHECK_FILE, dumps(doc))
        ws.check = doc
        write_atomic(ws.folder / REVIEW_PAGE, review_page(ws).encode())

    if todo:
        n_req = sum(2 * len(qs) for _, _, qs in todo)
        say(f"econeval steer check: {len(todo)} templates ({n_req} requests) to check")
    t_all = time.monotonic()
    sent = 0
    for i in range(0, len(todo), CHUNK):
        part = todo[i:i + CHUNK]
        reqs = [r for _, _, qs in part for q in qs for r in _requests(q, tokens)]
        t0 = time.monotonic()
        replies = backend.generate(reqs)
        seconds = time.monotonic() - t0
        k = 0
        for kind, key, qs in part:
            verdicts = []
            for q in qs:
                verdicts.append(_verdict(q, replies[k], replies[k + 1]))
                k += 2
            s = _summary([{"questions": verdicts}])
            entry = {"questions": verdicts, "agreement": s["agreement"] if s["agreement"] is not None else 0.0,
                     "seconds": round(seconds * 2 * len(qs) / max(1, len(reqs)), 3)}
            if kind == "written":
                done[key] = {**entry, "element": element_of[key]}
            else:
                gold_done[key] = entry
        sent += len(reqs)
        save()
        left = (time.monotonic() - t_all) / sent * (sum(2 * len(qs) for _, _, qs in todo) - sent)
        say(f"econeval steer check: {min(i + CHUNK, len(todo))}/{len(todo)} checked" + (f", about {left:.0f} s left" if left > 0 else ""))
    save()
    return doc


def review_page(ws: WrittenSet) -> str:
    """One static page: the flagged templates first, each with its questions, the closed-form
    answers and the checker's replies, and the command that records a decision."""
    check = ws.check or {}
    entries = check.get("templates") or {}
    by_id = ws.by_id()
    e = html.escape
    rows = []
    order = sorted(entries, key=lambda tid: (not entries[tid].get("flagged"), entries[tid].get("agreement", 0), tid))
    for tid in order:
        ent, t = entries[tid], by_id.get(tid)
        if t is None:
            continue
        state = ws.state(tid)
        qs = []
        for q in ent["questions"]:
            opts = "".join(f"<li{' class=right' if i == q['correct_index'] else ''}>{e(LETTERS[i])}. {e(str(o))}</li>"
                           for i, o in enumerate(q["options"]))
            chosen = "none" if q["mc_choice"] is None else LETTERS[q["mc_choice"]]
            qs.append(f"<div class=q><p>{e(q['question'])}</p><ul class=opts style='list-style:none'>{opts}</ul>"
                      f"<p>closed form: <b>{e(str(q['answer']))}</b> <code>{e(str(q.get('formula') or ''))}</code></p>"
                      f"<p>multiple choice: chose <b>{chosen}</b> ({'agrees' if q['mc_agrees'] else 'disagrees'})</p>"
                      f"<pre>{e(q['mc_reply'] or '')}</pre>"
                      f"<p>free text: read <b>{e(str(q['ft_value']))}</b> ({'agrees' if q['ft_agrees'] else 'disagrees'})</p>"
                      f"<pre>{e(q['ft_reply'] or '')}</pre></div>")
        folder = re.sub(r"'", "'\\''", str(ws.folder))
        rows.append(
            f"<section class='{state}' id='{e(tid)}'><h2>{e(tid)} <span class=state>{state}</span> "
            f"agreement {ent['agreement']:.2f}</h2>"
            f"<p class=meta>{e(ent.get('element', ''))} · {e(t['domains'][0])} · {e(t['perspectives'][0])} · "
            f"stage {e(t.get('stage', ''))} · from gold {e(t.get('gold', ''))}</p>"
            f"<p class=tpl>{e(t['text'])}</p>"
            f"<p class=cmd><code>econeval steer review '{e(folder)}' --accept {e(tid)}</code> or "
            f"<code>--reject {e(tid)}</code></p>"
            f"<details{' open' if state == 'flagged' else ''}><summary>{len(ent['questions'])} questions</summary>{''.join(qs)}</details>"
            f"</section>")
    s = check.get("summary") or {}
    w, g = s.get("written") or {}, s.get("gold") or {}

    def pct(x):
        return "n/a" if x is None else f"{100 * x:.0f}%"
    checker = (check.get("checker") or {}).get("name")
    head = (f"<p>checker <b>{e(str(checker))}</b>; threshold {check.get('threshold')}; {s.get('flagged', 0)} of "
            f"{w.get('templates', 0)} templates flagged. Agreement with the closed forms: written templates "
            f"{pct(w.get('agreement'))} (multiple choice {pct(w.get('mc_agreement'))}, free text {pct(w.get('ft_agreement'))}); "
            f"the gold templates of the same elements {pct(g.get('agreement'))}: a checker that disagrees with the gold "
            f"templates as often flags wording it cannot solve, not wording that is wrong.</p>"
            "<p>Decisions are saved in review.json (edit it, or run the command under a template); a rejected template is "
            "never used, a flagged one only once accepted.</p>")
    style = ("body{font:14px sans-serif;max-width:60em;margin:auto} section{border-top:1px solid #ccc;padding:.5em 0} "
             ".flagged h2{color:#b00} .rejected{opacity:.5} .state{font-size:70%;border:1px solid;padding:0 .3em} "
             "pre{white-space:pre-wrap;background:#f6f6f6;padding:.4em} .right{font-weight:bold} .tpl{background:#ffd}")
    return (f"<!doctype html><html><head><meta charset=utf-8><title>STEER-ME written templates: review</title>"
            f"<style>{style}</style></head><body><h1>Written templates: review</h1>{head}{''.join(rows)}</body></html>\n")


def check_dir(folder: Path) -> Path:
    if not Path(folder).is_dir():
        raise UsageError(f"{folder} is not a folder", hint="give the writer folder of `econeval steer write --out DIR`")
    return Path(folder)
