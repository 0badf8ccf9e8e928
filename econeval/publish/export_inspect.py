"""`econeval export --format inspect`: one Inspect eval log per task, built with inspect_ai's own
log types and written by its own writer (the optional `inspect` extra), so that
`inspect_ai.log.read_eval_log` reads it back and `inspect view` shows it.

Each item is a sample: its first prompt as the input, its requests as the conversation (each prompt
once as a user turn: a second request on the same prompt, such as the option log-probabilities
beside a generated answer, adds no turn; each text answer once as an assistant turn, the model of
the role that made it), the answer as the output, the gold answer as the target (as a reader reads it: `Yes`/`No`, an option's
letter, the text; Task.shown), and one score `econeval` whose value holds the task's item metrics,
whose answer is the parse (read the same way; the stored codes in its metadata) and whose
explanation says why an item was not parsed. The tokens each request counted are the sample's
and the log's model usage, per model (a judge's under its own name and role). The task's headline
numbers are the log's metrics, the paper's lead number first (Inspect shows the first; a 95%
interval, where the run has one, in the metric's metadata); the log's start and end span the
task's own measured seconds; the model, seed, versions and the data hash are in the eval spec.

The logs are Inspect's native `.eval` files by default: `inspect view` lists an `.eval` log with
its samples, tokens, duration and task arguments (read from the log's header), a `.json` log
without them. `.json` stays available (`--log-format json`): inspect_ai's `.eval` writer takes
time that grows with the square of a log's samples (write_logs).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from .. import registry
from ..version import __version__
from ..errors import UsageError
from .export_read import call_roles, interval, judged_by, obj, usage_by_role
from ..store.finished import FinishedRun
from ..store.items import ERROR, SKIPPED, ItemView
from ..types import MODEL, as_text

SCORER = "econeval"


def _inspect():
    try:
        import inspect_ai.log as log
        import inspect_ai.model as model
        import inspect_ai.scorer as scorer
    except ImportError:
        raise UsageError("an Inspect log is written with inspect_ai", hint="pip install 'econeval[inspect]'") from None
    return log, model, scorer


def _usage(model, counts: dict[str, int]):
    """Inspect's ModelUsage of a count of tokens (total: input and output)."""
    n_in, n_out = counts.get("input_tokens", 0), counts.get("output_tokens", 0)
    return model.ModelUsage(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out,
                            reasoning_tokens=counts.get("reasoning_tokens"))


def _add(total: dict[str, dict[str, int]], key: str, counts: dict[str, int]) -> None:
    got = total.setdefault(key, {})
    for k, v in counts.items():
        got[k] = got.get(k, 0) + v


