"""Results other tools open (`econeval export`): a run folder, read and checked as `compare`
reads it and its results recomputed from its samples (finished.open_verified), written in another
tool's shape.

- `table`: one row per item and task, flat columns of stable names and types (table_columns():
  TABLE_COLUMNS with the labels the tasks declare after `group`, then one `metric_<name>` column
  per item metric), as CSV or Parquet (by --out's suffix; Parquet needs pyarrow: the `export` extra). pandas, R's arrow and readr read it as it is.
- `inspect`: one Inspect eval log per task in a folder (`.eval`, or `.json` with --log-format
  json), built with inspect_ai's own types and written by its own writer (export_inspect.py; the
  `inspect` extra).
- `every-eval-ever`: the run's aggregate record in the Every Eval Ever schema (export_eee.py).
- `lm-eval`: a results.json in lm-evaluation-harness's layout (`results` with `<metric>,none`
  keys, `versions`, `n-shot`, `higher_is_better`, `n-samples`, `config`), valid under lm-eval's
  own result schema (`lm_eval/result_schema.py`), so scripts written for lm-eval output read
  econeval's headline numbers.

Every export carries a marker (`econeval_export`; an Every Eval Ever record names econeval as its
eval_library) so that a later export may replace it; any other
existing file at --out is refused, as is a folder that is not a finished run. docs/exports.md
says what maps to what.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import registry
from ..version import __version__
from ..errors import UsageError
from ..results import check_output, check_place, dumps, read_regular, write_output
from .export_read import interval, judged_by, obj, text
from ..store.items import ERROR, SCORED, SKIPPED, UNPARSED
from ..types import as_text
from ..store.finished import FinishedRun, open_verified

MARK = "econeval_export"  # in every export: what a later export may replace
# the table's format (a public interface): 2: the judge column; 3: the marker is the table's last
# column, `econeval_export` (`table/3 econeval VERSION` in every row), no longer a `#` first line,
# so that a plain pandas.read_csv reads the CSV
TABLE_VERSION = 3
# the table's fixed columns and their types; one `metric_<name>` (float) column per item metric follows
# (the item's labels, a string column each, stand after `group`: label_columns())
TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run", "string"), ("model", "string"), ("task", "string"), ("item_id", "string"), ("group", "string"),
    ("gold", "string"), ("parsed", "string"), ("correct", "bool"),
    ("unparsed_reason", "string"), ("error", "string"), ("skipped", "string"), ("n_prompt_tokens", "int"),
    ("n_generated_tokens", "int"), ("n_reasoning_tokens", "int"), ("judge", "string"))


def label_columns() -> list[str]:
    """The table's label columns: every label a known task declares (`Task.labels`: STEER-ME's
    element, setting, ...; CFBenchmark's subtask), each once, in the order the tasks declare them
    (the benchmarks with most labels first), so that one econeval writes one layout whatever the
    run's tasks; a plugin's labels join by its declaring them."""
    tasks = sorted(registry.tasks().values(), key=lambda t: -len(t.labels))
    return list(dict.fromkeys(k for t in tasks for k in t.labels if k not in dict(TABLE_COLUMNS)))


def table_columns() -> list[tuple[str, str]]:
    """The table's columns and their types, labels included (metric columns follow)."""
    head = 5  # run, model, task, item_id, group
    return [*TABLE_COLUMNS[:head], *((k, "string") for k in label_columns()), *TABLE_COLUMNS[head:]]
def _finished(folder: Path) -> FinishedRun:
    run = open_verified(folder)
    status = run.record.status
    if status != "complete":
        raise UsageError(f"{folder} is not a finished run (its status is {status!r})",
                         hint="finish it first: the same `econeval run` command resumes it")
    return run


