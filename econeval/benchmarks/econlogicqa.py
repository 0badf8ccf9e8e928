"""EconLogicQA (Quan & Liu, 2024): order four economic events A-D. Table 2: exact-match accuracy
for 1-shot and 5-shot prompting; pairwise accuracy is an extra.

Prompting follows the harness task proposed upstream: `Question: ...\\nA. ...\\nD. ...\\nAnswer:`,
target ` B, D, A, C`, few-shot examples drawn from train for each item (`-T shots=fixed`: one
set for all), greedy, at most 64 new tokens, stop at a blank line or at a new `Question:`.
"""

from __future__ import annotations

import csv
import random
import re
from itertools import combinations
from pathlib import Path

from .. import data, registry
from ..tables import Metric, Table, interval, limit_notes, published, published_rows
from ..types import Generate, Prepared, Task, TaskOption

BENCHMARK = "econlogicqa"
LETTERS = "ABCD"
MAX_TOKENS = 64
STOP = ("\n\n", "Question:")


def _rows(path: Path, split: str) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return [{"id": f"econlogicqa/{split}/{i}", "row": i, "question": r["Question"],
                 "options": {k: r[k] for k in LETTERS}, "answer": r["Answer"]}
                for i, r in enumerate(csv.DictReader(fh))]


def build(src: Path) -> dict[str, list[dict]]:
    rec = src / "reconstructed"
    files = {
        "test.jsonl": _rows(rec / "econlogicqa_test_reconstructed.csv", "test"),
        "train.jsonl": _rows(rec / "econlogicqa_train_reconstructed.csv", "train"),
        "validation.jsonl": _rows(rec / "econlogicqa_val_reconstructed.csv", "validation"),
    }
    # One real model's raw generations on test (FLaME, Llama-3.1-8B-Instruct): a predictions
    # file for `econeval score` and a regression set for the answer reader.
    with open(src / "raw" / "flame_econlogicqa_Meta-Llama-3.1-8B-Instruct-Turbo_04_11_2024.csv", newline="", encoding="utf-8") as fh:
        files["flame_llama31_8b_predictions.jsonl"] = [
            {"id": f"econlogicqa/test/{i}", "response": r["llm_complete_responses"], "first_line": r["llm_responses"]}
            for i, r in enumerate(csv.DictReader(fh))]
    return files


def build_hub(src: Path) -> dict[str, list[dict]]:
    """The full release (upstream `hub`: the Hugging Face dataset yinzhu-quan/econ_logic_qa, its
    `train.csv`, `validation.csv` and `test.csv`, columns Question, A-D, Answer), read as the
    reconstruction is: the same ids, so a run on it names the same items."""
    return {f"{split}.jsonl": _rows(src / f"{split}.csv", split) for split in ("test", "train", "validation")}


# ---- the answer reader ------------------------------------------------------------------
_LETTER = re.compile(r"(?<![A-Za-z0-9])([A-Da-d])(?![A-Za-z0-9])|(?<![A-Za-z0-9])([A-D]{4})(?![A-Za-z0-9])")
_GAP = re.compile(r"^[\s,;>\-=~*'\"()\[\]→⟶⇒]*(?:(?:and|then|and then|followed by)[\s,;>\-=*()\[\]→]*)?$", re.IGNORECASE)
_MARKER = re.compile(r"\b(?:answer|order|sequence|ordering|arrangement)\b", re.IGNORECASE)
_MARKER_WINDOW = 60  # characters between an answer marker and the ordering it introduces


def _runs(text: str) -> list[tuple[int, str]]:
    """Chains of isolated option letters joined only by separators (`,` `;` `->` `→` `>` `and` ...),
    as (start offset, letters). A 4-letter block such as `BDAC` is a chain of its own. Letters of
    one chain share their case, so the article "a" never joins a chain of capitals."""
    runs: list[tuple[int, str]] = []
    cur, start, last_end, last_case = "", -1, -1, None
    for m in _LETTER.finditer(text):
        if m.group(2):  # BDAC
            if cur:
                runs.append((start, cur))
            runs.append((m.start(), m.group(2)))
            cur, last_end = "", m.end()
            continue
        ch = m.group(1)
        case = ch.isupper()
        if cur and case == last_case and _GAP.match(text[last_end:m.start()]):
            cur += ch.upper()
        else:
            if cur:
                runs.append((start, cur))
            cur, start = ch.upper(), m.start()
        last_end, last_case = m.end(), case
    if cur:
        runs.append((start, cur))
    return [(s, r) for s, r in runs if len(r) >= 3]


