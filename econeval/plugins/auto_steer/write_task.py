"""`econeval steer write`'s task: auto-STEER's template writing (the paper's §3.2), re-implemented
with a model of the user's, as a task the API runs into an ordinary run folder (its lock,
resume, interruption, projection, progress, `econeval view` and the verified reader come with it).

An item is one gold template of element E in one domain D; its requests are three stages:

1. `domain/D`: the gold template rendered by the lexicon in its first domain and the first person
   (labeled fields left as `{field}`), rewritten into domain D;
2. `perspective/P`: the kept domain template rewritten into each perspective P (the first person
   is the domain template itself; a named person gets a name drawn from the seed);
3. `reword/P/k`: each kept (D, P) template rewritten N times (`per_template`), keeping domain,
   perspective, question and fields, changing words and objects (variant k of N; greedy
   decoding, so the variants differ by their prompts).

Every reply is read (`extract`) and validated (validate.py) before it is kept, and nothing is
written from a template that was not kept: which requests a stage sends is a pure function of
the item's earlier replies, so the verified reader re-derives every verdict from the stored
replies. A template identical to the item's source or to one of its templates already kept is
refused as `unchanged`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterator

from ...benchmarks.steer_me.generator import GENERATOR_VERSION, covered, lexicon, templates
from ...errors import UsageError
from ...results import dumps
from ...tables import Metric
from ...types import Generate, Prepared, Task, TaskOption
from .validate import RULE_TEXT, RULES, VALIDATOR_VERSION, Target, validate
from .write_prompts import (BASE_PERSPECTIVE, MAX_TOKENS, PROMPT_VERSION, PROMPTS, REPEAT_PENALTY, SLUG, STAGES, STYLES, decoding,
                            extract, gold_source, name_for, prompt_of, slug)

TASK = "auto-steer-write"
PER_TEMPLATE_MAX = 100


@dataclass(frozen=True)
class Job:
    """One request to the writer: which stage, from which gold template, into which (domain,
    perspective); `source` is the text it rewrites."""

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


def template_id(job: Job) -> str:
    tag = {"domain": "d", "perspective": "p", "reword": f"r{job.variant + 1}"}[job.stage]
    return f"{job.gold}.{slug(job.domain)}.{SLUG[job.perspective]}.{tag}"


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def choose(value: str, known: list[str], what: str, option: str) -> list[str] | None:
    """A comma-separated option value checked against the known values; None: all."""
    got = [v.strip() for v in str(value).split(",") if v.strip()]
    if not got or got == ["all"]:
        return None
    unknown = [v for v in got if v not in known]
    if unknown:
        raise UsageError(f"unknown {what}: {', '.join(unknown)}", hint=f"{option}: {what}s are {', '.join(known)}")
    return list(dict.fromkeys(got))


def per_template_of(value: Any) -> int:
    try:
        n = int(str(value))
    except ValueError:
        n = -1
    if not 0 <= n <= PER_TEMPLATE_MAX:
        raise UsageError(f"per-template must be a whole number from 0 to {PER_TEMPLATE_MAX}, not {value!r}")
    return n


def _item(t: dict, element: str, domain: str, perspectives: list[str], seed: int, index: int) -> dict:
    src, src_domain, base = gold_source(t)
    names = {p: name_for(seed, f"{t['id']}/{slug(domain)}/{SLUG[p]}", p) for p in perspectives}
    return {"id": f"auto-steer/{t['id']}/{slug(domain)}", "n": index, "element": element, "gold": t["id"], "type": t["type"],
            "domain": domain, "base": base, "source": src, "source_domain": src_domain, "perspectives": perspectives,
            "names": {p: n for p, n in names.items() if n}}


def jobs(item: dict, outputs: dict, variants: int) -> Iterator[tuple[str, Job, dict | None]]:
    """Each job of the item whose source is known (the domain job; a perspective's once the domain
    template is kept; a rewording's once its (D, P) template is kept), in order, with the verdict
    on its reply where the reply is in `outputs`."""
    seen = {_norm(item["source"])}

    def judged(name: str, job: Job) -> tuple[str, Job, dict | None]:
        if name not in outputs:
            return name, job, None
        text = extract(outputs[name] if isinstance(outputs[name], str) else "")
        verdict = validate(text, Target(gold=_gold_text(job), domain=job.domain, perspective=job.perspective, source=job.source,
                                        name=job.name, source_domain=job.source_domain, reword=job.stage == "reword"))
        if verdict.ok and _norm(text) in seen:
            verdict.add("unchanged", "identical to the template's source or to a template already kept")
        if verdict.ok:
            seen.add(_norm(text))
        return name, job, {"request": name, "stage": job.stage, "perspective": job.perspective, "person": job.name,
                           "variant": job.variant + 1 if job.stage == "reword" else None, "template_id": template_id(job),
                           "template": text, "kept": verdict.ok, "reasons": verdict.as_list()}

    common = {"element": item["element"], "gold": item["gold"], "type": item["type"], "domain": item["domain"]}
    key = f"{item['gold']}/{slug(item['domain'])}"
    dom = judged(f"domain/{slug(item['domain'])}", Job(id=f"domain/{key}", stage="domain", perspective=item["base"], source=item["source"],
                               source_domain=item["source_domain"], **common))
    yield dom
    if not (dom[2] and dom[2]["kept"]):
        return
    bases: dict[str, dict | None] = {}
    for p in item["perspectives"]:
        if p == item["base"]:
            bases[p] = dom[2]
            continue
        step = judged(f"perspective/{SLUG[p]}", Job(id=f"perspective/{key}/{SLUG[p]}", stage="perspective", perspective=p,
                                                    source=dom[2]["template"], source_domain=item["domain"],
                                                    name=item["names"].get(p), **common))
        bases[p] = step[2]
        yield step
    for p in item["perspectives"]:
        base = bases[p]
        if not (base and base["kept"]):
            continue
        for k in range(variants):
            yield judged(f"reword/{SLUG[p]}/{k + 1}", Job(id=f"reword/{key}/{SLUG[p]}/{k + 1}", stage="reword", perspective=p,
                                                          source=base["template"], source_domain=item["domain"],
                                                          name=item["names"].get(p), variant=k, **common))


def _gold_text(job: Job) -> str:
    return next(t["text"] for t in templates()[job.element] if t["id"] == job.gold)


def _counts(recs: list[dict]) -> dict:
    by_rule = {rule: sum(1 for r in recs if any(x["rule"] == rule for x in r["reasons"])) for rule in RULES}
    kept = sum(r["kept"] for r in recs)
    return {"written": len(recs), "kept": kept, "rejected": len(recs) - kept, "rejected_by_rule": {k: v for k, v in by_rule.items() if v}}


class WriteTemplates(Task):
    """auto-STEER's writer stages as one multi-stage task (run by `econeval steer write`)."""

    name = TASK
    suite = "auto-steer"
    benchmark = "auto-steer"
    in_suites = False
    prompt_version = PROMPT_VERSION
    description = "auto-STEER's writer: gold templates style-transferred into domains and perspectives, then reworded"
    stages = 3
    options = (
        TaskOption("elements", "all", "element slugs, comma-separated, or all covered ones"),
        TaskOption("domains", "all", "the domains to write into, comma-separated (default: each template's own)"),
        TaskOption("perspectives", "all", "the perspectives to write into, comma-separated (default: each template's own)"),
        TaskOption("per_template", "1", f"rewordings of each (domain, perspective) template, 0 to {PER_TEMPLATE_MAX}"),
        TaskOption("style", "chat", "chat: the prompt as a user turn; completion: the prompt ends where the rewritten template "
                                    "begins and the model continues the line", choices=STYLES),
    )
    metrics = (Metric("written", count=True), Metric("kept", count=True), Metric("kept share"))
    item_metrics = ()
    labels = ("element", "domain")
    group_field = "element"
    answer_field = "kept"

    def prepare(self, ctx) -> Prepared:
        opts = ctx.options_for(self)
        lex = lexicon()
        elements = choose(opts["elements"], covered(), "element", "--element") or covered()
        domains = choose(opts["domains"], list(lex["domains"]), "domain", "--domain")
        perspectives = choose(opts["perspectives"], list(lex["perspectives"]), "perspective", "--perspective")
        variants, style = per_template_of(opts["per_template"]), opts["style"]
        seed = ctx.seed_for(self)
        items: list[dict] = []
        for el in elements:
            for t in templates()[el]:
                pers = [p for p in (t.get("perspectives") or list(lex["perspectives"])) if perspectives is None or p in perspectives]
                for d in t.get("domains") or list(lex["domains"]):
                    if domains is None or d in domains:
                        items.append(_item(t, el, d, pers, seed, len(items)))
        if not items:
            raise UsageError("no gold template has the domains and perspectives asked for", hint="`econeval steer elements` lists them")
        settings = {"prompt_version": PROMPT_VERSION, "prompts_sha256": hashlib.sha256(dumps(PROMPTS)).hexdigest(),
                    "decoding": decoding(style), "validator": VALIDATOR_VERSION, "generator_version": GENERATOR_VERSION,
                    "base_perspective": BASE_PERSPECTIVE}
        return Prepared(items=items, settings=settings, state={"variants": variants, "style": style, "seed": seed})

    def requests(self, item, prep, outputs):
        dec = decoding(prep.state["style"])
        return {name: Generate(prompt=prompt_of(job, prep.state["variants"], prep.state["seed"], prep.state["style"]),
                               max_tokens=MAX_TOKENS, repeat_penalty=REPEAT_PENALTY, chat=dec["chat"], stop=tuple(dec["stop"]))
                for name, job, _ in jobs(item, outputs, prep.state["variants"])}

    def score(self, item, outputs, prep):
        written = [rec for _, _, rec in jobs(item, outputs, prep.state["variants"]) if rec is not None]
        return {"element": item["element"], "gold": item["gold"], "type": item["type"], "domain": item["domain"],
                "templates": written, "written": len(written), "kept": sum(r["kept"] for r in written)}

    def aggregate(self, records, prep):
        flat = [{**t, "element": r["element"]} for r in records for t in r["templates"]]
        return {"table": "auto-STEER written templates (econeval re-implementation)",
                "written": _counts(flat),
                "per_stage": {s: _counts([t for t in flat if t["stage"] == s]) for s in STAGES},
                "per_element": {el: _counts([t for t in flat if t["element"] == el]) for el in sorted({t["element"] for t in flat})},
                "rules": RULE_TEXT}

    def headline(self, result):
        w = result["written"]
        return {"written": w["written"], "kept": w["kept"], "kept share": w["kept"] / w["written"] if w["written"] else None}
