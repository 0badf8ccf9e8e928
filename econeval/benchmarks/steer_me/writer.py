"""`econeval steer write`: auto-STEER's template writing (the paper's §3.2), re-implemented with
a model of the user's: each hand-written gold template is style-transferred into each domain,
each of those into each perspective, and each of those reworded N times, every written template
validated mechanically (validate.py) before it is kept and before anything is written from it.

The stages, for a gold template of element E:

1. domain: the gold template rendered by the lexicon in its first domain and the first person
   (labeled fields left as `{field}`), rewritten into domain D;
2. perspective: each kept domain template rewritten into perspective P (the first person is the
   domain template itself; a named person gets a name drawn from the seed);
3. reword: each (D, P) template rewritten N times (`--per-template`), keeping domain, perspective,
   question and fields, changing words and objects (variant k of N; greedy decoding, so the
   variants differ by their prompts).

The folder (DIR): `writer.json` (the writer's identity, the prompts and their version, the seed,
the decoding settings, what was asked), `written.jsonl` (every request: its prompt, the reply,
the template read from it, kept or rejected with reasons, tokens and seconds), `templates/E.json`
(the kept templates, in the bundled templates' format), `manifest.json` (written, kept and
rejected per element and per rule, the time per kept template). Every file is written atomically
after each chunk of requests; the same command continues a folder (requests already answered are
not asked again), a different writer, prompt version, seed or decoding is refused.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterable

from ...errors import UsageError
from ...results import dumps, read_jsonl, write_atomic
from ...sampling import duration
from ...types import CHUNK, Generate
from .generator import GENERATOR_VERSION, fill, lexicon, templates
from .validate import RULE_TEXT, RULES, VALIDATOR_VERSION, Target, labeled_fields, validate

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


@dataclass(frozen=True)
class Job:
    """One request to the writer: which stage, from which gold template, into which (domain,
    perspective); `parent` is the job whose kept template it rewrites."""

    id: str
    stage: str
    element: str
    gold: str  # the gold template's id
    type: str
    domain: str
    perspective: str
    source: str
    source_domain: str
    name: str | None = None
    variant: int = 0
    parent: str | None = None


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
    lex = lexicon()
    pool = {"third person female": lex["female_names"], "third person male": lex["male_names"]}.get(perspective)
    return random.Random(f"{seed}/name/{key}").choice(pool) if pool else None


def perspective_rule(perspective: str, domain: str, name: str | None) -> str:
    return PERSPECTIVE_RULES[perspective].format(agent=lexicon()["domains"][domain]["agent"], name=name)


def prompt_of(job: Job, variants: int, seed: int, style: str = "chat") -> str:
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


def target_of(job: Job) -> Target:
    gold = next(t for t in templates()[job.element] if t["id"] == job.gold)
    return Target(gold=gold["text"], domain=job.domain, perspective=job.perspective, source=job.source, name=job.name,
                  source_domain=job.source_domain, reword=job.stage == "reword")


def template_id(job: Job) -> str:
    tag = {"domain": "d", "perspective": "p", "reword": f"r{job.variant + 1}"}[job.stage]
    return f"{job.gold}.{slug(job.domain)}.{SLUG[job.perspective]}.{tag}"


# ---- the folder -------------------------------------------------------------------------------
WRITER_FILE, WRITTEN_FILE, MANIFEST_FILE, TEMPLATES_DIR = "writer.json", "written.jsonl", "manifest.json", "templates"


def identity(writer: dict, seed: int, style: str = "chat") -> dict:
    """What must match for a folder to be continued: the writer, the prompts, the seed, the decoding."""
    return {"prompt_version": PROMPT_VERSION, "prompts_sha256": hashlib.sha256(dumps(PROMPTS)).hexdigest(),
            "decoding": decoding(style), "seed": seed, "writer": writer.get("identity", writer)}


def _load_records(out: Path) -> dict[str, dict]:
    path = out / WRITTEN_FILE
    return {r["id"]: r for r in read_jsonl(path, "written templates file")} if path.exists() else {}


def _select(elements: list[str]) -> list[tuple[str, dict]]:
    return [(el, t) for el in elements for t in templates()[el]]


def _domains_of(t: dict, domains: list[str] | None) -> list[str]:
    allowed = t.get("domains") or list(lexicon()["domains"])
    return [d for d in allowed if domains is None or d in domains]


def _perspectives_of(t: dict, perspectives: list[str] | None) -> list[str]:
    allowed = t.get("perspectives") or list(lexicon()["perspectives"])
    return [p for p in allowed if perspectives is None or p in perspectives]


def kept_text(rec: dict | None) -> str | None:
    return rec["template"] if rec and rec.get("kept") else None


def plan_stage(stage: str, elements: list[str], domains: list[str] | None, perspectives: list[str] | None,
               per_template: int, seed: int, records: dict[str, dict]) -> list[Job]:
    """The jobs of a stage, from the gold templates and the kept templates of the stage before."""
    jobs: list[Job] = []
    for el, t in _select(elements):
        src, src_domain, base = gold_source(t)
        for d in _domains_of(t, domains):
            dom_job = Job(id=f"domain/{t['id']}/{slug(d)}", stage="domain", element=el, gold=t["id"], type=t["type"], domain=d,
                          perspective=base, source=src, source_domain=src_domain)
            if stage == "domain":
                jobs.append(dom_job)
                continue
            dom_text = kept_text(records.get(dom_job.id))
            if dom_text is None:
                continue
            for p in _perspectives_of(t, perspectives):
                key = f"{t['id']}/{slug(d)}/{SLUG[p]}"
                name = name_for(seed, key, p)
                per_job = Job(id=f"perspective/{key}", stage="perspective", element=el, gold=t["id"], type=t["type"],
                              domain=d, perspective=p, source=dom_text, source_domain=d, name=name, parent=dom_job.id)
                if stage == "perspective":
                    if p != base:
                        jobs.append(per_job)
                    continue
                parent = dom_job if p == base else per_job
                base_text = kept_text(records.get(parent.id))
                if base_text is None:
                    continue
                for k in range(per_template):
                    jobs.append(Job(id=f"reword/{key}/{k + 1}", stage="reword", element=el, gold=t["id"], type=t["type"],
                                    domain=d, perspective=p, source=base_text, source_domain=d, name=name, variant=k,
                                    parent=parent.id))
    return jobs


def most_jobs(elements: list[str], domains: list[str] | None, perspectives: list[str] | None, per_template: int,
              seed: int, records: dict[str, dict]) -> int:
    """The jobs still to write if every template written from now on were kept (each stage's
    sources then all exist): the upper bound of a writer run."""
    assumed = dict(records)
    total = 0
    for stage in STAGES:
        jobs = [j for j in plan_stage(stage, elements, domains, perspectives, per_template, seed, assumed) if j.id not in records]
        total += len(jobs)
        assumed.update({j.id: {"kept": True, "template": j.source} for j in jobs if j.id not in assumed})
    return total


def projection(backend, jobs: list[Job], most: int, per_template: int, seed: int, style: str) -> dict | None:
    """The writer run's time before its first request, as a run's: the first stage's requests
    (a sample of three chunks) run dry through the backend's own projection; low: the jobs of
    this stage, each reply a token long; high: every job to the end, each using its whole
    budget, as if every template were kept. None where the backend cannot tell (a served model)."""
    if not jobs:
        return None
    dec = decoding(style)
    reqs = [Generate(prompt=prompt_of(j, per_template, seed, style), max_tokens=MAX_TOKENS, repeat_penalty=REPEAT_PENALTY,
                     chat=dec["chat"], stop=tuple(dec["stop"])) for j in jobs[:3 * CHUNK]]
    doc = backend.project({"write": [reqs[i:i + CHUNK] for i in range(0, len(reqs), CHUNK)]}, {}, seed)
    if doc is None:
        return None
    got = doc["tasks"]["write"]
    low, high = got["seconds_low"] / len(reqs) * len(jobs), got["seconds_high"] / len(reqs) * most
    return {"low": round(low, 1), "high": round(high, 1), "jobs_now": len(jobs), "jobs_at_most": most,
            "cost_model": doc.get("cost_model"), "method": "the first stage's requests (up to three chunks) run dry through "
            "the backend's scheduler, each call costed by a model of this device measured now; low: this stage's jobs, "
            "each reply one token; high: every job to come if every template were kept, each reply its whole budget"}


def _record(job: Job, prompt: str, reply: Any, seconds: float, seen: set[str]) -> dict:
    text = extract(reply.text or "") if reply.error is None else ""
    verdict = validate(text, target_of(job))
    norm = " ".join(text.split()).lower()
    if verdict.ok and norm in seen:
        verdict.add("unchanged", "identical to a template already kept")
    return {**asdict(job), "template_id": template_id(job), "validator": VALIDATOR_VERSION, "prompt": prompt,
            "prompt_sha256": hashlib.sha256(prompt.encode()).hexdigest(), "reply": reply.text, "error": reply.error,
            "finish": reply.finish, "template": text, "kept": verdict.ok, "reasons": verdict.as_list(),
            "n_prompt_tokens": reply.n_prompt_tokens, "n_tokens": reply.n_tokens, "seconds": round(seconds, 3)}


def revalidated(records: dict[str, dict]) -> dict[str, dict]:
    """Records validated by an older validator, read and judged again (no model needed); the
    records written from a template that is no longer kept are dropped (written again, from what is)."""
    if all(r.get("validator") == VALIDATOR_VERSION for r in records.values()):
        return records
    fields = [f for f in Job.__dataclass_fields__]
    out: dict[str, dict] = {}
    seen: set[str] = set()
    for stage in STAGES:
        for rid, r in records.items():
            if r["stage"] != stage or (r.get("parent") and not (out.get(r["parent"]) or {}).get("kept")):
                continue
            job = Job(**{k: r[k] for k in fields})
            reply = SimpleNamespace(text=r.get("reply"), error=r.get("error"), finish=r.get("finish"),
                                    n_prompt_tokens=r.get("n_prompt_tokens"), n_tokens=r.get("n_tokens"))
            new = _record(job, r["prompt"], reply, r.get("seconds") or 0.0, seen)
            out[rid] = new
            if new["kept"]:
                seen.add(" ".join(new["template"].split()).lower())
    return out


def _save(out: Path, records: dict[str, dict]) -> None:
    write_atomic(out / WRITTEN_FILE, b"".join(dumps(r, pretty=False) + b"\n" for r in records.values()))


def kept_templates(records: Iterable[dict]) -> dict[str, list[dict]]:
    """The kept templates per element, in the bundled templates' format (one domain and one
    perspective each), the domain stage's only where its perspective has no template of its own
    (the first person: the domain template is the (D, first person) template)."""
    out: dict[str, list[dict]] = {}
    for r in records:
        if not r.get("kept"):
            continue
        out.setdefault(r["element"], []).append({
            "id": r["template_id"], "type": r["type"], "text": r["template"], "domains": [r["domain"]],
            "perspectives": [r["perspective"]], "gold": r["gold"], "stage": r["stage"],
            **({"name": r["name"]} if r.get("name") else {})})
    return out


def manifest(records: list[dict]) -> dict:
    """Written, kept and rejected per element and per rule (a template rejected by several rules
    counts under each), per stage, and the writer's time per kept template."""
    def counts(rs: list[dict]) -> dict:
        by_rule = {rule: sum(1 for r in rs if any(x["rule"] == rule for x in r["reasons"])) for rule in RULES}
        return {"written": len(rs), "kept": sum(r["kept"] for r in rs), "rejected": sum(not r["kept"] for r in rs),
                "rejected_by_rule": {k: v for k, v in by_rule.items() if v}}

    seconds = sum(r.get("seconds") or 0.0 for r in records)
    kept = sum(r["kept"] for r in records)
    elements = sorted({r["element"] for r in records})
    return {"total": counts(records),
            "per_stage": {s: counts([r for r in records if r["stage"] == s]) for s in STAGES},
            "per_element": {el: counts([r for r in records if r["element"] == el]) for el in elements},
            "writer_seconds": round(seconds, 1),
            "seconds_per_kept_template": round(seconds / kept, 2) if kept else None,
            "tokens_generated": sum(r.get("n_tokens") or 0 for r in records),
            "rules": RULE_TEXT}


