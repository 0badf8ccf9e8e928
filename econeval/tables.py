"""What a benchmark declares about its numbers: metrics (direction, paired test, count) and paper
tables (layout, rows from its runs' results, published rows, notes, figures).

A benchmark registers a table builder with `registry.benchmark(NAME, tables=build)`; `econeval
report` renders whatever is registered and `econeval compare` reads each metric's direction and
test from the task's `metrics`. Nothing here names a benchmark.
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any


# ---- metrics ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Metric:
    """A headline metric of a task (a key of `Task.headline(result)`)."""

    name: str
    lower_is_better: bool = False
    # items are right or wrong (each record's `correct` is a bool): McNemar's exact test applies
    paired_exact: bool = False
    count: bool = False  # a count of items: no direction, no verdict
    bounds: tuple[float, float] = (0.0, 1.0)  # its range: an item metric's per item (econeval gate), a headline's whole

    @property
    def direction(self) -> int:
        """+1 when larger is better, -1 when smaller is, 0 for a count."""
        return 0 if self.count else (-1 if self.lower_is_better else 1)


# Every task's share of items without a valid answer: unparsed, an error or skipped (`store.items.unanswered`).
# `compare` and `gate` hold it against the baseline's like a metric, so that a paper's number that leaves
# unparsed answers out (a classification F1 over the parsed answers) cannot pass a candidate that answers nothing.
UNANSWERED = Metric("unanswered", lower_is_better=True, paired_exact=True)


@dataclass(frozen=True)
class CellView:
    """How a task's ratio metrics (per-class precision, recall, F1) are estimated from a sample:
    an item's confusion cell is its stratum and the value of `field` in its record, which takes
    one of `values`; `numbers` are the headline and table numbers this view determines (None:
    every number no other view names). intervals.py draws the unseen items' cells (Pólya)."""

    field: str
    values: tuple[Any, ...]
    numbers: tuple[str, ...] | None = None


# ---- tables ----------------------------------------------------------------------------------
@dataclass
class Table:
    """One table of a paper, the runs' rows beside the published ones.

    rows: {"source": "paper" | "run", "label", "setting", "values", "intervals", "n"}, and "std" (a
    standard deviation per value, or None) where a row is a mean over repeats: a published row over
    the paper's repeated runs, a run over its --epochs (report.py).
    figures: plots that belong beside the table, each {"kind", "caption", ...data}; kinds the
    HTML report draws: `bars` (grouped bars per row, optional intervals, reference marks and
    `n`, the items each bar rests on), `heatmap` (rows × columns; `n`: the items each cell rests
    on), `reliability` (confidence against accuracy bins), `scatter` (points per series, each
    with the items it rests on). A figure of nothing but zeros is not drawn, nor one whose maker
    says why in `not_drawn`, and what a drawn one rests on (single items, zero-width intervals) is
    said under it (publish/figures.py)."""

    id: str
    title: str
    columns: list[str]
    decimals: int = 3
    rows: list[dict] = field(default_factory=list)
    row_label: str = "model"  # what a row's label names (a model, or a group of items)
    notes: list[str] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list)
    # the columns a reader looks at first (a paper's averages): a wide table's HTML shows them in
    # a part of their own, beside the label columns, so they are never scrolled out of view
    headline: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@lru_cache(maxsize=None)
def published(path: str | Path) -> dict:
    """A published-rows file: {"source": paper text, "tables": {name: {"columns", "decimals", "rows"}}}."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def published_rows(table: dict) -> list[dict]:
    """The paper's rows; their setting column holds what the paper prints beside the model (a
    prompting method, a model size), if anything."""
    return [{"source": "paper", "label": r["model"], "setting": r.get("prompting") or r.get("size"),
             "values": r["values"], "intervals": None, "n": None, "reproduced_by": r.get("reproduced_by"),
             **({"std": r["std"]} if r.get("std") else {})}
            for r in table["rows"]]


def interval(res: dict | None, key: str) -> list | None:
    """The 95% interval of one number of a result, if it has one."""
    iv = ((res or {}).get("intervals") or {}).get(key)
    return list(iv) if isinstance(iv, (list, tuple)) and len(iv) == 2 else None


def limit_notes(pairs: "typing.Sequence[tuple[Any, dict | None]]") -> list[str]:
    """One note per run (a finished.FinishedRun) that evaluated a subset (`--limit`, or a stratified
    `--sample`)."""
    out = []
    for run, res in pairs:
        est = (res or {}).get("estimate")
        if est:
            out.append(f"{run.label}: {est['note']}; its intervals are those of the full-set numbers (stratified "
                       "bootstrap, finite-population corrected)")
        elif run.record.limit:
            n = (res or {}).get("n", (res or {}).get("n_scored"))
            out.append(f"{run.label}: --limit {run.record.limit} (a subset: {n} items)")
    return list(dict.fromkeys(out))


def task_rows(runs: list[Any], settings: "typing.Mapping[str, str | None]", values, columns: list[str],
              interval_keys: list[str] | None = None) -> list[tuple[Any, str, dict, dict]]:
    """Rows of the common layout: one per run and task (`settings`: task → the setting column),
    `values(result)` giving the row's numbers in column order; intervals read under
    `interval_keys` (default: the column names). Returns (run, task, result, row)."""
    keys = interval_keys or columns
    out = []
    for run in runs:
        for task, setting in settings.items():
            res = run.results.get(task)
            if res is None:
                continue
            out.append((run, task, res, {"source": "run", "label": run.label, "setting": setting, "values": values(res),
                                         "intervals": [interval(res, k) for k in keys], "n": res.get("n_scored")}))
    return out


def has_setting(t: dict) -> bool:
    """Whether a table's rows name a setting (the prompting, an adaptation): a table whose rows
    are groups of items names none, and a "setting" column there would be empty, or a second one
    beside a row label of that name."""
    return any(row.get("setting") for row in t["rows"])


def cell(value, decimals: int) -> str:
    """A table cell as text: – for a number not computed."""
    if value is None:
        return "–"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{decimals}f}"
    return str(value)


def interval_text(iv: Any, value: Any, decimals: int) -> str | None:
    """A cell's 95% interval as text ("[0.372, 0.737]"), None where it has none (or no value)."""
    return f"[{iv[0]:.{decimals}f}, {iv[1]:.{decimals}f}]" if iv and value is not None else None


def as_dict(obj: Any) -> Any:
    return obj.as_dict() if hasattr(obj, "as_dict") else obj
