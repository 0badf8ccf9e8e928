"""EconNLI (Guo & Yang, 2024): does a premise event cause a hypothesis event? Table 4.

Prompts: zero-shot as in the released code; ICL and CoT as in the paper's Appendix D.3 / D.4.
Headline numbers use the released code's parse rule, which drops unparsable answers from both
y_true and y_pred; a strict variant (unparsed = wrong) and a log-probability variant
(" Yes" vs " No" at the answer position) are reported beside it.
"""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path
from typing import Any

from .. import data, registry
from ..metrics import classification_report
from ..tables import CellView, Metric, Table, interval, limit_notes, published, published_rows, task_rows
from ..types import JUDGE, MODEL, SELF_JUDGED, Generate, OptionLogprobs, Prepared, Task, TaskOption

BENCHMARK = "econnli"

INSTRUCTION = (
    "Conduct inference on economic events. We provide a premise and a hypothesis, both of them are "
    "economical events. Infer whether the premise can cause the happening of the hypothesis. "
    "Only answer 'Yes' or 'No'."
)
_INSTR_A = "Conduct inference on economic events. We provide a premise and a hypothesis, both of them are economical events. Infer"
_INSTR_B = "whether the premise can cause the happening of the hypothesis. Only answer 'Yes' or 'No'."
_TAIL = "premise: {premise}, hypothesis: {hypothesis}, answer:"
_FOLLOW = "Conduct inference on the following premise and hypothesis: " + _TAIL
# The zero-shot and ICL prompts in three variants: `released-open`, the released open-model
# notebook cells character for character (their backslash line continuations keep the next
# line's indentation: 9 spaces before "whether" and 17 before "premise:" zero-shot); `released-api`,
# the released ChatGPT/GPT-4 cells (2 and 10 spaces; ICL demonstrations joined by ";"); `paper`,
# the paper's Appendix D.3 text with single spaces (econeval's prompt before prompt version 2).
ZERO_PROMPTS = {
    "released-open": f"{_INSTR_A}{' ' * 9}{_INSTR_B}{' ' * 17}{_TAIL}",
    "released-api": f"{_INSTR_A}{' ' * 2}{_INSTR_B}{' ' * 10}{_TAIL}",
    "paper": f"{INSTRUCTION} {_TAIL}",
}
ICL_PROMPTS = {
    "released-open": f"{_INSTR_A} {_INSTR_B} Here are some examples: premise: {{p_pos}}, hypothesis: {{h_pos}}, answer:Yes \n "
                     f"premise: {{p_neg}}, hypothesis: {{h_neg}}, answer:No \n {_FOLLOW}",
    "released-api": f"{_INSTR_A} {_INSTR_B} Here are some examples: premise: {{p_pos}}, hypothesis: {{h_pos}}, answer:Yes; "
                    f"premise: {{p_neg}}, hypothesis: {{h_neg}}, answer:No; {_FOLLOW}",
    "paper": f"{INSTRUCTION} Here are some examples: premise:{{p_pos}}, hypothesis: {{h_pos}}, answer:Yes\n"
             f"premise: {{p_neg}}, hypothesis: {{h_neg}}, answer:No\n{_FOLLOW}",
}
# The fine-tuned models' prompt (Table 3): the released fine-tuning notebook's
# (fine-tuned_model_evaluation.ipynb, `get_zero_shot_results_from_llama`), the format the LoRA
# adapters were trained on (its `formatting_prompts_func` adds " {answer} " and the EOS token), line
# continuations resolved: the paper's Appendix D.1 shows it as "### Question: … premise: {premise},
# hypothesis: {hypothesis}.\n\n### Answer:". The released code decodes prompt + output, takes the text
# after "\n ### Answer:" (the prompt's end: the model's continuation), stripped, and reads it with the
# released rule; 3 new tokens.
SFT_PROMPT = ("### Question: Conduct inference on economic events. We provide a premise and a hypothesis,both of them are "
              "economical events. Infer whether the premise can cause the happening of the hypothesis. Only answer 'Yes' or "
              "'No'. premise: {premise}, hypothesis: {hypothesis}. \n ### Answer:")
ZERO_PROMPTS["sft"] = SFT_PROMPT
VARIANT_VERSIONS = {"sft": "econnli-sft/1"}  # a variant added after its task's prompt version: a version of its own
ZERO, ICL = ZERO_PROMPTS["paper"], ICL_PROMPTS["paper"]
# new tokens: the released open-model cells' max_new_tokens (10 zero-shot, 3 ICL); the API cells
# set none (econeval: 8, enough for the first word the rule reads)
MAX_TOKENS = {("zero", "released-open"): 10, ("icl", "released-open"): 3, ("zero", "sft"): 3}
PROMPT_OPTION = TaskOption("prompt", "released-open",
                           "released-open: the released open-model prompt, whitespace included (the open models' rows); "
                           "released-api: the released ChatGPT/GPT-4 prompt, answer stripped of newlines only, as released "
                           "(for served chat models); paper: the paper's Appendix D.3 text, single-spaced",
                           ("released-open", "released-api", "paper"), "choice")
