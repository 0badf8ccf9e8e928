"""Predictions made elsewhere (`econeval score`): each line checked and turned into the outputs a
task scores (a response that reasons inline is read after its reasoning). A line of a run's own
samples.jsonl is taken as it is."""

from __future__ import annotations

from pathlib import Path

from .errors import UsageError
from .metrics import logprob_problem
from .reasoning import THINKING, split

MAX_RESPONSE = 1 << 20  # characters: a longer "response" is not a model answer


_KINDS = {"generate": "a string", "option_logprobs": "an object of numbers", "similarity": "a number"}


def _sample_outputs(row: dict, n: int, where: Path, task, item, prep) -> dict:
    """A line of a run's samples.jsonl as outputs: each request it records (`calls`) with a result
    of its kind's type, the task's own first requests among them."""
    from .types import Generate, OptionLogprobs, Similarity

    calls = row["calls"]
    if not isinstance(calls, dict) or not calls or not all(isinstance(c, dict) for c in calls.values()):
        raise UsageError(f"{where}: prediction {n}: calls must name the requests' results (as a run's samples.jsonl does)")
    kinds = {Generate: "generate", OptionLogprobs: "option_logprobs", Similarity: "similarity"}
    for name, request in task.requests(item, prep, {}).items():
        want = kinds.get(type(request))
        if want and (name not in calls or calls[name].get("kind") != want):
            raise UsageError(f"{where}: prediction {n}: calls lack the request {name} ({want}) that {task.name} sends")
    for name, call in calls.items():
        if name not in row:
            raise UsageError(f"{where}: prediction {n}: calls.{name} has no result: the line has no field {name}")
        kind, value = call.get("kind"), row.get(name)
        ok = {"generate": isinstance(value, str),
              "option_logprobs": isinstance(value, dict) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                                 for v in value.values()),
              "similarity": value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))}.get(kind)
        if ok is None:
            raise UsageError(f"{where}: prediction {n}: calls.{name} has kind {kind!r}, not one of {', '.join(_KINDS)}")
        if not ok:
            raise UsageError(f"{where}: prediction {n}: {name} must be {_KINDS[kind]} (its call's kind is {kind})")
        if isinstance(value, str) and len(value) > MAX_RESPONSE:
            raise UsageError(f"{where}: prediction {n}: {name} is longer than {MAX_RESPONSE} characters")
    return {k: row[k] for k in calls if k in row} | {"calls": calls}


def prediction_outputs(row: dict, n: int, where: Path, task, item, prep) -> dict:
    """A prediction line (or a line of a run's samples.jsonl) as the outputs a task scores."""
    if "calls" in row:  # a run's own sample line: its outputs are the request results, checked as a prediction's are
        return _sample_outputs(row, n, where, task, item, prep)
    resp = row.get("response")
    if not isinstance(resp, str):
        raise UsageError(f"{where}: prediction {n} needs a string field 'response'")
    if len(resp) > MAX_RESPONSE:
        raise UsageError(f"{where}: prediction {n}: response is longer than {MAX_RESPONSE} characters")
    part = split(resp)  # a reasoning model's reply: the answer is read after its reasoning, never from inside it
    out: dict = {"response": part.answer}
    if part.reasoning is not None:
        out[THINKING] = {"response": part.reasoning}
        out["calls"] = {"response": {"kind": "generate", "n_reasoning_tokens": None, "reasoning_ended": part.ended}}
    if "option_logprobs" in row:
        lp = row["option_logprobs"]
        if not isinstance(lp, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in lp.values()):
            raise UsageError(f"{where}: prediction {n}: option_logprobs must map options to numbers")
        allowed = set(task.answer_options(item, prep) or ()) | {"<top>"}
        unknown = sorted(set(lp) - allowed)
        if unknown:
            raise UsageError(f"{where}: prediction {n}: option_logprobs has option(s) {', '.join(unknown)} that "
                             f"{task.name} does not ask for", hint=f"its options: {', '.join(sorted(allowed - {'<top>'}))}")
        problem = logprob_problem({k: v for k, v in lp.items() if k != "<top>"}, lp.get("<top>"))
        if problem:
            raise UsageError(f"{where}: prediction {n}: {problem}")
        out["option_logprobs"] = {k: float(v) for k, v in lp.items() if k != "<top>"}
        out["calls"] = {**out.get("calls", {}), "option_logprobs": {"kind": "option_logprobs", "top_logprob": lp.get("<top>")}}
    return out
