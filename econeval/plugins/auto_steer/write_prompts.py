"""auto-STEER's writer prompts (the paper's §3.2 style transfer and replication, re-implemented):
each stage's request to the writer model, how its reply is read (`extract`), and the decoding.
Their version (`PROMPT_VERSION`) and the sha256 of the prompts are part of a writer run's
settings: another version of either is another run.
"""

from __future__ import annotations

import random
import re
from typing import Any

from ...benchmarks.steer_me.generator import fill, lexicon, templates
from .validate import labeled_fields

PROMPT_VERSION = "steer-write/3"  # 2: a worked example in each prompt, the task restated after the template;
# 3: the completion style (the prompt ends where the rewritten template begins, one line)
BASE_PERSPECTIVE = "first person"
STAGES = ("domain", "perspective", "reword")
MAX_TOKENS, REPEAT_PENALTY = 200, 1.1
STYLES = ("chat", "completion")


def decoding(style: str) -> dict[str, Any]:
    """chat: the prompt as a user turn (the chat template), the reply read by `extract`; completion:
    the prompt ends with the label the worked example's rewriting follows, and the model continues
    it up to the end of the line (small models follow the pattern far better than the request)."""
    return {"sampling": "greedy", "max_tokens": MAX_TOKENS, "repeat_penalty": REPEAT_PENALTY, "style": style,
            "stop": ["\n"] if style == "completion" else [], "chat": style == "chat"}


INTRO = ("You rewrite question templates for an economics benchmark. A template is a question whose numbers are "
         "labeled fields in curly braces, filled in later. Do not answer the question: rewrite it.\n\n")
KEEP = ("Keep these labeled fields exactly as written, each in curly braces: {fields}. Add no other curly braces and "
        "write no numbers that the template does not have.\n")
# one worked example per stage (a template of no element's own wording), then the template, then the task restated
EXAMPLES = {
    "domain": ("Example. Template: I buy apples at a market, and my demand is {demand}. What is my consumer surplus when "
               "the price is {p}?\nSet in the medical domain: I buy vitamin supplements at the pharmacy, and my demand "
               "for them is {demand}. What is my consumer surplus when the price is {p}?\n\n"),
    "perspective": ("Example. Template: I buy vitamin supplements at the pharmacy, and my demand for them is {demand}. What is "
                    "my consumer surplus when the price is {p}?\nAbout a woman named Maria: Maria buys vitamin supplements at "
                    "the pharmacy, and her demand for them is {demand}. What is her consumer surplus when the price is {p}?\n\n"),
    "reword": ("Example. Template: Maria buys vitamin supplements at the pharmacy, and her demand for them is {demand}. What "
               "is her consumer surplus when the price is {p}?\nNew version: At her local drugstore, Maria purchases "
               "allergy tablets; her demand for them is {demand}. What consumer surplus does Maria get when the price is "
               "{p}?\n\n"),
}
TAIL = "Template: {source}\nReply with the rewritten template only, on one line, and nothing else."
# the completion style's ending: the template, then the label its rewriting follows in the example
COMPLETION_TAIL = "Template: {source}\n{label}:"
LABELS = {"domain": "Set in the {domain} domain", "perspective": "{perspective_label}", "reword": "New version"}
PERSPECTIVE_LABELS = {"first person": "In the first person", "second person": "In the second person",
                      "third person anonymous": "About an unnamed {agent}", "third person female": "About a woman named {name}",
                      "third person male": "About a man named {name}"}
PROMPTS = {
    "domain": INTRO + "Rewrite the template so that it is set in the {domain} domain: change the setting, the people "
                      "and the objects to ones of the {domain} domain (for example {examples}). Keep everything else: {perspective_rule} "
                      "Keep the economics and the question asked exactly the same.\n" + KEEP + "\n" + EXAMPLES["domain"] + TAIL,
    "perspective": INTRO + "Rewrite the template in a new perspective: {perspective_rule} Keep the domain ({domain}), "
                           "the setting, the objects, the economics and the question asked exactly the same.\n" + KEEP + "\n"
                           + EXAMPLES["perspective"] + TAIL,
    "reword": INTRO + "Write a new version of the template (variant {variant} of {variants}). Keep its domain "
                      "({domain}), its perspective ({perspective_rule}) the economics and the question asked, but change the "
                      "wording and the objects; for example, it could be about {hint}.\n" + KEEP + "\n" + EXAMPLES["reword"] + TAIL,
}
PERSPECTIVE_RULES = {
    "first person": "it is written in the first person (I, me, my).",
    "second person": "it is written in the second person, addressing the reader as you (you, your).",
    "third person anonymous": "it is about an unnamed {agent}, in the third person (the {agent}; never I, you, he or she).",
    "third person female": "it is about a woman named {name}, in the third person (she, her).",
    "third person male": "it is about a man named {name}, in the third person (he, him, his).",
}
# objects a rewording may turn to (a seeded one per variant, besides the lexicon's own)
HINTS = {
    "consumer goods": ("kitchen tables", "winter coats", "coffee makers", "sofas", "desk lamps"),
    "medical": ("blood tests", "hearing aids", "dental check-ups", "knee braces", "allergy medicine"),
    "finance": ("savings accounts", "mutual fund units", "insurance policies", "credit card plans", "retirement accounts"),
    "education": ("language classes", "exam preparation books", "school laptops", "music lessons", "lab kits"),
    "technology": ("smartwatches", "wireless headphones", "tablets", "game consoles", "web hosting plans"),
    "entertainment": ("theatre tickets", "board games", "video games", "festival passes", "music albums"),
    "environmental policy": ("heat pumps", "compost bins", "LED bulbs", "rain barrels", "electric scooters"),
    "politics": ("yard signs", "fundraising dinners", "campaign T-shirts", "radio ads", "town hall events"),
    "sports": ("football boots", "yoga mats", "bike helmets", "swimming lessons", "gym memberships"),
    "gambling": ("blackjack tables", "horse race bets", "slot machine tokens", "bingo cards", "sports bets"),
}
SLUG = {"first person": "first", "second person": "second", "third person anonymous": "anon", "third person female": "female",
        "third person male": "male"}


