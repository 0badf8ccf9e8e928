"""Runs spread over machines: `--shard K/N` runs the chunks whose index ≡ K−1 (mod N) of every task
into its own folder (OUT/shard-K-of-N); `econeval merge` joins the N folders into one that is the
single-process run of the same command: the same samples.jsonl and results.json, byte for byte.

Exact because of the schedule: a task's items are cut into fixed chunks, each chunk's requests go
to the backend together from an empty KV cache in request order, so a chunk's samples do not depend
on which process ran it. Shards of one run share an identity (with the shard count in it); the
index K is recorded beside it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from .. import registry
from ..version import __version__
from ..errors import UsageError
from ..store.finished import FinishedRun, open_run
from ..store.folder import RunFolder, read_samples
from ..store.record import RunRecord, now
from ..store.runfiles import RESULTS, RUN_JSON, SAMPLES
from ..store.runmeta import task_identity
from ..scoring import aggregate
from .selection import Full, Limit, Selection, Shard, StratifiedSample
from ..store.verify import check_records


def parse(spec: str | None, count: int | None = None, environ=os.environ) -> tuple[int, int] | None:
    """`K/N`, or `auto`: Slurm's SLURM_ARRAY_TASK_ID (less SLURM_ARRAY_TASK_MIN) and
    SLURM_ARRAY_TASK_COUNT, else Kubernetes' JOB_COMPLETION_INDEX with `count` (--shard-count)."""
    if spec is None:
        if count is not None:
            raise UsageError("--shard-count goes with --shard auto")
        return None
    if spec == "auto":
        if "SLURM_ARRAY_TASK_ID" in environ:
            try:
                task, low = int(environ["SLURM_ARRAY_TASK_ID"]), int(environ.get("SLURM_ARRAY_TASK_MIN", "0"))
                n = count or int(environ["SLURM_ARRAY_TASK_COUNT"])
            except (KeyError, ValueError):
                raise UsageError("--shard auto: SLURM_ARRAY_TASK_ID, _MIN and _COUNT must be numbers "
                                 "(or give --shard-count)") from None
            k = task - low + 1
        elif "JOB_COMPLETION_INDEX" in environ:
            if count is None:
                raise UsageError("--shard auto with JOB_COMPLETION_INDEX needs --shard-count N (the Job's completions)")
            try:
                k, n = int(environ["JOB_COMPLETION_INDEX"]) + 1, count
            except ValueError:
                raise UsageError("--shard auto: JOB_COMPLETION_INDEX must be a number") from None
        else:
            raise UsageError("--shard auto needs SLURM_ARRAY_TASK_ID (a Slurm job array) or JOB_COMPLETION_INDEX "
                             "(a Kubernetes Indexed Job)", hint="or give --shard K/N")
    else:
        if count is not None:
            raise UsageError(f"--shard {spec} with --shard-count {count}: K/N names the count already",
                             hint="--shard-count goes with --shard auto")
        try:
            k_text, n_text = spec.split("/")
            k, n = int(k_text), int(n_text)
        except ValueError:
            raise UsageError(f"--shard {spec}: expected K/N (e.g. 2/8) or auto") from None
    if not (n >= 1 and 1 <= k <= n):
        step = "SLURM_ARRAY_TASK_STEP" in environ and environ.get("SLURM_ARRAY_TASK_STEP") not in ("", "1")
        raise UsageError(f"--shard: shard {k} of {n} does not exist (1 ≤ K ≤ N)",
                         hint="a Slurm array with a step (--array=0-8:2) numbers its tasks with gaps: use --array=0-N-1"
                         if spec == "auto" and step else None)
    return k, n


def folder_for(out: Path, shard: tuple[int, int]) -> Path:
    return Path(out) / f"shard-{shard[0]}-of-{shard[1]}"


