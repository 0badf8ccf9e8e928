"""From outputs to records to results, with no model: each item's sample record (`score_records`),
the items a selection runs (`select_items`), and a task's result with its counts and intervals
(`aggregate`). `run`, `score`, `merge` and the readers of finished folders share these.
"""

from __future__ import annotations

import hashlib

from . import reasoning
from .intervals import headline_intervals
from .types import Prepared, Task, TaskResult, is_scored


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def select_items(task: Task, prep: Prepared, limit: int | None) -> list[dict]:
    return task.finalize_items(prep.items if limit is None else task.limit_items(prep.items, limit), prep)


def score_records(task: Task, items: list[dict], outputs: list[dict], prep: Prepared) -> list[dict]:
    """Sample records from outputs (shared by `run` and `score`): skipped and errored items are
    recorded as such and never scored."""
    records = []
    for item, out in zip(items, outputs):
        rec = {"id": item["id"], "task": task.name, **out}
        if out.get("prompts"):
            rec["prompt_hash"] = prompt_hash(next(iter(out["prompts"].values())))
        if is_scored(out):
            rec.update(task.score(item, out, prep))
        records.append(rec)
    return records


def aggregate(task: Task, records: list[dict], prep: Prepared, n_boot: int = 0, seed: int = 0,
              sample: dict | None = None) -> TaskResult:
    """A task's result; `sample` (a stratified sample's record): its numbers are estimates of the
    full set's, with intervals that account for the strata and the finite population."""
    kept = [r for r in records if is_scored(r)]
    out: TaskResult = task.aggregate(kept, prep)  # type: ignore[assignment]  # a task's table is its own shape
    design = None
    if sample:
        from .sampling import RANDOM_SCHEME

        one = sample["scheme"] == RANDOM_SCHEME
        strata = {it["id"]: "all" if one else str(task.strata(it)) for it in prep.items}
        design = (strata, sample["n"] / sample["population"])
        how = "a simple random sample" if one else f"a stratified sample over {len(sample['strata'])} strata"
        out["estimate"] = {"from": sample["n"], "of": sample["population"], "scheme": sample["scheme"],
                           "strata": len(sample["strata"]), "strata_sampled_once": sample["strata_sampled_once"],
                           "note": f"estimated from {sample['n']:,} of {sample['population']:,} items ({how})"}
    intervals = headline_intervals(task, kept, prep, n_boot, seed, design)
    if intervals:
        out["intervals"] = intervals
    out["n"] = len(records)
    for key in ("skipped", "error"):
        bad = [r[key] for r in records if r.get(key)]
        reasons: dict[str, int] = {}
        for why in bad:
            reasons[why] = reasons.get(why, 0) + 1
        if key == "skipped":
            out["n_skipped"] = len(bad)
            if bad:
                out["skip_reasons"] = reasons
        else:
            out["n_errors"] = len(bad)
            if bad:
                out["error_reasons"] = reasons
    out.setdefault("n_scored", len(kept))
    thought = reasoning.summary(records)
    if thought:
        out["reasoning"] = thought
    return out