def metric_column(name: str) -> str:
    """An item metric's column: `metric_` and its name in lower case, other characters as `_`."""
    return "metric_" + re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def table_rows(runs: list[FinishedRun]) -> tuple[list[str], list[dict[str, Any]]]:
    """The table's column names and its rows, in each run's task and samples order; the last
    column is the marker `econeval_export` (the table's format and the econeval that wrote it)."""
    mark = f"table/{TABLE_VERSION} econeval {__version__}"
    metrics: list[str] = []
    rows: list[dict[str, Any]] = []
    for run in runs:
        for name in run.record.tasks:
            task = registry.get_task(name)
            judge = judged_by(run, name)
            for m in task.item_metrics:
                if metric_column(m.name) not in metrics:
                    metrics.append(metric_column(m.name))
            for item in run.items(name):
                row: dict[str, Any] = {
                    "run": run.path.name, "model": run.record.model_name, "task": name, "item_id": item.id, "group": item.group,
                    **{k: item.labels.get(k) for k in label_columns()},
                    "gold": as_text(item.gold_code), "parsed": as_text(item.answer_code), "correct": item.correct,
                    "unparsed_reason": item.why if item.outcome in (SCORED, UNPARSED) else None,
                    "error": item.why if item.outcome == ERROR else None, "skipped": item.why if item.outcome == SKIPPED else None,
                    "n_prompt_tokens": item.tokens("n_prompt_tokens"), "n_generated_tokens": item.tokens("n_tokens"),
                    "n_reasoning_tokens": item.tokens("n_reasoning_tokens"), "judge": judge}
                for m in task.item_metrics:
                    v = item.values.get(m.name)
                    row[metric_column(m.name)] = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
                row[MARK] = mark
                rows.append(row)
    return [c for c, _ in table_columns()] + metrics + [MARK], rows


def _csv(columns: list[str], rows: list[dict]) -> bytes:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("true" if v is True else "false" if v is False else v) for k, v in row.items()})
    return buf.getvalue().encode("utf-8")


def _parquet(columns: list[str], rows: list[dict]) -> bytes:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError("writing Parquet needs pyarrow", hint="pip install 'econeval[export]', or name a .csv file") from None
    kinds = {**dict(table_columns()), MARK: "string"}
    types = {"string": pa.string(), "bool": pa.bool_(), "int": pa.int64()}
    schema = pa.schema([(c, types[kinds[c]] if c in kinds else pa.float64()) for c in columns],
                       metadata={MARK: f"table/{TABLE_VERSION}", "econeval_version": __version__})
    table = pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows], schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def _stderr(result: dict, metric: str) -> float | None:
    """A metric's standard error from its 95% interval (half its width over 1.96); None without one."""
    iv = interval(result, metric)
    return (iv[1] - iv[0]) / (2 * 1.959964) if iv else None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _unix(stamp: Any) -> float | None:
    """run.json's ISO time as lm-eval's `date` (a UNIX time), or None where it is not one."""
    try:
        return datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return None


def lm_eval_model_args(run: FinishedRun, developer: str | None = None) -> str:
    """The model as lm-eval's `config.model_args` names it: `key=value` pairs, `pretrained=` the
    model's `<developer>/<name>` as the Every Eval Ever record files it (export_eee.model_identity:
    --developer, models.toml's, the GGUF's, a served name's prefix), the bare name where nothing
    names the developer. lm-eval takes its `model_name` from it, and Every Eval Ever's
    `convert lm_eval` its model id and developer (the part before the `/`)."""
    from .export_eee import UNKNOWN, model_identity

    dev, name, _ = model_identity(run.record, developer)
    return f"pretrained={name if dev == UNKNOWN else f'{dev}/{name}'}"


