"""`econeval steer check`'s task: auto-STEER's AI double-check (the paper's Figure 1),
re-implemented as a task the API runs into an ordinary run folder. Each kept template of a
writer folder is filled with drawn values (the same solvers and distractors as every question),
a checker model solves each question twice, as multiple choice and as free text, and its answers
are compared with the closed-form answer; the templates the checker disagrees with are flagged
for a person (written.py decides with the threshold; review_page.py shows them).

The checker's agreement on the gold templates of the same elements (filled the same way) is
measured beside it: a weak checker disagrees with good templates too, and that rate says how much
a flag means.

The task reads the set it checks from a snapshot file (`-T templates=FILE`, written by `steer
check` into the check's own run folder), never from the writer folder itself: templates edited
after a check are another set, and the check's folder stays what it checked.
"""

from __future__ import annotations

import re
from pathlib import Path

from ... import data
from ...benchmarks.steer_me import BENCHMARK, LETTERS, free_text_correct, letter_of, marked_letter, number_from_text
from ...benchmarks.steer_me.generator import combos, generate
from ...errors import UsageError
from ...results import read_json
from ...types import Generate, Prepared, Task, TaskOption
from ...tables import Metric

TASK = "auto-steer-check"
CHECK_VERSION = "steer-check/2"  # 2: a reply that echoes the option list is not read as the option it starts with
MC_PROMPT = ("Solve this economics question. Work it out briefly, then give the letter of the correct option after "
             "'ANSWER:'.\n\nQuestion: {question}\n{options}")
FT_PROMPT = ("Solve this economics question. Work it out step by step, then give the final answer as a number after "
             "'ANSWER:'.\n\nQuestion: {question}")
SNAPSHOT_LIMIT = 64 << 20


def options_text(options: list[str]) -> str:
    return "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))


def mc_letter(text: str, options: list[str]) -> int | None:
    """The option the reply chose: the letter after its last ANSWER marker; else, its lines that
    repeat the option list set aside (a reply that echoes "A. 12.5" has not chosen A), the letter
    it opens with or names as the answer."""
    letters = LETTERS[:len(options)]
    letter = marked_letter(text or "", letters)
    if letter is None:
        echoed = {f"{LETTERS[i]}. {o}".lower() for i, o in enumerate(options)} | \
            {f"{LETTERS[i]}) {o}".lower() for i, o in enumerate(options)}
        rest = "\n".join(ln for ln in (text or "").splitlines() if " ".join(ln.split()).lower() not in echoed)
        letter = letter_of(rest.strip(), letters)
    return None if letter is None else LETTERS.index(letter)


def load_snapshot(path: str) -> dict[str, list[dict]]:
    """The set a check runs on: {element: [template, ...]}, as `steer check` wrote it (written.py
    checked every template when it read the writer folder)."""
    try:
        doc = read_json(Path(path))
    except (OSError, ValueError) as exc:
        raise UsageError(f"the checked set {path} cannot be read ({getattr(exc, 'strerror', None) or type(exc).__name__})") from None
    if not (isinstance(doc, dict) and isinstance(doc.get("templates"), dict)):
        raise UsageError(f"the checked set {path} is not one `econeval steer check` writes")
    return doc["templates"]


def taxonomy() -> dict[str, dict]:
    """STEER-ME's elements (their setting and module), from its data package."""
    return {r["element"]: r for r in data.load(BENCHMARK, "taxonomy.jsonl")}


def _questions(element: str, template: dict, n: int, seed: int, tax: dict) -> list[dict]:
    return generate([element], n, seed, tax, combos_of=lambda _e: [(template, template["domains"][0], template["perspectives"][0])])


def verdict(q: dict, mc: str, ft: str) -> dict:
    """One question's two answers against the closed form."""
    chosen = mc_letter(mc, q["options"])
    value = number_from_text(ft or "")
    gold = q["solution"]["value"]
    others = [float(o.replace(",", "")) for i, o in enumerate(q["options"]) if i != q["correct_index"]]
    return {"mc_choice": chosen, "mc_agrees": chosen == q["correct_index"], "ft_value": value,
            "ft_agrees": free_text_correct(value, gold, others)}


