"""`econeval export --format every-eval-ever`: a run's aggregate record in the Every Eval Ever
schema (version SCHEMA), one evaluation result per task and headline metric, each with the items it
rests on and, where the run has one, its 95% interval. Plain JSON built here and checked in the
tests with the `every-eval-ever` package's own validator (it needs Python >= 3.12, so econeval
does not import it). A metric the run could not compute (null) is left out, never written as a
number. Where --out lies in the datastore's layout (data/<benchmark>/<developer>/<model>/<uuid>.json),
the instance-level records go beside it (<uuid>_samples.jsonl), one per item of each task whose items
are right or wrong, tied to that task's first headline result (docs/exports.md).
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any

from .. import registry
from ..version import __version__
from .export_read import interval, judged_by, obj, text
from ..types import as_text
from ..store.finished import FinishedRun
from ..store.record import RunRecord

SCHEMA = "0.3.0"


def _backend(kind: str | None) -> Any:
    """The backend class of a kind (what it says of itself: runs_elsewhere, open_weights, engine_label);
    None for a kind this econeval does not know."""
    return registry.backends().get(str(kind))


def _strings(d: dict) -> dict[str, str]:
    """additional_details: every value a string, as the schema asks (a missing one left out)."""
    return {k: t for k, v in d.items() if (t := text(v)) is not None}


def _bound(x: float) -> float | str:
    """A metric's bound as the schema writes it: a number, or "Infinity" / "-Infinity"."""
    return x if math.isfinite(x) else ("Infinity" if x > 0 else "-Infinity")


UNKNOWN = "unknown"


def model_identity(rec: RunRecord, developer: str | None = None) -> tuple[str, str, str]:
    """Who made the model and what it is called, as the datastore files it: (developer, model
    name, where the developer came from). The developer: `developer` (the --developer option),
    else the models.toml entry's `developer`, else the GGUF's `general.organization`, else the
    prefix of a served model's `org/name`; "unknown" where none says. The model name: the GGUF's
    own (`general.basename`, its size label and fine-tune, as GGUF file names join them), else
    the run's model name. The backend (llamacpp, openai) is the inference platform, never the
    developer."""
    name = str(rec.model_name or UNKNOWN)
    if (rec.file_metadata("general.basename") or "").strip():
        name = "-".join(str(v).strip() for k in ("general.basename", "general.size_label", "general.finetune")
                        if (v := rec.file_metadata(k)) and v.strip())
    served_dev, _, served_name = name.partition("/") if getattr(_backend(rec.backend_kind), "runs_elsewhere", False) else ("", "", "")
    for got, where in ((developer, "the --developer option"), (rec.model_developer, "models.toml's developer"),
                       (rec.file_metadata("general.organization"), "the GGUF's general.organization"),
                       (served_dev if served_name else None, "the served model's name")):
        if isinstance(got, str) and got.strip():
            dev = got.strip()
            if name.startswith(dev + "/"):
                name = name[len(dev) + 1:]
            return dev, name.replace("/", "_"), where
    return UNKNOWN, name.replace("/", "_"), "nothing in the run says (the models.toml field `developer` or --developer names it)"


def _model_info(rec: RunRecord, developer: str | None = None) -> dict:
    kind = str(rec.backend_kind or UNKNOWN)
    model = rec.model
    backend = _backend(kind)
    served = bool(getattr(backend, "runs_elsewhere", False))
    dev, name, source = model_identity(rec, developer)
    info: dict[str, Any] = {
        "name": str(rec.model_name or name),
        # the datastore files a record under the id's prefix: a flat id with developer "unknown" says honestly that
        # no one named the developer (the validator then calls it not merge-ready, as it should)
        "id": f"{dev}/{name}" if dev != UNKNOWN else name, "developer": dev,
        "inference_platform": "local" if not served else kind,
        "additional_details": {"deployment_type": "externally_managed" if served else "self_deployed",
                               "model_availability": "open_weights" if getattr(backend, "open_weights", False) else UNKNOWN,
                               **_strings({"econeval_backend": kind, "sha256": model.get("sha256"),
                                           "developer_from": source, "reasoning": rec.reasoning.get("mode")})}}
    if getattr(backend, "engine_label", None):  # the engine's build run.json records
        info["inference_engine"] = {"name": backend.engine_label, "version": rec.engine_version or UNKNOWN}
    return info


LAYOUT = re.compile(r"(?:^|/)(data/[^/]+/[^/]+/[^/]+/)([0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})\.json$",
                    re.IGNORECASE)


def samples_path(out: Path) -> tuple[Path, str] | None:
    """The instance records' file beside a record at `out` and its datastore path, where `out`
    is in the datastore's layout; None elsewhere."""
    m = LAYOUT.search(out.absolute().as_posix())
    if not m:
        return None
    return out.with_name(f"{m.group(2)}_samples.jsonl"), f"{m.group(1)}{m.group(2)}_samples.jsonl"


