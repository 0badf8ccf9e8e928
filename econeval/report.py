"""`econeval report`: each suite's table in its paper's layout, the user's runs as rows beside the
papers' published rows (bundled in econeval/published/, checked against the paper texts by the
tests), with 95% intervals, the number of items each row rests on, and the deviations from the
paper's protocol under each table. Formats: md, csv, json (here) and html (report_html.py).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import UsageError
from .results import read_json

PUBLISHED = Path(__file__).resolve().parent / "published"


@lru_cache(maxsize=None)
def published(paper: str) -> dict:
    """The published tables of one paper (econnli, econlogicqa, cfbenchmark, steer_me)."""
    return json.loads((PUBLISHED / f"{paper}.json").read_text(encoding="utf-8"))


@dataclass
class Run:
    folder: Path
    meta: dict
    results: dict[str, dict]  # task -> results.json entry
    label: str = ""

    @property
    def model(self) -> str:
        """The model's name; a folder written by `econeval score --out` has none: its folder name."""
        return (self.meta.get("backend") or {}).get("model", {}).get("name") or self.folder.name


@dataclass
class Table:
    id: str
    title: str
    columns: list[str]
    decimals: int = 3
    rows: list[dict] = field(default_factory=list)  # {"source": "paper"|"run", "label", "setting", "values", "intervals", "n"}
    row_label: str = "model"  # what a row's label names (a model, or a STEER-ME group)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def load_run(folder: Path) -> Run:
    folder = Path(folder)
    try:
        meta = read_json(folder / "run.json")
    except (OSError, ValueError) as exc:
        raise UsageError(f"{folder} is not a run folder (no readable run.json: {exc})") from None
    results: dict[str, dict] = {}
    for name in ["results.json", *sorted(p.name for p in folder.glob("results-limit-*.json"))]:
        path = folder / name
        if path.is_file():
            for task, res in read_json(path).get("tasks", {}).items():
                results.setdefault(task, res)  # results.json (the run's own limit) first
    if not results:
        raise UsageError(f"{folder} has no results yet (the run did not finish; rerun it to resume)")
    return Run(folder, meta, results)


def _labels(runs: list[Run]) -> None:
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.model] = seen.get(r.model, 0) + 1
    for r in runs:
        r.label = f"{r.model} ({r.folder.name})" if seen[r.model] > 1 else r.model


def _iv(res: dict, key: str):
    iv = (res.get("intervals") or {}).get(key)
    return list(iv) if isinstance(iv, (list, tuple)) else None


def _limit_note(runs_rows: list[tuple[Run, dict]]) -> list[str]:
    out = []
    for run, res in runs_rows:
        if run.meta.get("limit"):
            out.append(f"{run.label}: --limit {run.meta['limit']} (a subset: {res.get('n', res.get('n_scored'))} items)")
    return out


def _published_rows(table: dict) -> list[dict]:
    """The paper's rows; their setting column holds the prompting method (EconNLI) or the model
    size (CFBenchmark) where the paper prints one."""
    return [{"source": "paper", "label": r["model"], "setting": r.get("prompting") or r.get("size"),
             "values": r["values"], "intervals": None, "n": None} for r in table["rows"]]


# ---- one builder per paper table ----------------------------------------------------------------
def econnli_table4(runs: list[Run]) -> Table | None:
    pub = published("econnli")["tables"]["table4"]
    settings = {"econnli-zero": "Zero", "econnli-icl": "ICL", "econnli-cot": "CoT"}
    mine = [(r, t, r.results[t]) for r in runs for t in settings if t in r.results]
    if not mine:
        return None
    tab = Table("econnli-table4", "EconNLI Table 4: classification (precision / recall / F1 per class)", pub["columns"], 3)
    tab.rows = _published_rows(pub)
    for run, task, res in mine:
        p = res["paper"]
        vals = [p[c][m] for c in ("Negative Pairs", "Positive Pairs", "Average") for m in ("precision", "recall", "f1")]
        tab.rows.append({"source": "run", "label": run.label, "setting": settings[task], "values": vals,
                         "intervals": [_iv(res, c) for c in pub["columns"]], "n": res.get("n_scored")})
    tab.notes = ["Published rows: open models through HuggingFace, greedy; ChatGPT/GPT-4 through OpenAI's API (January 2024).",
                 "The published open-model ICL rows are a parsing artefact of the released code (it reads the demonstration's "
                 "'answer:Yes', so every item is predicted Yes); econeval's row parses the model's own continuation.",
                 "Rows are computed over the parsed answers (n); unparsable answers are excluded, as in the released code."]
    tab.notes += _limit_note([(r, res) for r, _, res in mine])
    return tab


