"""auto-STEER re-implementation: fill element templates with drawn numbers, compute the answer,
build distractors from typical mistakes, balance domains, perspectives, types and the position
of the correct option. Same seed and version → byte-identical output on any machine (string
seeds hash with SHA-512 in random.Random; no floating-point formatting depends on the platform).
"""

from __future__ import annotations

import json
import math
import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Callable

from .solvers import ELEMENTS, Draw

GENERATOR_VERSION = "4"  # 2: six elements rewritten to ask what they name, type variants, grammar; 3: a named
# person is introduced before any pronoun, no option is the correct answer's negation, consumption smoothing wording;
# 4: "What does one pack cost?", a labour endowment above 24 hours is a week's
HERE = Path(__file__).resolve().parent
NEAR_MISSES = (1.1, 0.9, 1.25, 0.8, 1.5, 0.5, 2.0)
LETTERS = "ABCD"


@lru_cache(maxsize=None)
def lexicon() -> dict:
    return json.loads((HERE / "lexicon.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def templates() -> dict[str, list[dict]]:
    out = {}
    for p in sorted((HERE / "templates").glob("*.json")):
        doc = json.loads(p.read_text(encoding="utf-8"))
        out[doc["element"]] = doc["templates"]
    return out


def covered() -> list[str]:
    """Elements with both a solver and templates."""
    return sorted(set(ELEMENTS) & set(templates()))


def combos(element: str) -> list[tuple[dict, str, str]]:
    """(template, domain, perspective) combinations that are coherent for an element."""
    lex = lexicon()
    out = []
    for t in templates()[element]:
        for d in t.get("domains", list(lex["domains"])):
            for p in t.get("perspectives", list(lex["perspectives"])):
                out.append((t, d, p))
    return out


_CHOICE = re.compile(r"\{([^{}|]+)\|([^{}|]+)\}")
_SLOT = re.compile(r"\{([A-Za-z0-9_]+)\}")


def fill(text: str, slots: dict[str, str], domain: str, perspective: str, rng: random.Random) -> str:
    lex = lexicon()
    dom = lex["domains"][domain]
    per = dict(lex["perspectives"][perspective])
    names = {"female": rng.choice(lex["female_names"]), "male": rng.choice(lex["male_names"]), "agent": dom["agent"]}
    for k in ("Subj", "subj", "poss", "obj", "Poss"):
        per[k] = _SLOT.sub(lambda m: names[m.group(1)], per[k])
    if per["Subj"].startswith("A ") and per["Subj"][2:3].lower() in "aeiou":
        per["Subj"] = "An " + per["Subj"][2:]  # "An athlete"
    per["Subj2"] = per["subj"][0].upper() + per["subj"][1:] if perspective != "first person" else "I"
    text = _CHOICE.sub(lambda m: m.group(1) if per["form"] == 0 else m.group(2), text)
    text = _introduce(text, per, lex["perspectives"][perspective]["Subj"])
    values = {**per, "good": dom["goods"][0], "good2": dom["goods"][1], "product": dom["product"], "seller": dom["seller"],
              "market": dom["market"], "activity": dom["activity"], "agent": dom["agent"], **slots}

    def slot(m):
        if m.group(1) not in values:
            raise KeyError(f"template slot {{{m.group(1)}}} has no value")
        return str(values[m.group(1)])

    out = _SLOT.sub(slot, text)
    return out[0].upper() + out[1:]


_PERSON = ("Subj", "subj", "Subj2", "poss", "Poss", "obj")


def _introduce(text: str, per: dict, subj_template: str) -> str:
    """A named third person (`{female}`, `{male}`) is named at the first mention: a text whose
    first reference to the person is a pronoun ("When his income rises ...") gets the name there
    ("When Omar's income rises ...")."""
    if "{female}" not in subj_template and "{male}" not in subj_template:
        return text
    first = next((m for m in _SLOT.finditer(text) if m.group(1) in _PERSON), None)
    if first is None or first.group(1) == "Subj":
        return text
    name = per["Subj"]
    named = {"subj": name, "Subj2": name, "obj": name, "poss": f"{name}'s", "Poss": f"{name}'s"}[first.group(1)]
    return text[:first.start()] + named + text[first.end():]


def fmt(value: float, decimals: int) -> str:
    return f"{value:,.{decimals}f}" if decimals else f"{round(value):,}"


def options_for(draw: Draw, decimals: int) -> list[tuple[str, float, str]] | None:
    """The correct option and three wrong ones (typical mistakes first, then near misses), all
    distinct after formatting and each clearly apart from the answer (by 1% of it and two units
    of the last decimal shown); None if that cannot be done."""
    right = fmt(draw.answer, decimals)
    seen = {right}
    wrong = []
    gap = max(2 * 10.0 ** -decimals, 0.01 * abs(draw.answer))
    negated = fmt(-draw.answer, decimals)
    for why, v in list(draw.mistakes.items()) + [(f"near miss ×{f:g}", draw.answer * f) for f in NEAR_MISSES]:
        if v is None or not math.isfinite(v):
            continue
        s = fmt(v, decimals)
        if s == negated:  # -x is never offered: where a quantity is read as a magnitude (an elasticity, "by how much"), it is right too
            continue
        if s not in seen and abs(v - draw.answer) >= gap:
            seen.add(s)
            wrong.append((s, v, why))
        if len(wrong) == 3:
            return [(right, draw.answer, "correct")] + wrong
    return None


def _round_robin_types(order: list[int], cs: list[tuple[dict, str, str]]) -> list[int]:
    """The shuffled combinations, taken one type at a time in turn: any number of questions
    splits evenly across an element's types (the paper compares Cobb-Douglas, Leontief, linear)."""
    by_type: dict[str, list[int]] = {}
    for i in order:
        by_type.setdefault(cs[i][0]["type"], []).append(i)
    queues = list(by_type.values())
    out = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def generate(elements: list[str], per_element: int, seed: int, taxonomy: dict[str, dict],
             combos_of: Callable[[str], list[tuple[dict, str, str]]] = combos) -> list[dict]:
    """`combos_of`: an element's (template, domain, perspective) combinations (default: the bundled
    templates'; a written template set's from written.py), filled, solved and balanced alike."""
    items = []
    for el in elements:
        spec = ELEMENTS[el]
        cs = combos_of(el)
        order = _round_robin_types(random.Random(f"{seed}/{el}/combos").sample(range(len(cs)), len(cs)), cs)
        n_types = {t["type"] for t, _, _ in cs}
        if not n_types <= set(spec.types):
            raise ValueError(f"{el}: template types {n_types} not solved by its solver")
        positions: list[int] = []
        for n in range(per_element):
            tmpl, domain, perspective = cs[order[n % len(cs)]]
            if not positions:  # blocks of 4: the correct option visits every position equally often
                positions = random.Random(f"{seed}/{el}/pos/{n}").sample(range(4), 4)
            pos = positions.pop()
            for attempt in range(50):
                rng = random.Random(f"{seed}/{el}/{n}/{attempt}")
                draw = spec.solve(rng, tmpl["type"])
                opts = options_for(draw, spec.decimals) if draw and math.isfinite(draw.answer) else None
                if opts:
                    break
            else:
                raise RuntimeError(f"{el}: no valid question after 50 draws (n={n})")
            wrong = opts[1:]
            ordered = wrong[:pos] + [opts[0]] + wrong[pos:]
            items.append({
                "id": f"steer-me/{el}/{n}", "setting": taxonomy[el]["setting"], "module": taxonomy[el]["module"],
                "element": el, "type": tmpl["type"], "domain": domain, "perspective": perspective, "template_id": tmpl["id"],
                "question": fill(tmpl["text"], draw.slots, domain, perspective, rng),
                "options": [o[0] for o in ordered], "correct_index": pos,
                "distractor_reasons": [o[2] for o in ordered],
                "params": draw.params, "solution": {"value": draw.answer, "formula": draw.formula},
                "generator_version": GENERATOR_VERSION,
            })
    return items
