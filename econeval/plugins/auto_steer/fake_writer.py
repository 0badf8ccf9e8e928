"""A deterministic writer for tests and pipeline checks (`--writer fake:w -M
respond=econeval.plugins.auto_steer.fake_writer:respond`): it reads the target from
`steer write`'s prompt and rewrites the template by word substitution. The target picks what it
does (`mode_of`): a faithful rewrite, or one of three mistakes the validator must refuse: a
labeled field dropped (into finance; a rewording's third variant), a number leaked in (into
gambling; a rewording's second variant), the perspective broken (into the third person male; a
rewording's fourth variant).
As a checker (any other prompt) it answers `A` to a multiple-choice question and `ANSWER: 1` to
a free-text one."""

from __future__ import annotations

import re

from ...benchmarks.steer_me.generator import lexicon

MODES = ("good", "drop-field", "leak-number", "wrong-perspective")
_FIELD = re.compile(r"\{[A-Za-z0-9_]+\}")


def mode_of(prompt: str) -> str:
    t = _target(prompt)
    if t["stage"] == "domain":
        return {"finance": "drop-field", "gambling": "leak-number"}.get(t["domain"], "good")
    if t["stage"] == "perspective":
        return "wrong-perspective" if t.get("perspective") == "male" else "good"
    return {2: "leak-number", 3: "drop-field", 4: "wrong-perspective"}.get(t["variant"], "good")


def _target(prompt: str) -> dict:
    m = re.search(r"set in the (.+?) domain", prompt) or re.search(r"[Kk]eep (?:the|its) domain \((.+?)\)", prompt)
    out: dict = {"domain": m.group(1) if m else None, "stage": "domain" if "so that it is set in" in prompt else
                 "perspective" if "in a new perspective" in prompt else "reword"}
    rule = prompt.split("perspective:", 1)[1].split("\n", 1)[0] if out["stage"] == "perspective" else ""
    if "first person" in rule:
        out["perspective"] = "first"
    elif "second person" in rule:
        out["perspective"] = "second"
    elif (n := re.search(r"a (woman|man) named (\w+)", rule)):
        out["perspective"], out["name"] = ("female" if n.group(1) == "woman" else "male"), n.group(2)
    elif (a := re.search(r"an unnamed (.+?), in the third", rule)):
        out["perspective"], out["agent"] = "anon", a.group(1)
    v = re.search(r"variant (\d+) of", prompt)
    out["variant"] = int(v.group(1)) if v else 0
    return out


def _domain_words(domain: str) -> list[str]:
    d = lexicon()["domains"][domain]
    return [d["market"], d["seller"], d["product"], d["goods"][0], d["goods"][1], d["activity"], d["agent"]]


def _to_domain(text: str, domain: str) -> str:
    lex = lexicon()["domains"]
    source = max(lex, key=lambda d: sum(text.count(w) for w in _domain_words(d)))
    if not any(w in text for w in _domain_words(source)):
        return f"In {lex[domain]['activity']}, {text[0].lower() + text[1:] if not text.startswith('I ') else text}"
    pairs = sorted(zip(_domain_words(source), _domain_words(domain)), key=lambda p: -len(p[0]))
    marks = {}
    for i, (a, b) in enumerate(pairs):  # two steps: a replacement is never replaced again
        text = text.replace(a, f"\x00{i}\x00")
        marks[f"\x00{i}\x00"] = b
    for k, b in marks.items():
        text = text.replace(k, b)
    return text


def _to_perspective(text: str, t: dict) -> str:
    p = t.get("perspective")
    if p == "second":
        subs = {"I": "you", "my": "your", "My": "Your", "me": "you", "myself": "yourself", "mine": "yours", "am": "are"}
    elif p == "anon":
        a = t["agent"]
        subs = {"I": f"the {a}", "my": f"the {a}'s", "My": f"The {a}'s", "me": f"the {a}", "myself": "itself", "mine": "theirs"}
    elif p in ("female", "male"):
        she, her, obj = ("she", "her", "her") if p == "female" else ("he", "his", "him")
        subs = {"I": she, "my": her, "My": her.capitalize(), "me": obj, "myself": obj + "self", "mine": her}
        text = re.sub(r"\bI\b", t["name"], text, count=1)
    else:
        return text
    out = re.sub(r"\b(I|my|My|me|myself|mine|am)\b", lambda m: subs.get(m.group(1), m.group(1)), text)
    return out[0].upper() + out[1:]


REWORDS = ("Consider this case.", "Picture the following.", "Think about the following.", "A short problem.")


def respond(prompt: str) -> str:
    if "question templates for an economics benchmark" not in prompt:  # a checker's question
        return "ANSWER: A" if "\nA. " in prompt else "ANSWER: 1"
    source = prompt.rsplit("Template:", 1)[1].strip().split("\n", 1)[0]
    t = _target(prompt)
    if t["stage"] == "domain":
        text = _to_domain(source, t["domain"])
    elif t["stage"] == "perspective":
        text = _to_perspective(source, t)
    else:
        text = f"{REWORDS[t['variant'] % len(REWORDS)]} {source}"
    mode = mode_of(prompt)
    if mode == "drop-field" and _FIELD.search(text):
        text = _FIELD.sub("some", text, count=1)
    elif mode == "leak-number" and _FIELD.search(text):
        text = _FIELD.sub("37", text, count=1)
    elif mode == "wrong-perspective":
        text += " You decide." if re.search(r"\b(I|my|me)\b", text) else " I ask."
    return f"Rewritten template: {text}"