# econnli-zero's: the same, and the fine-tuned models' prompt (Table 3)
ZERO_PROMPT_OPTION = TaskOption("prompt", "released-open", PROMPT_OPTION.help + "; sft: the fine-tuned models' prompt "
                                "(\"### Question: … ### Answer:\", Appendix D.1, as the released fine-tuning notebook "
                                "wrote it; 3 new tokens): run a LoRA fine-tuned model with it for Table 3",
                                (*(PROMPT_OPTION.choices or ()), "sft"), "choice")
# The released notebook's CoT prompt (ICL_COT_model_evaluation.ipynb, `cot_prompt`), character
# for character, line continuations resolved: the paper's Appendix D.4 lost the second
# demonstration's question; this is its actual text.
_COT_Q = ("### Question: Conduct inference on economic events. We provide a premise and a hypothesis,both of them are "
          "economic events. Infer whether the premise can cause the hypothesis to happen. Write the reasoning chain on "
          "the first line, and summarize the answer as 'Yes' or 'No' in the second line. ")
COT_DEMOS = (
    "\n" + _COT_Q + "premise: demand increases, hypothesis: price increases. \n ### Answer: When demand for a product or "
    "service increases, more people want to buy it. This creates a situation where there are more buyers than available "
    "supply, which leads to an increase in competition among buyers. As a result, sellers can raise their prices because "
    "they know that buyers are willing to pay more to get the product or service they want.\nYes.\n\n"
    + _COT_Q + "premise: government borrowing creates higher demand for credit in the financial markets,hypothesis: interest "
    "rates decreases across the market. \n ### Answer:When the government borrows money, it creates higher demand for "
    "credit in the financial markets. This is because the government is competing with other borrowers for available "
    "funds, which can drive up interest rates. Therefore, it is unlikely that government borrowing would cause interest "
    "rates to decrease across the market. \n No. \n\n"
)
COT_QUESTION = _COT_Q + "premise:{premise}, hypothesis: {hypothesis} \n \n### Answer:\n"

CLASSES = {0: "Negative Pairs", 1: "Positive Pairs"}
ANSWERS = {1: "Yes", 0: "No"}  # a label or a parse as the prompt asks for it (1: the premise causes the hypothesis)


def build(src: Path) -> dict[str, list[dict]]:
    with open(src / "raw" / "EconNLI_test.csv", newline="", encoding="utf-8") as fh:
        test = [
            {"id": f"econnli/test/{i}", "row": i, "wiki_page": r["wiki_page"], "sentence": r["sentence"],
             "premise": r["cause"], "hypothesis": r["effect"], "label": int(r["label"])}
            for i, r in enumerate(csv.DictReader(fh))
        ]
    with open(src / "raw" / "EconNLI_train.csv", newline="", encoding="utf-8") as fh:
        train = [
            {"id": f"econnli/train/{i}", "row": i, "wiki_page": r["wiki_page"], "sentence": r["sentence"],
             "premise": r["cause"], "hypothesis": r["effect"],
             "chatgpt_label": int(r["ChatGPT_label"]), "gpt4_label": int(float(r["GPT4_label"]))}
            for i, r in enumerate(csv.DictReader(fh))
        ]
    return {"test.jsonl": test, "train.jsonl": train}




def parse_answer(text: str, strip: str | None = None) -> int | None:
    """The released code's rule: first space-separated token of the stripped answer, lowercased;
    contains "yes" → 1, else contains "no" → 0, else unparsable (None). `strip="\n"`: the
    released API cells strip newlines only (a leading space leaves an empty first token)."""
    first = text.strip(strip).split(" ")[0].lower()
    if "yes" in first:
        return 1
    if "no" in first:
        return 0
    return None


def released_icl_parse(prompt: str, response: str) -> int | None:
    """The released ICL code for open models: it decodes prompt + output and reads the text after
    the *first* "answer:" — the positive demonstration's "answer:Yes" — with the released rule."""
    parts = (prompt + response).split("answer:")
    return parse_answer(parts[1]) if len(parts) > 1 else None


