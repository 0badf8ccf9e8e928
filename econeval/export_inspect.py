"""`econeval export --format inspect`: one Inspect eval log per task, built with inspect_ai's own
log types and written by its own writer (the optional `inspect` extra), so that
`inspect_ai.log.read_eval_log` reads it back and `inspect view` shows it.

Each item is a sample: its first prompt as the input, every request as a user/assistant turn, the
answer as the output, the gold answer as the target, and one score `econeval` whose value holds
the task's item metrics, whose answer is the parse and whose explanation says why an item was not
parsed. The task's headline numbers are the log's metrics (a 95% interval, where the run has one,
in the metric's metadata); the model, seed, versions and the data hash are in the eval spec.
"""

from __future__ import annotations

from typing import Any

from . import __version__, registry
from .errors import UsageError
from .export_read import TAXONOMY, interval, obj, prompts, text
from .finished import FinishedRun

SCORER = "econeval"


def _inspect():
    try:
        import inspect_ai.log as log
        import inspect_ai.model as model
        import inspect_ai.scorer as scorer
    except ImportError:
        raise UsageError("an Inspect log is written with inspect_ai", hint="pip install 'econeval[inspect]'") from None
    return log, model, scorer


def _sample(task, item_id: str, rec: dict, model_id: str):
    log, model, scorer = _inspect()
    texts = prompts(rec)
    messages: list = []
    for name, prompt in texts.items():
        messages.append(model.ChatMessageUser(content=prompt))
        if isinstance(rec.get(name), str):
            messages.append(model.ChatMessageAssistant(content=rec[name], model=model_id))
    answer = next((rec[k] for k in texts if isinstance(rec.get(k), str)), "")
    ok = not rec.get("error") and not rec.get("skipped")
    values = task.item_values(rec) if ok else {}
    why = rec.get("unparsed_reason") or rec.get("error") or rec.get("skipped")
    score = scorer.Score(value={m.name: values.get(m.name) for m in task.item_metrics} if ok else {},
                         answer=text(rec.get("parsed")), explanation=None if why is None else str(why),
                         metadata={"correct": rec.get("correct") if isinstance(rec.get("correct"), bool) else None})
    labels = {k: text(rec.get(k)) for k in TAXONOMY if k in rec}
    if task.group_field and rec.get(task.group_field) is not None:
        labels["group"] = text(rec[task.group_field])
    if isinstance(rec.get("thinking"), dict):
        labels["reasoning"] = rec["thinking"]  # never parsed
    for k in ("error", "skipped"):
        if rec.get(k):
            labels[k] = str(rec[k])
    gold = text(rec.get("gold", rec.get("reference"))) or ""
    return log.EvalSample(id=item_id, epoch=1, input=next(iter(texts.values()), ""), target=gold,
                          messages=messages, output=model.ModelOutput.from_content(model=model_id, content=answer),
                          scores={SCORER: score}, metadata=labels)


def eval_logs(run: FinishedRun) -> dict[str, Any]:
    """Each task's EvalLog (task name → log)."""
    results = run.results
    log, _, _ = _inspect()
    rec = run.record
    model_id = f"{rec.backend_kind or 'econeval'}/{rec.model_name or 'model'}"
    out: dict[str, Any] = {}
    for name, entry in rec.tasks.items():
        task, prep, res = registry.get_task(name), run.preps[name], results.get(name)
        if not isinstance(res, dict):
            continue  # not run for this model: no results to log
        recs = run.samples.get(name, {})
        samples = [_sample(task, item_id, rec, model_id) for item_id, rec in recs.items()]
        metrics = {}
        for metric, value in task.headline(res).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                iv = interval(res, metric)
                metrics[metric] = log.EvalMetric(name=metric, value=value, metadata={"interval_95": list(iv)} if iv else None)
        estimate = obj(res.get("estimate"))
        scored = res.get("n_scored") if isinstance(res.get("n_scored"), int) else None
        results_ = log.EvalResults(total_samples=len(recs), completed_samples=len(recs), scores=[log.EvalScore(
            name=SCORER, scorer=SCORER, scored_samples=scored, unscored_samples=None if scored is None else len(recs) - scored,
            metrics=metrics, metadata={"table": res.get("table"), "estimate": estimate.get("note"), "n": res.get("n")})])
        spec = log.EvalSpec(
            created=str(rec.started), task=f"econeval/{name}", task_version=task.prompt_version,
            task_description=task.description, task_attribs={"benchmark": task.benchmark, "suite": task.suite},
            task_args=entry.get("options") or {},
            dataset=log.EvalDataset(name=task.benchmark, samples=len(prep.items), sample_ids=list(recs)),
            model=model_id, config=log.EvalConfig(limit=rec.limit),
            packages={"econeval": str(rec.econeval_version or __version__)},
            metadata={"seed": rec.seed, "dataset": entry.get("dataset"), "data_package": rec.data_package,
                      "model": rec.model, "identity": rec.identity, "run_folder": str(run.path),
                      "n_shot": task.n_shot(prep)})
        stats = log.EvalStats(started_at=str(rec.started), completed_at=str(rec.finished or rec.started))
        out[name] = log.EvalLog(version=2, status="success", eval=spec, results=results_, stats=stats, samples=samples)
    return out


def log_name(created: str, task: str) -> str:
    """A JSON log's file name as Inspect names its logs (`inspect view` lists a JSON log only when
    its name starts with the run's ISO time): `<started, ':' as '-'>_<task>.json`."""
    return f"{created[:25].replace(':', '-')}_{task}.json"


def write_logs(logs: dict[str, Any], folder) -> None:
    """Each log in Inspect's JSON log format: its `.eval` writer takes time quadratic in the samples
    of one write (49 s for 6,400 STEER-ME items here, against 0.7 s as JSON)."""
    log, _, _ = _inspect()
    for name, one in logs.items():
        log.write_eval_log(one, str(folder / log_name(one.eval.created, name)))
