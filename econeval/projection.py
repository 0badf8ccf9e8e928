"""The run's projected time, before its first item: every remaining item's first-stage prompt
tokens and generation budget at the rates the backend measures on this device now
(`Backend.calibrate`: a short batch of prompt tokens, a generation step over every sequence).

Prompt tokens come from each item's prompt characters at the task's own characters per token
(a sample of its prompts tokenized by the model: Chinese text has far fewer characters per token
than English). The generation budget is every request's `max_tokens`, so a model that stops
early takes less; later stages (a CoT answer turn, the judge) are not counted.
"""

from __future__ import annotations

from typing import Any

from .progress import TaskLine, duration

SAMPLE = 32  # prompts per task tokenized for its characters per token
LONG = 3600.0  # a projection beyond this names the ways to run less


def project(lines: list[TaskLine], prompts: dict[str, list[str]], backend: Any) -> dict | None:
    """run.json's `projection`: the seconds each task's remaining items should take at the
    measured rates; None where the backend cannot measure them (a served model)."""
    rates = backend.calibrate()
    if rates is None:
        return None
    tasks: dict[str, dict] = {}
    for line in lines:
        sample = prompts.get(line.name, [])  # up to SAMPLE of its first-stage prompts
        counts = backend.count_tokens(sample) if sample else None
        per_token = sum(map(len, sample)) / sum(counts) if counts and sum(counts) else 4.0
        prompt_tokens = sum(line.chars) / per_token
        budget = sum(line.budget)
        seconds = prompt_tokens / rates.prompt_tokens_per_s + budget / rates.generated_tokens_per_s
        tasks[line.name] = {"items": len(line.chars), "prompt_tokens": round(prompt_tokens), "generation_budget": budget,
                            "chars_per_token": round(per_token, 3), "seconds": round(seconds, 1)}
    return {"seconds": round(sum(t["seconds"] for t in tasks.values()), 1), "tasks": tasks,
            "rates": {"prompt_tokens_per_s": round(rates.prompt_tokens_per_s, 1),
                      "generated_tokens_per_s": round(rates.generated_tokens_per_s, 1), "measured_in_s": rates.seconds},
            "method": "first-stage prompt tokens and generation budgets at the rates measured before the first item; "
                      "an upper bound where models stop early, later stages (CoT answers, the judge) not counted"}


def lines_of(projection: dict, device: str) -> list[str]:
    """What the run prints before its first item."""
    items = sum(t["items"] for t in projection["tasks"].values())
    prompt = sum(t["prompt_tokens"] for t in projection["tasks"].values())
    budget = sum(t["generation_budget"] for t in projection["tasks"].values())
    r = projection["rates"]
    out = [f"econeval: projected time {duration(projection['seconds'])} for {items:,} item{'s' if items != 1 else ''} ({prompt:,} prompt tokens at "
           f"{r['prompt_tokens_per_s']:,.0f}/s, up to {budget:,} generated at {r['generated_tokens_per_s']:,.0f}/s, "
           f"measured now on {device}; less where the model stops early, more for CoT and judge stages)"]
    if projection["seconds"] > LONG:
        out.append("econeval: that is far beyond an hour: --budget 10m runs what fits in 10 minutes (estimates with "
                   "intervals, continued by the same command without it), --sample N runs a seeded sample, "
                   "--shard K/N splits the run over machines")
    return out