def cot_votes(text: str, rule: str, raw: bool = False) -> list[int]:
    """The predictions the released CoT code records for one answer (the text after the prompt's
    last "### Answer:", up to the next "### Question:"):
    - released-llama (the LLAMA2 13B and Alpaca rows; the notebook's commented-out rule): 'Yes.' in
      it → 1, elif 'No.' in it → 0;
    - released-finma (the LLAMA2 7B and FINMA rows; the notebook's live code): 'Yes' in it → 1 and,
      independently, 'No' in it → 0 (case-sensitive substrings: "Now", "Not" count as No; an
      answer with both is counted twice: LLAMA2 7B's published support is 1,028 of 1,026 items);
    - released-gpt (ChatGPT / GPT-4 rows): the last line, lower-cased: 'yes' in it → 1, elif 'no' → 0.
    An answer the rule cannot read gives no prediction (it is dropped, as released). `raw`: the
    reply as the API returned it (-T cot_reply=raw); released-gpt then reads its last line as the
    GPT cells did, uncut and unstripped (a reply ending in a newline has an empty last line)."""
    pred = text if raw and rule == "released-gpt" else text.split("### Question:")[0].strip()
    if rule == "released-llama":
        return [1] if "Yes." in pred else [0] if "No." in pred else []
    if rule == "released-finma":
        return ([1] if "Yes" in pred else []) + ([0] if "No" in pred else [])
    last = pred.split("\n")[-1].lower()
    return [1] if "yes" in last else [0] if "no" in last else []


COT_RULES = ("released-llama", "released-finma", "released-gpt")
RAW_REPLY_TOKENS = 4096  # -T cot_reply=raw: the GPT cells set no cap; a served model ends its answer itself


def table_row(y_true: list[int], y_pred: list[int]) -> dict:
    rep = classification_report(y_true, y_pred)
    row = {CLASSES[c]: {k: rep[c][k] for k in ("precision", "recall", "f1", "support")} for c in (0, 1)}
    row["Average"] = rep["macro"]
    row["accuracy"] = rep["accuracy"]
    return row


class _EconNLITask(Task):
    suite = "econnli"
    benchmark = BENCHMARK
    metrics = (Metric("P"), Metric("R"), Metric("F1"), Metric("F1 (logprob)"))
    lead = "F1"  # Table 4's headline number
    logprobs = True
    max_tokens = 8
    # The released rule reads only the first space-separated word of the stripped answer, so
    # stopping at the first space after it leaves the parsed answer unchanged; and once that word
    # contains "yes" the rule answers 1 whatever follows, so generation can stop there too.
    stop: tuple[str, ...] = (" ",)
    settled: str | None = r"(?i)^\s*[^ ]*yes"

    # a sample's per-class numbers: each stratum (gold label) splits by the parsed answer, and by
    # the log-probability answer for the logprob F1 (intervals.py: a Pólya interval per stratum)
    sample_cells: tuple[CellView, ...] = (CellView("parsed", (0, 1, None)),
                                          CellView("logprob_pred", (0, 1), numbers=("F1 (logprob)",)))

    def strata(self, item):
        return f"label {item['label']}"  # the gold label: Table 4 is per class

    def shown(self, value, record):
        return ANSWERS[value] if isinstance(value, int) and value in ANSWERS else super().shown(value, record)

    def prepare(self, ctx) -> Prepared:
        settings = {"max_tokens": self.max_tokens, "stop": list(self.stop), "parse_rule": self.parse_rule,
                    "prompt_version": self.prompt_version}
        if self.settled:
            settings["early_stop"] = {"regex": self.settled, "why": "the released rule reads only the first space-separated "
                                      "word and answers 1 as soon as it contains 'yes': the parse cannot change after it"}
        return Prepared(items=data.load(BENCHMARK, "test.jsonl"), settings=settings)

    parse_rule = "released code: first token contains yes→1 / no→0, else unparsable (dropped from the paper's numbers)"

    def prompt(self, item: dict, prep: Prepared) -> tuple[str, str]:
        """(prefix shared by all items, full prompt)."""
        raise NotImplementedError

    def parse_with(self, text: str, prep: Prepared) -> int | None:
        return parse_answer(text)

    def budget(self, prep: Prepared) -> int:
        return self.max_tokens

    def stops(self, prep: Prepared) -> tuple[str, ...]:
        return self.stop

    def requests(self, item, prep, outputs):
        prefix, prompt = self.prompt(item, prep)
        reqs: dict[str, Generate | OptionLogprobs] = {
            "response": Generate(prompt=prompt, prefix=prefix, max_tokens=self.budget(prep), stop=self.stops(prep),
                                 stop_regex=self.settled)}
        if self.logprobs:
            reqs["option_logprobs"] = OptionLogprobs(prompt=prompt, prefix=prefix, options=("Yes", "No"))
        return reqs

    def score(self, item, outputs, prep):
        parsed = self.parse_with(outputs["response"], prep)
        rec = {"parsed": parsed, "gold": item["label"], "correct": None if parsed is None else parsed == item["label"]}
        lp = outputs.get("option_logprobs")
        if lp and "Yes" in lp and "No" in lp:
            rec["logprob_pred"] = int(lp["Yes"] > lp["No"])
        return rec

    def aggregate(self, records, prep):
        scored = [r for r in records if r["parsed"] is not None]
        out: dict[str, Any] = {
            "table": "EconNLI Table 4 (classification)",
            "n": len(records), "n_scored": len(scored), "n_unparsed": len(records) - len(scored),
            "paper": table_row([r["gold"] for r in scored], [r["parsed"] for r in scored]),
            "extras": {
                "strict": {"description": "unparsable answers count as wrong (all items)",
                           **table_row([r["gold"] for r in records],
                                       [r["parsed"] if r["parsed"] is not None else 1 - r["gold"] for r in records])},
            },
        }
        lp = [r for r in records if "logprob_pred" in r]
        if lp:
            out["extras"]["logprob"] = {"description": "' Yes' vs ' No' log-probability at the answer position (never unparsable)",
                                        "n": len(lp), **table_row([r["gold"] for r in lp], [r["logprob_pred"] for r in lp])}
        return out


    def table_numbers(self, result):
        p = result["paper"]
        return {f"{cls.split()[0]} {m if m == 'F1' else m.lower()}": p[cls][m.lower()]
                for cls in (CLASSES[0], CLASSES[1], "Average") for m in ("Precision", "Recall", "F1")}

    def headline(self, result):
        avg = result["paper"]["Average"]
        out = {"P": avg["precision"], "R": avg["recall"], "F1": avg["f1"]}
        if "logprob" in result["extras"]:
            out["F1 (logprob)"] = result["extras"]["logprob"]["Average"]["f1"]
        return out


