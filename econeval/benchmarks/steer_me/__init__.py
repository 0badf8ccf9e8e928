"""STEER-ME (Raman et al., 2025): microeconomics multiple choice. The released question data is
not reachable, so econeval generates its own questions (generator.py and solvers.py here, a
re-implementation of auto-STEER, labelled as such) and scores them with the authors' metric definitions.

Adaptations (`--adaptation`): direct (default), cot-shown, cot-hidden (0-CoT: reasoning first,
then the letter with the options shown), free-text. `--car` replaces one option per question
with "No other option is correct." in the paper's exact 1/K balance. Prompts (`-T prompts=`):
the authors' released `open2025` set by default (prompts.py), `econeval1` for econeval's own.
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path
from typing import Any

from ... import data, registry
from ...errors import UsageError
from ...metrics import binned_ece, brier, ece, ece_bin, mean, normalized_accuracy, spread
from ...results import read_jsonl
from ...tables import Metric
from ...types import JUDGE, MODEL, Generate, OptionLogprobs, Prepared, Task, TaskOption, call_info
from . import prompts as P
from .generator import GENERATOR_VERSION, covered, generate
from .orders import MAX_PERMUTE, across_orders, car_over_orders, limited, with_orders
from .values import free_text_gold, option_values
from .values import to_float as _to_float

BENCHMARK = "steer-me"
LETTERS = "ABCDEFGHIJ"
NOTA = "No other option is correct."
BUNDLE_SEED, BUNDLE_PER_ELEMENT = 2025, 100
ADAPTATIONS = ("direct", "cot-shown", "cot-hidden", "free-text")
SHOT_POOL_SEED, SHOT_POOL_PER_ELEMENT = BUNDLE_SEED + 1, 20  # the bundled set's few-shot pool: other questions


def taxonomy_rows(src: Path) -> list[dict]:
    tax = json.loads((src / "taxonomy.json").read_text(encoding="utf-8"))
    return [{"element": e["element"], "name": e["name"], "setting": f"{s['number']} {s['name']}",
             "module": f"{m['number']} {m['name']}", "appendix": e["appendix"]}
            for s in tax["settings"] for m in s["modules"] for e in m["elements"]]


def build(src: Path) -> dict[str, list[dict]]:
    rows = taxonomy_rows(src)
    tax = {r["element"]: r for r in rows}
    elements = [r["element"] for r in rows if r["element"] in covered()]
    return {"taxonomy.jsonl": rows, "questions.jsonl": generate(elements, BUNDLE_PER_ELEMENT, BUNDLE_SEED, tax)}


def _tables(runs):
    from .tables import paper_tables

    return paper_tables(runs)


registry.benchmark(BENCHMARK, build, tables=_tables, commands="econeval.benchmarks.steer_me.commands:steer")


# ---- reading answers ----------------------------------------------------------------------
# The forms the authors' package reads (`parse_letter`): a reply that starts with a letter, bold or
# bracketed or not (`B`, ` B.`, `(B)`, `**B**`, `B, because`), else the last "answer is B",
# "Answer: option C", "The answer is **C**." — capital letters only, and only a valid letter counts.
_OPENING = re.compile(r"\s*(?:\*\*)?\(?\s*([A-Z])\s*(?:[).:,\s]|\*\*|$)")
_ANSWER_AT = re.compile(r"(?:answer|Answer|ANSWER)\s*(?:is|:)?\s*(?:option\s*)?\(?\*{0,2}([A-Z])\b")


def letter_of(text: str, letters: tuple[str, ...] | str) -> str | None:
    """The valid letter the reply commits to: its opening letter, else its last answer marker's."""
    m = _OPENING.match(text or "")
    if m and m.group(1) in letters:
        return m.group(1)
    return marked_letter(text, letters)


def marked_letter(text: str, letters: tuple[str, ...] | str) -> str | None:
    """The valid letter of the reply's last answer marker ("answer is B", "ANSWER: C")."""
    marked = [x for x in _ANSWER_AT.findall(text or "") if x in letters]
    return marked[-1] if marked else None


def letter_from_text(text: str, k: int) -> int | None:
    """The index of the letter `letter_of` reads among the first K."""
    letter = letter_of(text, LETTERS[:k])
    return None if letter is None else LETTERS.index(letter)


_NUMBER = r"-?\$?\d[\d,]*(?:\.\d+)?"


def number_from_text(text: str) -> float | None:
    """The number in the last \\boxed{}, else the first after the last `ANSWER:`, else the last number."""
    boxed = re.findall(r"\\boxed\{([^}]*)\}", text)
    for source in ([boxed[-1]] if boxed else []) + ([text.rsplit("ANSWER:", 1)[1]] if "ANSWER:" in text else []):
        m = re.search(_NUMBER, source)
        if m:
            return _to_float(m.group(0))
    nums = re.findall(_NUMBER, text)
    return _to_float(nums[-1]) if nums else None


# The paper's evaluator prompt (its Appendix C.3) is not in the text we have; this one asks for what
# Section 5.3 says the evaluator reported: the answer the reasoning arrived at, or None.
EXTRACT_PROMPT = ("Below is a question and a response that reasons about it. Report the final numerical answer the "
                  "response arrived at, as a number only, or None if there is no easily findable answer.\n\n"
                  "Question: {question}\n\nResponse: {response}\n\nFinal answer:")
EXTRACT_MAX_TOKENS = 24


def number_from_evaluator(text: str) -> float | None:
    """The evaluator's reply: None (or no number) means no answer; else its first number."""
    if re.match(r"\s*none\b", text, re.IGNORECASE):
        return None
    m = re.search(_NUMBER, text)
    return _to_float(m.group(0)) if m else None


def free_text_correct(value: float | None, gold: float, others: list[float]) -> bool:
    """Within 98% of the gold value (relative error ≤ 2%) and closer to it than to any other option."""
    if value is None or not math.isfinite(value):
        return False
    if abs(value - gold) > 0.02 * abs(gold) + 1e-12:
        return False
    return all(abs(value - gold) < abs(value - o) for o in others)


