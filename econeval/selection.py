"""Which items of each task a run takes, in which order, until when, and into which results file:
one object the runner executes.

- `Full()`: every item, in the dataset's order; results.json.
- `Limit(n)`: the first n items of each task (the task's own `limit_items`); results.json, or
  results-limit-N.json beside a larger run's.
- `Sample(spec)`: a seeded stratified sample (sampling.py), N items per task or a fraction; its
  numbers are estimates of the full set's; results-sample-SPEC.json.
- `Ordered(order, ...)`: every item in a seeded order ("nested": `--budget`'s growing stratified
  samples; "random": the gate's uniformly random order), the tasks' chunks interleaved, the
  cheapest per item first; no chunk starts after `deadline`; `watch(task, records)` after each
  chunk says whether the task needs more items (the gate's e-processes, a budget's progress
  note); `only` keeps the item ids a gate's baseline scored. What stopped early is reported as
  estimates in results-partial.json.
- `Shard(inner, k, n)`: the chunks of `inner` whose index is k-1 (mod n); `merge` asks it which
  chunk is whose.

`from_flags` turns the command line's --limit / --sample / --budget / --shard into one, refusing
the combinations that cannot be one selection.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import UsageError
from .scoring import select_items
from .types import Prepared, Task

Watch = Callable[[Task, list[dict]], tuple[bool, str | None]]


class Selection:
    """Every item of each task, in the dataset's order (the base: `Full`)."""

    interleave = False  # the tasks take turns a chunk at a time (cheapest per item first)
    watches = False  # watch() is asked after every chunk
    deadline: float | None = None  # time.monotonic(): no chunk starts after it
    limit: int | None = None  # what run.json and results.json record as the run's --limit

    def items(self, task: Task, prep: Prepared, seed: int) -> list[dict]:
        """The task's items that run, in the order they run."""
        return select_items(task, prep, None)

    def owns(self, chunk_index: int) -> bool:
        """Whether this process runs the chunk (every chunk but in a shard)."""
        return True

    def shard(self) -> tuple[int, int] | None:
        return None

    def watch(self, task: Task, records: list[dict]) -> tuple[bool, str | None]:
        """After each chunk: (no more items for this task?, a note for its progress line)."""
        return False, None

    def results_name(self, folder, meta: dict, old: dict) -> str:
        """The results file this run writes, recording in `meta` what the folder needs to know."""
        name = folder.results_name(self.limit)
        if name != "results.json":
            meta["limit"] = old.get("limit")
            meta["partial_results"] = {**old.get("partial_results", {}), name: self.limit}
        return name

    def design(self, task: Task, items: list[dict], kept: list[dict]) -> dict | None:
        """A task's sample design when what ran estimates the full set's numbers (None: it is the set)."""
        return None

    def doc(self) -> dict[str, Any]:
        """What results.json records of the selection."""
        return {}

    def stopped_note(self) -> dict[str, Any]:
        """What run.json's partial_results records of a run that stopped early."""
        return {}

    def marks(self, old: dict) -> dict[str, Any]:
        """What run.json records of the folder beyond this run (a gate's folder stays one)."""
        return {"gate": old["gate"]} if old.get("gate") else {}


class Full(Selection):
    pass


@dataclass
class Limit(Selection):
    n: int

    def __post_init__(self):
        self.limit = self.n

    def items(self, task, prep, seed):
        return select_items(task, prep, self.n)


@dataclass
class Sample(Selection):
    spec: float | int
    designs: dict[str, dict] = field(default_factory=dict)  # task → its sample design (run.json)

    def items(self, task, prep, seed):
        from .sampling import stratified

        picked, self.designs[task.name] = stratified(prep.items, task.strata, self.spec, seed, task.name)
        return task.finalize_items(picked, prep)

    def results_name(self, folder, meta, old):
        name = f"results-sample-{self.spec}.json"  # a sample never writes results.json
        meta["limit"] = old.get("limit")
        meta["samples"] = {**old.get("samples", {}), name: {"sample": self.spec, "seed": meta["seed"], "tasks": self.designs}}
        meta["partial_results"] = {**old.get("partial_results", {}), name: {"sample": self.spec}}
        return name

    def design(self, task, items, kept):
        return self.designs.get(task.name)

    def doc(self):
        return {"sample": self.spec}