def _load(folder: Path) -> FinishedRun:
    if not (Path(folder) / RUN_JSON).is_file():
        raise UsageError(f"{folder} is not a run folder (it has no run.json)")
    run = open_run(folder)
    record = run.record
    if record.shard is None or not record.identity:
        raise UsageError(f"{folder} is not a shard folder (its run.json has no shard)", hint="shards come from run --shard K/N")
    if record.status != "complete":
        raise UsageError(f"{folder} is {record.status or 'not finished'}, not complete",
                         hint="rerun that shard's command to finish it, then merge")

    def whole(value, low: int) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= low

    bad = ("shard.count is not a whole number of at least 1" if not whole(record.shard_count, 1) else
           "shard.index is not a whole number of at least 1" if not whole(record.shard_index, 1) else
           "it has no schedule" if record.schedule is None else
           "schedule.chunk_items is not a whole number of at least 1" if not whole(record.chunk_items, 1) else
           "seed is not a whole number" if not whole(record.seed, 0) else None)
    if bad:
        raise UsageError(f"{folder}/run.json is not a shard's run.json: {bad}", hint="merge the folders run --shard K/N wrote")
    return run


def merge(folders: list[Path], out: Path) -> dict:
    """Check that the shard folders are one run's N shards, each present once and complete, with
    every chunk of every task exactly where it belongs; then write the single-process folder.
    Returns its results document. Nothing is written when anything is refused."""
    if not folders:
        raise UsageError("name the shard folders to merge")
    named, out = Path(out), Path(out).absolute()
    if out.exists() and out.resolve() == Path.cwd().resolve():
        raise UsageError(f"{named} is the current folder: a merge into it would replace the folder you stand in",
                         hint="merge into a new folder")
    with _merge_lock(out, named):
        return _merge(folders, out, named)