class CheckTemplates(Task):
    """auto-STEER's double-check as a task (run by `econeval steer check`)."""

    name = TASK
    suite = "auto-steer"
    benchmark = "auto-steer"
    in_suites = False
    prompt_version = CHECK_VERSION
    description = "auto-STEER's double-check: a checker model solves questions filled from each written template"
    options = (
        TaskOption("templates", None, "the set to check (the snapshot `econeval steer check` writes)", kind="path"),
        TaskOption("questions", "2", "questions filled per template, 1 to 50"),
        TaskOption("tokens", "256", "the checker's token budget per answer, 8 to 8192"),
    )
    metrics = (Metric("agreement"), Metric("mc agreement"), Metric("ft agreement"))
    item_metrics = ()
    labels = ("element", "kind")
    group_field = "element"
    answer_field = "agreement"

    def prepare(self, ctx) -> Prepared:
        opts = ctx.options_for(self)
        if not opts["templates"]:
            raise UsageError(f"{TASK} needs -T templates=FILE (`econeval steer check` writes it)")
        n, tokens = _bounded(opts["questions"], "questions", 1, 50), _bounded(opts["tokens"], "tokens", 8, 8192)
        seed, tax = ctx.seed_for(self), taxonomy()
        items = []
        for el, ts in load_snapshot(opts["templates"]).items():
            for t in ts:
                items.append({"id": f"check/{t['id']}", "kind": "written", "element": el, "template_id": t["id"], "text": t["text"],
                              "questions": _questions(el, t, n, seed, tax)})
            items.append({"id": f"check/gold/{el}", "kind": "gold", "element": el,
                          "questions": generate([el], n, seed, tax, combos_of=combos)})
        return Prepared(items=items, settings={"check_version": CHECK_VERSION, "prompts": {"multiple_choice": MC_PROMPT,
                                                                                           "free_text": FT_PROMPT}},
                        state={"tokens": tokens})

    def requests(self, item, prep, outputs):
        out = {}
        for i, q in enumerate(item["questions"], 1):
            out[f"mc/{i}"] = Generate(prompt=MC_PROMPT.format(question=q["question"], options=options_text(q["options"])),
                                      max_tokens=prep.state["tokens"], chat=True)
            out[f"ft/{i}"] = Generate(prompt=FT_PROMPT.format(question=q["question"]), max_tokens=prep.state["tokens"], chat=True)
        return out

    def score(self, item, outputs, prep):
        vs = [verdict(q, _text(outputs, f"mc/{i}"), _text(outputs, f"ft/{i}")) for i, q in enumerate(item["questions"], 1)]
        mc, ft = _share(v["mc_agrees"] for v in vs), _share(v["ft_agrees"] for v in vs)
        return {"element": item["element"], "kind": item["kind"], "verdicts": vs, "mc_agreement": mc, "ft_agreement": ft,
                "agreement": (mc + ft) / 2}

    def aggregate(self, records, prep):
        return {"table": "auto-STEER double-check (econeval re-implementation)",
                "written": summary([r for r in records if r["kind"] == "written"]),
                "gold": summary([r for r in records if r["kind"] == "gold"])}

    def headline(self, result):
        w = result["written"]
        return {"agreement": w["agreement"], "mc agreement": w["mc_agreement"], "ft agreement": w["ft_agreement"]}


def summary(records: list[dict]) -> dict:
    """Agreement over every question of these templates (None over none), with their counts."""
    vs = [v for r in records for v in r["verdicts"]]
    if not vs:
        return {"templates": len(records), "questions": 0, "agreement": None, "mc_agreement": None, "ft_agreement": None}
    mc, ft = _share(v["mc_agrees"] for v in vs), _share(v["ft_agrees"] for v in vs)
    return {"templates": len(records), "questions": len(vs), "agreement": (mc + ft) / 2, "mc_agreement": mc, "ft_agreement": ft}


def _share(flags) -> float:
    flags = list(flags)
    return sum(map(bool, flags)) / len(flags)


def _text(outputs: dict, name: str) -> str:
    v = outputs.get(name)
    return v if isinstance(v, str) else ""


def _bounded(value, what: str, lo: int, hi: int) -> int:
    if not re.fullmatch(r"\d+", str(value)) or not lo <= int(value) <= hi:
        raise UsageError(f"--{what} must be a whole number from {lo} to {hi}, not {value!r}")
    return int(value)