class _Variant(_EconNLITask):
    """Zero-shot and ICL: the prompt variant (-T prompt=) sets the text, the token budget and the strip."""

    options = (PROMPT_OPTION,)
    kind = ""

    def prepare(self, ctx):
        prep = super().prepare(ctx)
        variant = ctx.options_for(self)["prompt"]
        prep.state["variant"] = variant
        prep.state["max_tokens"] = MAX_TOKENS.get((self.kind, variant), self.max_tokens)
        prep.settings.update(prompt_variant=variant, max_tokens=prep.state["max_tokens"],
                             answer_strip="newlines only (released API cells)" if variant == "released-api" else "all whitespace")
        if variant in VARIANT_VERSIONS:
            prep.settings["variant_version"] = VARIANT_VERSIONS[variant]
        return prep

    def parse_with(self, text: str, prep: Prepared) -> int | None:
        return parse_answer(text, "\n" if prep.state["variant"] == "released-api" else None)

    def budget(self, prep: Prepared) -> int:
        return prep.state["max_tokens"]


@registry.task
class ZeroShot(_Variant):
    name = "econnli-zero"
    prompt_version = "econnli-zero/2"  # /2: the released prompts' whitespace (-T prompt=), 10 new tokens for open models
    description = "EconNLI classification, zero-shot (released-code prompt)"
    kind = "zero"
    shots = 0
    options = (ZERO_PROMPT_OPTION,)

    def prompt(self, item, prep):
        text = ZERO_PROMPTS[prep.state["variant"]]
        return text.split("premise: {premise}")[0], text.format(premise=item["premise"], hypothesis=item["hypothesis"])


@registry.task
class ICLTask(_Variant):
    name = "econnli-icl"
    prompt_version = "econnli-icl/2"  # /2: the released prompts (-T prompt=), 3 new tokens for open models
    kind = "icl"
    shots = 2  # one positive, one negative
    description = "EconNLI classification, ICL: one positive and one negative train example per item (Appendix D.3)"

    def prepare(self, ctx):
        prep = super().prepare(ctx)
        agree = [r for r in data.load(BENCHMARK, "train.jsonl") if r["chatgpt_label"] == r["gpt4_label"]]
        prep.state["pos"] = [r for r in agree if r["chatgpt_label"] == 1]
        prep.state["neg"] = [r for r in agree if r["chatgpt_label"] == 0]
        prep.state["seed"] = ctx.seed
        prep.settings["demonstrations"] = ("per item: one positive, one negative, drawn from train rows where "
                                           "ChatGPT_label == GPT4_label with random.Random(f'{seed}/{item id}'); "
                                           "ids are recorded per sample")
        return prep

    def demos(self, item, prep) -> tuple[dict, dict]:
        rng = random.Random(f"{prep.state['seed']}/{item['id']}")
        return rng.choice(prep.state["pos"]), rng.choice(prep.state["neg"])

    def prompt(self, item, prep):
        pos, neg = self.demos(item, prep)
        text = ICL_PROMPTS[prep.state["variant"]]
        return text.split("{p_pos}")[0], text.format(p_pos=pos["premise"], h_pos=pos["hypothesis"], p_neg=neg["premise"],
                                                     h_neg=neg["hypothesis"], premise=item["premise"], hypothesis=item["hypothesis"])

    def score(self, item, outputs, prep):
        rec = super().score(item, outputs, prep)
        rec["demonstrations"] = [d["id"] for d in self.demos(item, prep)]
        rec["released_code_pred"] = released_icl_parse(self.prompt(item, prep)[1], outputs["response"])
        return rec

    def aggregate(self, records, prep):
        out = super().aggregate(records, prep)
        rel = [r for r in records if r.get("released_code_pred") is not None]
        out["extras"]["released_code"] = {
            "description": "the released open-model code's parse: prompt + output split at the first 'answer:' (the "
                           "positive demonstration's), so every item reads Yes — the published open-model ICL rows",
            "n": len(rel), **table_row([r["gold"] for r in rel], [r["released_code_pred"] for r in rel])}
        return out