def instances(run: FinishedRun, doc: dict) -> list[dict]:
    """One instance record per item of each task whose records are right or wrong (a boolean
    `correct`), tied to the task's first headline result; other tasks' items have no
    is_correct to give and are left to the aggregate."""
    import hashlib

    first: dict[str, str] = {}
    for r in doc["evaluation_results"]:
        first.setdefault(r["evaluation_name"], r["evaluation_result_id"])
    out = []
    for name in run.samples:
        task = registry.get_task(name)
        if name not in first:
            continue
        for item in run.items(name):
            if item.correct is None or not item.scored:
                continue
            sent = item.prompts()
            replies = {c.name: c.result for c in item.calls}
            raw = next(iter(sent.values()), "")
            gold = as_text(item.gold_code)
            reference = [] if gold is None else [gold]
            answers = [replies[k] for k in sent if isinstance(replies.get(k), str)]
            thinking = [v for v in item.reasoning().values() if v]
            n_in, n_out = item.tokens("n_prompt_tokens"), item.tokens("n_tokens")
            labels = _strings(dict(item.labels))
            out.append({
                "schema_version": SCHEMA, "evaluation_id": doc["evaluation_id"], "model_id": doc["model_info"]["id"],
                "evaluation_name": name, "evaluation_result_id": first[name], "sample_id": item.id,
                "sample_hash": hashlib.sha256((raw + "".join(reference)).encode()).hexdigest(),
                "interaction_type": "single_turn" if len(sent) <= 1 else "multi_turn",
                "input": {"raw": raw, "reference": reference},
                "output": {"raw": answers, "reasoning_trace": thinking or None} if len(sent) <= 1 else None,
                "messages": None if len(sent) <= 1 else [
                    m for n, (k, v) in enumerate(sent.items()) for m in (
                        {"turn_idx": 2 * n, "role": "user", "content": v},
                        {"turn_idx": 2 * n + 1, "role": "assistant", "content": replies[k] if isinstance(replies.get(k), str) else None})],
                "answer_attribution": [{"turn_idx": 0, "source": "output.raw", "extracted_value": as_text(item.answer_code) or "",
                                        "extraction_method": f"custom: {task.name}'s parse (the paper's)", "is_terminal": True}],
                "evaluation": {"score": 1.0 if item.correct else 0.0, "is_correct": item.correct},
                "token_usage": {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out}
                if n_in is not None and n_out is not None else None,  # only counts the backend made
                "metadata": labels or None})
    return out


def record(run: FinishedRun, developer: str | None = None) -> dict[str, Any]:
    """The run's aggregate Every Eval Ever record (`developer`: who made the model, where the run
    does not say). No local path is written: the model is named by its id and weights' sha256."""
    rec, results = run.record, run.results
    info = _model_info(rec, developer)
    created = str(int(time.time()))
    started = str(rec.started)
    out: list[dict] = []
    for entry in rec.task_entries():
        name = entry.name
        task, res = registry.get_task(name), results.get(name)
        if not isinstance(res, dict):
            continue
        estimate = obj(res.get("estimate"))
        judge = judged_by(run, name)  # "self-judged": the evaluated model judged its own answers
        source = {"dataset_name": task.benchmark, "source_type": "other",
                  "additional_details": _strings({"econeval_task": name, "prompt_version": task.prompt_version,
                                                  "dataset": entry.dataset, "options": dict(entry.options),
                                                  "items": len(run.preps[name].items), "judge": judge})}
        for metric, value in task.headline(res).items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue  # not computed: no number is written for it
            spec = task.metric(metric)
            n = res.get("n") if isinstance(res.get("n"), int) else None
            uncertainty: dict[str, Any] = {"num_samples": n} if n is not None else {}
            iv = interval(res, metric)
            if iv:
                uncertainty["confidence_interval"] = {"lower": iv[0], "upper": iv[1], "confidence_level": 0.95,
                                                      "method": str(obj(res.get("intervals")).get("method", "econeval"))[:500]}
            out.append({
                "evaluation_result_id": f"{name}/{metric}", "evaluation_name": name, "source_data": source,
                "evaluation_timestamp": started,
                "metric_config": {"evaluation_description": task.description, "metric_id": f"econeval.{name}.{metric}",
                                  "metric_name": metric, "lower_is_better": spec.direction < 0, "score_type": "continuous",
                                  "min_score": _bound(spec.bounds[0]), "max_score": _bound(spec.bounds[1]),
                                  "metric_unit": "count" if spec.count else "proportion" if spec.bounds == (0.0, 1.0) else "points"},
                "score_details": {"score": value, "details": _strings({"table": res.get("table"), "n": n,
                                                                       "estimate": estimate.get("note"), "judge": judge}),
                                  **({"uncertainty": uncertainty} if uncertainty else {})}})
    return {"schema_version": SCHEMA, "evaluation_id": f"econeval/{info['id']}/{created}", "evaluation_timestamp": started,
            "retrieved_timestamp": created,
            "source_metadata": {"source_name": "econeval", "source_type": "evaluation_run",
                                "source_organization_name": "econeval (a local run)", "evaluator_relationship": "other",
                                "additional_details": _strings({"run_folder": run.path.name, "seed": rec.seed,
                                                                "limit": rec.limit, "data_package": rec.data_version})},
            "eval_library": {"name": "econeval", "version": str(rec.econeval_version or __version__)},
            "model_info": info, "evaluation_results": out}
