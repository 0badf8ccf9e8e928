"""What a finished run folder is checked against (finished.py opens it for `gate`, `compare`,
`merge` and the exports): each task's data prepared as the run prepared it, and every scored
record re-derived from its stored response with the task's own scorer.

A record whose scored fields (`correct`, `parsed`, a score, ...) differ from what the task's
scorer makes of the record's own stored outputs is a folder that contradicts itself (edited, or
written by something else): it is refused in one line naming the item, never trusted. So is an
id that appears twice, and an item the task's data does not have; and a task's table in a results
file (what report and the exports publish) that is not what the task makes of the records it
counts, or whose intervals (or sample estimate) are not what the run's seeded resamples of them make.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson

from ..context import RunContext, protocol_shift
from ..errors import UsageError
from .record import RunRecord
from .runfiles import ResultSource
from ..types import Prepared, Task, is_scored


def prepared_from(record: RunRecord, task: Task, given: frozenset[str] | None = None) -> Prepared:
    """The task's data and options prepared as the recorded run prepared them (`given`: with models
    named for these roles instead of the run's)."""
    ctx = RunContext(seed=record.run_seed, seed_given=record.seed_was_given,
                     protocol_shift=protocol_shift(record.run_seed, record.seed_was_given),
                     per_task={task.name: dict(record.task(task.name).options)},
                     given=record.named_roles if given is None else given, bootstrap=record.n_boot)
    return ctx.prepare(task)


def _plain(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY, default=str))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):  # True is not 1: a `correct` rewritten as 1/0 was edited
        return type(a) is type(b) and a == b
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
            return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


SCORED_FIELDS = ("correct", "parsed", "gold")  # what a task's scorer adds; never on an error or a skipped item


def check_records(task: Task, prep: Prepared, records: dict[str, dict], where: Path) -> None:
    """Refuse records the task's data lacks and scored fields that the task's scorer does not
    re-derive from the record's own outputs."""
    by_id = {it["id"]: it for it in prep.items}
    unknown = [i for i in records if i not in by_id]
    if unknown:
        raise UsageError(f"{where}: {task.name} item {unknown[0]} is not in the task's data"
                         f"{f' (and {len(unknown) - 1} more)' if len(unknown) > 1 else ''}",
                         hint="the folder was run on other data, or edited")
    present = [it for it in prep.items if it["id"] in records]
    finals = [{it["id"]: it for it in task.finalize_items(items, prep)} for items in (prep.items, present)]
    for item_id, rec in records.items():
        if not is_scored(rec):
            scored = sorted(k for k in SCORED_FIELDS if k in rec)
            if scored:  # econeval never scores an item it marks an error or skipped
                raise UsageError(f"{where}: {task.name} item {item_id} is marked {'an error' if rec.get('error') else 'skipped'} "
                                 f"and scored ({', '.join(scored)}): the folder contradicts itself",
                                 hint="the samples were edited or written by another tool; rerun or rescore the items")
            continue
        for final in finals:
            try:
                derived = _plain(task.score(final.get(item_id, by_id[item_id]), rec, prep))
            except Exception:  # noqa: BLE001 - a record the scorer cannot read is a contradiction too
                derived = None
            if derived is not None:  # a field the scorer came to add later is not asked of a line written before it
                derived = {k: v for k, v in derived.items() if k in rec or k not in task.later_fields}
            if derived is not None and all(_same(value, _plain(rec.get(key))) for key, value in derived.items()) \
                    and _same_prompts(task, final.get(item_id, by_id[item_id]), prep, rec):
                break
        else:
            bad = sorted(k for k, v in (derived or {}).items() if not _same(v, _plain(rec.get(k)))) if derived else ["?"]
            if not bad:
                raise UsageError(f"{where}: {task.name} item {item_id}: its stored prompts are not the prompts {task.name} "
                                 "sends for it: the folder contradicts itself",
                                 hint="the samples were edited, relabelled or written by another tool; rerun the items")
            raise UsageError(f"{where}: {task.name} item {item_id}: its scored fields ({', '.join(bad)}) are not what the "
                             "task's scorer makes of its stored response: the folder contradicts itself",
                             hint="the samples were edited or written by another tool; rerun or rescore the items")
        _check_values(task, item_id, rec, where)


def _same_prompts(task: Task, item: dict, prep: Prepared, rec: dict) -> bool:
    """The record's first-stage prompts (and its prompt_hash) are the ones the task sends for the item."""
    from ..scoring import prompt_hash

    stored = rec.get("prompts")
    if stored is None:
        return "prompt_hash" not in rec
    if not isinstance(stored, dict):
        return False
    try:
        first = {name: str(r.prompt) for name, r in task.requests(item, prep, {}).items()}
    except Exception:  # noqa: BLE001 - an item the task cannot build requests for: not its record
        return False
    if any(name in stored and stored[name] != text for name, text in first.items()):
        return False
    if "prompt_hash" in rec and stored:
        return rec["prompt_hash"] == prompt_hash(str(next(iter(stored.values()))))
    return True