@registry.task
class CoTTask(_EconNLITask):
    name = "econnli-cot"
    prompt_version = "econnli-cot/2"  # /2: the released notebook's prompt (both demonstrations' real text)
    description = "EconNLI classification, chain-of-thought with the released notebook's two demonstrations"
    logprobs = False  # the answer follows the model's own reasoning: no fixed answer position
    shots = 2
    sample_cells: tuple[CellView, ...] = ()  # its table counts every rule's votes (a record may give two): a sample keeps the bootstrap
    max_tokens = 200  # the released code's max_new_tokens
    stop = ("### Question:", "### Answer:")  # where the released split ends the answer
    settled = None  # the answer comes after the reasoning
    options = (TaskOption("cot_parse", "released-llama",
                          "which released CoT rule gives the headline: released-llama (the LLAMA2 13B / Alpaca rows: "
                          "'Yes.' then 'No.'), released-finma (the LLAMA2 7B / FINMA rows: independent 'Yes'/'No' "
                          "substrings, an answer with both counted twice), released-gpt (the ChatGPT/GPT-4 rows: the "
                          "last line); the other two are reported beside it",
                          COT_RULES, "choice"),
               TaskOption("cot_reply", "cut", "cut: 200 new tokens, stopped at the next '### Question:' or '### Answer:' "
                          "(the released open-model code's budget and split) | raw: the reply as the model gives it, no "
                          f"stop, up to {RAW_REPLY_TOKENS} tokens, released-gpt reading its last line as the GPT cells did "
                          "(they set no cap): for served chat models", ("cut", "raw"), "choice"))

    parse_rule = "released CoT rule named by the cot_parse option (run.json: options); the other two are extras"

    def prepare(self, ctx):
        prep = super().prepare(ctx)
        opts = ctx.options_for(self)
        prep.settings["parse_rule"] = opts["cot_parse"]
        prep.state["raw"] = opts["cot_reply"] == "raw"
        if prep.state["raw"]:
            prep.settings.update(cot_reply="raw: no stop, the reply unstripped, released-gpt on its last line",
                                 max_tokens=RAW_REPLY_TOKENS, stop=[])
        return prep

    def budget(self, prep):
        return RAW_REPLY_TOKENS if prep.state.get("raw") else self.max_tokens

    def stops(self, prep):
        return () if prep.state.get("raw") else self.stop

    def prompt(self, item, prep):
        return COT_DEMOS, COT_DEMOS + COT_QUESTION.format(premise=item["premise"], hypothesis=item["hypothesis"])

    def score(self, item, outputs, prep):
        votes = {rule: cot_votes(outputs["response"], rule, prep.state.get("raw", False)) for rule in COT_RULES}
        mine = votes[prep.options["cot_parse"]]
        parsed = mine[0] if len(mine) == 1 else None
        return {"parsed": parsed, "gold": item["label"], "correct": None if parsed is None else parsed == item["label"],
                "votes": votes}

    def aggregate(self, records, prep):
        def row(rule):
            pairs = [(r["gold"], v) for r in records for v in r["votes"][rule]]
            return {"n_predictions": len(pairs), "n_dropped": sum(1 for r in records if not r["votes"][rule]),
                    "n_counted_twice": sum(1 for r in records if len(r["votes"][rule]) == 2),
                    **table_row([g for g, _ in pairs], [v for _, v in pairs])}

        rule = prep.options["cot_parse"]
        mine = row(rule)
        out = {"table": "EconNLI Table 4 (classification)", "n": len(records),
               "n_scored": len(records) - mine["n_dropped"], "n_unparsed": mine["n_dropped"],
               "parse_rule": rule, "paper": {k: mine[k] for k in (CLASSES[0], CLASSES[1], "Average", "accuracy")},
               "extras": {r: {"description": f"the {r} rule", **row(r)} for r in COT_RULES if r != rule}}
        out["extras"]["headline_rule_counts"] = {k: mine[k] for k in ("n_predictions", "n_dropped", "n_counted_twice")}
        out["extras"]["strict"] = {"description": "unparsable (or doubly counted) answers count as wrong (all items, one prediction each)",
                                   **table_row([r["gold"] for r in records],
                                               [r["parsed"] if r["parsed"] is not None else 1 - r["gold"] for r in records])}
        return out


GEN_PROMPT = ("If the event {premise} happens, what event will be caused? Answer the possible resulting event "
              "very briefly in one sentence. answer:")
