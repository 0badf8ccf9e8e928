"""A run's record as it starts (for `run` and for `score --out`; record.py owns its layout): the
identity made from the tasks as prepared, the backend's description, the roles, the environment.

The identity is what a resumed run must match: the run format, the model's identity (its
weights' sha256, or a served model's URL and name), the seed, each task's prompt version,
settings, options and data fingerprint, the identity of each role the tasks use (the judge, the
embedder, a task's own), and (where the backend's results depend on batch composition) the chunk
size.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from typing import Any

from .. import data
from ..version import __version__
from ..errors import hide_credentials
from .record import RUN_FORMAT, RunRecord, now
from ..types import CHUNK, BackendInfo, Prepared, Task


def chunk_size(parallel: int) -> int:
    """Items per chunk: at least 16, and twice the backend's parallel sequences (so finished
    sequences are refilled)."""
    return max(CHUNK, 2 * parallel)


def dataset_fingerprint(task: Task, prep: Prepared) -> dict:
    if prep.dataset is not None:
        return prep.dataset
    if task.benchmark in data.benchmarks():
        return data.fingerprint(task.benchmark)
    digest = hashlib.sha256(data.jsonl_bytes(prep.items)).hexdigest()
    return {"version": None, "items_sha256": digest}


def task_identity(tasks: list[Task], preps: dict[str, Prepared]) -> dict:
    return {t.name: {"prompt_version": t.prompt_version, "settings": preps[t.name].settings,
                     "options": preps[t.name].options, "dataset": dataset_fingerprint(t, preps[t.name])} for t in tasks}


def role_entry(info: BackendInfo, named: bool) -> dict:
    """What run.json's `roles` records of a role the tasks used (`named`: a model was named for
    it; otherwise it fell back, to the evaluated model or the registry's default)."""
    return {**info.model, "kind": info.kind, "identity": info.identity(),
            "chat_template_applied": info.chat_template_applied, "named": named}


def partial_identity(seed: int, tasks: list[Task], preps: dict[str, Prepared], model: dict | None = None) -> dict:
    """What can be checked against a folder before any model is loaded (`model`: what the
    backend can tell of its identity before it is made)."""
    return {"run_format": RUN_FORMAT, "seed": seed, "tasks": task_identity(tasks, preps),
            **({"model": model} if model is not None else {})}


def run_record(tasks: list[Task], preps: dict[str, Prepared], info: BackendInfo, roles: dict[str, dict], *,
               seed: int, limit: int | None, bootstrap: int, argv: list[str] | None,
               shard: tuple[int, int] | None = None, seed_given: bool = True, config: dict | None = None,
               not_run: dict[str, str] | None = None) -> RunRecord:
    """The record of a run as it starts (status running), its identity included."""
    tids = task_identity(tasks, preps)
    from ..sampling import SCHEME

    identity: dict[str, Any] = {"run_format": RUN_FORMAT, "model": info.identity(), "seed": seed, "tasks": tids,
                                "sample_scheme": SCHEME, "roles": {k: v["identity"] for k, v in roles.items()}}
    schedule = {"chunk_items": chunk_size(info.parallel),
                "description": "each task's items in fixed chunks of its item list; a chunk's requests go to the "
                               "backend together, stage by stage; a chunk is written whole or not at all"}
    if info.composition_matters:
        identity["chunk_items"] = schedule["chunk_items"]
    if shard is not None:  # shards of one run share the identity; the index is recorded beside it
        identity["shard_count"] = shard[1]
    return RunRecord(
        shard={"index": shard[0], "count": shard[1]} if shard else None,
        econeval_version=__version__,
        command=[hide_credentials(a) for a in argv or sys.argv],
        started=now(),
        status="running",
        seed=seed,
        seed_given=seed_given,
        limit=limit,
        bootstrap=bootstrap,
        options={t.name: preps[t.name].options for t in tasks if preps[t.name].options},
        tasks={t.name: {**tids[t.name], "description": t.description} for t in tasks},
        backend=info.to_json(),
        roles=roles,
        environment={"python": sys.version.split()[0], "platform": platform.platform(),
                     "machine": platform.machine(), "cpu_count": os.cpu_count(), "frozen": bool(getattr(sys, "frozen", False))},
        data_package={"version": data.package_version(),
                      "locations": {t.benchmark: str(data.files_dir(t.benchmark)) for t in tasks if t.benchmark in data.benchmarks()}},
        identity=identity,
        schedule=schedule,
        config=config or None,
        not_run=not_run or None,
    )


def scored_record(task: Task, prep: Prepared, *, seed: int, predictions: str, predictions_sha256: str,
                  argv: list[str] | None, roles: dict[str, dict], seed_given: bool = True) -> RunRecord:
    """The record of a folder written by `econeval score --out`: the model is the predictions file."""
    tids = task_identity([task], {task.name: prep})
    stamp = now()
    return RunRecord(econeval_version=__version__, command=[hide_credentials(a) for a in argv or sys.argv],
                     started=stamp, finished=stamp, status="complete", seed=seed, seed_given=seed_given, limit=None,
                     options={task.name: prep.options},
                     tasks={task.name: {**tids[task.name], "description": task.description}},
                     backend={"kind": "predictions", "model": {"name": None, "predictions": predictions, "sha256": predictions_sha256}},
                     roles=roles,
                     identity={"run_format": RUN_FORMAT, "model": {"predictions_sha256": predictions_sha256}, "seed": seed,
                               "tasks": tids, "roles": {k: v["identity"] for k, v in roles.items()}})