def read_order(text: str) -> tuple[str | None, str]:
    """The ordering a generation commits to, as `B, D, A, C`, or None; and why.

    The text is cut where the model starts a new `Question:`. The last answer marker (answer /
    order / sequence) followed within a few characters by a chain of letters decides; without
    one, the first chain in the text. A chain with repeated, missing or extra letters is
    unparsable: nothing is guessed. Single letters in prose (`event (B) comes first`) and
    an echoed option list (`A. ... B. ...`) are not chains.
    """
    text = re.split(r"\n\s*Question:", text, maxsplit=1)[0]
    runs = _runs(text)
    if not runs:
        return None, "no ordering of letters found"
    chosen = None
    for m in reversed(list(_MARKER.finditer(text))):
        after = [r for s, r in runs if m.end() <= s <= m.end() + _MARKER_WINDOW]
        if after:
            chosen = after[0]
            break
    if chosen is None:
        chosen = runs[0][1]
    if sorted(chosen) != list(LETTERS):
        return None, f"'{chosen}' is not a permutation of A-D"
    return ", ".join(chosen), "ok"


# The reader of the harness task's PR (#4120, `extract_order`), as it behaves: the text after the
# last answer marker first, then the whole text; in each, the first run of four option letters
# with separators (`D, A, C, B`, `D -> A`, `D then A`, any case) that is a permutation, else the
# first unseparated capital run (`DACB`), else the first window of four standalone capitals.
_PR_GAP = r"\s*(?:,|;|-->|->|→|>|\||\band\b|\bthen\b)?\s*"
_PR_LONE = r"(?<![A-Za-z])[ABCD](?![A-Za-z])"
_PR_SPACED = re.compile(rf"(?<![A-Za-z])[ABCD](?:{_PR_GAP}{_PR_LONE}){{3}}", re.IGNORECASE)
_PR_TIGHT = re.compile(r"(?<![A-Za-z])[ABCD]{4}(?![A-Za-z])")
_PR_MARKER = re.compile(r"(?i)\b(?:answer|order|sequence|ordering)\b\s*(?:is)?\s*[:\-–]?\s*")
READERS = {
    "econeval": "econeval answer reader v1 (last answer marker wins; permutations of A-D only)",
    "extract_order": "the harness PR #4120's extract_order (after the last answer marker, else anywhere: the first "
                     "separated run, else a tight capital run, else four standalone capitals, that is a permutation)",
}


def order_as_pr_reads(text: str) -> str | None:
    """The ordering `extract_order` of the harness PR finds, as `B, D, A, C`, or None."""
    marks = list(_PR_MARKER.finditer(text or ""))
    for segment in ([text[marks[-1].end():]] if marks else []) + [text or ""]:
        for pattern in (_PR_SPACED, _PR_TIGHT):
            for m in pattern.finditer(segment):
                letters = re.findall("[ABCD]", m.group(0).upper())
                if sorted(letters) == list(LETTERS):
                    return ", ".join(letters)
        lone = re.findall(r"(?<![A-Za-z])([ABCD])(?![A-Za-z])", segment)
        for i in range(len(lone) - 3):
            if sorted(lone[i:i + 4]) == list(LETTERS):
                return ", ".join(lone[i:i + 4])
    return None


def pairwise_accuracy(pred: str, gold: str) -> float:
    p, g = pred.replace(", ", ""), gold.replace(", ", "")
    pairs = list(combinations(g, 2))  # gold order: x before y
    return sum(p.index(x) < p.index(y) for x, y in pairs) / len(pairs)