class _Models:
    """Who made a role's requests, as Inspect names a model (`<provider>/<name>`)."""

    def __init__(self, rec):
        self.rec = rec
        self.model = f"{rec.backend_kind or 'econeval'}/{rec.model_name or 'model'}"

    def of(self, role: str) -> str:
        if role == MODEL:
            return self.model
        entry = self.rec.role(role)
        if entry.name is None:
            return role
        return f"{entry.kind}/{entry.name}" if entry.kind is not None and "/" not in entry.name else entry.name

    def per_model(self, by_role: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        """Counts per role summed per model (a judge that is the evaluated model counts under it)."""
        out: dict[str, dict[str, int]] = {}
        for role, counts in by_role.items():
            _add(out, self.of(role), counts)
        return out


def _messages(model, texts: dict[str, str], replies: dict[str, Any], roles: dict[str, str], models: _Models) -> list:
    """The item's requests as one conversation: each prompt once as a user turn (a request on the
    prompt of the turn before it, such as the option log-probabilities beside a generated answer
    or a judge's second request, adds none), each text answer once as an assistant turn by the
    model of the role that made the request."""
    messages: list = []
    last = None
    for name, prompt in texts.items():
        if prompt != last:
            messages.append(model.ChatMessageUser(content=prompt))
            last = prompt
        if isinstance(replies.get(name), str):
            messages.append(model.ChatMessageAssistant(content=replies[name], model=models.of(roles.get(name, MODEL))))
    return messages


def _sample(task, prep, view: ItemView, models: _Models, item: dict | None):
    log, model, scorer = _inspect()
    texts = view.prompts()
    replies = {c.name: c.result for c in view.calls}
    roles = call_roles(task, item, prep, view)
    messages = _messages(model, texts, replies, roles, models)
    answer = next((replies[k] for k in texts if isinstance(replies.get(k), str) and roles.get(k, MODEL) == MODEL), "")
    score = scorer.Score(value={m.name: view.values.get(m.name) for m in task.item_metrics} if view.scored else {},
                         answer=view.answer, explanation=view.why,
                         metadata={"correct": view.correct, "parsed": as_text(view.answer_code),
                                   "gold": as_text(view.gold_code)})  # the codes as stored
    labels: dict[str, Any] = dict(view.labels)
    if view.group is not None:
        labels["group"] = view.group
    if view.reasoning():
        labels["reasoning"] = view.reasoning()  # never parsed
    if view.outcome in (ERROR, SKIPPED):
        labels[view.outcome] = view.why
    by_role = usage_by_role(roles, view)
    usage = {who: _usage(model, counts) for who, counts in models.per_model(by_role).items()}
    output = model.ModelOutput.from_content(model=models.model, content=answer)
    if MODEL in by_role:
        output.usage = _usage(model, by_role[MODEL])
    sample = log.EvalSample(id=view.id, epoch=1, input=next(iter(texts.values()), ""), target=view.gold or "",
                            messages=messages, output=output, scores={SCORER: score}, metadata=labels, model_usage=usage,
                            role_usage={role: _usage(model, counts) for role, counts in by_role.items() if role != MODEL})
    return sample, by_role


def eval_logs(run: FinishedRun) -> dict[str, Any]:
    """Each task's EvalLog (task name → log)."""
    results = run.results
    log, model, _ = _inspect()
    rec = run.record
    models = _Models(rec)
    started = _when(rec.started)
    elapsed = 0.0  # the tasks' measured seconds laid end to end from the run's start, in the run's order
    out: dict[str, Any] = {}
    for entry in rec.task_entries():
        name = entry.name
        task, prep, res = registry.get_task(name), run.preps[name], results.get(name)
        if not isinstance(res, dict):
            continue  # not run for this model: no results to log
        recs = run.samples.get(name, {})
        items = {it["id"]: it for it in prep.items}
        samples: list = []
        usage: dict[str, dict[str, int]] = {}
        for view in run.items(name):
            sample, by_role = _sample(task, prep, view, models, items.get(view.id))
            samples.append(sample)
            for role, counts in by_role.items():
                _add(usage, role, counts)
        metrics = {}
        lead = task.lead_metric()
        headline = task.headline(res)
        for metric in sorted(headline, key=lambda m: m != lead):  # the paper's headline number first: Inspect shows it
            value = headline[metric]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                iv = interval(res, metric)
                metrics[metric] = log.EvalMetric(name=metric, value=value, metadata={"interval_95": list(iv)} if iv else None)
        estimate = obj(res.get("estimate"))
        scored = res.get("n_scored") if isinstance(res.get("n_scored"), int) else None
        results_ = log.EvalResults(total_samples=len(recs), completed_samples=len(recs), scores=[log.EvalScore(
            name=SCORER, scorer=SCORER, scored_samples=scored, unscored_samples=None if scored is None else len(recs) - scored,
            metrics=metrics, metadata={"table": res.get("table"), "estimate": estimate.get("note"), "n": res.get("n"),
                                       "not_computed": [m for m, v in headline.items() if v is None] or None,
                                       "judge": judged_by(run, name)})])  # "self-judged": the model judged its own answers
        seconds = entry.seconds
        spec = log.EvalSpec(
            created=str(rec.started), task=f"econeval/{name}", task_version=task.prompt_version,
            task_description=task.description, task_attribs={"benchmark": task.benchmark, "suite": task.suite},
            task_args=dict(entry.options),
            dataset=log.EvalDataset(name=task.benchmark, samples=len(prep.items), sample_ids=list(recs)),
            model=models.model, config=log.EvalConfig(limit=rec.limit),
            packages={"econeval": str(rec.econeval_version or __version__)},
            metadata={"seed": rec.seed, "dataset": entry.dataset, "data_package": rec.data_package,
                      "model": rec.model, "identity": rec.identity, "run_folder": str(run.path),
                      "n_shot": task.n_shot(prep), "headline": lead,
                      "timing": "started_at and completed_at: this task's measured seconds (run.json's timing), laid end "
                                "to end from the run's start in the run's task order"})
        if started is not None and seconds is not None:
            begin, end = started + timedelta(seconds=elapsed), started + timedelta(seconds=elapsed + seconds)
            elapsed += seconds
            stats = log.EvalStats(started_at=begin.isoformat(), completed_at=end.isoformat())
        else:  # no measured time for the task: the run's own times
            stats = log.EvalStats(started_at=str(rec.started), completed_at=str(rec.finished or rec.started))
        stats.model_usage = {who: _usage(model, counts) for who, counts in models.per_model(usage).items()}
        stats.role_usage = {role: _usage(model, counts) for role, counts in usage.items() if role != MODEL}
        out[name] = log.EvalLog(version=2, status="success", eval=spec, results=results_, stats=stats, samples=samples)
    return out


def _when(stamp: Any) -> datetime | None:
    """run.json's ISO time, or None where it is not one."""
    try:
        return datetime.fromisoformat(str(stamp))
    except ValueError:
        return None


LOG_FORMATS = ("eval", "json")  # Inspect's own log formats (`inspect eval --log-format`); the first is the default


def log_name(created: str, task: str, fmt: str = LOG_FORMATS[0]) -> str:
    """A log's file name as Inspect names its logs (`inspect view` lists a log by a name that starts
    with the run's ISO time): `<started, ':' as '-'>_<task>.<eval|json>`."""
    return f"{created[:25].replace(':', '-')}_{task}.{fmt}"


def write_logs(logs: dict[str, Any], folder, fmt: str = LOG_FORMATS[0]) -> None:
    """Each log in Inspect's `.eval` (a zip of a header, sample summaries and one member per
    sample) or `.json` format, by inspect_ai's own writer. Its `.eval` writer (inspect_ai 0.3.285)
    takes time that grows with the square of a log's samples: 57 s for 6,400 STEER-ME samples on
    a loaded 2-core machine, 14 s for 3,200, against 0.8 s as JSON."""
    log, _, _ = _inspect()
    for name, one in logs.items():
        log.write_eval_log(one, str(folder / log_name(one.eval.created, name, fmt)), format=fmt)