# The released judge prompt (generation_evaluation.ipynb, `prompt2`), filled as the released code
# did: event 1 = the reference hypothesis, event 2 = the model's answer (Appendix D.5 shows the
# reverse order and slightly different wording).
JUDGE_PROMPT = (
    "I will give you two economical events. Determine the connection between these two events, choosing from "
    "'entailment', 'contradiction', and 'irrelevant'. 'Entailment' means the two events describe the similar "
    "economical phenomena, 'contradiction' means the two events describe the opposite economical phenomena, "
    "'irrelevant' means the two events are not related or not belonging to one of the above two classes. "
    "Only provide the label.Event 1: {hypothesis}, event 2:{answer}"
)
JUDGE_LABELS = ("entailment", "contradiction", "irrelevant")
GEN_MAX_TOKENS = 100  # prompt_llama_like_model's default max_new_tokens
JUDGE_MAX_TOKENS = 16  # room for a label and a little more (GPT-4 answered with the label)


def parse_judge(text: str) -> str | None:
    """The released check, in its fixed order: the lower-cased answer contains "entailment", else
    "contradiction", else "irrelevant"; otherwise the answer is not counted."""
    low = text.lower()
    return next((lab for lab in JUDGE_LABELS if lab in low), None)


def released_gen_answer(prompt: str, response: str) -> str:
    """The released open-model code: prompt + output split at the first "answer:", stripped."""
    parts = (prompt + response).split("answer:")
    return parts[1].strip() if len(parts) > 1 else response.strip()


@registry.task
class GenTask(Task):
    """Table 6: generate the consequence of each positive premise; a judge model labels it
    against the reference hypothesis as entailment / contradiction / irrelevant (Appendix D.5)."""

    name = "econnli-gen"
    shots = 0
    suite = "econnli"
    benchmark = BENCHMARK
    prompt_version = "econnli-gen/2"  # /2: the released code's generation length and judge prompt
    description = "EconNLI generation of consequences, judged entailment/contradiction/irrelevant by --judge (Table 6)"
    roles = (MODEL, JUDGE)
    stages = 2  # the evaluated model's answer, then the judge's label
    metrics = (Metric("Ent.", count=True, bounds=(0.0, math.inf)), Metric("Con.", count=True, bounds=(0.0, math.inf)),
               Metric("Irr.", count=True, bounds=(0.0, math.inf)), Metric("Con./Ent.(%)", lower_is_better=True, bounds=(0.0, math.inf)))
    item_metrics = ()  # the judge's labels make counts and a ratio, not a mean over items: `econeval gate` does not gate them
    gold_field = "reference"  # the hypothesis the generated consequence is judged against

    def prepare(self, ctx):
        items = [r for r in data.load(BENCHMARK, "test.jsonl") if r["label"] == 1]
        return Prepared(items=items, settings={
            "items": "the 513 positive test pairs",
            "max_tokens": GEN_MAX_TOKENS, "stop": "none (the released code generates 100 tokens and keeps all of it)",
            "answer": "prompt + output split at the first 'answer:', stripped (released open-model code)",
            "chat_template": "none for the answer (released: raw prompt); the judge's request asks for one (GPT-4 chat API)",
            "judge_prompt": "released notebook prompt2, filled (hypothesis, answer); Appendix D.5 shows (answer, hypothesis)",
            "judge_max_tokens": JUDGE_MAX_TOKENS,
            "judge_parse": "released: 'entailment' in the lower-cased answer, else 'contradiction', else 'irrelevant'; "
                           "otherwise not counted"})

    def requests(self, item, prep, outputs):
        prompt = GEN_PROMPT.format(premise=item["premise"])
        if "response" not in outputs:
            return {"response": Generate(prompt=prompt, max_tokens=GEN_MAX_TOKENS)}
        judge = JUDGE_PROMPT.format(hypothesis=item["hypothesis"], answer=released_gen_answer(prompt, outputs["response"]))
        return {"judge_option_logprobs": OptionLogprobs(prompt=judge, options=JUDGE_LABELS, chat=True, role=JUDGE),
                "judge_response": Generate(prompt=judge, max_tokens=JUDGE_MAX_TOKENS, stop=("\n",), chat=True, role=JUDGE)}

    def score(self, item, outputs, prep):
        scored = outputs.get("judge_option_logprobs") or {}
        prompt = GEN_PROMPT.format(premise=item["premise"])
        return {"answer": released_gen_answer(prompt, outputs["response"]), "reference": item["hypothesis"],
                "parsed": parse_judge(outputs["judge_response"]),
                "judge_logprob_label": max(scored, key=lambda label: scored[label]) if scored else None}

    def aggregate(self, records, prep):
        def row(labels):
            ent, con, irr = (sum(1 for x in labels if x == k) for k in JUDGE_LABELS)
            return {"Ent.": ent, "Con.": con, "Irr.": irr, "Con./Ent.(%)": 100 * con / ent if ent else None}

        parsed = [r.get("parsed") for r in records]
        return {"table": "EconNLI Table 6 (generation, judged)",
                "n_scored": sum(p is not None for p in parsed), "n_unparsed": sum(p is None for p in parsed),
                "paper": row(parsed),
                "extras": {"judge_logprob": {"description": "the judge's most likely label by log-probability (never unparsable)",
                                             **row([r.get("judge_logprob_label") for r in records])}}}

    def headline(self, result):
        p = result["paper"]
        return {k: p[k] for k in ("Ent.", "Con.", "Irr.", "Con./Ent.(%)")}

    table_numbers = headline