def format_question(item: dict) -> str:
    opts = "\n".join(f"{k}. {item['options'][k]}" for k in LETTERS)
    return f"Question: {item['question']}\n{opts}\nAnswer:"


def _demos(shots: list[dict]) -> str:
    return "".join(f"{format_question(s)} {s['answer']}\n\n" for s in shots)


class _FewShot(Task):
    suite = "econlogicqa"
    benchmark = BENCHMARK
    metrics = (Metric("accuracy", paired_exact=True), Metric("pairwise"))
    item_metrics = metrics  # both are means over all items (an unparsed answer scores 0)
    options = (TaskOption("shots", "per-item", "per-item: each item's demonstrations drawn from train, seeded by the seed and "
                          "the item's id (as the harness task samples them per document); fixed: one seeded set for every item "
                          "(econeval before prompt version 3)", choices=("per-item", "fixed")),
               TaskOption("stops", "after-text", "after-text: the stop strings apply once non-blank text was generated | "
                          "harness: at their first occurrence anywhere, as the harness's `until` (an answer that starts with "
                          "a blank line is then empty)", choices=("after-text", "harness")),
               TaskOption("reader", "econeval", "econeval: econeval's answer reader | extract_order: the harness PR "
                          "#4120's reader", choices=tuple(READERS)))
    k = 1

    def n_shot(self, prep):
        return self.k

    def prepare(self, ctx) -> Prepared:
        train = data.load(BENCHMARK, "train.jsonl")
        opts = ctx.options_for(self)
        mode = opts["shots"]
        upstream = data.built_upstream(BENCHMARK)  # the full release (hub) where it was built from it
        source = "train (partial reconstruction: 189 of 390 rows)" if upstream is None else \
            f"train ({len(train)} rows of upstream {upstream})"
        settings = {"shots": mode, "shot_source": source,
                    "max_tokens": MAX_TOKENS, "stop": list(STOP), "decoding": "greedy", "reader": READERS[opts["reader"]]}
        if opts["stops"] == "harness":
            settings["stops"] = "at their first occurrence anywhere (the harness's until)"
        state = {"train": train, "seed": ctx.seed, "mode": mode, "after_text": opts["stops"] == "after-text",
                 "reader": opts["reader"]}
        if mode == "fixed":
            shots = random.Random(ctx.seed).sample(train, self.k)
            settings["shot_ids"] = [s["id"] for s in shots]
            state["prefix"] = _demos(shots)
        else:
            settings["shot_draw"] = "random.Random(f'{seed}/{item id}').sample(train, k), per item"
        return Prepared(items=data.load(BENCHMARK, "test.jsonl"), settings=settings, state=state)

    def shots_for(self, item: dict, prep: Prepared) -> list[dict]:
        """The item's demonstrations: the same on every run with the same seed, whatever the
        order, shard or --limit the item runs in."""
        return random.Random(f"{prep.state['seed']}/{item['id']}").sample(prep.state["train"], self.k)

    def requests(self, item, prep, outputs):
        if prep.state["mode"] == "fixed":
            prefix = prep.state["prefix"]
            return {"response": Generate(prompt=prefix + format_question(item), prefix=prefix, max_tokens=MAX_TOKENS,
                                         stop=STOP, stop_after_text=prep.state["after_text"])}
        demos = _demos(self.shots_for(item, prep))
        return {"response": Generate(prompt=demos + format_question(item), max_tokens=MAX_TOKENS, stop=STOP,
                                     stop_after_text=prep.state["after_text"])}

    def score(self, item, outputs, prep):
        if prep.state["reader"] == "extract_order":
            order = order_as_pr_reads(outputs["response"])
            why = "ok" if order else "no permutation of A-D found (extract_order)"
        else:
            order, why = read_order(outputs["response"])
        rec = {"parsed": order, "gold": item["answer"], "correct": order == item["answer"]}
        if order is None:
            rec["unparsed_reason"] = why
        rec["pairwise"] = pairwise_accuracy(order, item["answer"]) if order else 0.0
        return rec

    def item_values(self, record):
        return {"accuracy": float(record["correct"]), "pairwise": float(record["pairwise"])}

    def aggregate(self, records, prep):
        n = len(records)
        unparsed = sum(r["parsed"] is None for r in records)
        return {
            "table": "EconLogicQA Table 2",
            "n_scored": n - unparsed, "n_unparsed": unparsed,
            "paper": {"accuracy": sum(r["correct"] for r in records) / n if n else None},
            "extras": {"pairwise_accuracy": {"description": "share of the 6 event pairs in the right relative order; unparsable scores 0",
                                             "value": sum(r["pairwise"] for r in records) / n if n else None}},
        }

    def headline(self, result):
        return {"accuracy": result["paper"]["accuracy"], "pairwise": result["extras"]["pairwise_accuracy"]["value"]}


