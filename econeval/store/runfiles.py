"""The files of a run folder, named here alone: run.json (record.py reads and writes it),
samples.jsonl (folder.py), the lock, and the family of results files — results.json (the table of
the folder's largest run), results-limit-N.json (a smaller --limit run beside it),
results-sample-SPEC.json (a --sample run), results-partial.json (a --budget run or a gate that
stopped early: estimates) — with the order in which their tables are read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..results import read_json

RUN_JSON = "run.json"
SAMPLES = "samples.jsonl"
LOCK = ".lock"
RESULTS = "results.json"  # the table of the folder's largest run
PARTIAL = "results-partial.json"  # a --budget run or a gate that stopped early: estimates
MEMBERS = (LOCK, RUN_JSON, SAMPLES, RESULTS, PARTIAL)


def limit_results(n: int) -> str:
    """The results file of a --limit run smaller than the folder's largest."""
    return f"results-limit-{n}.json"


def sample_results(spec: float | int) -> str:
    """The results file of a --sample run (a sample never writes results.json)."""
    return f"results-sample-{spec}.json"


def is_member(name: str) -> bool:
    """A file econeval writes in a run folder (an atomic write's leftover temporary file too)."""
    return name in MEMBERS or (name.startswith(("results-limit-", "results-sample-")) and name.endswith(".json")) \
        or (name.startswith(".") and name.endswith(".tmp"))


def results_files(path: Path) -> list[Path]:
    """The folder's results files, in the order their tables are read: results.json first (the
    largest run), then results-partial.json, results-limit-*.json and results-sample-*.json."""
    names = [RESULTS, PARTIAL, *sorted(p.name for p in path.glob("results-limit-*.json")),
             *sorted(p.name for p in path.glob("results-sample-*.json"))]
    return [path / n for n in names if (path / n).is_file()]


def read_results_doc(file: Path) -> dict:
    """One results file's document; a file that cannot be read as a results document is refused."""
    try:
        doc = read_json(file)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{file} cannot be read: {exc}") from None
    tasks = doc.get("tasks") if isinstance(doc, dict) else None
    if not isinstance(tasks, dict):
        raise UsageError(f"{file} is not a results document (no 'tasks' table)")
    return doc


def read_results_file(file: Path) -> dict[str, dict]:
    """The tasks of one results file (read_results_doc)."""
    return read_results_doc(file)["tasks"]


@dataclass(frozen=True)
class ResultSource:
    """Where a task's result was read: its results file, and the selection that file's run made
    (its `limit` and `sample`, as the file records them; the items its results count)."""

    file: Path
    limit: Any = None
    sample: Any = None


def folder_results(path: Path) -> tuple[dict[str, Any], dict[str, ResultSource]]:
    """Each task's result in a run folder's results files (the first file that has the task), and
    where each was read."""
    results: dict[str, Any] = {}
    sources: dict[str, ResultSource] = {}
    for file in results_files(path):
        doc = read_results_doc(file)
        for task, res in doc["tasks"].items():
            if task not in results:
                results[task] = res
                sources[task] = ResultSource(file, doc.get("limit"), doc.get("sample"))
    return results, sources