def _check_values(task: Task, item_id: str, rec: dict, where: Path) -> None:
    """The record's item metric values (what compare and gate resample) are numbers within each
    metric's bounds: a stored value the scorer does not re-derive (an embedder's similarity) may
    still be impossible."""
    try:
        values = task.item_values(rec)
    except Exception:  # noqa: BLE001 - a record the task cannot read is a contradiction
        raise UsageError(f"{where}: {task.name} item {item_id}: its values cannot be read: the folder contradicts itself",
                         hint="the samples were edited or written by another tool; rerun or rescore the items") from None
    for m in task.item_metrics:
        v = values.get(m.name)
        lo, hi = m.bounds if m.bounds else (-math.inf, math.inf)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
            raise UsageError(f"{where}: {task.name} item {item_id}: its {m.name} {v!r} is not a number within "
                             f"{list(m.bounds) if m.bounds else 'the finite numbers'}: the folder contradicts itself",
                             hint="the samples were edited or written by another tool; rerun or rescore the items")


EDITED = "results.json was edited or written by another tool; rerun or rescore the items"


def counted_records(task: Task, prep: Prepared, records: dict[str, dict], source: ResultSource, seed: int) -> list[dict]:
    """The records a results file's table of the task counts, in the order the run took them: the
    items of the file's selection (its sample's, else its --limit's, else all) the folder holds."""
    from ..sampling import parse, stratified
    from ..scoring import select_items

    if source.sample is not None:
        try:
            spec = parse(source.sample)
        except ValueError:
            raise UsageError(f"{source.file}: its sample {source.sample!r} is no sample: the folder contradicts itself",
                             hint=EDITED) from None
        items = task.finalize_items(stratified(prep.items, task.strata, spec or 0, seed, task.name)[0], prep)
    else:
        limit = source.limit if isinstance(source.limit, int) and not isinstance(source.limit, bool) and source.limit > 0 else None
        items = select_items(task, prep, limit)
    return [records[it["id"]] for it in items if it["id"] in records]


def check_result(task: Task, prep: Prepared, result: Any, counted: list[dict], file: Path) -> None:
    """Refuse a task's table in a results file that is not what the task's aggregate makes of the
    records it counts (`counted`): every number of the table and its counts recomputed (a table of
    another type, a number that is text, a value edited, a line added or removed), its intervals
    pairs of finite numbers within the metric's bounds (redrawn by check_intervals)."""
    from ..scoring import aggregate

    where = f"{file}: {task.name}"
    if not isinstance(result, dict):
        raise UsageError(f"{where}: its result is {type(result).__name__}, not a table: the folder contradicts itself", hint=EDITED)
    derived = _plain(aggregate(task, counted, prep))  # no resamples: the table and its counts
    path = _differs(derived, result)
    if path is not None:
        stored, made = _at(result, path), _at(derived, path)
        said = "is missing" if stored is _MISSING else f"is {_shown(stored)}"
        raise UsageError(f"{where}: its {'.'.join(map(str, path)) or 'result'} {said}, and the {len(counted):,} items it "
                         f"counts make it {_shown(made)}: the folder contradicts itself", hint=EDITED)
    try:
        task.headline(result), task.table_numbers(result)
    except Exception:  # noqa: BLE001 - a table the task cannot read is a contradiction too
        raise UsageError(f"{where}: its table cannot be read as {task.name}'s: the folder contradicts itself", hint=EDITED) from None
    _check_intervals(task, result.get("intervals"), where)


def check_intervals(task: Task, prep: Prepared, result: dict, counted: list[dict], in_file: list[dict], record: RunRecord,
                    file: Path) -> None:
    """Refuse a task's table whose intervals (or sample estimate) are not what the run's seeded
    resamples of the records it counts make: they are redrawn as the run drew them (its seed, its
    resamples, its sample design: run.json's for a sample's file, the kept items' for a run that
    stopped early), over the records in the run's order or, for a scored predictions file, the
    file's (`in_file`). A table without intervals has nothing to redraw."""
    from ..scoring import aggregate

    if result.get("intervals") is None and result.get("estimate") is None:
        return
    design = _design(task, prep, result, counted, record, file)
    if design is _UNKNOWN:
        return
    seen = _redrawn_before(task, result, counted, in_file, record, design)
    if seen is None or _marked(seen):
        return
    made = None
    for order in (counted, in_file):
        made = _plain(aggregate(task, order, prep, n_boot=record.n_boot, seed=record.run_seed, sample=design))
        if _differs(made.get("intervals"), result.get("intervals")) is None and \
                _differs(made.get("estimate"), result.get("estimate")) is None:
            _remember(seen)
            return
    assert made is not None
    key = "intervals" if _differs(made.get("intervals"), result.get("intervals")) is not None else "estimate"
    path = (key, *(_differs(made.get(key), result.get(key)) or ()))
    stored, redrawn = _at(result, path), _at(made, path)
    raise UsageError(f"{file}: {task.name}: its {'.'.join(map(str, path))} "
                     f"{'is missing' if stored is _MISSING else 'is ' + _shown(stored)}, and the {len(counted):,} items it "
                     f"counts, redrawn with the run's seed {record.run_seed} and {record.n_boot:,} resamples, make it "
                     f"{'none' if redrawn is _MISSING else _shown(redrawn)}: the folder contradicts itself", hint=EDITED)


