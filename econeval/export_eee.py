"""`econeval export --format every-eval-ever`: a run's aggregate record in the Every Eval Ever
schema (version SCHEMA), one evaluation result per task and headline metric, each with the items it
rests on and, where the run has one, its 95% interval. Plain JSON built here and checked in the
tests with the `every-eval-ever` package's own validator (it needs Python >= 3.12, so econeval
does not import it). A metric the run could not compute (null) is left out, never written as a
number; instance-level records are not written (docs/exports.md).
"""

from __future__ import annotations

import math
import time
from typing import Any

from . import __version__, registry
from .verify import LoadedRun

SCHEMA = "0.3.0"
SERVED = ("openai", "anthropic")  # backend kinds whose model runs elsewhere


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _strings(d: dict) -> dict[str, str]:
    """additional_details: every value a string, as the schema asks."""
    import json

    return {k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str) for k, v in d.items() if v is not None}


def _bound(x: float) -> float | str:
    """A metric's bound as the schema writes it: a number, or "Infinity" / "-Infinity"."""
    return x if math.isfinite(x) else ("Infinity" if x > 0 else "-Infinity")


def _model_info(meta: dict) -> dict:
    backend = _obj(meta.get("backend"))
    kind = str(backend.get("kind") or "unknown")
    model = _obj(backend.get("model"))
    name = str(model.get("name") or "unknown")
    served = kind in SERVED
    info: dict[str, Any] = {
        "name": name, "id": name if "/" in name else f"{kind}/{name}",
        "inference_platform": "local" if not served else kind,
        "additional_details": {"deployment_type": "externally_managed" if served else "self_deployed",
                               "model_availability": "open_weights" if kind == "llamacpp" else "unknown",
                               **_strings({"econeval_backend": kind, "sha256": model.get("sha256"), "path": model.get("path"),
                                           "reasoning": _obj(backend.get("reasoning")).get("mode")})}}
    if kind == "llamacpp":
        info["inference_engine"] = {"name": "llama.cpp (llama-cpp-python)",
                                    "version": str(_obj(meta.get("environment")).get("llama_cpp_python") or "unknown")}
    return info


def record(run: LoadedRun, results: dict[str, dict]) -> dict[str, Any]:
    meta = run.meta
    info = _model_info(meta)
    created = str(int(time.time()))
    started = str(meta.get("started"))
    out: list[dict] = []
    for name, entry in meta.get("tasks", {}).items():
        task, res = registry.get_task(name), results.get(name)
        if not isinstance(res, dict):
            continue
        intervals = _obj(res.get("intervals"))
        estimate = _obj(res.get("estimate"))
        source = {"dataset_name": task.benchmark, "source_type": "other",
                  "additional_details": _strings({"econeval_task": name, "prompt_version": task.prompt_version,
                                                  "dataset": entry.get("dataset"), "options": entry.get("options"),
                                                  "items": len(run.preps[name].items)})}
        for metric, value in task.headline(res).items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue  # not computed: no number is written for it
            spec = task.metric(metric)
            n = res.get("n") if isinstance(res.get("n"), int) else None
            uncertainty: dict[str, Any] = {"num_samples": n} if n is not None else {}
            iv = intervals.get(metric)
            if isinstance(iv, list) and len(iv) == 2 and all(isinstance(x, (int, float)) for x in iv):
                uncertainty["confidence_interval"] = {"lower": iv[0], "upper": iv[1], "confidence_level": 0.95,
                                                      "method": str(intervals.get("method", "econeval"))[:500]}
            out.append({
                "evaluation_result_id": f"{name}/{metric}", "evaluation_name": name, "source_data": source,
                "evaluation_timestamp": started,
                "metric_config": {"evaluation_description": task.description, "metric_id": f"econeval.{name}.{metric}",
                                  "metric_name": metric, "lower_is_better": spec.direction < 0, "score_type": "continuous",
                                  "min_score": _bound(spec.bounds[0]), "max_score": _bound(spec.bounds[1]),
                                  "metric_unit": "count" if spec.count else "proportion" if spec.bounds == (0.0, 1.0) else "points"},
                "score_details": {"score": value, "details": _strings({"table": res.get("table"), "n": n,
                                                                       "estimate": estimate.get("note")}),
                                  **({"uncertainty": uncertainty} if uncertainty else {})}})
    return {"schema_version": SCHEMA, "evaluation_id": f"econeval/{info['id']}/{created}", "evaluation_timestamp": started,
            "retrieved_timestamp": created,
            "source_metadata": {"source_name": "econeval", "source_type": "evaluation_run",
                                "source_organization_name": "econeval (a local run)", "evaluator_relationship": "other",
                                "additional_details": _strings({"run_folder": str(run.path), "seed": meta.get("seed"),
                                                                "limit": meta.get("limit"),
                                                                "data_package": _obj(meta.get("data_package")).get("version")})},
            "eval_library": {"name": "econeval", "version": str(meta.get("econeval_version") or __version__)},
            "model_info": info, "evaluation_results": out}