# ---- the paper's tables (econeval report) --------------------------------------------------------
PUBLISHED = Path(__file__).resolve().parent.parent / "published" / "econnli.json"
TABLE4_SETTINGS = {"econnli-zero": "Zero", "econnli-icl": "ICL", "econnli-cot": "CoT"}
_CELLS = [(c, m) for c in (CLASSES[0], CLASSES[1], "Average") for m in ("precision", "recall", "f1")]


def fine_tuned(run) -> bool:
    """Whether a run's zero-shot rows belong to Table 3: it ran econnli-zero with the fine-tuned
    models' prompt (-T prompt=sft)."""
    return run.record.task(ZeroShot.name).option("prompt") == "sft"


def _table3(runs) -> Table | None:
    pub = published(PUBLISHED)["tables"]["table3"]
    tuned = [r for r in runs if fine_tuned(r)]
    mine = task_rows(tuned, {ZeroShot.name: "SFT prompt (D.1)"}, lambda res: [res["paper"][c][m] for c, m in _CELLS], pub["columns"])
    if not mine:
        return None
    tab = Table("econnli-table3", "EconNLI Table 3: classification after supervised fine-tuning (precision / recall / F1 "
                "per class)", pub["columns"], 3, headline=[c for c in pub["columns"] if c.startswith("Average")])
    paper_rows = [{**row, "setting": {"encoder": "SFT (classifier head)", "decoder, LoRA": "SFT (LoRA)"}.get(r.get("fine_tuned"))}
                  for row, r in zip(published_rows(pub), pub["rows"])]
    tab.rows = paper_rows + [row for *_, row in mine]
    adapters = [f"{run.label}: " + ", ".join(f"{Path(a.get('path', '?')).name} (scale {a.get('scale')}, sha256 "
                                             f"{str(a.get('sha256'))[:12]}…)" for a in run.record.lora)
                for run, *_ in mine if run.record.lora]
    tab.notes = ["Published rows: mean ± std over three fine-tunings on the train set's ChatGPT labels (10% held out "
                 "for validation, 3 epochs, the best checkpoint): BERT to FLANG-ELECTRA as sequence classifiers "
                 "(HuggingFace Trainer), which econeval does not run (it evaluates generative models); LLAMA2-chat (7B, "
                 "13B) with LoRA (r 16, alpha 32), evaluated greedily with the fine-tuning prompt and the released "
                 "rule, as econeval's rows (`-T prompt=sft`: Appendix D.1 as the released notebook wrote it, 3 new "
                 "tokens; the model a fine-tuned GGUF, or the base GGUF with its adapter: -M lora=ADAPTER.gguf).",
                 "A run row is one fine-tuned model, with its 95% interval over items; the paper's ± is the spread over "
                 "three fine-tunings: run each fine-tuning's adapter and compare the rows (--epochs repeats one model "
                 "with other seeds, which changes nothing for this greedy zero-shot prompt).",
                 "Rows are computed over the parsed answers (n); unparsable answers are excluded, as in the released code."]
    tab.notes += [f"LoRA adapters: {a}" for a in adapters]
    tab.notes += limit_notes([(run, res) for run, _, res, _ in mine])
    return tab