def slug(domain: str) -> str:
    return domain.replace(" ", "-")


def extract(reply: str) -> str:
    """The template in a writer's reply: what is between <template> tags if any; else, where the
    reply quotes sentences holding a labeled field, the longest of them (a reply that quotes the
    original question and then its rewriting); else its first line that is not a lead-in ("Here is
    the rewritten template:"), without a label ("Rewritten template:", "Set in the X domain:") or quotes."""
    m = re.search(r"<template>(.*?)(?:</template>|$)", reply, re.S | re.I)
    text = m.group(1) if m else reply
    quoted = [q.strip() for q in re.findall(r"[\"“]([^\"“”\n]*\{[A-Za-z0-9_]+\}[^\"“”\n]*)[\"”]", text)] if not m else []
    if quoted:
        text = max(quoted, key=len)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    while len(lines) > 1 and lines[0].rstrip().endswith(":") and "{" not in lines[0]:
        lines.pop(0)
    out = lines[0] if lines else ""
    out = re.sub(r"^(?:\*\*)?(?:rewritten template|new template|template|rewritten|new version|answer|variant \d+|"
                 r"set in the [a-z ]+ domain|about an? (?:wo)?man named \w+)(?:\*\*)?\s*:\s*(?:\*\*)?\s*", "", out, flags=re.I)
    return out.strip().strip("`").strip().strip('"“”').strip()


def gold_source(t: dict) -> tuple[str, str, str]:
    """The gold template as the writer sees it: rendered by the lexicon in its first domain and
    the first person (or its first perspective), labeled fields left as `{field}`."""
    lex = lexicon()
    domain = (t.get("domains") or list(lex["domains"]))[0]
    perspectives = t.get("perspectives") or list(lex["perspectives"])
    perspective = BASE_PERSPECTIVE if BASE_PERSPECTIVE in perspectives else perspectives[0]
    text = fill(t["text"], {f: "{" + f + "}" for f in labeled_fields(t["text"])}, domain, perspective, random.Random(t["id"]))
    return text, domain, perspective


def name_for(seed: int, key: str, perspective: str) -> str | None:
    """A named third person's name, drawn from the seed (None for the other perspectives)."""
    lex = lexicon()
    pool = {"third person female": lex["female_names"], "third person male": lex["male_names"]}.get(perspective)
    return random.Random(f"{seed}/name/{key}").choice(pool) if pool else None


def perspective_rule(perspective: str, domain: str, name: str | None) -> str:
    return PERSPECTIVE_RULES[perspective].format(agent=lexicon()["domains"][domain]["agent"], name=name)


def prompt_of(job: Any, variants: int, seed: int, style: str = "chat") -> str:
    """The request for one job (write_task.Job): the stage's prompt with the job's source, domain,
    perspective, the fields to keep and a seeded object to write about."""
    gold = next(t for t in templates()[job.element] if t["id"] == job.gold)
    fields = ", ".join("{" + f + "}" for f in sorted(labeled_fields(gold["text"])))
    dom = lexicon()["domains"][job.domain]
    hints = [*dom["goods"], dom["product"], *HINTS.get(job.domain, ())]
    hint = random.Random(f"{seed}/hint/{job.id}").choice(hints)
    text = PROMPTS[job.stage]
    if style == "completion":
        text = text[: text.rindex(TAIL)] + COMPLETION_TAIL.replace("{label}", LABELS[job.stage])
    label = PERSPECTIVE_LABELS[job.perspective].format(agent=dom["agent"], name=job.name)
    return _subst(text, perspective_label=label,
        domain=job.domain, examples=f"{dom['agent']}s, {dom['goods'][0]}, {dom['product']}", fields=fields or "none",
        perspective_rule=perspective_rule(job.perspective, job.domain, job.name), source=job.source,
        variant=job.variant + 1, variants=variants, hint=hint)


def _subst(text: str, **values: object) -> str:
    """The prompt with its {key}s given (one pass: a labeled field in a value or an example stays as written)."""
    return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), text)
