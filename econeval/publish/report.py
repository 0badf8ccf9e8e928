"""`econeval report`: each benchmark's paper tables (declared by the benchmark through the
registry), the user's runs as rows beside the papers' published rows, with 95% intervals, the
number of items each row rests on, and the deviations from the paper's protocol under each table.
Formats: md, csv, json (here) and html (report_html.py).
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any, Callable

from .. import registry
from ..errors import UsageError, clean_tree
from ..store.epochs import EpochGroup, open_group, spread
from ..store.finished import FinishedRun, open_run
from ..tables import Table, as_dict, cell, has_setting, interval_text, limit_notes, task_rows


def _open(folder: Path) -> FinishedRun:
    """A run folder as a report reads it: a field of another type in an edited run.json read as
    absent; an --epochs parent as one run (its epochs' means); each run's (each epoch's) records
    re-derived and its results recomputed from them (FinishedRun.verified), as the exports check
    them: a number a report shows is one its samples make."""
    group = open_group(folder, strict=False)
    run = group if group is not None else open_run(folder, strict=False)
    for one in group.epochs if group is not None else [run]:
        if not one.results:
            raise UsageError(f"{one.path} has no results yet (the run did not finish; rerun it to resume)")
        one.verified()
    return run


def _flag(command: Any, name: str) -> str | None:
    """The value of a flag in a run's recorded command line (`--budget 10m` or `--budget=10m`)."""
    words = [str(w) for w in command] if isinstance(command, list) else []
    for i, w in enumerate(words):
        if w == name and i + 1 < len(words):
            return words[i + 1]
        if w.startswith(name + "="):
            return w[len(name) + 1:]
    return None


def selection(run: FinishedRun) -> str:
    """Which of its items a run evaluated, as its label says it: "limit 8", "budget 10m, 32 of
    1,026 items" (the items its estimates rest on, of the tasks' items), "sample 30, ...", "all
    items"; another part of the items (a shard, a gate's, a stopped run) by the items it scored."""
    rec = run.record
    if rec.limit:
        return f"limit {rec.limit}"
    results = [r for r in run.results.values() if isinstance(r, dict)]
    est = [r["estimate"] for r in results if isinstance(r.get("estimate"), dict)]
    counts = [(e["from"], e["of"]) for e in est if isinstance(e.get("from"), int) and isinstance(e.get("of"), int)]
    items = f", {sum(n for n, _ in counts):,} of {sum(of for _, of in counts):,} items" if counts else ""
    if est and isinstance(rec.stopped_early, dict) and rec.stopped_early.get("why") == "budget spent":
        budget = _flag(rec.command, "--budget")
        return (f"budget {budget}" if budget else "a budget") + items
    if est:
        specs = sorted(str(s) for s in rec.sample_specs() if s is not None)
        return (f"sample {specs[0]}" if len(specs) == 1 else "a sample") + items
    if rec.whole:
        return "all items"
    if rec.shard:
        return f"shard {rec.shard_index} of {rec.shard_count}"
    scored = sum(r["n"] for r in results if isinstance(r.get("n"), int) and not isinstance(r.get("n"), bool))
    return f"{scored:,} items"


def _settings(run: FinishedRun) -> dict[str, Any]:
    """What a run is, in the user's terms: each differing entry labels the runs of a report."""
    def obj(value: Any) -> dict:
        return value if isinstance(value, dict) else {}

    record = run.record
    model = record.model_identity
    lora = ",".join(f"{Path(str(a.get('path'))).name}:{a.get('scale')}" for a in record.lora) or None
    out = {"n_ctx": model.get("n_ctx"), "chat": model.get("chat_mode"), **obj(model.get("settings")), "lora": lora,
           "seed": record.seed, "limit": selection(run), "econeval": record.econeval_version, "data": record.data_version}
    for task, opts in (record.options or {}).items():
        for k, v in obj(opts).items():
            out[f"{task} {k}"] = v
    return out


def _part(key: str, value: Any) -> str:
    """One difference in a label: the items a run evaluated as they are named ("limit 8", "budget
    10m, 32 of 1,026 items"), a setting by its name and value, a path by its last part (a file's
    or folder's name: the label is no place for a machine's paths), an unset one as such."""
    if key == "limit":
        return str(value)
    if value is None:
        return f"{key} not set"
    if isinstance(value, str) and os.path.isabs(value):
        value = Path(value).name or value
    return f"{key} {value}"


def _labels(runs: list[FinishedRun]) -> None:
    """Each run's label: its model, and what differs between it and the others (parallel 8,
    limit 2, ...); the folder's name where nothing else tells two runs apart."""
    settings = [_settings(r) for r in runs]
    keys = sorted({k for s in settings for k in s})
    # a setting tells runs apart where the runs that have it differ in it: a task option of a task only one run has
    # (the tasks of the two differ) is no difference, and would put every option of both into both labels
    differ = [k for k in keys if len({repr(s[k]) for s in settings if k in s}) > 1]
    keys_ = [r.record.reasoning_key() for r in runs]
    plain = all(k.plain for k in keys_)  # no run reasoned or set a mode: no label
    differ = [k for k in differ if k != "reasoning"]
    for r, s, key in zip(runs, settings, keys_):
        parts = [_part(k, s.get(k)) for k in differ if k in s and not (k == "seed" and isinstance(r, EpochGroup))]
        if not plain:
            parts.append(key.describe())
        if isinstance(r, EpochGroup):
            parts.append(f"{len(r.epochs)} epochs")
        r.label = r.model + (f" ({', '.join(parts)})" if parts else "")
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.label] = seen.get(r.label, 0) + 1
    for r in runs:
        if seen[r.label] > 1:
            r.label = f"{r.label} [{r.path.name}]"


def tables(runs: list[FinishedRun]) -> list:
    """Every registered benchmark's and plugin's tables for these runs, in registration order; an --epochs
    run's cells the mean and std over its epochs (`_spread`)."""
    out = _tables(runs)
    for group in (r for r in runs if isinstance(r, EpochGroup)):
        _spread(out, group, alone=len(runs) == 1)
    return out


def _tables(runs: list[FinishedRun]) -> list:
    """Every registered benchmark's tables for these runs, in registration order; then, for each
    task of a benchmark that registers none (a plugin's), a table of its headline metrics."""
    out: list = []
    for bench in registry.extensions():
        if bench.tables is None:
            continue
        try:
            out += bench.tables(runs) or []
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
            raise UsageError(f"the results of benchmark {bench.name} in these run folders are not as econeval writes "
                             f"them ({type(exc).__name__}: {exc})", hint="the folder was edited or written by another tool") from None
    for name in dict.fromkeys(t for r in runs for t in r.results):
        task = registry.tasks().get(name)
        declared = registry.benchmarks().get(task.benchmark) if task else None
        if task is not None and (declared is None or declared.tables is None):
            out.append(headline_table(task, runs))
    return out


def _spread(out: list, group: EpochGroup, alone: bool = False) -> None:
    """Each cell of an --epochs run in these tables: the mean over its epochs and their standard
    deviation (`std`), from its epochs' own tables (each built as if the epoch were the report's one
    run): its rows (a row labelled with the run) and its column (a table whose columns are the
    runs). Intervals over items give way to the spread over epochs. A table whose epochs differ in
    shape keeps the mean of the numbers, and says so."""
    per_epoch = []
    for run in group.epochs:
        run.label = group.label
        per_epoch.append({t.id: t for t in _tables([run])})
    label = group.label
    for t in out:
        _spread_figures(t, [e.get(t.id) for e in per_epoch], group, alone)
        mine = [r for r in t.rows if r["source"] == "run" and r["label"] == label]
        column = t.columns.index(label) if label in t.columns else None
        if not mine and column is None:
            continue
        theirs = [e.get(t.id) for e in per_epoch]
        cells: list[tuple[dict, int, list]] = []  # (row, column, the epochs' values)
        if mine:
            runs_ = [[r for r in e.rows if r["source"] == "run" and r["label"] == label] if e else [] for e in theirs]
            if all(len(rs) == len(mine) and all(a.get("setting") == b.get("setting") for a, b in zip(rs, mine)) for rs in runs_):
                cells = [(row, j, [rs[i]["values"][j] for rs in runs_]) for i, row in enumerate(mine) for j in range(len(row["values"]))]
                for i, row in enumerate(mine):  # the items each epoch's row rests on
                    ns = [rs[i].get("n") for rs in runs_]
                    row["n"] = ns[0] if len(set(map(str, ns))) == 1 else "/".join("-" if n is None else str(n) for n in ns)
        elif column is not None:
            rows_ = [{r["label"]: r for r in e.rows if r["source"] == "run"} if e else {} for e in theirs]
            cells = [(row, column, [rs[row["label"]]["values"][0] if row["label"] in rs else None for rs in rows_])
                     for row in t.rows if row["source"] == "run"]
        if not cells:
            t.notes.append(f"{label}: the means over {len(group.epochs)} epochs; no std (its epochs' tables differ in shape)")
            continue
        for row, j, values in cells:
            avg, sd = spread(values)
            row.setdefault("std", [None] * len(row["values"]))
            row["values"][j], row["std"][j] = (avg, sd) if avg is not None else (row["values"][j], None)
            if mine:
                row["intervals"] = None
        t.notes.append(f"{label}: each number the mean ± std over {len(group.epochs)} epochs (seeds "
                       f"{', '.join(map(str, group.seeds))}; {group.path}/epoch-K), in place of an interval over items.")


_UNEVEN = object()  # figures of the epochs that differ in more than their numbers
_NOT_AVERAGED = ("forest", "estimates")  # intervals over items: a mean of their ends is no interval (bars: _with_intervals)


def _spread_figures(t: Table, theirs: list, group: EpochGroup, alone: bool) -> None:
    """A table's figures for an --epochs run: drawn from each epoch alone (its items and its
    numbers), then each number the mean over the epochs, where the report shows this run alone
    and its epochs' figures differ only in their numbers and draw no intervals over items;
    otherwise a note says that the run's marks rest on its epoch 1's items where a figure counts
    them (the table's numbers are the means)."""
    if not t.figures:
        return
    n = len(group.epochs)
    if alone and all(e is not None and len(e.figures) == len(t.figures) for e in theirs):
        means = [_mean_of([e.figures[i] for e in theirs]) for i in range(len(t.figures))]
        if all(m is not _UNEVEN and m.get("kind") not in _NOT_AVERAGED and not _with_intervals(m) for m in means):
            t.figures = [{**m, "caption": f"{m.get('caption', '')} Each number the mean over {n} epochs."} for m in means]
            return
    t.notes.append(f"{group.label}: where a figure counts items, its marks rest on epoch 1's items (seed "
                   f"{group.seeds[0]}), while the table's numbers are the means over its {n} epochs.")


def _with_intervals(fig: dict) -> bool:
    """Whether a figure draws intervals over items (a bar's error bars): the mean of their ends
    over epochs is no interval, so such a figure is not averaged."""
    return any(isinstance(ser, dict) and ser.get("intervals") for ser in fig.get("series") or [])


def _mean_of(values: list) -> Any:
    """The mean over the epochs of one figure's document: numbers averaged (a cell an epoch lacks
    left out), everything else the same in every epoch, else _UNEVEN."""
    first = values[0]
    if all(isinstance(v, dict) for v in values):
        if any(v.keys() != first.keys() for v in values):
            return _UNEVEN
        out = {k: _mean_of([v[k] for v in values]) for k in first}
        return _UNEVEN if any(x is _UNEVEN for x in out.values()) else out
    if all(isinstance(v, list) for v in values):
        if any(len(v) != len(first) for v in values):
            return _UNEVEN
        items = [_mean_of([v[i] for v in values]) for i in range(len(first))]
        return _UNEVEN if any(x is _UNEVEN for x in items) else items
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if numbers and len(numbers) + sum(v is None for v in values) == len(values):
        return first if all(v == first for v in values) else sum(numbers) / len(numbers)
    return first if all(v == first for v in values) else _UNEVEN


def headline_table(task, runs: list[FinishedRun]) -> Table:
    """A task whose benchmark registers no paper tables: each run's headline metrics as its
    results.json holds them, with their intervals and the items they rest on."""
    columns = list(dict.fromkeys(m for r in runs if isinstance(r.results.get(task.name), dict)
                                 for m in _headline(task, r.results[task.name])))
    t = Table(f"{task.name}-headline", f"{task.name}: headline metrics", columns, 3)
    try:
        rows = task_rows(runs, {task.name: None}, lambda res: [_headline(task, res).get(c) for c in columns], columns)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise UsageError(f"the results of task {task.name} in these run folders are not as econeval writes them "
                         f"({type(exc).__name__}: {exc})", hint="the folder was edited or written by another tool") from None
    t.rows = [row for *_, row in rows]
    t.notes = [f"{task.benchmark or task.name} registers no paper table: each run's headline metrics (results.json), "
               "with no published rows beside them.", *limit_notes([(run, res) for run, _, res, _ in rows])]
    return t


def _headline(task, result: dict) -> dict:
    return task.headline(result) if isinstance(result, dict) else {}


def estimates(runs: list[FinishedRun]) -> list[dict[str, Any]]:
    """Per run of a --sample or --budget: each task's headline estimates of the full set's numbers
    with their 95% intervals and the items they rest on (counts left out: another scale)."""
    from ..tables import interval

    out = []
    for run in runs:
        rows = []
        for name, res in run.results.items():
            est = res.get("estimate") if isinstance(res, dict) else None
            if not isinstance(est, dict):
                continue
            task = registry.tasks().get(name)
            if task is None:
                continue
            for metric, value in task.headline(res).items():
                spec = task.metric(metric)
                if spec.count or not isinstance(value, (int, float)) or isinstance(value, bool):
                    continue
                iv = interval(res, metric)
                rows.append({"task": name, "metric": metric, "value": value, "low": iv[0] if iv else None,
                             "high": iv[1] if iv else None, "direction": spec.direction, "from": est.get("from"), "of": est.get("of")})
        if rows:
            out.append({"run": run.label, "rows": rows})
    return out


Comparer = Callable[[Path, Path], dict[str, Any]]
"""The paired comparison of a later run (second) with the first, as a report shows it; raises
UsageError where the two are not comparable. The judges own it (`econeval.judge.compare.report_entry`):
the command that asks for a report hands it in, so nothing here imports a judge."""


def build(folders: list[Path], compare: Comparer | None = None) -> dict[str, Any]:
    """The report document: runs, tables (paper rows and run rows, each with its figures), and,
    given `compare`, the paired comparison of each later run against the first."""
    runs = [_open(Path(f)) for f in folders]
    if not runs:
        raise UsageError("name at least one run folder")
    _labels(runs)
    doc = {"runs": [{"label": r.label, "folder": str(r.path), "model": r.model, "limit": r.record.limit,
                     "seed": r.seeds if isinstance(r, EpochGroup) else r.record.seed, "econeval_version": r.record.econeval_version,
                     "data_package": r.record.data_version, "tasks": sorted(r.results),
                     **({"epochs": len(r.epochs)} if isinstance(r, EpochGroup) else {})} for r in runs],
           "tables": [as_dict(t) for t in tables(runs)], "compare": [], "estimates": estimates(runs)}
    if len(runs) > 1 and compare is not None:
        for cand in runs[1:]:
            try:
                entry = compare(runs[0].path, cand.path)
            except UsageError as exc:
                doc["compare"].append({"baseline": runs[0].label, "candidate": cand.label, "refused": str(exc)})
                continue
            doc["compare"].append({"baseline": runs[0].label, "candidate": cand.label, **entry})
    return clean_tree(doc)  # names from run folders shown safely: no terminal escapes, no bidi overrides


# ---- text formats -----------------------------------------------------------------------------
def cell_iv(value, iv, decimals: int, std=None) -> str:
    """A cell as text: a mean over repeats with its std (`± s`), else the value with its interval."""
    if std is not None and value is not None:
        return f"{cell(value, decimals)} ± {std:.{decimals}f}"
    shown = interval_text(iv, value, decimals)
    return f"{cell(value, decimals)} {shown}" if shown else cell(value, decimals)


def _row_cells(t: dict, row: dict) -> list[str]:
    ivs = row.get("intervals") or [None] * len(row["values"])
    std = row.get("std") or [None] * len(row["values"])
    return [cell_iv(v, iv, t["decimals"], sd) for v, iv, sd in zip(row["values"], ivs, std)]


def _head(t: dict) -> list[str]:
    return ["source", t.get("row_label", "model"), *(["setting"] if has_setting(t) else []), *t["columns"], "n"]


def md_text(text: str) -> str:
    """Text from run folders (model names, paths, notes) as plain text in Markdown: one line, no
    table breaks, no raw HTML."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


CompareText = Callable[[dict[str, Any]], str]
"""A comparison entry of the document (what a `Comparer` returned) as Markdown; the judges own it
(`econeval.judge.compare.render_entry`)."""


def render_md(doc: dict, compare_md: CompareText | None = None) -> str:
    runs = "; ".join(md_text(f"{r['label']} ({r['folder']}, {', '.join(r['tasks'])})") for r in doc["runs"])
    out = ["# econeval report", "", "Runs: " + runs,
           "", "Cells of econeval's rows: the value [95% bootstrap interval over items], or the mean ± std over repeats (a "
           "published row's over the paper's repeated runs, a run's over its --epochs); n: the items a row rests on; – : not "
           "computed.", ""]
    for t in doc["tables"]:
        out += [f"## {t['title']}", "", "| " + " | ".join(_head(t)) + " |", "|" + "---|" * len(_head(t))]
        for row in t["rows"]:
            cells = [row["source"], row["label"], *([row.get("setting") or ""] if has_setting(t) else []), *_row_cells(t, row),
                     "" if row.get("n") is None else str(row["n"])]
            out.append("| " + " | ".join(md_text(c) for c in cells) + " |")
        out += [""] + [f"- {md_text(n)}" for n in t["notes"]] + [""]
    for c in doc["compare"]:
        out += [f"## Compare: {md_text(c['candidate'])} against {md_text(c['baseline'])}", ""]
        if "refused" in c:
            out += [f"Not comparable: {md_text(c['refused'])}", ""]
            continue
        if compare_md is not None:
            out += [compare_md(c), ""]
    for est in doc.get("estimates") or []:
        out += [f"## Estimates: {md_text(est['run'])}", "", "| task | metric | estimate [95% interval] | items |", "|---|---|---|---|"]
        out += [f"| {md_text(r['task'])} | {md_text(r['metric'])} | "
                f"{cell_iv(r['value'], [r['low'], r['high']] if r['low'] is not None else None, 3)} | {r['from']} of {r['of']} |"
                for r in est["rows"]]
        out.append("")
    return "\n".join(out)


def render_csv(doc: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["table", "source", "model", "setting", "column", "value", "low", "high", "n", "std"])
    for t in doc["tables"]:
        for row in t["rows"]:
            ivs = row.get("intervals") or [None] * len(row["values"])
            std = row.get("std") or [None] * len(row["values"])
            for col, v, iv, sd in zip(t["columns"], row["values"], ivs, std):
                w.writerow([t["id"], row["source"], row["label"], row.get("setting") or "", col,
                            "" if v is None else v, iv[0] if iv else "", iv[1] if iv else "",
                            "" if row.get("n") is None else row["n"], "" if sd is None else sd])
    return buf.getvalue()


def render(doc: dict, fmt: str, compare_md: CompareText | None = None) -> str:
    if fmt == "md":
        return render_md(doc, compare_md)
    if fmt == "csv":
        return render_csv(doc)
    if fmt == "json":
        from ..results import dumps

        return dumps(doc).decode()
    from .report_html import render_html

    return render_html(doc)