def lm_eval_doc(run: FinishedRun, developer: str | None = None) -> dict[str, Any]:
    """The run's headline numbers in lm-eval's results.json layout, as lm-eval's own result schema
    (lm_eval/result_schema.py, EvalResults) types it: each task's `name`, `alias` and `sample_len`;
    a metric as a number, left out where the run computed none (named in the task's config's
    `not_computed`), its `_stderr` only where the run has an interval; a config's values as text;
    `date` a UNIX time; the model as lm-eval's `model_args` (`pretrained=DEVELOPER/MODEL`)."""
    if run.record.gate:
        raise UsageError(f"{run.path} is a gate's folder: its items are the gate's sample, not a task's results",
                         hint="export the baseline or candidate run, or use --format table")
    rec, results = run.record, run.results
    doc: dict[str, Any] = {"results": {}, "groups": {}, "group_subtasks": {}, "configs": {}, "versions": {}, "n-shot": {},
                           "higher_is_better": {}, "n-samples": {}, "task_hashes": {}}
    for entry in rec.task_entries():
        name = entry.name
        task, res = registry.get_task(name), results.get(name)
        if not isinstance(res, dict):
            continue  # a task with no results (not run for this model): nothing to report
        n = res.get("n") if isinstance(res.get("n"), int) else len(run.samples.get(name, {}))
        row: dict[str, Any] = {"name": name, "alias": name, "sample_len": n}
        better: dict[str, bool | None] = {}
        missing = []
        for metric, value in task.headline(res).items():
            direction = task.metric(metric).direction
            better[metric] = direction > 0 if direction else None
            if not _number(value):
                missing.append(metric)  # not computed (over no parsed item): no number is written for it
                continue
            row[f"{metric},none"] = value
            if (se := _stderr(res, metric)) is not None:
                row[f"{metric}_stderr,none"] = se
        estimate = obj(res.get("estimate"))
        shots = task.n_shot(run.preps[name])
        of = estimate.get("of")
        doc["results"][name] = row
        doc["group_subtasks"][name] = []
        doc["versions"][name] = task.prompt_version
        if shots is not None:
            doc["n-shot"][name] = shots
        doc["higher_is_better"][name] = better
        doc["n-samples"][name] = {"original": of if isinstance(of, int) else len(run.preps[name].items), "effective": n}
        # each task's data, as its files' hashes: one hash of them (lm-eval's task_hashes)
        doc["task_hashes"][name] = hashlib.sha256(json.dumps(entry.dataset, sort_keys=True).encode()).hexdigest()
        doc["configs"][name] = {
            "task": name, "description": task.description, "version": task.prompt_version,
            "table": text(res.get("table")), "estimate": text(estimate.get("note")),
            "not_computed": ", ".join(missing) or None,
            # a task that draws with its authors' seed says so (STEER-ME without --seed)
            "seed": text(run.preps[name].settings.get("seed", rec.seed)),
            "options": text(dict(entry.options) or None),
            "judge": judged_by(run, name)}  # "self-judged": the evaluated model judged its own answers
    model_args = lm_eval_model_args(run, developer)
    config: dict[str, Any] = {"model": str(rec.backend_kind or "econeval"), "model_args": model_args, "limit": rec.limit,
                              "gen_kwargs": None}
    for key, value in (("random_seed", rec.seed), ("bootstrap_iters", rec.bootstrap)):
        if isinstance(value, int):
            config[key] = value
    if isinstance(rec.model_sha256, str):
        config["model_sha"] = rec.model_sha256
    doc["config"] = config
    doc["model_source"] = str(rec.backend_kind or "econeval")
    # as lm-eval names the model: the `pretrained` of its model_args, sanitized by its own rule (lm_eval/utils.py)
    doc["model_name"] = model_args.partition("=")[2]
    doc["model_name_sanitized"] = re.sub(r"[\"<>:/|\\?*\[\]]+", "__", doc["model_name"])
    if (date := _unix(rec.started)) is not None:
        doc["date"] = date
        end = _unix(rec.finished)
        if end is not None:
            doc["total_evaluation_time_seconds"] = str(end - date)
    doc["econeval_version"] = rec.econeval_version
    doc["data_package"] = rec.data_package
    doc[MARK] = "lm-eval/2"
    return doc


def _previous(path: Path, fmt: str) -> bool:
    """Whether the file at `path` is an earlier export (which may be replaced)."""
    try:
        head = read_regular(path, limit=256 << 20)
    except OSError:
        return False
    if fmt == "lm-eval":
        try:
            return isinstance(doc := json.loads(head), dict) and MARK in doc
        except ValueError:
            return False
    if fmt == "every-eval-ever":  # the schema allows no marker of ours: an EEE record of econeval's
        try:
            doc = json.loads(head)
        except ValueError:
            return False
        return isinstance(doc, dict) and isinstance(doc.get("eval_library"), dict) and doc["eval_library"].get("name") == "econeval"
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq

            return MARK.encode() in (pq.read_schema(io.BytesIO(head)).metadata or {})
        except Exception:  # noqa: BLE001 - not a Parquet file pyarrow reads: not ours
            return False
    # a CSV whose header names the marker column (table/3), or an older one's `# econeval_export` first line
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    return first.startswith(f"# {MARK} ") or MARK in next(csv.reader([first]), [])


def _table(runs: list[FinishedRun], out: Path) -> bytes:
    columns, rows = table_rows(runs)
    return _parquet(columns, rows) if out.suffix == ".parquet" else _csv(columns, rows)


FORMATS = ("table", "lm-eval", "inspect", "every-eval-ever")
FOLDER_MARK = ".econeval_export"  # in an Inspect export's folder: a later export may replace the folder