@dataclass
class Ordered(Selection):
    order: str  # "nested" (--budget) or "random" (the gate)
    deadline: float | None = None
    watcher: Watch | None = None
    only: dict[str, set[str]] | None = None

    interleave = True
    watches = True

    def items(self, task, prep, seed):
        from .sampling import nested_order, random_order

        everything = select_items(task, prep, None)  # every item, settled as in a full run
        if self.only is not None:
            everything = [it for it in everything if it["id"] in self.only.get(task.name, ())]
        return (nested_order(everything, task.strata, seed, task.name) if self.order == "nested"
                else random_order(everything, seed, task.name))

    def watch(self, task, records):
        return self.watcher(task, records) if self.watcher else (False, None)

    def stopped_note(self) -> dict[str, Any]:
        """What run.json's partial_results records of a run that stopped early."""
        return {"order": self.order}

    def marks(self, old):
        from .sampling import RANDOM_SCHEME

        return {"gate": {"order": RANDOM_SCHEME}} if self.order == "random" else super().marks(old)

    def design(self, task, items, kept):
        from .sampling import RANDOM_SCHEME, SCHEME, design

        if len(kept) >= len(items):
            return None
        nested = self.order == "nested"
        return design(items, {r["id"] for r in kept}, task.strata if nested else None, SCHEME if nested else RANDOM_SCHEME)


@dataclass
class Shard(Selection):
    inner: Selection
    k: int
    n: int

    def __post_init__(self):
        self.limit = self.inner.limit

    def items(self, task, prep, seed):
        return self.inner.items(task, prep, seed)

    def owns(self, chunk_index):
        return self.owner(chunk_index) == self.k

    def owner(self, chunk_index: int) -> int:
        """The shard (1..n) that runs a chunk."""
        return chunk_index % self.n + 1

    def shard(self):
        return self.k, self.n

    def results_name(self, folder, meta, old):
        return self.inner.results_name(folder, meta, old)

    def design(self, task, items, kept):
        return self.inner.design(task, items, kept)

    def doc(self):
        return self.inner.doc()


def deadline_of(budget: str | float | None, started: float) -> float | None:
    """When a `--budget` that started at `started` (time.monotonic()) is spent; None without one."""
    from .sampling import parse_duration

    if budget is None:
        return None
    try:
        return started + parse_duration(budget)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def from_flags(limit: int | None = None, sample: str | float | int | None = None, budget: str | float | None = None,
               shard: tuple[int, int] | None = None, started: float | None = None) -> Selection:
    """The selection the command line's flags name (one of --limit, --sample, --budget; --shard
    around the first two). `started`: when the budget's clock started (default: now)."""
    from .sampling import parse, width_note

    if sample is not None and limit is not None:
        raise UsageError("--sample and --limit together: a sample is drawn from all items", hint="pass one of them")
    try:
        spec = parse(sample)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    deadline = deadline_of(budget, started if started is not None else time.monotonic())
    base: Selection
    if deadline is not None:
        if limit is not None or spec is not None:
            raise UsageError("--budget with --limit or --sample: a budget run takes its own growing sample", hint="pass one of them")
        base = Ordered("nested", deadline=deadline, watcher=width_note)
    elif spec is not None:
        base = Sample(spec)
    elif limit is not None:
        base = Limit(limit)
    else:
        base = Full()
    if shard is None:
        return base
    if isinstance(base, Ordered):
        raise UsageError("--shard with --budget or a gate: the items' order spans every shard")
    return Shard(base, *shard)