def econnli_table6(runs: list[Run]) -> Table | None:
    pub = published("econnli")["tables"]["table6"]
    mine = [(r, r.results["econnli-gen"]) for r in runs if "econnli-gen" in r.results]
    if not mine:
        return None
    tab = Table("econnli-table6", "EconNLI Table 6: generated consequences judged against the reference", pub["columns"], 2)
    tab.rows = _published_rows(pub)
    for run, res in mine:
        p = res["paper"]
        tab.rows.append({"source": "run", "label": run.label, "values": [p.get(c) for c in pub["columns"]],
                         "intervals": [_iv(res, c) for c in pub["columns"]], "n": res.get("n_scored")})
    judges = {(r.meta.get("judge") or {}).get("name") or r.model for r, _ in mine}
    tab.notes = [f"Published rows were judged by GPT-4 over 513 positive pairs; econeval's by {', '.join(sorted(judges))}."]
    tab.notes += _limit_note(mine)
    return tab


def econlogicqa_table2(runs: list[Run]) -> Table | None:
    pub = published("econlogicqa")["tables"]["table2"]
    mine = [r for r in runs if "econlogicqa-1shot" in r.results or "econlogicqa-5shot" in r.results]
    if not mine:
        return None
    tab = Table("econlogicqa-table2", "EconLogicQA Table 2: accuracy (%)", pub["columns"], 2)
    tab.rows = _published_rows(pub)
    for run in mine:
        vals, ivs, ns = [], [], []
        for t in ("econlogicqa-1shot", "econlogicqa-5shot"):
            res = run.results.get(t)
            acc = res["paper"]["accuracy"] if res else None
            vals.append(None if acc is None else 100 * acc)
            iv = _iv(res, "accuracy") if res else None
            ivs.append([100 * x for x in iv] if iv else None)
            ns.append(res.get("n") if res else None)
        tab.rows.append({"source": "run", "label": run.label, "values": vals, "intervals": ivs,
                         "n": "/".join("-" if n is None else str(n) for n in ns)})
    tab.notes = ["Few-shot demonstrations come from a partial train split (189 of 390 rows were released); the paper drew "
                 "them from the full split.", "n: items of the 1-shot / 5-shot runs."]
    tab.notes += _limit_note([(r, r.results.get("econlogicqa-1shot") or r.results.get("econlogicqa-5shot")) for r in mine])
    return tab


def cfbenchmark_table2(runs: list[Run]) -> Table | None:
    pub = published("cfbenchmark")["tables"]["table2"]
    settings = {"cfbenchmark-zero": "zero-shot", "cfbenchmark-few": "few-shot"}
    mine = [(r, t, r.results[t]) for r in runs for t in settings if t in r.results]
    if not mine:
        return None
    tab = Table("cfbenchmark-table2", "CFBenchmark-Basic Table 2: F1 (recognition, classification), cosine similarity (generation)",
                pub["columns"], 3)
    tab.rows = _published_rows(pub)
    for run, task, res in mine:
        tab.rows.append({"source": "run", "label": run.label, "setting": settings[task],
                         "values": [res["paper"].get(c) for c in pub["columns"]],
                         "intervals": [_iv(res, c) for c in pub["columns"]], "n": res.get("n_scored")})
    embedders = {(r.meta.get("embedder") or {}).get("name") for r, _, _ in mine} - {None}
    tab.notes = [f"Generation columns use the {', '.join(sorted(embedders)) or 'configured'} embedder, not the paper's "
                 "bge-zh-v1.5: similarities are not on the same scale as the published Summary/Risk/Suggestion/G.Avg.",
                 "The paper does not say whether Table 2 is zero-shot or few-shot; both of econeval's settings are shown."]
    tab.notes += _limit_note([(r, res) for r, _, res in mine])
    return tab


STEER_NOTE = ("STEER-ME is an econeval re-implementation: the questions come from econeval's own generator (no STEER-ME "
              "data was released in reach), so the published numbers are not directly comparable.")