def export(folders: list[Path], fmt: str, out: Path, developer: str | None = None, log_format: str | None = None) -> int:
    """Write the runs in `fmt` to `out`; returns the rows (table), tasks (lm-eval) or logs (inspect) written
    (`developer`: who made the model, for an Every Eval Ever record or lm-eval's model_args, where the run does not say;
    `log_format`: an Inspect export's log format, `eval` (the default) or `json`)."""
    if log_format is not None and fmt != "inspect":
        raise UsageError("--log-format is for --format inspect", hint="leave it out")
    if developer is not None and fmt not in ("every-eval-ever", "lm-eval"):
        raise UsageError("--developer is for --format every-eval-ever and lm-eval", hint="leave it out")
    if developer is not None and (not developer.strip() or "/" in developer):
        raise UsageError(f"--developer {developer!r}: a name such as google, one path component", hint="name the organisation")
    to_stdout = str(out) == "-"  # `--out -`: standard output (a table as CSV)
    if to_stdout and fmt == "inspect":
        raise UsageError("--out -: an Inspect export is a folder of logs, not one stream", hint="name a folder")
    if fmt == "table" and not to_stdout and out.suffix not in (".csv", ".parquet"):
        raise UsageError(f"--out {out}: a table is written as .csv or .parquet", hint="name FILE.csv or FILE.parquet")
    if fmt in ("lm-eval", "inspect", "every-eval-ever") and len(folders) != 1:
        raise UsageError(f"an {fmt} export holds one run: name one run folder", hint="export each run on its own")
    if fmt == "inspect":
        return _export_inspect(Path(folders[0]), out, log_format)
    if not to_stdout:
        check_output(out)
    if not to_stdout and out.exists() and not _previous(out, fmt):
        raise UsageError(f"--out {out} exists and is not an earlier export of econeval's: it is left as it is",
                         hint="name a new file, or remove that one")
    runs = [_finished(Path(f)) for f in folders]
    if fmt == "table":
        data = _table(runs, out)
        count = sum(len(t) for r in runs for t in r.samples.values())
    elif fmt == "every-eval-ever":
        from .export_eee import instances, record, samples_path

        doc = record(runs[0], developer)
        beside = None if to_stdout else samples_path(out)
        if beside is not None:  # the datastore's layout: the instance records beside the record, written first
            lines = instances(runs[0], doc)
            body = b"".join(dumps(line, pretty=False) + b"\n" for line in lines)
            check_output(beside[0])
            write_output(beside[0], body)
            doc["detailed_evaluation_results"] = {"format": "jsonl", "file_path": beside[1], "hash_algorithm": "sha256",
                                                  "checksum": hashlib.sha256(body).hexdigest(), "total_rows": len(lines)}
        data, count = dumps(doc) + b"\n", len(doc["evaluation_results"])
    else:
        doc = lm_eval_doc(runs[0], developer)
        data, count = dumps(doc) + b"\n", len(doc["results"])
    if to_stdout:
        import sys

        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        write_output(out, data)
    return count


def _export_inspect(folder: Path, out: Path, log_format: str | None = None) -> int:
    """One Inspect log per task in the folder `out` (new, or an earlier Inspect export, replaced
    whole), `.eval` unless `log_format` says `json`: written into a staging folder beside it, then
    renamed into place."""
    import os
    import shutil

    from .export_inspect import LOG_FORMATS, eval_logs, write_logs

    log_format = log_format or LOG_FORMATS[0]
    if log_format not in LOG_FORMATS:
        raise UsageError(f"--log-format {log_format}: Inspect's log formats are {' and '.join(LOG_FORMATS)}",
                         hint="--log-format eval")

    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise UsageError(f"--out {out}: an Inspect export is a folder of logs, and this is not a folder", hint="name a new folder")
    check_place(out)  # the staging folder is made beside it
    if out.exists() and any(out.iterdir()) and not (out / FOLDER_MARK).is_file():
        raise UsageError(f"--out {out} is a folder that is not an earlier export of econeval's: it is left as it is",
                         hint="name a new folder")
    run = _finished(folder)
    logs = eval_logs(run)
    out = out.absolute()
    staging = out.parent / f".{out.name}.{os.getpid()}.exporting"
    old = out.parent / f".{out.name}.{os.getpid()}.replaced"
    staging.mkdir(parents=True)
    try:
        write_logs(logs, staging, log_format)
        (staging / FOLDER_MARK).write_text(f"inspect/2 {log_format}\n")
        if out.exists():
            out.rename(old)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return len(logs)
