"""What every export (export.py, export_inspect.py, export_eee.py) reads of a run's records and
results, one way: a field of another type in an edited folder is read as absent, a value of varying
type as text, a count the backend did not make as None."""

from __future__ import annotations

import json
import math
from typing import Any

TAXONOMY = ("element", "setting", "module", "domain", "perspective", "type", "subtask")  # an item's own labels


def obj(value: Any) -> dict:
    """A field that should be an object, or {} (an edited run.json's field of another type)."""
    return value if isinstance(value, dict) else {}


def text(value: Any) -> str | None:
    """A value of varying type (a gold label, an order, an option index) as the table's text."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def tokens(rec: dict, key: str) -> int | None:
    """A token count (`n_prompt_tokens`, `n_tokens`, ...) summed over the record's requests; None
    where the backend counted none."""
    calls = [c for c in obj(rec.get("calls")).values() if isinstance(c, dict)]
    got = [c[key] for c in calls if isinstance(c.get(key), int) and not isinstance(c.get(key), bool)]
    return sum(got) if got else None


def prompts(rec: dict) -> dict[str, str]:
    """The record's prompts by request name, in the order they were sent."""
    return {k: v for k, v in obj(rec.get("prompts")).items() if isinstance(v, str)}


def interval(result: dict, metric: str) -> tuple[float, float] | None:
    """A metric's 95% interval in a task's results (a --sample or --budget run's), or None."""
    iv = obj(result.get("intervals")).get(metric)
    if isinstance(iv, list) and len(iv) == 2 and all(isinstance(x, (int, float)) and math.isfinite(x) for x in iv):
        return iv[0], iv[1]
    return None


def call_roles(task, item: dict | None, prep, rec: dict) -> dict[str, str]:
    """Which role (model, judge, embedder, ...) made each of the record's requests, by replaying
    the task's stages on the record's own outputs; a request the replay does not reach (an item
    not in the data, a record the task cannot read) counts as the evaluated model's."""
    from ..types import MODEL

    calls = obj(rec.get("calls"))
    roles = {name: MODEL for name in calls}
    if item is None:
        return roles
    outputs: dict[str, Any] = {"calls": {}}
    try:
        for _ in range(max(1, task.stages)):
            reqs = task.requests(item, prep, outputs)
            if not reqs:
                break
            for name, req in reqs.items():
                roles[name] = req.role
                if name in rec:
                    outputs[name] = rec[name]
                outputs["calls"][name] = calls.get(name, {})
    except Exception:  # noqa: BLE001 - a record the task cannot replay: its requests stay the model's
        pass
    return roles


def usage_by_role(task, item: dict | None, prep, rec: dict) -> dict[str, dict[str, int]]:
    """The record's token counts summed per role: input, output and reasoning tokens of the
    requests that role made (a count the backend did not make is left out, never taken as 0)."""
    roles = call_roles(task, item, prep, rec)
    out: dict[str, dict[str, int]] = {}
    for name, call in obj(rec.get("calls")).items():
        if not isinstance(call, dict):
            continue
        got = out.setdefault(roles.get(name, "model"), {})
        for key, field in (("n_prompt_tokens", "input_tokens"), ("n_tokens", "output_tokens"), ("n_reasoning_tokens", "reasoning_tokens")):
            v = call.get(key)
            if isinstance(v, int) and not isinstance(v, bool):
                got[field] = got.get(field, 0) + v
    return {role: u for role, u in out.items() if u}