def steer_tables(runs: list[Run]) -> list[Table]:
    mine = [(r, r.results["steer-me"]) for r in runs if "steer-me" in r.results]
    if not mine:
        return []
    cols = ["accuracy", "normalized accuracy", "ECE", "Brier", "EPA", "no-answer rate"]
    overall = Table("steer-me-overall", "STEER-ME overall", cols, 3)
    for run, res in mine:
        o = res["paper"]["overall"]
        ren = o.get("renormalized") or {}
        overall.rows.append({"source": "run", "label": run.label, "setting": res.get("adaptation"),
                             "values": [o["accuracy"], o["normalized_accuracy"], ren.get("ece"), ren.get("brier"),
                                        ren.get("epa"), o.get("no_answer_rate")],
                             "intervals": [_iv(res, k) for k in ("acc", "norm acc", "ECE", "Brier", "EPA")] + [None],
                             "n": o.get("n")})
    overall.notes = [STEER_NOTE, "ECE, Brier and EPA use the option probabilities renormalised over the options; "
                     "empty where the backend gave no log-probabilities."] + _limit_note(mine)
    out = [overall]
    for group, title in (("module", "STEER-ME by module (normalized accuracy)"), ("setting", "STEER-ME by setting (normalized accuracy)"),
                         ("element", "STEER-ME by element (normalized accuracy)")):
        keys = sorted({k for _, res in mine for k in res["paper"].get(group, {})})
        tab = Table(f"steer-me-{group}", title, [run.label for run, _ in mine], 3, row_label=group)
        for k in keys:
            cells = [res["paper"].get(group, {}).get(k) or {} for _, res in mine]
            tab.rows.append({"source": "run", "label": k, "values": [c.get("normalized_accuracy") for c in cells],
                             "intervals": None, "n": "/".join(str(c.get("n", "-")) for c in cells)})
        tab.notes = [STEER_NOTE, "Rows are the groups, columns the runs; n: items per run."]
        out.append(tab)
    pub = published("steer_me")["tables"]["table2"]
    car = [(r, res) for r, res in mine if res["paper"]["overall"].get("car")]
    if car:
        tab = Table("steer-me-table2", "STEER-ME Table 2: choosing \"No other option is correct\" under CAR", pub["columns"], 3)
        tab.rows = _published_rows(pub)
        for run, res in car:
            c = res["paper"]["overall"]["car"]
            tab.rows.append({"source": "run", "label": run.label, "values": [c.get("recall"), c.get("precision"), c.get("f1")],
                             "intervals": None, "n": c.get("n")})
        tab.notes = [STEER_NOTE, "Published: aggregated over 20 elements; random guessing gives 0.25."]
        out.append(tab)
    return out


def build(folders: list[Path]) -> dict[str, Any]:
    """The report document: runs, tables (paper rows and run rows), and the paired comparison of
    each later run against the first when the runs share tasks."""
    runs = [load_run(Path(f)) for f in folders]
    if not runs:
        raise UsageError("name at least one run folder")
    _labels(runs)
    tables = [t for t in (econnli_table4(runs), econnli_table6(runs), econlogicqa_table2(runs), cfbenchmark_table2(runs)) if t]
    tables += steer_tables(runs)
    doc = {"runs": [{"label": r.label, "folder": str(r.folder), "model": r.model, "limit": r.meta.get("limit"),
                     "seed": r.meta.get("seed"), "econeval_version": r.meta.get("econeval_version"),
                     "data_package": (r.meta.get("data_package") or {}).get("version"),
                     "tasks": sorted(r.results)} for r in runs],
           "tables": [t.as_dict() for t in tables], "compare": [], "figures": figures(runs)}
    if len(runs) > 1:
        from . import compare

        for cand in runs[1:]:
            try:
                rows = compare.compare(runs[0].folder, cand.folder, n_boot=500)
            except UsageError as exc:
                doc["compare"].append({"baseline": runs[0].label, "candidate": cand.label, "refused": str(exc)})
                continue
            doc["compare"].append({"baseline": runs[0].label, "candidate": cand.label, "rows": [r.as_dict() for r in rows]})
    return doc