@contextlib.contextmanager
def _merge_lock(out: Path, named: Path) -> Iterator[None]:
    """One merge at a time into the folder that holds `out`: an exclusive lock on that folder itself
    (nothing is written for it), held for the whole merge; a second merge waits, then finds `out`
    taken. So no merge removes or renames the staging folder of a live one."""
    import fcntl

    try:
        fd = os.open(out.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise UsageError(f"cannot merge into {named}: {out.parent}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _merge(folders: list[Path], out: Path, named: Path) -> dict:
    if out.exists() and (not out.is_dir() or out.is_symlink()):
        raise UsageError(f"{named} exists and is not a folder", hint="merge into a new folder")
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{named} is not empty", hint="merge into a new folder")
    runs = [_load(f) for f in folders]
    seen = _check_one_run(runs)
    first = runs[0].record
    by_shard = {k: read_samples(run.path / SAMPLES)[0] for k, run in seen.items()}
    tasks = [registry.get_task(t) for t in first.tasks]
    preps = runs[0].preps  # each task prepared once, as the shards' record says
    if task_identity(tasks, preps) != first.identity_tasks():  # before any record is read or scored
        raise UsageError("the shards were run on other data or options than this econeval has",
                         hint="merge with the econeval version and data package the shards used")
    for k, recs in by_shard.items():  # every scored record re-derived from its stored response
        for task in tasks:
            check_records(task, preps[task.name], {i: r for (t, i), r in recs.items() if t == task.name}, seen[k].path)
    records: list[dict] = []
    results: dict = {}
    spec = _sample_of(first)
    inner: Selection = StratifiedSample(spec) if spec is not None else Limit(first.limit) if first.limit is not None else Full()
    selection = Shard(inner, 1, first.shard_count)  # asked which chunk is whose
    for task in tasks:
        prep = preps[task.name]
        items = selection.items(task, prep, first.run_seed)
        task_records = _task_records(task.name, items, first.chunk_items, selection, by_shard)
        records += task_records
        results[task.name] = aggregate(task, task_records, prep, n_boot=first.n_boot, seed=first.run_seed,
                                       sample=selection.design(task, items, task_records))
    doc = {"econeval_version": __version__, "model": first.model_name, "limit": first.limit, **selection.doc(), "tasks": results}
    record = _merged_record(runs)
    notes = selection.notes(False, None, first.run_seed)
    if spec is not None:  # a sample's own file, and what the record keeps of it
        record = record.noted(notes)
    _write_whole(out, records, doc, record, notes.results if spec is not None else RESULTS)
    return doc


def _check_one_run(runs: list[FinishedRun]) -> dict[int, FinishedRun]:
    """The shard folders are one run's N shards, each present once: shard index → its run."""
    first_folder, first = runs[0].path, runs[0].record
    n = first.shard_count
    seen: dict[int, FinishedRun] = {}
    for run in runs:
        folder, rec = run.path, run.record
        if rec.identity != first.identity or rec.limit != first.limit:
            what = "identity differs" if rec.identity != first.identity else f"--limit {rec.limit} there, {first.limit} here"
            raise UsageError(f"{folder} is a shard of another run than {first_folder} ({what})",
                             hint="merge the shards of one command")
        for what, value, here in (("--bootstrap", rec.n_boot, first.n_boot), ("--sample", _sample_of(rec), _sample_of(first)),
                                  ("chunks of", rec.chunk_items, first.chunk_items)):
            if value != here:
                why = (f"its items were cut into chunks of {value}, {first_folder}'s into chunks of {here} (a served "
                       "model's chunk follows --concurrency or --max-concurrency)" if what == "chunks of" else
                       f"{what} {value} there, {here} in {first_folder}")
                raise UsageError(f"{folder} cannot be merged with {first_folder}: {why}",
                                 hint="run every shard with the same command (same --concurrency or --max-concurrency, --bootstrap, "
                                      "--sample)")
        k = rec.shard_index
        if k in seen:
            raise UsageError(f"{folder} and {seen[k].path} are both shard {k} of {n}")
        seen[k] = run
    missing = [k for k in range(1, (n or 0) + 1) if k not in seen]
    if missing:
        raise UsageError(f"shard(s) {', '.join(map(str, missing))} of {n} are missing", hint="merge all N shard folders")
    return seen


def _task_records(task: str, items: list[dict], size: int, selection: Shard,
                  by_shard: dict[int, dict[tuple[str, str], dict]]) -> list[dict]:
    """A task's records in the single-process order, each from the shard that owns its chunk."""
    out = []
    for c, start in enumerate(range(0, len(items), size)):
        owner = selection.owner(c)
        for it in items[start:start + size]:
            key = (task, it["id"])
            holders = [k for k, recs in by_shard.items() if key in recs]
            if holders != [owner]:
                where = f"in shards {', '.join(map(str, holders))}" if holders else "in no shard"
                raise UsageError(f"{task} item {it['id']} (chunk {c}, shard {owner}) is {where}",
                                 hint="the shard folders do not hold one run; rerun the shard")
            out.append(by_shard[owner][key])
    return out


def _merged_record(runs: list[FinishedRun]) -> RunRecord:
    """The record of the single-process run: the shards' own without the shard, their timing summed."""
    import dataclasses

    first = runs[0].record
    timing: dict = {}
    for run in runs:
        for t, tm in (run.record.timing or {}).items():
            acc = timing.setdefault(t, {})
            for key, value in tm.items():
                if isinstance(value, (int, float)) and key != "items_per_s":
                    acc[key] = round(acc.get(key, 0) + value, 3)
    return dataclasses.replace(
        first, shard=None, identity={k: v for k, v in first.identity.items() if k != "shard_count"}, status="complete",
        finished=now(), timing=timing, samples=None, partial_results=None,  # a sample's are written anew
        merged_from=[{"folder": str(r.path), "shard": r.record.shard, "started": r.record.started, "finished": r.record.finished}
                     for r in sorted(runs, key=lambda r: r.record.shard_index)])


def _sample_of(record: RunRecord) -> float | int | None:
    """The --sample a shard ran (its record's samples entry), or None."""
    specs = record.sample_specs()
    if len(specs) > 1:
        raise UsageError("a shard folder holds several samples' results: merge the shards of one command")
    return specs.pop() if specs else None


def _write_whole(out: Path, records: list[dict], doc: dict, record: RunRecord, results_name: str = RESULTS) -> None:
    """The merged folder appears whole or not at all: written into a staging folder beside it,
    then renamed into place. A merge that fails part way (a full disk, a signal) removes its
    staging folder; one killed outright leaves it, and the next merge into `out` replaces it."""
    import shutil

    staging = out.parent / f".{out.name}.merging"
    if staging.exists() or staging.is_symlink():  # left by a merge that was killed (the merge lock is ours): never finished
        if staging.is_dir() and not staging.is_symlink():
            shutil.rmtree(staging)
        else:
            staging.unlink()
    try:
        written = RunFolder.open(staging)
    except UsageError as exc:  # said of the folder the user named, not of the staging folder
        raise UsageError(f"cannot write {out}: {str(exc).split(': ', 1)[-1]}", hint="merge into a folder you can write") from None
    try:
        written.write_complete(records, doc, record, results_name)
    except BaseException:
        written.close()
        shutil.rmtree(staging, ignore_errors=True)
        raise
    written.close()
    os.replace(staging, out)  # onto a missing or empty folder
