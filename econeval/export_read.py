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