def write_outputs(out: Path, records: dict[str, dict]) -> dict:
    _save(out, records)
    kept = kept_templates(records.values())
    tdir = out / TEMPLATES_DIR
    tdir.mkdir(exist_ok=True)
    for el, ts in kept.items():
        write_atomic(tdir / f"{el}.json", dumps({"element": el, "written": True, "templates": ts}))
    for stale in tdir.glob("*.json"):
        if stale.stem not in kept:
            stale.unlink()
    man = manifest(list(records.values()))
    write_atomic(out / MANIFEST_FILE, dumps(man))
    return man


def run(backend, writer: dict, out: Path, elements: list[str], domains: list[str] | None, perspectives: list[str] | None,
        per_template: int, seed: int, say: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True),
        chunk: int = CHUNK, argv: list[str] | None = None, style: str = "chat") -> dict:
    """Write (or continue writing) the folder; returns the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    ident = identity(writer, seed, style)
    meta_path = out / WRITER_FILE
    if meta_path.exists():
        try:
            prior = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"{meta_path} cannot be read ({type(exc).__name__})") from None
        if prior.get("identity") != ident:
            diff = sorted(k for k in ident if (prior.get("identity") or {}).get(k) != ident[k])
            raise UsageError(f"{out} was written with another {', '.join(diff)}",
                             hint="continue it with the same writer, seed and prompt version, or give a new --out")
        asked = prior.get("asked", [])
    else:
        asked = []
    asked.append({"elements": elements, "domains": domains, "perspectives": perspectives, "per_template": per_template,
                  "argv": argv})
    write_atomic(meta_path, dumps({
        "what": "auto-STEER templates written by econeval steer write (the paper's protocol re-implemented with the user's "
                "writer model; not the authors' data)", "identity": ident, "prompts": PROMPTS, "perspective_rules": PERSPECTIVE_RULES,
        "completion_style": {"ending": COMPLETION_TAIL, "labels": LABELS, "perspective_labels": PERSPECTIVE_LABELS},
        "generator_version": GENERATOR_VERSION, "writer_info": writer, "asked": asked}))
    records = revalidated(_load_records(out))
    first = next((js for js in ([j for j in plan_stage(s, elements, domains, perspectives, per_template, seed, records)
                                 if j.id not in records] for s in STAGES) if js), [])
    proj = projection(backend, first, most_jobs(elements, domains, perspectives, per_template, seed, records),
                      per_template, seed, style)
    if proj is not None:
        say(f"econeval steer write: projected {duration(proj['low'])} to {duration(proj['high'])} "
            f"({proj['jobs_now']} templates to write in the {first[0].stage} stage, at most {proj['jobs_at_most']} in all "
            f"if every one is kept; measured now on this machine)")
        written = json.loads(meta_path.read_text(encoding="utf-8"))
        write_atomic(meta_path, dumps({**written, "projection": proj}))
    for stage in STAGES:
        jobs = [j for j in plan_stage(stage, elements, domains, perspectives, per_template, seed, records) if j.id not in records]
        if not jobs:
            continue
        seen = {" ".join(r["template"].split()).lower() for r in records.values() if r["kept"]} | \
            {" ".join(j.source.split()).lower() for j in jobs}
        say(f"econeval steer write: {stage} stage, {len(jobs)} templates to write")
        t_stage = time.monotonic()
        for i in range(0, len(jobs), chunk):
            part = jobs[i:i + chunk]
            prompts = [prompt_of(j, per_template, seed, style) for j in part]
            dec = decoding(style)
            reqs = [Generate(prompt=p, max_tokens=MAX_TOKENS, repeat_penalty=REPEAT_PENALTY, chat=dec["chat"], stop=tuple(dec["stop"]))
                    for p in prompts]
            t0 = time.monotonic()
            replies = backend.generate(reqs)
            each = (time.monotonic() - t0) / len(part)
            for j, p, rep in zip(part, prompts, replies):
                rec = _record(j, p, rep, each, seen)
                records[j.id] = rec
                if rec["kept"]:
                    seen.add(" ".join(rec["template"].split()).lower())
            write_outputs(out, records)
            done = i + len(part)
            rate = (time.monotonic() - t_stage) / done
            kept = sum(records[j.id]["kept"] for j in jobs[:done])
            say(f"econeval steer write: {stage} {done}/{len(jobs)} written, {kept} kept"
                + (f", about {rate * (len(jobs) - done):.0f} s left in this stage" if done < len(jobs) else ""))
    return write_outputs(out, records)

