"""The files of a run folder, named here alone: run.json (record.py reads and writes it),
samples.jsonl (folder.py), the lock, and the family of results files — results.json (the table of
the folder's largest run), results-limit-N.json (a smaller --limit run beside it),
results-sample-SPEC.json (a --sample run), results-partial.json (a --budget run or a gate that
stopped early: estimates) — with the order in which their tables are read."""

from __future__ import annotations

from pathlib import Path

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


def read_results_file(file: Path) -> dict[str, dict]:
    """The tasks of one results file; a file that cannot be read as a results document is refused."""
    try:
        doc = read_json(file)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{file} cannot be read: {exc}") from None
    tasks = doc.get("tasks") if isinstance(doc, dict) else None
    if not isinstance(tasks, dict):
        raise UsageError(f"{file} is not a results document (no 'tasks' table)")
    return tasks


def folder_results(path: Path) -> dict[str, dict]:
    """Each task's result in a run folder's results files (the first file that has the task)."""
    results: dict[str, dict] = {}
    for file in results_files(path):
        for task, res in read_results_file(file).items():
            results.setdefault(task, res)
    return results
