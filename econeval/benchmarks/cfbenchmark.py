"""CFBenchmark-Basic (Lei et al., 2023): eight Chinese financial tasks, zero- and few-shot.
Table 2: F1 for recognition (company, product) and classification (sector, event, sentiment),
embedding cosine similarity for generation (summary, risk, suggestion).

Prompt construction, decoding settings, post-processing and the F1 formula follow the released
code. Where the code and the paper's intent differ, run.json records which was used:
- `summary` decoding: the released code's typo ('summmary') runs summary with the
  classification settings (64 tokens); `--cfbenchmark-decoding intended` uses 512 tokens and the
  generation penalties instead;
- the repetition penalty is applied the Hugging Face way, over the whole context.
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import data, registry
from ..metrics import mean
from ..tables import Metric, Table, limit_notes, published, published_rows, task_rows
from ..types import EMBEDDER, MODEL, Generate, Prepared, Similarity, Task, TaskOption

BENCHMARK = "cfbenchmark"
RECOGNITION = ("company", "product")
CLASSIFICATION = ("sector", "event", "sentiment")
GENERATION = ("summary", "risk", "suggestion")
SUBTASKS = RECOGNITION + CLASSIFICATION + GENERATION
COLUMNS = {"Company": "company", "Product": "product", "Sector": "sector", "Event": "event", "Sentiment": "sentiment",
           "Summary": "summary", "Risk": "risk", "Suggestion": "suggestion"}
ANSWER_MARK = "回答："


def build(src: Path) -> dict[str, list[dict]]:
    files: dict[str, list[dict]] = {}
    for t in SUBTASKS:
        with open(src / "raw" / "data" / t / f"{t}.jsonl", encoding="utf-8") as fh:
            files[f"{t}.jsonl"] = [{"id": f"cfbenchmark/{t}/{i}", "task": t, "row": i, **json.loads(line)}
                                   for i, line in enumerate(fh) if line.strip()]
    files["fewshot.jsonl"] = [{"task": t, "text": (src / "raw" / "fewshot" / f"fewshot-{t}.txt").read_text(encoding="utf-8")}
                              for t in SUBTASKS]
    labels = json.loads((src / "raw" / "labels.json").read_text(encoding="utf-8"))
    files["labels.jsonl"] = [{"task": t, "labels": labels[t]} for t in CLASSIFICATION]
    return files




def decoding(task: str, few: bool, summary_mode: str) -> tuple[int, float]:
    """(max new tokens, repetition penalty) of the released code."""
    generation = task in ("risk", "suggestion") or (task == "summary" and summary_mode == "intended")
    if generation:
        return 512, (1.05 if few else 1.02)
    return 64, (1.03 if few else 1.00)


def candidates(instruction: str) -> str:
    return instruction.split("（", 1)[1].split("）", 1)[0] if "（" in instruction and "）" in instruction else ""


def build_prompt(item: dict, fewshot: str | None) -> tuple[str, str]:
    """(shared prefix, prompt) as the released code builds them."""
    if fewshot is None:  # the instruction is shared by many items of a sub-task (company, product: all)
        return item["instruction"], item["instruction"] + item["input"] + "\n" + ANSWER_MARK
    prefix = fewshot + "\ncase4：\n新闻内容："
    body = item["input"]
    if item["task"] in CLASSIFICATION:
        body += "\n类别：（" + candidates(item["instruction"]) + "）\n"
    return prefix, prefix + body + "\n" + ANSWER_MARK


def extract(prompt: str, response: str, few: bool) -> str:
    """Released post-processing on the whole decoded text (`split('回答：', k)[-1]`): all that follows
    the 1st (zero-shot) or 4th (few-shot) `回答：`, later ones kept, then its first line, stripped."""
    return (prompt + response).split(ANSWER_MARK, 4 if few else 1)[-1].split("\n", 1)[0].strip()


def _items(s: str) -> set[str]:
    """The released `get_y` split: `，` → `,`, strip the whole text, split on `,`, keep the parts
    that are non-empty *before* stripping (so " " becomes an empty item), strip each."""
    return {x.strip() for x in s.replace("，", ",").strip().split(",") if x}


def row_f1(gold: str, pred: str, labels: list[str]) -> float:
    """The released F1 of one row over the label list L (which may repeat a label), with one
    extra slot set in y_pred when nothing matched or when the prediction holds more items than
    y_pred counts (`y_pred.sum() == 0 or len(output) > y_pred.sum()`, exactly as released)."""
    g, p = _items(gold), _items(pred)
    y_true = [int(lab in g) for lab in labels] + [0]
    y_pred = [int(lab in p) for lab in labels] + [0]
    if sum(y_pred) == 0 or len(p) > sum(y_pred):
        y_pred[-1] = 1
    tp = sum(t and q for t, q in zip(y_true, y_pred))
    prec = tp / sum(y_true) if sum(y_true) else 0.0  # released: 0/0 is NaN, which its mean counts as 0
    rec = tp / sum(y_pred)
    return 2 * prec * rec / (prec + rec) if prec and rec else 0.0


# pandas' default NA strings: the released scorer writes answers to CSV and reads them back, so
# an answer (or reference) equal to one of these, or empty, becomes NaN and is embedded as "nan"
PANDAS_NA = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A",
             "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}


def released_text(text: str | None) -> str:
    """A text as the released scorer embeds it after its CSV round trip."""
    return "nan" if text is None or text in PANDAS_NA else text


def table2(scores: dict[str, float | None]) -> dict[str, float | None]:
    def avg(keys):
        vals = [v for v in (scores.get(k) for k in keys) if v is not None]
        return None if len(vals) < len(keys) else sum(vals) / len(vals)

    row = {col: scores.get(t) for col, t in COLUMNS.items()}
    row["R.Avg"], row["C.Avg"], row["G.Avg"] = avg(RECOGNITION), avg(CLASSIFICATION), avg(GENERATION)
    parts = [row["R.Avg"], row["C.Avg"], row["G.Avg"]]
    row["Avg"] = None if any(v is None for v in parts) else sum(v for v in parts if v is not None) / 3
    order = ["Company", "Product", "R.Avg", "Sector", "Event", "Sentiment", "C.Avg", "Summary", "Risk", "Suggestion", "G.Avg", "Avg"]
    return {k: row[k] for k in order}


class _CFB(Task):
    metrics = (Metric("R.Avg"), Metric("C.Avg"), Metric("G.Avg", bounds=(-1.0, 1.0)), Metric("Avg", bounds=(-1.0, 1.0)))  # cosines
    lead = "Avg"  # Table 2's last column: the mean of the three groups
    # each item's F1 (recognition, classification) or cosine similarity (generation): their mean
    # over all items, where the paper averages sub-task means
    item_metrics = (Metric("item score", bounds=(-1.0, 1.0)),)
    suite = "cfbenchmark"
    group_field = "subtask"
    labels = ("subtask",)
    answer_field = "answer"  # the answer extracted from the reply (a label list, a company name, a summary)

    def unparsed(self, record):
        return not record.get("answer")  # what n_unparsed counts: an empty extraction

    def strata(self, item):
        return item["task"]  # the sub-task: Table 2 is per sub-task
    benchmark = BENCHMARK
    roles = (MODEL, EMBEDDER)
    stages = 2  # the model's answer, then (generation sub-tasks) the embedding similarity to the reference
    few = False

    def n_shot(self, prep):
        return 3 if self.few else 0  # the upstream few-shot prompts hold three cases
    options = (TaskOption("summary_decoding", "released", "summary decoding: as the released code ran it (64 tokens, "
                          "classification penalty) or as intended (512 tokens)", ("released", "intended"), "choice",
                          flag="--cfbenchmark-decoding"),)

    def prepare(self, ctx) -> Prepared:
        mode = ctx.options_for(self)["summary_decoding"]
        items = [it for t in SUBTASKS for it in data.load(BENCHMARK, f"{t}.jsonl")]
        fewshot = {r["task"]: r["text"] for r in data.load(BENCHMARK, "fewshot.jsonl")}
        labels = {r["task"]: r["labels"] for r in data.load(BENCHMARK, "labels.jsonl")}
        settings = {
            "decoding": "greedy",
            "summary_decoding": mode,
            "per_subtask": {t: dict(zip(("max_tokens", "repetition_penalty"), decoding(t, self.few, mode))) for t in SUBTASKS},
            "repetition_penalty": "Hugging Face style over the whole context (llama.cpp's own covers only the last n tokens)",
            "stop": "first newline: the released post-processing keeps only the first line, so the score is unchanged",
            "post_processing": f"text after the {'4th' if self.few else '1st'} '回答：' of prompt + response, first line, stripped",
            "limit": "--limit N takes the first N rows of each of the 8 sub-tasks",
            "chat_template": "none by default: the released code tokenizes the raw prompt (--chat on applies one)",
            "f1": "released get_y: extra y_pred slot when y_pred.sum() == 0 or len(output set) > y_pred.sum()",
            "missing_text": "released: an empty answer or a missing reference is embedded as the string 'nan' "
                            "(pandas CSV round trip); extras.missing_as_zero scores those rows 0",
        }
        return Prepared(items=items, settings=settings, state={"fewshot": fewshot if self.few else None, "labels": labels, "mode": mode})

    def limit_items(self, items, limit):
        return [it for t in SUBTASKS for it in [x for x in items if x["task"] == t][:limit]]

    def _answer(self, item, prep, response: str) -> str:
        few = prep.state["fewshot"]
        _, prompt = build_prompt(item, few[item["task"]] if few else None)
        return extract(prompt, response, self.few)

    def requests(self, item, prep, outputs):
        if "response" not in outputs:
            few = prep.state["fewshot"]
            prefix, prompt = build_prompt(item, few[item["task"]] if few else None)
            max_tokens, penalty = decoding(item["task"], self.few, prep.state["mode"])
            return {"response": Generate(prompt=prompt, prefix=prefix, max_tokens=max_tokens, stop=("\n",),
                                         stop_after_text=False, repeat_penalty=penalty)}
        if item["task"] in GENERATION and "similarity" not in outputs:
            answer, reference = self._answer(item, prep, outputs["response"]), item["response"]
            return {"similarity": Similarity(released_text(answer), released_text(reference))}
        return {}

    def score(self, item, outputs, prep):
        answer = self._answer(item, prep, outputs["response"])
        rec = {"subtask": item["task"], "answer": answer, "gold": item["response"]}
        t = item["task"]
        if t in RECOGNITION:
            rec["f1"] = row_f1(item["response"], answer, item["response"].split("，"))
        elif t in CLASSIFICATION:
            rec["f1"] = row_f1(item["response"], answer, prep.state["labels"][t])
        else:
            substituted = [k for k, v in (("answer", answer), ("reference", item["response"])) if released_text(v) != v]
            if substituted:  # embedded as "nan", as the released scorer did
                rec["nan_substituted"] = substituted
        return rec

    def item_values(self, record):
        return {"item score": record["f1"] if "f1" in record else record.get("similarity")}  # as the sub-task means

    def aggregate(self, records, prep):
        per: dict[str, list[float]] = {}
        for r in records:
            per.setdefault(r["subtask"], []).append(r["f1"] if "f1" in r else r["similarity"])
        scores = {t: mean(v) for t, v in per.items()}
        return {
            "table": "CFBenchmark-Basic Table 2",
            "n_scored": len(records), "n_unparsed": sum(1 for r in records if not r["answer"]),
            "paper": table2(scores),
            "extras": {"n_per_subtask": {t: len(per.get(t, [])) for t in SUBTASKS},
                       "nan_substituted": {"description": "generation rows whose empty answer or missing reference was "
                                                          "embedded as 'nan' (the released CSV round trip)",
                                           "n": sum(1 for r in records if r.get("nan_substituted"))},
                       "missing_as_zero": {"description": "Table 2 with those rows scored 0 instead",
                                           **table2({t: mean([0.0 if r.get("nan_substituted") else (r["f1"] if "f1" in r else r["similarity"])
                                                              for r in records if r["subtask"] == t]) for t in per})}},
        }

    def headline(self, result):
        p = result["paper"]
        return {k: p[k] for k in ("R.Avg", "C.Avg", "G.Avg", "Avg")}

    def table_numbers(self, result):
        return dict(result["paper"])


@registry.task
class ZeroShot(_CFB):
    name = "cfbenchmark-zero"
    prompt_version = "cfbenchmark-zero/2"  # /2: the raw prompt by default (no chat template), as released
    description = "CFBenchmark-Basic, 8 tasks zero-shot (Table 2)"


@registry.task
class FewShot(_CFB):
    name = "cfbenchmark-few"
    prompt_version = "cfbenchmark-few/2"
    description = "CFBenchmark-Basic, 8 tasks few-shot with the upstream 3-case prompts (Table 2)"
    few = True



# ---- the paper's table (econeval report) ---------------------------------------------------------
PUBLISHED = Path(__file__).resolve().parent.parent / "published" / "cfbenchmark.json"
SETTINGS = {"cfbenchmark-zero": "zero-shot", "cfbenchmark-few": "few-shot"}


def paper_tables(runs) -> list[Table]:
    pub = published(PUBLISHED)["tables"]["table2"]
    mine = task_rows(runs, SETTINGS, lambda res: [res["paper"].get(c) for c in pub["columns"]], pub["columns"])
    if not mine:
        return []
    tab = Table("cfbenchmark-table2", "CFBenchmark-Basic Table 2: F1 (recognition, classification), cosine similarity (generation)",
                pub["columns"], 3, headline=[c for c in pub["columns"] if c.endswith("Avg")])
    tab.rows = published_rows(pub) + [row for *_, row in mine]
    embedders = {str(name) for run, *_ in mine if (name := run.role(EMBEDDER).name)}
    tab.notes = [f"Generation columns use the {', '.join(sorted(embedders)) or 'configured'} embedder, not the paper's "
                 "bge-zh-v1.5: similarities are not on the same scale as the published Summary/Risk/Suggestion/G.Avg.",
                 "The paper does not say whether Table 2 is zero-shot or few-shot; both of econeval's settings are shown."]
    tab.notes += limit_notes([(run, res) for run, _, res, _ in mine])
    subtasks = [c for c in pub["columns"] if not c.endswith("Avg")]
    idx = [pub["columns"].index(c) for c in subtasks]
    tab.figures = [{"kind": "bars", "groups": subtasks,
                    "caption": "CFBenchmark-Basic per sub-task, each run and setting, with 95% intervals: F1 for recognition "
                               "(Company, Product) and classification (Sector, Event, Sentiment), the embedder's cosine "
                               "similarity for generation (Summary, Risk, Suggestion; not on the paper's scale). "
                               "The published rows are in the table above.",
                    "series": [{"name": f"{run.label} {SETTINGS[task]}", "values": [row["values"][i] for i in idx],
                                "intervals": [row["intervals"][i] for i in idx]} for run, task, _, row in mine]}]
    return [tab]


registry.benchmark(BENCHMARK, build, tables=paper_tables)
