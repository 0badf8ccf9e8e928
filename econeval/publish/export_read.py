"""What every export (export.py, export_inspect.py, export_eee.py) reads of a run's records and
results, one way: a field of another type in an edited folder is read as absent, a value of varying
type as text, a count the backend did not make as None."""

from __future__ import annotations

import math
from typing import Any

from .. import registry
from ..store.items import ItemView
from ..types import JUDGE, MODEL, as_text, task_roles


def obj(value: Any) -> dict:
    """A field that should be an object, or {} (an edited run.json's field of another type)."""
    return value if isinstance(value, dict) else {}


text = as_text  # a value of varying type (a gold label, an order, an option index) as the table's text


def interval(result: dict, metric: str) -> tuple[float, float] | None:
    """A metric's 95% interval in a task's results (a --sample or --budget run's), or None."""
    iv = obj(result.get("intervals")).get(metric)
    if isinstance(iv, list) and len(iv) == 2 and all(isinstance(x, (int, float)) and math.isfinite(x) for x in iv):
        return iv[0], iv[1]
    return None


def judged_by(run, name: str) -> str | None:
    """Who judged a task's answers in a run (RunRecord.judged_by: "self-judged" where the evaluated
    model judged its own), for every export to say it; None for a task without a judge."""
    if JUDGE not in task_roles(registry.get_task(name), run.preps[name]):
        return None
    return run.record.judged_by(JUDGE)


def call_roles(task, item: dict | None, prep, view: ItemView) -> dict[str, str]:
    """Which role (model, judge, embedder, ...) made each of the item's requests, by replaying
    the task's stages on the line's own outputs; a request the replay does not reach (an item
    not in the data, a line the task cannot read) counts as the evaluated model's."""
    calls = {c.name: c for c in view.calls}
    roles = {name: MODEL for name in calls}
    if item is None:
        return roles
    stored = obj(view.line.get("calls"))
    outputs: dict[str, Any] = {"calls": {}}
    try:
        for _ in range(max(1, task.stages)):
            reqs = task.requests(item, prep, outputs)
            if not reqs:
                break
            for name, req in reqs.items():
                roles[name] = req.role
                if name in view.line:
                    outputs[name] = view.line[name]
                outputs["calls"][name] = stored.get(name, {})
    except Exception:  # noqa: BLE001 - a line the task cannot replay: its requests stay the model's
        pass
    return roles


def usage_by_role(roles: dict[str, str], view: ItemView) -> dict[str, dict[str, int]]:
    """The item's token counts summed per role (`roles`: call_roles'): input, output and reasoning
    tokens of the requests that role made (a count the backend did not make is left out, never
    taken as 0)."""
    by_name = {c.name: c for c in view.calls}
    out: dict[str, dict[str, int]] = {}
    for name, info in obj(view.line.get("calls")).items():  # in the order the line keeps its calls
        if not isinstance(info, dict):
            continue
        call = by_name[str(name)]
        got = out.setdefault(roles.get(call.name, MODEL), {})
        for key, field in (("n_prompt_tokens", "input_tokens"), ("n_tokens", "output_tokens"), ("n_reasoning_tokens", "reasoning_tokens")):
            v = getattr(call, key)
            if v is not None:
                got[field] = got.get(field, 0) + v
    return {role: u for role, u in out.items() if u}