def _redrawn_before(task: Task, result: dict, counted: list[dict], in_file: list[dict], record: RunRecord,
                    design: Any) -> Path | None:
    """The cache's mark that these intervals were redrawn from these records by this econeval
    (a redraw takes seconds per task: a suite's 50 s where the rest of an export takes 4): named by
    a hash of everything the redraw reads, so an edit of any of it is redrawn again. None: nothing
    to redraw (an empty table)."""
    import hashlib

    from .. import config
    from ..version import __version__

    if not counted:
        return None
    key = hashlib.sha256(orjson.dumps([__version__, task.name, task.prompt_version, result.get("intervals"),
                                       result.get("estimate"), counted, [r.get("id") for r in in_file], record.n_boot,
                                       record.run_seed, design], option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY,
                                      default=str)).hexdigest()
    return config.cache_home() / "redrawn" / key


def _marked(mark: Path) -> bool:
    try:
        return mark.is_file()
    except OSError:  # a cache that cannot be read: redrawn
        return False


def _remember(mark: Path) -> None:
    """Leave the mark (best effort: a cache that cannot be written costs only the next redraw)."""
    try:
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()
    except OSError:
        pass


def _design(task: Task, prep: Prepared, result: dict, counted: list[dict], record: RunRecord, file: Path) -> Any:
    """The sample design a results file's table was estimated under: run.json's record of a
    sample's file; for a run that stopped early (results-partial.json), the design of the items it
    kept among those it would have run (_UNKNOWN where those were a gate's baseline's items, which the
    folder does not list); None for a table of the whole selection."""
    from ..sampling import SCHEME, design
    from ..scoring import select_items

    recorded = (record.samples or {}).get(file.name)
    if isinstance(recorded, dict) and isinstance(recorded.get("tasks"), dict) and task.name in recorded["tasks"]:
        return recorded["tasks"][task.name]
    estimate = result.get("estimate")
    if not isinstance(estimate, dict):
        return None
    scheme = estimate.get("scheme")
    items = select_items(task, prep, record.limit if isinstance(record.limit, int) and not isinstance(record.limit, bool) else None)
    made = design(items, {r["id"] for r in counted}, task.strata if scheme == SCHEME else None,
                  scheme if isinstance(scheme, str) else SCHEME)
    return made if made["population"] == estimate.get("of") else _UNKNOWN


_UNKNOWN: Any = {}  # a design the folder does not let us redraw

_MISSING = object()


def _differs(derived: Any, stored: Any, path: tuple = ()) -> tuple | None:
    """The first path where `stored` lacks or differs from a number (or table) `derived` has; text is
    not compared (a description)."""
    if isinstance(derived, dict):
        if not isinstance(stored, dict):
            return path
        for k, v in derived.items():
            if k not in stored:
                return (*path, k)
            found = _differs(v, stored[k], (*path, k))
            if found is not None:
                return found
        return None
    if isinstance(derived, list):
        if not isinstance(stored, list) or len(stored) != len(derived):
            return path
        return next((p for i, (a, b) in enumerate(zip(derived, stored)) if (p := _differs(a, b, (*path, i))) is not None), None)
    if isinstance(derived, str):
        return None
    return None if _same(derived, _plain(stored)) else path


def _shown(value: Any) -> str:
    """A value of a results table in a message: a number or text as it is, a table or list by its kind."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _at(doc: Any, path: tuple) -> Any:
    for k in path:
        if isinstance(doc, dict) and k in doc:
            doc = doc[k]
        elif isinstance(doc, list) and isinstance(k, int) and k < len(doc):
            doc = doc[k]
        else:
            return _MISSING
    return doc


def _check_intervals(task: Task, intervals: Any, where: str) -> None:
    if intervals is None:
        return
    bad = None if isinstance(intervals, dict) else f"intervals ({_shown(intervals)})"
    for name, iv in (intervals.items() if isinstance(intervals, dict) else ()):
        if name in ("method", "seed") or iv is None:
            continue
        declared = next((m for m in task.metrics if m.name == name), None)
        lo, hi = declared.bounds if declared else (-math.inf, math.inf)
        if not (isinstance(iv, list) and len(iv) == 2 and all(_finite(x) for x in iv) and lo <= iv[0] <= iv[1] <= hi):
            bad = f"interval of {name} ({_shown(iv)})"
            break
    if bad:
        raise UsageError(f"{where}: its {bad} is no 95% interval within the metric's bounds: the folder contradicts itself",
                         hint=EDITED)


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