@registry.task
class OneShot(_FewShot):
    name = "econlogicqa-1shot"
    prompt_version = "econlogicqa-1shot/3"  # /2: the raw prompt (no chat template), as the harness fed it; /3: shots per item
    description = "EconLogicQA event ordering, 1-shot (Table 2)"
    k = 1


@registry.task
class FiveShot(_FewShot):
    name = "econlogicqa-5shot"
    prompt_version = "econlogicqa-5shot/3"
    description = "EconLogicQA event ordering, 5-shot (Table 2)"
    k = 5



# ---- the paper's table (econeval report) ---------------------------------------------------------
PUBLISHED = Path(__file__).resolve().parent.parent / "published" / "econlogicqa.json"
TASKS = ("econlogicqa-1shot", "econlogicqa-5shot")


def paper_tables(runs) -> list[Table]:
    pub = published(PUBLISHED)["tables"]["table2"]
    mine = [r for r in runs if any(t in r.results for t in TASKS)]
    if not mine:
        return []
    tab = Table("econlogicqa-table2", "EconLogicQA Table 2: accuracy (%)", pub["columns"], 2)
    tab.rows = published_rows(pub)
    for run in mine:
        vals, ivs, ns = [], [], []
        for t in TASKS:
            res = run.results.get(t)
            acc = res["paper"]["accuracy"] if res else None
            vals.append(None if acc is None else 100 * acc)
            iv = interval(res, "accuracy")
            ivs.append([100 * x for x in iv] if iv else None)
            ns.append(res.get("n") if res else None)
        tab.rows.append({"source": "run", "label": run.label, "values": vals, "intervals": ivs,
                         "n": "/".join("-" if n is None else str(n) for n in ns)})
    full = [r for r in mine if all(r.record.task(t).data_upstream() == "hub" for t in TASKS if t in r.results)]
    tab.notes = [f"{r.label}: few-shot demonstrations from the full train split (390 rows, upstream hub)." for r in full]
    if len(full) < len(mine):
        tab.notes.append("Few-shot demonstrations come from a partial train split (189 of 390 rows were released); the paper drew "
                         "them from the full split.")
    tab.notes.append("n: items of the 1-shot / 5-shot runs.")
    tab.notes += limit_notes([(r, r.results.get(TASKS[0]) or r.results.get(TASKS[1])) for r in mine])
    runs_ = [row for row in tab.rows if row["source"] == "run"]
    best = max((r for r in tab.rows if r["source"] == "paper"), default=None,
               key=lambda r: max([v for v in r["values"] if v is not None], default=-1.0))
    tab.figures = [{"kind": "bars", "groups": list(pub["columns"]), "ylim": [0, 100],
                    "caption": "EconLogicQA: accuracy (%) of each run, 1-shot and 5-shot, with 95% intervals; dashed: "
                               "random ordering of 4 events (1 in 24)" + (f"; the best published row is {best['label']}'s "
                                                                           "(table above)." if best else "."),
                    "series": [{"name": row["label"], "values": row["values"], "intervals": row["intervals"]} for row in runs_],
                    "reference": {"value": 100 / 24, "label": "random order (4.2%)"}}]
    return [tab]


registry.benchmark(BENCHMARK, build, tables=paper_tables, upstreams={"hub": build_hub})