FREE_TEXT_GRADINGS = {
    "paper": "the number read counts if within 2% of the answer and closer to it than to any other option; a wrong "
             "answer costs 1/(K-1) in normalised accuracy",
    "package": "the number read counts if it equals the answer at 3 significant figures; a wrong answer costs 0 "
               "(the authors' scorer: guessing a number has no chance to remove)",
}
_PLAIN_NUMBER = re.compile(r"[-+−]?\$?\s?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _numbers_in(text: str) -> list[float]:
    """The numbers in a text as the authors' scorer reads them: thousands separators, `$`, a
    unicode minus, a sign and an exponent allowed."""
    out = []
    for m in _PLAIN_NUMBER.finditer(text):
        if any(c.isdigit() for c in m.group(0)):
            v = _to_float(m.group(0).replace("−", "-").replace(" ", ""))
            if v is not None:
                out.append(v)
    return out


def number_as_package_reads(text: str) -> float | None:
    """The final number as the authors' scorer finds it: the first in the last \\boxed{}, else the
    first after the last `ANSWER:` or `Answer:`, else the last number."""
    text = text or ""
    boxed = re.findall(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}", text)
    after = max(text.rfind("ANSWER:"), text.rfind("Answer:"))
    for source in ([boxed[-1]] if boxed else []) + ([text[after + 7:]] if after >= 0 else []):
        nums = _numbers_in(source)
        if nums:
            return nums[0]
    nums = _numbers_in(text)
    return nums[-1] if nums else None


def same_at_3_figures(value: float | None, gold: float) -> bool:
    return value is not None and math.isfinite(value) and float(f"{value:.3g}") == float(f"{gold:.3g}")


def distribution(lp: dict[str, float], k: int) -> tuple[list[float], float]:
    """Probabilities of the K valid letters (max over duplicates is done by the backend) and
    alpha, the total mass on them."""
    raw = [math.exp(lp[L]) if L in lp else 0.0 for L in LETTERS[:k]]
    return raw, sum(raw)


def rpm(raw: list[float], alpha: float, mode: str) -> list[float]:
    """Reshaped probability mapping: renormalise (uniform if alpha = 0), or mix with uniform."""
    k = len(raw)
    cond = [p / alpha for p in raw] if alpha > 0 else [1.0 / k] * k
    if mode == "renormalized":
        return cond
    return [alpha * p + (1 - alpha) / k for p in cond]


def argmax(p: list[float]) -> int:
    return max(range(len(p)), key=lambda i: (p[i], -i))  # ties: the first option


def part_name(name: str, part: int) -> str:
    """A request's name for a part of a question (the first part's keep the plain names)."""
    return name if part == 0 else f"{name}@{part + 1}"


REPLY = "answer_text"  # the reply written at an answer turn under the generated rule (a part's: answer_text@2, ...)
REPLY_TOKENS = 4096  # that reply's tokens with -T text_answer_tokens=none (a generation needs a number)


def reply_of(outputs: dict, part: int = 0) -> str | None:
    """The reply the model wrote at a part's answer turn, where it is known: the answer turn's
    generation under the generated rule, or a prediction's own response."""
    reply = outputs.get(part_name(REPLY, part))
    if isinstance(reply, str):
        return reply
    given = outputs.get("response") if part == 0 else None
    return given if isinstance(given, str) and given else None


ANSWER_RULES = {
    "restricted": "the valid letter of highest probability (the paper's distribution restricted to the options): an "
                  "item with any probability on a letter is answered",
    "generated": "the letter the model's reply at the answer turn commits to, read as the authors' package's "
                 "parse_letter reads it (a leading letter, else the last 'answer is X'); a reply with none is no answer, "
                 "left out of accuracy and calibration; the reply, not the letter, goes on to a group's next part (the "
                 "authors' package)",
}


def top_is_letter(scores: dict, letters: tuple[str, ...], call: dict) -> bool | None:
    """Whether the model's most likely token at the answer position is a valid letter (None: not known)."""
    top = call.get("top_logprob")
    if top is None or not scores:
        return None
    valid = [scores[L] for L in letters if L in scores]
    return bool(valid) and max(valid) >= top - 1e-9


def chosen_letter(scores, letters: tuple[str, ...], call: dict, rule: str = "restricted", reply: str | None = None) -> str | None:
    """The letter the model chose at an answer turn, by the answer rule (ANSWER_RULES): under the
    generated rule, the letter its reply there commits to where the reply is known (`reply`), else
    its most likely token when that is a letter; the text when the backend gave no
    log-probabilities; a string stands in for a reply."""
    if isinstance(scores, str):
        return scores
    if rule == "generated" and reply is not None:
        return letter_of(reply, letters)
    if scores and any(L in scores for L in letters):
        if rule == "generated" and top_is_letter(scores, letters, call) is False:
            return None
        return max(letters, key=lambda L: (scores.get(L, -math.inf), -letters.index(L)))
    return letter_of(call.get("text") or "", letters)


def parse_rule(rule: str) -> set[tuple[int, ...]]:
    """`same_brand:01,12` → {(0, 1), (1, 2)}: the allowed choices, one index per part."""
    return {tuple(int(c) for c in a.strip()) for a in rule.partition(":")[2].split(",") if a.strip()}


def consistency_penalty(allowed: set[tuple[int, ...]], sizes: list[int]) -> float:
    """What a wrong answer costs in normalised accuracy: p / (1 - p), p the chance that uniform
    random choices satisfy the rule (1/(K-1) for one K-option question), so guessing scores 0."""
    total = math.prod(sizes)
    valid = {a for a in allowed if len(a) == len(sizes) and all(0 <= x < n for x, n in zip(a, sizes))}
    p = len(valid) / total if total else 0.0
    return p / (1 - p) if p < 1 else 0.0


# ---- CAR ----------------------------------------------------------------------------------
def apply_car(items: list[dict], seed: int) -> list[dict]:
    """In each (element, K) bucket exactly round(N/K) questions, chosen by a seeded hash of
    their ids, get the correct option replaced; the others get one wrong option replaced (each
    part of a multi-part question; K is its first part's). Consistency-graded groups have no
    correct option: they are left as they are here, and `prepare` does not run them with --car, as
    the authors' package's `none` format drops them."""
    buckets: dict[tuple, list[dict]] = {}
    for it in items:
        if it.get("grading", "answer") == "answer":
            buckets.setdefault((it["element"], len(it["options"])), []).append(it)
    out = {}
    for (element, k), group in buckets.items():  # the authors' selection: floor(N/K + 1/2) by a seeded hash rank
        ranked = sorted(group, key=lambda it: (P.stable_hash(seed, "none", element, it.get("base_id", it["id"])), it["id"]))
        replace_correct = {it["id"] for it in ranked[: math.floor(len(group) / k + 0.5)]}
        for it in group:
            parts, replaced = [], []
            for part in P.parts_of(it):
                opts = list(part["options"])
                if it["id"] in replace_correct:
                    idx = part["correct_index"]
                else:
                    rng = random.Random(P.stable_hash(seed, "none-wrong", part.get("question_id", it.get("question_id", it["id"]))))
                    idx = rng.choice([i for i in range(len(opts)) if i != part["correct_index"]])
                opts[idx] = NOTA
                parts.append({**part, "options": opts})
                replaced.append(idx)
            out[it["id"]] = {**it, "options": parts[0]["options"], **({"parts": parts} if it.get("parts") else {}),
                             "car_replaced": replaced[0], "nota_is_correct": it["id"] in replace_correct}
    return [out.get(it["id"], it) for it in items]


# ---- prompts ------------------------------------------------------------------------------
def _int_option(value, name: str, lo: int, hi: int) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise UsageError(f"task option {name} of steer-me: '{value}' is not a whole number") from None
    if not lo <= n <= hi:
        raise UsageError(f"task option {name} of steer-me: {n} is out of range ({lo} to {hi})")
    return n


def options_block(item: dict) -> str:
    return "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(item["options"]))


def letters_phrase(k: int) -> str:
    return f"among A through {LETTERS[k - 1]}"


def _questions(qfile: str | None) -> tuple[list[dict], dict]:
    """The questions to run and where they come from (run.json's `source`): the authors' staged
    data package (a folder, package.py), a questions file (JSON Lines), or the bundled set."""
    if qfile and Path(qfile).is_dir():
        from .package import load as load_package

        items, source = load_package(Path(qfile))
        if not items:
            raise UsageError(f"{qfile}: the package holds no question")
        return items, source
    if not qfile:
        return data.load(BENCHMARK, "questions.jsonl"), {"questions": "bundled set", "seed": BUNDLE_SEED,
                                                         "per_element": BUNDLE_PER_ELEMENT}
    items = read_jsonl(Path(qfile), "questions file")
    need = {"id", "element", "options", "correct_index", "question"}
    for n, it in enumerate(items, 1):
        if not need <= set(it):
            raise UsageError(f"{qfile}: question {n} lacks {', '.join(sorted(need - set(it)))}")
    source = {"questions_file": str(qfile), "sha256": data.sha256_file(Path(qfile))}
    if isinstance(items[0].get("template_set") if items else None, dict):  # written templates (`steer generate --templates`)
        source["template_set"] = items[0]["template_set"]
    return items, source


def _runnable(items: list[dict], source: dict, qfile: str | None, *, one_at_a_time: bool, free_text: bool,
              car: bool) -> tuple[list[dict], dict]:
    """The questions these options can run, and the source noting those left out and why:
    multi-part and consistency-graded groups where the protocol asks one question at a time; for
    free text, answers that are not numbers (graded by the number, as the authors' package); for
    --car (the package's `none` format), consistency-graded groups (no correct option to replace)."""
    where = qfile or "the bundled set"
    groups = [it for it in items if it.get("parts") or it.get("grading", "answer") != "answer"]
    if groups and one_at_a_time:
        items = [it for it in items if it not in groups]
        source = {**source, "not_run": {"groups": len(groups), "why": "multi-part and consistency-graded groups run with "
                                        "the open2025 prompts and a multiple-choice adaptation"}}
        if not items:
            raise UsageError(f"{where}: no single question to run with these options", hint=source["not_run"]["why"])
    if free_text:
        numeric = [it for it in items if free_text_gold(it) is not None]
        if len(numeric) < len(items):
            source = {**source, "not_run_free_text": {"questions": len(items) - len(numeric),
                                                      "why": "free text is graded by the number; these answers are not numbers"}}
            items = numeric
        if not items:
            raise UsageError(f"{where}: no question with a numeric answer to run as free text")
    if car:
        ruled = [it for it in items if it.get("grading", "answer") != "answer"]
        if ruled:
            items = [it for it in items if it.get("grading", "answer") == "answer"]
            source = {**source, "not_run_car": {"groups": len(ruled), "why": "consistency-graded groups have no "
                                                "correct option for --car to replace (the authors' package drops them)"}}
            if not items:
                raise UsageError(f"{where}: no answer-graded question to run with --car")
    return items, source


@registry.task
class SteerMe(Task):
    name = "steer-me"
    suite = "steer-me"
    benchmark = BENCHMARK
    prompt_version = "steer-me/2"  # /2: the authors' open2025 prompt set and turns by default (-T prompts=econeval1: /1)
    description = "STEER-ME re-implementation: generated microeconomics multiple choice (options: adaptation, car, questions)"
    stages = 2
    protocol_seed = 42  # the authors' package's seed (NOTA placement, few-shot draws); --seed wins
    group_field = "element"
    labels = ("element", "setting", "module", "domain", "perspective", "type")  # the taxonomy an item carries
    later_fields = ("perspective", "mistake")  # a sample line written before econeval recorded them lacks them
    stands_in_for_choices = True  # a later part quotes the letter chosen before it
    fixed: dict[str, Any] = {}  # option values an experiment of the paper's matrix fixes (steer_me_paper.py)
    metrics = (Metric("acc", paired_exact=True), Metric("norm acc", bounds=(-1.0, 1.0)), Metric("ECE", lower_is_better=True),
               Metric("Brier", lower_is_better=True, bounds=(0.0, 2.0)))
    # over all items (an unanswered question counts as wrong; the paper's acc is over the answered
    # ones), and each item's Brier score of the renormalised option probabilities where it has them
    item_metrics = (Metric("accuracy", paired_exact=True), Metric("Brier", lower_is_better=True, bounds=(0.0, 2.0)))

    def shown(self, value, record):
        """An option index as its letter (a group's choices as letters, in order); a number read
        from free text as it is."""
        def letter(v):
            return LETTERS[v] if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < len(LETTERS) else None
        if isinstance(value, list) and value and all(letter(v) for v in value):
            return ", ".join(str(letter(v)) for v in value)
        return letter(value) or super().shown(value, record)

    options: tuple[TaskOption, ...] = (
        TaskOption("adaptation", "direct", "direct | cot-shown | cot-hidden (0-CoT, options shown or hidden while "
                   "reasoning) | free-text (no options; the final number is read)", ADAPTATIONS, "choice", flag="--adaptation"),
        TaskOption("car", False, 'calibrated answer replacement: one option per question becomes "No other option is correct."',
                   kind="bool", flag="--car"),
        TaskOption("prompts", P.DEFAULT, "open2025: the authors' released prompt set and turn structure (the canonical "
                   "open-weight runs'); econeval1: econeval's own wording, one turn", tuple(P.PROMPT_SETS), "choice"),
        TaskOption("shots", "0", "few-shot examples per question, drawn for its (element, type, domain) cell as the authors' "
                   "package does (bundled set: from a separately generated pool; a package: its few_shot split)"),
        TaskOption("reasoning_tokens", None, "the reasoning budget of cot-shown, cot-hidden and free-text (default: the "
                   "prompt set's: open2025 4096, econeval1 256)"),
        TaskOption("answer_rule", "restricted", "which letter a multiple-choice answer is: restricted (the paper's: the "
                   "valid letter of highest probability) | generated (the authors' package: the model also writes its reply "
                   "at the answer turn; the letter it commits to, read as the package's parse_letter, or no answer; the "
                   "reply goes on to a group's next part)", tuple(ANSWER_RULES), "choice"),
        TaskOption("reasoning", "econeval", "the reasoning turn: econeval (stops at a new 'Q: ' line, the reasoning "
                   "stripped before the answer turn) | package (the authors' solver: no stop, the reasoning unchanged)",
                   ("econeval", "package"), "choice"),
        TaskOption("free_text_grading", "paper", "free text: paper (within 2% and closest, a wrong answer costs "
                   "1/(K-1)) | package (the authors' scorer: 3 significant figures, a wrong answer costs 0)",
                   tuple(FREE_TEXT_GRADINGS), "choice"),
        TaskOption("text_answer_tokens", "8", "tokens a model without log-probabilities writes for its letter, read "
                   "from the text, and the reply at the answer turn under answer_rule=generated (none: the server's limit, "
                   "as the authors' package leaves it; 4096 for that reply)"),
        TaskOption("permute", "0", "ask each question again under K seeded permutations of its options (0-23; free text "
                   "shows none): accuracy in every order, the circular accuracy (right in all) and each letter's rate of being "
                   "chosen against being right (results' `orders`)", recorded_at_default=False),
        TaskOption("questions", None, "a question set from `econeval steer generate` (a .jsonl file), or the authors' "
                   "released STEER-ME data package (a folder: elements.csv + data/<element>/test.parquet, or the staging layout "
                   "data/<setting>/<module>/<element>/test.parquet; needs pyarrow), instead of the bundled one", kind="path", flag="--questions"),
    )

    def n_shot(self, prep):
        shots = prep.settings.get("shots")  # -T shots
        return shots if isinstance(shots, int) and not isinstance(shots, bool) else None

    def prepare(self, ctx) -> Prepared:
        opts = {**ctx.options_for(self), **self.fixed}
        adaptation = opts["adaptation"]
        qfile = opts["questions"]
        items, source = _questions(qfile)
        pset = opts["prompts"]
        shots = _int_option(opts["shots"], "shots", 0, 64)
        budget = _int_option(opts["reasoning_tokens"], "reasoning_tokens", 1, 65536) if opts["reasoning_tokens"] else \
            P.PROMPT_SETS[pset]["reasoning_tokens"]
        if shots and pset != "open2025":
            raise UsageError("-T shots needs the open2025 prompt set (its few-shot format)")
        if shots and adaptation == "free-text":
            raise UsageError("few-shot examples are multiple choice: -T shots must be 0 with --adaptation free-text")
        items, source = _runnable(items, source, qfile, one_at_a_time=pset != "open2025" or adaptation == "free-text",
                                  free_text=adaptation == "free-text", car=bool(opts["car"]))
        text_tokens = None if str(opts["text_answer_tokens"]).strip().lower() == "none" else \
            _int_option(opts["text_answer_tokens"], "text_answer_tokens", 1, 65536)
        per_part = 1 if P.FORMATS[adaptation] == "mc" else 2
        most_parts = max((len(P.parts_of(it)) for it in items), default=1)
        seed = ctx.seed_for(self)  # NOTA placement, few-shot draws and the options' orders
        permute = _int_option(opts.get("permute", "0"), "permute", 0, MAX_PERMUTE)
        if permute and adaptation == "free-text":
            raise UsageError("-T permute asks the options in other orders: free text shows no options")
        if permute:
            items = with_orders(items, permute, seed)
        car = bool(opts["car"])  # applied to the items that run (finalize_items), so --limit keeps its 1/K balance
        label = adaptation + ("+car" if car else "")
        prep = Prepared(items=items, settings={
            "adaptation": label, "source": source, "generator_version": GENERATOR_VERSION,
            "re_implementation": "questions generated by econeval's own templates and solvers, not the released STEER-ME data",
            "scoring": ("option log-probabilities of the letters at the answer position (' A' counts as 'A', max over duplicates), "
                        "reshaped by renormalising and by mixing with uniform (RPM)") if adaptation != "free-text" else
                       "number from the text (last \\boxed{}, else after the last ANSWER:, else the last number); "
                       "correct within 2% and closest to gold",
            "reasoning_tokens": budget, "car": car,
            "prompts": {"set": pset, "sha256": P.strings_hash(pset)}, "shots": shots,
            "answer_rule": {"name": opts["answer_rule"], "rule": ANSWER_RULES[opts["answer_rule"]]},
            "reasoning": opts["reasoning"], "text_answer_tokens": text_tokens,
            "seed": {"value": seed, "from": "--seed" if ctx.seed_given else "the authors' package (no --seed given)"},
        }, state={"adaptation": adaptation, "label": label, "car": car, "seed": seed, "prompts": pset,
                  "strings": P.PROMPT_SETS[pset], "budget": budget, "shots": shots, "rule": opts["answer_rule"],
                  "stop": ("\nQ: ",) if opts["reasoning"] == "econeval" else (), "strip": opts["reasoning"] == "econeval",
                  "text_tokens": text_tokens, "grading": opts["free_text_grading"],
                  "pool": self._shot_pool(qfile) if shots else []})
        if permute:
            prep.settings["permute"] = {"orders": permute, "seed": seed, "how": "each single question asked again under this "
                                        "many distinct seeded permutations of its options (fewer where it has fewer), as "
                                        "items ID~1, ID~2, ...; the paper's numbers are over every order"}
        if most_parts > 1:
            prep.stages = per_part * most_parts  # each part in turn, in one conversation
        if adaptation == "free-text":
            prep.settings["free_text_grading"] = {"name": opts["free_text_grading"],
                                                  "rule": FREE_TEXT_GRADINGS[opts["free_text_grading"]]}
            extractor = "judge" if JUDGE in ctx.given else "regex"
            prep.settings["free_text_extractor"] = (
                "an evaluator model (--judge) reports the final answer or None, as in the paper; the regex is an extra"
                if extractor == "judge" else "regex (no --judge given): last \\boxed{}, else after the last ANSWER:, else the last number")
            prep.state["extractor"] = extractor
            if extractor == "judge":
                prep.roles = (MODEL, JUDGE)
                prep.settings["evaluator_prompt"] = EXTRACT_PROMPT
        return prep

    @staticmethod
    def _shot_pool(qfile) -> list[dict]:
        """Where few-shot examples come from: a package's few_shot split; for the bundled set (or a
        questions file), questions generated apart from it (another seed), never the evaluated ones."""
        if qfile and Path(qfile).is_dir():
            from .package import load as load_package
            from .package import package_dir, split_files

            return load_package(Path(qfile), "few_shot")[0] if split_files(package_dir(Path(qfile)), "few_shot") else []
        tax = {r["element"]: r for r in data.load(BENCHMARK, "taxonomy.jsonl")}
        pool = generate([e for e in tax if e in covered()], SHOT_POOL_PER_ELEMENT, SHOT_POOL_SEED, tax)
        return [{**q, "id": q["id"].replace("steer-me/", "steer-me-shots/", 1)} for q in pool]

    def not_for(self, prep, reasoning):
        """The paper's protocol for a model that reasons (o1-preview, its §4): no 0-CoT adaptation
        (it reasons anyway), no hidden adaptation (it reasons again once it sees the options), and
        no free text where its reasoning cannot be read."""
        a = prep.state["adaptation"]
        if not reasoning.get("reasons"):
            return None
        if a in ("cot-shown", "cot-hidden"):
            return (f"--adaptation {a} is not run for a model that reasons: STEER-ME's protocol asks such a model "
                    "(o1-preview in its paper) for its answer directly, with no 0-CoT turn and no hidden adaptation "
                    "(--adaptation direct, or --reasoning off where the model can stop)")
        if a == "free-text" and reasoning.get("hidden"):
            return ("--adaptation free-text is not run for a model whose reasoning is hidden: STEER-ME's paper ran no "
                    "free text for o1-preview, whose reasoning tokens were not available")
        return None

    def finalize_items(self, items, prep):
        if not prep.state["car"]:
            return items
        if any("variant_of" in it for it in items):  # -T permute: each order its question after CAR
            return car_over_orders(items, lambda bases: apply_car(bases, prep.state["seed"]))
        return apply_car(items, prep.state["seed"])

    def strata(self, item):
        return item["element"]  # the paper reports per element

    def limit_items(self, items, limit):
        """--limit N: the first N questions of each element (with -T permute, each in all its orders)."""
        return limited(items, limit)

    def answer_options(self, item, prep):
        return tuple(LETTERS[:len(item["options"])])

    def requests(self, item, prep, outputs):
        if prep.state["prompts"] == "open2025":
            return self._requests_open2025(item, prep, outputs)
        return self._requests_econeval1(item, prep, outputs)

    def _requests_open2025(self, item, prep, outputs):
        """The authors' turns: the reasoning turn and the answer turn are separate user messages,
        the model's reasoning between them (chat template); a raw model gets them joined by
        newlines. The parts of a multi-part question follow in the same conversation, each after
        the model's answer to the one before (the letter it chose; under the generated rule its
        reply, as the authors' solver sends it), their letters continuing (A-B, then C-E, ...)."""
        st = prep.state
        fmt = P.FORMATS[st["adaptation"]]
        prefix = self._prefix(item, st)
        if fmt == "free":
            t = P.turns(fmt, item["question"], item["options"], st["strings"])
            if "response" not in outputs:
                return {"response": Generate(prompt=prefix + t[0], prefix=prefix, max_tokens=st["budget"], stop=st["stop"],
                                             chat=True)}
            return self._evaluator(item, prep, outputs)
        conversation: list[str] = []
        for i, (part, offset, letters) in enumerate(P.lettered_parts(item)):
            t = P.turns(fmt, part["question"], part["options"], st["strings"], offset)
            if i == 0:
                t[0] = prefix + t[0]
            for j, text in enumerate(t):
                answer = j == len(t) - 1
                name = part_name("option_logprobs" if answer else "reasoning", i)
                conversation.append(text)
                turns = tuple(conversation) if len(conversation) > 1 else ()
                prompt = "\n".join(conversation)
                asked = self._answer_turn(st, i, prompt, letters, prefix=prefix, turns=turns) if answer else \
                    {name: Generate(prompt=prompt, prefix=prefix, max_tokens=st["budget"], stop=st["stop"], chat=True, turns=turns)}
                if any(k not in outputs for k in asked):
                    return asked
                reply = outputs[name] if not answer else outputs[part_name(REPLY, i)] if st["rule"] == "generated" else \
                    chosen_letter(outputs[name], letters, call_info(outputs, name), st["rule"])
                reply = reply or ""
                conversation.append(reply.strip() if st["strip"] else reply)
        return {}

    @staticmethod
    def _answer_turn(st: dict, part: int, prompt: str, letters: tuple[str, ...], **where) -> dict:
        """An answer turn's requests: the letters' log-probabilities; under the generated rule
        also the reply the model writes there, as the authors' solver has it write one (its letter
        read by parse_letter's forms; at most text_answer_tokens)."""
        asked: dict = {part_name("option_logprobs", part): OptionLogprobs(prompt=prompt, options=letters, chat=True,
                                                                           text_tokens=st["text_tokens"], **where)}
        if st["rule"] == "generated":
            asked[part_name(REPLY, part)] = Generate(prompt=prompt, max_tokens=st["text_tokens"] or REPLY_TOKENS, chat=True,
                                                     **where)
        return asked

    @staticmethod
    def _prefix(item: dict, st: dict) -> str:
        """The few-shot prefix of the item's (element, type, domain) cell, made once per cell."""
        cell = (item["element"], item.get("type"), item.get("domain"))
        cache = st.setdefault("prefixes", {})
        if cell not in cache:
            cache[cell] = P.few_shot_prefix(P.select_shots(st["pool"], *cell, st["shots"], st["seed"]), st["strings"])
        return cache[cell]

    def _evaluator(self, item, prep, outputs):
        if prep.state.get("extractor") == "judge" and "extracted" not in outputs:
            ask = EXTRACT_PROMPT.format(question=item["question"], response=outputs["response"].strip())
            return {"extracted": Generate(prompt=ask, max_tokens=EXTRACT_MAX_TOKENS, stop=("\n",), chat=True, role=JUDGE)}
        return {}

    def _requests_econeval1(self, item, prep, outputs):
        a, k = prep.state["adaptation"], len(item["options"])
        q = f"Question: {item['question']}\n"
        letters = tuple(LETTERS[:k])
        final = f"\nTherefore, {letters_phrase(k)}, the answer is"
        if a == "direct":
            return {} if outputs else self._answer_turn(prep.state, 0, q + options_block(item) + "\nAnswer:", letters)
        if a == "free-text":
            if "response" not in outputs:
                prompt = q + "Give the final answer as a number after 'ANSWER:'.\nAnswer: Let's think step by step."
                return {"response": Generate(prompt=prompt, max_tokens=prep.state["budget"], stop=("\nQuestion:",), chat=True)}
            return self._evaluator(item, prep, outputs)
        shown = a == "cot-shown"
        first = q + (options_block(item) + "\n" if shown else "") + "Answer: Let's think step by step."
        if "reasoning" not in outputs:
            return {"reasoning": Generate(prompt=first, max_tokens=prep.state["budget"], stop=("\nQuestion:",), chat=True)}
        if "option_logprobs" in outputs:
            return {}
        second = first + outputs["reasoning"] + ("" if shown else "\n" + options_block(item)) + final
        return self._answer_turn(prep.state, 0, second, letters)

    def score(self, item, outputs, prep):
        k = len(item["options"])
        rec = {"element": item["element"], "setting": item.get("setting"), "module": item.get("module"),
               "domain": item.get("domain"), "type": item.get("type"), "perspective": item.get("perspective"), "k": k,
               "gold": item["correct_index"]}
        if item.get("car_replaced") is not None:
            rec["nota_is_correct"] = item["nota_is_correct"]
        if "order" in item:  # -T permute
            rec["order"] = item["order"]
            if "variant_of" in item:
                rec["variant_of"] = item["variant_of"]
        if prep.state["adaptation"] == "free-text":
            gold = free_text_gold(item)
            assert gold is not None  # prepare ran only questions with a numeric answer
            others = [v for i, o in enumerate(item["options"]) if i != item["correct_index"] and (v := _to_float(o)) is not None]
            package = prep.state["grading"] == "package"
            by_regex = (number_as_package_reads if package else number_from_text)(outputs.get("response", ""))
            value = number_from_evaluator(outputs.get("extracted") or "") if prep.state.get("extractor") == "judge" else by_regex
            if package:  # the authors' scorer: the correct option read as a number, 3 significant figures, no penalty
                gold = _to_float(str(item["options"][item["correct_index"]])) if item.get("correct_index") is not None else None
                gold = gold if gold is not None else free_text_gold(item)
                assert gold is not None
                rec.update(answered=value is not None, parsed=value, correct=same_at_3_figures(value, gold), penalty=0.0,
                           regex_parsed=by_regex, regex_correct=same_at_3_figures(by_regex, gold))
                return _with_mistake(rec, item, package=True)
            rec.update(answered=value is not None, parsed=value, correct=free_text_correct(value, gold, others),
                       regex_parsed=by_regex, regex_correct=free_text_correct(by_regex, gold, others))
            return _with_mistake(rec, item)
        if item.get("parts") or item.get("grading", "answer") != "answer":
            rec = self._score_group(item, outputs, rec, prep.state["rule"])
            if rec["answered"] and item.get("car_replaced") is not None:
                rec["chose_nota"] = rec["parsed"][0] == item["car_replaced"]  # the first part's choice, as its probabilities
            return rec
        lp = outputs.get("option_logprobs")
        reply = reply_of(outputs)
        if lp and any(L in lp for L in LETTERS[:k]):
            raw, alpha = distribution(lp, k)
            p_ren, p_mix = rpm(raw, alpha, "renormalized"), rpm(raw, alpha, "mixed")
            top = argmax(p_ren)
            is_letter = top_is_letter(lp, tuple(LETTERS[:k]), call_info(outputs, "option_logprobs"))
            written = letter_from_text(reply, k) if reply is not None else None
            rec.update(answered=True, parsed=top, correct=top == item["correct_index"], alpha=alpha,
                       p_renormalized=p_ren, p_mixed=p_mix, top_token_invalid=None if is_letter is None else not is_letter,
                       generated_answer=is_letter if reply is None else written is not None)
            if prep.state["rule"] == "generated" and reply is not None:  # the letter its reply commits to, as parse_letter
                rec.update(parsed=written, correct=written == item["correct_index"], top_correct=top == item["correct_index"])
            if prep.state["rule"] == "generated" and rec["generated_answer"] is False:  # no letter generated: no answer
                for key in ("alpha", "p_renormalized", "p_mixed", "top_correct"):
                    rec.pop(key, None)
                rec.update(answered=False, parsed=None, correct=False)
        else:  # no log-probabilities: read the letter from the text
            letter = letter_from_text(reply or call_info(outputs, "option_logprobs").get("text") or "", k)
            rec.update(answered=letter is not None, parsed=letter, correct=letter == item["correct_index"],
                       generated_answer=letter is not None)
        if rec["answered"] and item.get("car_replaced") is not None:
            rec["chose_nota"] = rec["parsed"] == item["car_replaced"]
        return _with_mistake(rec, item)

    def item_values(self, record):
        probs = record.get("p_renormalized")
        return {"accuracy": 1.0 if record.get("correct") is True else 0.0,
                "Brier": brier(probs, record["gold"]) if probs else None}

    @staticmethod
    def _score_group(item, outputs, rec, rule="restricted"):
        """A question group, as the authors' scorer: answered when every part has a choice;
        correct when every part is right (answer-graded) or the choices satisfy the rule
        (consistency-graded); a wrong answer costs the largest 1/(K-1) of its parts, or
        p/(1-p) for a rule that random choices satisfy with probability p; option
        probabilities (calibration) from the first part of an answer-graded group."""
        parts = P.parts_of(item)
        chosen, generated = [], []
        for i, (_part, _offset, letters) in enumerate(P.lettered_parts(item)):
            name = part_name("option_logprobs", i)
            scores, call, reply = outputs.get(name) or {}, call_info(outputs, name), reply_of(outputs, i)
            letter = chosen_letter(scores, letters, call, rule, reply)
            chosen.append(None if letter is None else letters.index(letter))
            generated.append(chosen_letter(scores, letters, call, "generated", reply) is not None)
        answered = all(c is not None for c in chosen)
        rec.update(parts=len(parts), grading=item.get("grading", "answer"), answered=answered, parsed=chosen,
                   generated_answer=all(generated))
        sizes = [len(p["options"]) for p in parts]
        if rec["grading"] == "consistency":
            allowed = parse_rule(item["consistency_rule"])
            rec.update(correct=answered and tuple(chosen) in allowed, penalty=consistency_penalty(allowed, sizes), gold=None)
            return rec
        golds = [p["correct_index"] for p in parts]
        rec.update(correct=answered and chosen == golds, penalty=max(1.0 / (n - 1) for n in sizes), gold=golds[0])
        lp = outputs.get("option_logprobs")
        if answered and lp:
            raw, alpha = distribution(lp, sizes[0])
            p_ren = rpm(raw, alpha, "renormalized")
            rec.update(alpha=alpha, p_renormalized=p_ren, p_mixed=rpm(raw, alpha, "mixed"), top_correct=argmax(p_ren) == golds[0])
        return rec

    def aggregate(self, records, prep):
        records = _with_perspective(records, prep)
        groups = {"overall": {"all": records}}
        for key in ("setting", "module", "element"):
            g: dict[str, list] = {}
            for r in records:
                g.setdefault(r.get(key) or "?", []).append(r)
            groups[key] = g
        out = {
            "table": "STEER-ME (econeval re-implementation)",
            "adaptation": prep.state["label"],
            # which letter counted as the answer (no_answer_rate, accuracy, calibration);
            # package_no_answer_rate is always the authors' package's rule
            "answer_rule": {"name": prep.state["rule"], "rule": ANSWER_RULES[prep.state["rule"]]},
            "n_scored": sum(r["answered"] for r in records), "n_unparsed": sum(not r["answered"] for r in records),
            "paper": {name: {k: metrics(v) for k, v in g.items()} for name, g in groups.items()},
        }
        out["paper"]["overall"] = out["paper"]["overall"]["all"]
        out["heatmap"] = {"rows": "this run's model", "columns": "elements", "metric": "normalized_accuracy",
                          "values": {el: m["normalized_accuracy"] for el, m in out["paper"]["element"].items()}}
        mistakes = mistake_shares(records, prep)
        if mistakes:
            out["mistakes"] = mistakes
        orders = across_orders(records)
        if orders:
            out["orders"] = orders
        if prep.state.get("extractor") == "judge":
            regex = [r for r in records if "regex_correct" in r]
            out["extras"] = {"regex_extraction": {
                "description": "the answer read by econeval's regex instead of the evaluator model",
                "n": len(regex), "n_answered": sum(r["regex_parsed"] is not None for r in regex),
                "accuracy": mean([float(r["regex_correct"]) for r in regex if r["regex_parsed"] is not None]),
                "agreement_with_evaluator": mean([float(r["regex_parsed"] == r["parsed"]) for r in regex])}}
        return out

    def headline(self, result):
        o = result["paper"]["overall"]
        return {"acc": o["accuracy"], "norm acc": o["normalized_accuracy"], "ECE": (o.get("renormalized") or {}).get("ece"),
                "Brier": (o.get("renormalized") or {}).get("brier")}

    def headline_of(self, records, prep):
        return self.headline({"paper": {"overall": metrics(records)}})  # not every element's and module's numbers

    def table_numbers(self, result):
        o = result["paper"]["overall"]
        return {**self.headline(result), "EPA": (o.get("renormalized") or {}).get("epa")}

    def numbers_of(self, records, prep):
        result = {"paper": {"overall": metrics(records)}}  # the overall numbers only, not every element's
        return {**self.headline(result), **self.table_numbers(result)}

    def resampler(self, records, prep):
        return overall_resampler(records)


# ---- the mistakes wrong answers make (the paper's Fig. 10 and §5.2) ------------------------
NOTA_MISTAKE = 'chose "No other option is correct."'  # under --car, where another option was right
OTHER_MISTAKE = "no option's value"  # free text: a wrong number near no option (within the grading's rule)


def labelled(item: dict) -> bool:
    """Whether the question labels each option with the mistake it encodes (a generated one does:
    `distractor_reasons`; the authors' data package does not)."""
    reasons = item.get("distractor_reasons")
    return not item.get("parts") and isinstance(reasons, list) and len(reasons) == len(item["options"])


def _with_mistake(rec: dict, item: dict, package: bool = False) -> dict:
    """The record with `mistake`, for a question whose options are labelled: None when right or
    unanswered; else the label of the option chosen (NOTA_MISTAKE for "No other option is
    correct" where it was not). Free text: the label of the wrong option whose value the number is
    as the grading counts a right one (within 2% and closest of all options; `package`: equal at 3
    significant figures), else OTHER_MISTAKE."""
    if not labelled(item):
        return rec
    mistake = None
    if rec["answered"] and not rec["correct"]:
        if isinstance(rec["parsed"], int):
            mistake = NOTA_MISTAKE if rec["parsed"] == item.get("car_replaced") else item["distractor_reasons"][rec["parsed"]]
        else:
            values = option_values(item)
            near = [i for i, v in values.items() if i != item["correct_index"] and
                    (same_at_3_figures(rec["parsed"], v) if package else
                     free_text_correct(rec["parsed"], v, [w for j, w in values.items() if j != i]))]
            mistake = item["distractor_reasons"][near[0]] if near else OTHER_MISTAKE
    rec["mistake"] = mistake
    return rec


def mistake_shares(records: list[dict], prep) -> dict | None:
    """Per element, the share of its wrong answers that make each mistake its options encode, with
    a 95% Wilson interval; every mistake the element's questions offer is listed (a share over no
    wrong answer is null, with its count). None when no record has a mistake label."""
    from ...intervals import wilson

    mine = [r for r in records if "mistake" in r]
    if not mine:
        return None
    items = {it["id"]: it for it in (prep.items if prep else [])}
    offered: dict[str, list[str]] = {}
    for r in mine:
        labels = offered.setdefault(r["element"], [])
        item = items.get(r.get("id"), {})
        for reason in item.get("distractor_reasons", []):
            if reason != "correct" and reason not in labels:
                labels.append(reason)
    for r in mine:  # labels no option of the run's questions offers (NOTA, no option's value) come last
        if r["mistake"] is not None and r["mistake"] not in offered[r["element"]]:
            offered[r["element"]].append(r["mistake"])
    out = {}
    for element, labels in offered.items():
        recs = [r for r in mine if r["element"] == element]
        wrong = [r["mistake"] for r in recs if r["answered"] and not r["correct"]]
        out[element] = {"n": len(recs), "n_answered": sum(bool(r["answered"]) for r in recs), "n_wrong": len(wrong),
                        "mistakes": {m: {"n": wrong.count(m), "share": wrong.count(m) / len(wrong) if wrong else None,
                                         "interval": list(iv) if (iv := wilson(wrong.count(m), len(wrong))) else None}
                                     for m in labels}}
    return {"description": "per element, the share of wrong answers (answered, not right) that make each mistake its "
                           "options encode: the chosen option's label (free text: the wrong option whose value the number is "
                           "within the grading's rule, else \"" + OTHER_MISTAKE + "\"); 95% Wilson intervals; unanswered "
                           "questions are not wrong answers here", "element": out}


def _with_perspective(records: list[dict], prep) -> list[dict]:
    """The records, each with its question's perspective: a line written before econeval recorded
    it (a folder resumed since) takes it from the question."""
    if all("perspective" in r for r in records):
        return records
    of = {it["id"]: it.get("perspective") for it in (prep.items if prep else [])}
    return [r if "perspective" in r else {**r, "perspective": of.get(r.get("id"))} for r in records]


def overall_resampler(recs: list[dict]):
    """The overall numbers of `metrics` (accuracy, normalised accuracy, and the renormalised ECE,
    Brier and EPA) of a resample by index, from each record's terms computed once: the same terms
    summed in the same order, so the same floats as `numbers_of` on the resampled records."""
    rows = []
    for r in recs:
        p, penalty = r.get("p_renormalized"), r.get("penalty")
        rows.append((bool(r["answered"]), float(r["correct"]),
                     1.0 if r["correct"] else -(penalty if penalty is not None else 1.0 / (r["k"] - 1)),
                     "p_renormalized" in r, r.get("grading") != "consistency",
                     None if p is None else ((ece_bin(max(p)), float(r.get("top_correct", r["correct"])), max(p)),
                                             brier(p, r["gold"]), p[r["gold"]])))

    def numbers(idx) -> dict:
        answered = [rows[i] for i in idx if rows[i][0]]
        out = {"acc": mean([a[1] for a in answered]), "norm acc": mean([a[2] for a in answered]),
               "ECE": None, "Brier": None, "EPA": None}
        probs = [a[5] for a in answered if a[3]]
        if probs and len(probs) == sum(1 for a in answered if a[4]):
            out.update({"ECE": binned_ece([b for b, _, _ in probs]), "Brier": mean([b for _, b, _ in probs]),
                        "EPA": mean([e for _, _, e in probs])})
        return out

    return numbers


def metrics(recs: list[dict]) -> dict:
    answered = [r for r in recs if r["answered"]]
    out: dict[str, Any] = {
        "n": len(recs),
        "accuracy": mean([float(r["correct"]) for r in answered]),
        "normalized_accuracy": normalized_accuracy([r["correct"] for r in answered], [r["k"] for r in answered],
                                                   [r.get("penalty") for r in answered]),
        "no_answer_rate": 1 - len(answered) / len(recs) if recs else None,
    }
    known = [r["generated_answer"] for r in recs if r.get("generated_answer") is not None]
    # the authors' package's rule (ANSWER_RULES["generated"]), whichever rule the run uses: its reply's
    # letter where the reply is known, else whether its most likely token was a letter
    out["package_no_answer_rate"] = 1 - sum(known) / len(known) if known and len(known) == len(recs) else None
    probs = [r for r in answered if "p_renormalized" in r]
    graded = [r for r in answered if r.get("grading") != "consistency"]  # a rule has no gold option: no probabilities
    if probs and len(probs) == len(graded):
        for mode in ("renormalized", "mixed"):
            p = [r[f"p_{mode}"] for r in probs]
            out[mode] = {
                "ece": ece([max(x) for x in p], [r.get("top_correct", r["correct"]) for r in probs]),
                "brier": mean([brier(x, r["gold"]) for x, r in zip(p, probs)]),
                "epa": mean([x[r["gold"]] for x, r in zip(p, probs)]),
            }
        out["invalid_mass"] = mean([1 - r["alpha"] for r in probs])
        flags = [r["top_token_invalid"] for r in probs if r.get("top_token_invalid") is not None]
        out["invalid_top_rate"] = mean([float(f) for f in flags]) if flags else None
    else:
        out["renormalized"] = out["mixed"] = None  # no log-probabilities: calibration is unavailable
    for key in ("domain", "type", "perspective"):  # the paper's domain and type robustness; perspective alike
        by: dict[str, list[float]] = {}
        for r in answered:
            by.setdefault(r.get(key) or "?", []).append(float(r["correct"]))
        out[f"{key}_robustness"] = spread({k: mean(v) for k, v in by.items()}) if len(by) > 1 else None
    nota = [r for r in answered if "chose_nota" in r]
    if nota:
        out["nota_selection_rate"] = mean([float(r["chose_nota"]) for r in nota])
        out["nota_correct_rate"] = mean([float(r["nota_is_correct"]) for r in nota])
    car = [r for r in recs if "nota_is_correct" in r]
    if car:
        out["car"] = car_table(car)
    return out


def car_table(recs: list[dict]) -> dict:
    """The paper's Table 2: choosing "No other option is correct" as a detection task, micro over
    the questions. Precision: right when it chose NOTA; recall: chose it when NOTA was correct
    (an unanswered question did not choose it)."""
    chose = [bool(r.get("chose_nota")) for r in recs]
    truth = [bool(r["nota_is_correct"]) for r in recs]
    tp = sum(c and t for c, t in zip(chose, truth))
    precision = tp / sum(chose) if any(chose) else None
    recall = tp / sum(truth) if any(truth) else None
    f1 = (2 * precision * recall / (precision + recall) if precision and recall else 0.0) \
        if precision is not None and recall is not None else None
    return {"n": len(recs), "n_nota_correct": sum(truth), "n_chose_nota": sum(chose),
            "precision": precision, "recall": recall, "f1": f1}