def figures(runs: list[Run]) -> dict[str, Any]:
    """Data for the HTML plots: STEER-ME heatmap, reliability bins, EconNLI per-class F1."""
    out: dict[str, Any] = {}
    steer = [(r, r.results["steer-me"]) for r in runs if "steer-me" in r.results]
    if steer:
        elements = sorted({e for _, res in steer for e in res["paper"].get("element", {})})
        out["steer_heatmap"] = {"rows": [r.label for r, _ in steer], "columns": elements,
                                "values": [[(res["paper"]["element"].get(e) or {}).get("normalized_accuracy") for e in elements]
                                           for _, res in steer]}
        out["reliability"] = [b for b in (reliability(r) for r, _ in steer) if b]
    nli = [(r.label + f" {t.split('-')[1]}", r.results[t]["paper"]) for r in runs
           for t in ("econnli-zero", "econnli-icl", "econnli-cot") if t in r.results]
    if nli:
        out["econnli_f1"] = {"rows": [label for label, _ in nli],
                             "negative": [p["Negative Pairs"]["f1"] for _, p in nli],
                             "positive": [p["Positive Pairs"]["f1"] for _, p in nli]}
    return out


def reliability(run: Run, bins: int = 10) -> dict | None:
    """Confidence (the chosen option's renormalised probability) against accuracy, in 10 bins,
    from the run's STEER-ME samples."""
    from .folder import read_samples

    try:
        samples = read_samples(run.folder / "samples.jsonl")[0].values()
    except (OSError, UsageError):
        return None
    pts = [(max(s["p_renormalized"]), bool(s.get("correct"))) for s in samples
           if s.get("task") == "steer-me" and s.get("answered") and isinstance(s.get("p_renormalized"), list) and s["p_renormalized"]]
    if not pts:
        return None
    out = {"label": run.label, "bins": []}
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(c, ok) for c, ok in pts if lo <= c < hi or (b == bins - 1 and c == 1.0)]
        if inside:
            out["bins"].append({"low": lo, "high": hi, "n": len(inside), "confidence": sum(c for c, _ in inside) / len(inside),
                                "accuracy": sum(ok for _, ok in inside) / len(inside)})
    return out


# ---- text formats -----------------------------------------------------------------------------
def cell(value, decimals: int) -> str:
    if value is None:
        return "–"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{value:.{decimals}f}"


def cell_iv(value, iv, decimals: int) -> str:
    text = cell(value, decimals)
    return f"{text} [{iv[0]:.{decimals}f}, {iv[1]:.{decimals}f}]" if iv and value is not None else text


def _row_cells(t: dict, row: dict) -> list[str]:
    ivs = row.get("intervals") or [None] * len(row["values"])
    return [cell_iv(v, iv, t["decimals"]) for v, iv in zip(row["values"], ivs)]


def _head(t: dict) -> list[str]:
    return ["source", t.get("row_label", "model"), "setting", *t["columns"], "n"]


def render_md(doc: dict) -> str:
    out = ["# econeval report", "", "Runs: " + "; ".join(f"{r['label']} ({r['folder']}, {', '.join(r['tasks'])})" for r in doc["runs"]),
           "", "Cells of econeval's rows: the value [95% bootstrap interval over items]; n: the items a row rests on; – : not computed.", ""]
    for t in doc["tables"]:
        out += [f"## {t['title']}", "", "| " + " | ".join(_head(t)) + " |", "|" + "---|" * len(_head(t))]
        for row in t["rows"]:
            cells = [row["source"], row["label"], row.get("setting") or "", *_row_cells(t, row),
                     "" if row.get("n") is None else str(row["n"])]
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        out += [""] + [f"- {n}" for n in t["notes"]] + [""]
    for c in doc["compare"]:
        out += [f"## Compare: {c['candidate']} against {c['baseline']}", ""]
        if "refused" in c:
            out += [f"Not comparable: {c['refused']}", ""]
            continue
        from .compare import Row, render

        out += [render([Row(**r) for r in c["rows"]], "md"), ""]
    return "\n".join(out)


def render_csv(doc: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["table", "source", "model", "setting", "column", "value", "low", "high", "n"])
    for t in doc["tables"]:
        for row in t["rows"]:
            ivs = row.get("intervals") or [None] * len(row["values"])
            for col, v, iv in zip(t["columns"], row["values"], ivs):
                w.writerow([t["id"], row["source"], row["label"], row.get("setting") or "", col,
                            "" if v is None else v, iv[0] if iv else "", iv[1] if iv else "",
                            "" if row.get("n") is None else row["n"]])
    return buf.getvalue()


def render(doc: dict, fmt: str) -> str:
    if fmt == "md":
        return render_md(doc)
    if fmt == "csv":
        return render_csv(doc)
    if fmt == "json":
        from .results import dumps

        return dumps(doc).decode()
    from .report_html import render_html

    return render_html(doc)