def _table4(runs) -> Table | None:
    pub = published(PUBLISHED)["tables"]["table4"]
    runs = [r for r in runs if not fine_tuned(r)]  # a fine-tuned model's zero-shot rows are Table 3's
    mine = task_rows(runs, TABLE4_SETTINGS, lambda res: [res["paper"][c][m] for c, m in _CELLS], pub["columns"])
    if not mine:
        return None
    tab = Table("econnli-table4", "EconNLI Table 4: classification (precision / recall / F1 per class)", pub["columns"], 3,
                headline=[c for c in pub["columns"] if c.startswith("Average")])
    paper_rows = published_rows(pub)
    for row in paper_rows:  # which released rule and which average reproduce the row (published/econnli.json)
        how = row.get("reproduced_by") or {}
        marks = [how["cot_parse"]] if "cot_parse" in how else []
        marks += ["weighted avg"] if how.get("average") == "weighted" else []
        if marks:
            row["setting"] = f"{row['setting']} ({', '.join(marks)})"
    run_rows = []
    for run, task, res, row in mine:
        if task != "econnli-cot":
            run_rows.append(row)
            continue
        row = {**row, "setting": f"CoT ({res.get('parse_rule')})"}
        run_rows.append(row)
        for rule in COT_RULES:  # the run scored as each published CoT row was
            other = (res.get("extras") or {}).get(rule)
            if rule != res.get("parse_rule") and other:
                run_rows.append({"source": "run", "label": run.label, "setting": f"CoT ({rule})",
                                 "values": [other[c][m] for c, m in _CELLS], "intervals": None, "n": other.get("n_predictions")})
    tab.rows = paper_rows + run_rows
    tab.notes = ["Published rows: open models through HuggingFace, greedy; ChatGPT/GPT-4 through OpenAI's API (January 2024).",
                 "CoT rows name the released rule that reproduces them (the released results file's supports settle it: "
                 "LLAMA2 (7B)'s 1,028 predictions on 1,026 items can only come from released-finma's independent 'Yes'/'No' "
                 "tests, the notebook's live code, which FINMA's row also ran under; LLAMA2 (13B) and Alpaca ran under the "
                 "commented-out released-llama rule; ChatGPT/GPT-4 under the last-line rule released-gpt); each econeval CoT run "
                 "is shown scored by all three (n: predictions), so every published row has its like.",
                 "Averages are macro averages, as sklearn's classification_report prints them, except ChatGPT Zero's published "
                 "Average, which is the weighted average (its supports differ: 1,024 predictions); econeval's rows are macro "
                 "(equal to the weighted one when both classes have the same support).",
                 "The published open-model ICL rows are a parsing artefact of the released code (it reads the demonstration's "
                 "'answer:Yes', so every item is predicted Yes); econeval's row parses the model's own continuation.",
                 "Rows are computed over the parsed answers (n); unparsable answers are excluded, as in the released code."]
    tab.notes += limit_notes([(run, res) for run, _, res, _ in mine])
    labels = [f"{run.label} {TABLE4_SETTINGS[task]}" for run, task, _, _ in mine]
    series = [{"name": f"{cls.split()[0]} F1", "values": [res["paper"][cls]["f1"] for _, _, res, _ in mine],
               "intervals": [interval(res, f"{cls.split()[0]} F1") for _, _, res, _ in mine]} for cls in (CLASSES[0], CLASSES[1])]
    f1_cols = [pub["columns"].index(f"{cls.split()[0]} F1") for cls in (CLASSES[0], CLASSES[1])]
    marks = []
    for model in ("GPT-4", "LLAMA2 (7B)"):  # the paper's strongest model and the open model econeval's default resembles
        by_setting = {r["prompting"]: r["values"] for r in pub["rows"] if r["model"] == model}
        marks.append({"name": f"{model} (published)",
                      "values": [[by_setting.get(TABLE4_SETTINGS[task], [None] * 9)[c] for c in f1_cols] for _, task, _, _ in mine]})
    tab.figures = [{"kind": "bars", "caption": "EconNLI: F1 per class for each run and prompting method, with 95% intervals; "
                                               "ticks: published F1 of GPT-4 and LLAMA2 (7B) with the same prompting "
                                               "(dashed: random guessing).",
                    "groups": labels, "series": series, "marks": marks, "reference": {"value": 0.5, "label": "random"},
                    "ylim": [0, 1]}]
    return tab


def _table6(runs) -> Table | None:
    pub = published(PUBLISHED)["tables"]["table6"]
    mine = task_rows(runs, {"econnli-gen": None}, lambda res: [res["paper"].get(c) for c in pub["columns"]], pub["columns"])
    if not mine:
        return None
    tab = Table("econnli-table6", "EconNLI Table 6: generated consequences judged against the reference", pub["columns"], 2)
    paper_rows = [{**row, "setting": "judge: GPT-4"} for row in published_rows(pub)]
    run_rows = []
    for run, *_, row in mine:  # who judged each run: never shown as if GPT-4 had
        judge = run.record.judged_by(JUDGE)
        run_rows.append({**row, "setting": judge if judge == SELF_JUDGED else f"judge: {judge}"})
    tab.rows = paper_rows + run_rows
    judges = {run.record.judged_by(JUDGE) for run, *_ in mine}
    tab.notes = ["Published rows were judged by GPT-4 over 513 positive pairs; econeval's by the judge its setting names."]
    if SELF_JUDGED in judges:
        tab.notes.append("self-judged: the evaluated model labelled its own answers (no --judge, the default, or a --judge "
                         "naming the same model): these counts are not comparable with the paper's GPT-4-judged rows; "
                         "pass --judge MODEL for a judge of its own.")
    tab.notes += limit_notes([(run, res) for run, _, res, _ in mine])
    return tab


def paper_tables(runs) -> list[Table]:
    return [t for t in (_table3(runs), _table4(runs), _table6(runs)) if t]


registry.benchmark(BENCHMARK, build, tables=paper_tables)
