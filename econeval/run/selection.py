"""Which items of each task a run takes, in which order, until when, and into which results file:
one object the runner executes.

- `Full()`: every item, in the dataset's order; results.json.
- `Limit(n)`: the first n items of each task (the task's own `limit_items`); results.json, or
  results-limit-N.json beside a larger run's.
- `StratifiedSample(spec)`: a seeded stratified sample (sampling.py), N items per task or a
  fraction; its numbers are estimates of the full set's; results-sample-SPEC.json.
- `Ordered(order, ...)`: every item in a seeded order ("nested": `--budget`'s growing stratified
  samples; "random": the gate's uniformly random order), the tasks' chunks interleaved, the
  cheapest per item first; until `deadline` (on `clock`: no chunk starts that is projected to end
  after it, and the chunk in flight at it is cut off where the model allows: the runner's rule,
  docs/statistics.md); `watch(task, records)`, fed each
  chunk's new records (a resumed run's saved ones first), says whether the task needs more items
  (the gate's e-processes, a budget's progress note); `only` keeps the item ids a gate's baseline
  scored. What stopped early is reported as estimates in results-partial.json.
- `Shard(inner, k, n)`: the chunks of `inner` whose index is k-1 (mod n); `merge` asks it which
  chunk is whose.

`from_flags` turns the command line's --limit / --sample / --budget / --shard into one, refusing
the combinations that cannot be one selection: the one place where flags become a selection.
A selection writes nothing into the run's record: `notes(...)` returns what the record keeps of it
(its results file, the folder's largest --limit, a sample's designs, a gate's order).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import UsageError
from ..store.record import Notes, RunRecord
from ..store.runfiles import limit_results, sample_results
from ..scoring import select_items
from ..types import Prepared, Task

Watch = Callable[[Task, list[dict]], tuple[bool, str | None]]


class Selection:
    """Every item of each task, in the dataset's order (the base: `Full`)."""

    interleave = False  # the tasks take turns a chunk at a time (cheapest per item first)
    watches = False  # watch() is asked after every chunk
    deadline: float | None = None  # on `clock`: the run's chunks end by it (the runner's budget rule)
    clock: Callable[[], float] = time.monotonic  # the clock of the deadline and of the run's timing
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
        """After each chunk, its new records (and, on resuming, the task's saved ones first): (no more
        items for this task?, a note for its progress line)."""
        return False, None

    def notes(self, has_results: bool, old: RunRecord | None, seed: int) -> Notes:
        """The results file this run writes and what the record keeps of it (`has_results`: the
        folder holds results.json; `old`: the folder's record): results.json, unless the folder
        holds a run over more items."""
        smaller = has_results and old is not None and self.limit is not None and (old.limit is None or self.limit < old.limit)
        gate = self.gate_mark(old)
        if not smaller:
            return Notes(gate=gate)
        name = limit_results(self.limit)  # type: ignore[arg-type]
        return Notes(name, folder_limit=True, old_limit=old.limit if old else None,
                     partial_results={**((old.partial_results if old else None) or {}), name: self.limit}, gate=gate)

    def gate_mark(self, old: RunRecord | None) -> dict | None:
        """What the record keeps of a gate's folder (a gate's folder stays one)."""
        return old.gate if old is not None and old.gate else None

    def design(self, task: Task, items: list[dict], kept: list[dict]) -> dict | None:
        """A task's sample design when what ran estimates the full set's numbers (None: it is the set)."""
        return None

    def doc(self) -> dict[str, Any]:
        """What results.json records of the selection."""
        return {}

    def stopped_note(self) -> dict[str, Any]:
        """What run.json's partial_results records of a run that stopped early."""
        return {}


class Full(Selection):
    pass


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class Limit(Selection):
    n: int

    def __post_init__(self):
        from ..sampling import MAX_SAMPLE

        if not _whole(self.n) or not 1 <= self.n <= MAX_SAMPLE:
            raise UsageError(f"Limit({self.n!r}): the items of each task, a whole number from 1 to {MAX_SAMPLE:,}")
        self.limit = self.n

    def items(self, task, prep, seed):
        return select_items(task, prep, self.n)


@dataclass
class StratifiedSample(Selection):
    spec: float | int
    designs: dict[str, dict] = field(default_factory=dict)  # task → its sample design (run.json)

    def __post_init__(self):
        from ..sampling import parse

        try:
            self.spec = parse(self.spec)  # type: ignore[assignment]  # a spec parse refuses is never None
        except ValueError as exc:
            raise UsageError(f"StratifiedSample({self.spec!r}): {str(exc).split(': ', 1)[-1]}") from None
        if self.spec is None:
            raise UsageError("StratifiedSample(None): give a number of items (e.g. 200) or a fraction (e.g. 0.1)")

    def items(self, task, prep, seed):
        from ..sampling import stratified

        picked, self.designs[task.name] = stratified(prep.items, task.strata, self.spec, seed, task.name)
        return task.finalize_items(picked, prep)

    def notes(self, has_results, old, seed):
        name = sample_results(self.spec)  # a sample never writes results.json
        return Notes(name, folder_limit=True, old_limit=old.limit if old else None,
                     samples={**((old.samples if old else None) or {}),
                              name: {"sample": self.spec, "seed": seed, "tasks": self.designs}},
                     partial_results={**((old.partial_results if old else None) or {}), name: {"sample": self.spec}},
                     gate=self.gate_mark(old))

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
    clock: Callable[[], float] = time.monotonic

    interleave = True
    watches = True

    def __post_init__(self):
        if self.order not in ("nested", "random"):
            raise UsageError(f"Ordered({self.order!r}): the order is 'nested' (a budget's) or 'random' (a gate's)")

    def items(self, task, prep, seed):
        from ..sampling import nested_order, random_order

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

    def gate_mark(self, old):
        from ..sampling import RANDOM_SCHEME

        return {"order": RANDOM_SCHEME} if self.order == "random" else super().gate_mark(old)

    def design(self, task, items, kept):
        from ..sampling import RANDOM_SCHEME, SCHEME, design

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
        if not isinstance(self.inner, (Full, Limit, StratifiedSample)):
            raise UsageError(f"Shard({self.inner!r}, ...): a shard is of Full(), Limit(n) or StratifiedSample(spec)",
                             hint="a budget's or a gate's order spans every shard")
        if not (_whole(self.k) and _whole(self.n) and 1 <= self.k <= self.n):
            raise UsageError(f"Shard(k={self.k!r}, n={self.n!r}): shard {self.k} of {self.n} does not exist (1 ≤ K ≤ N)")
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

    def notes(self, has_results, old, seed):
        return self.inner.notes(has_results, old, seed)

    def design(self, task, items, kept):
        return self.inner.design(task, items, kept)

    def doc(self):
        return self.inner.doc()


def deadline_of(budget: str | float | None, started: float) -> float | None:
    """When a `--budget` that started at `started` (time.monotonic()) is spent; None without one."""
    from ..sampling import parse_duration

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
    from ..sampling import WidthNote, parse

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
        base = Ordered("nested", deadline=deadline, watcher=WidthNote())
    elif spec is not None:
        base = StratifiedSample(spec)
    elif limit is not None:
        base = Limit(limit)
    else:
        base = Full()
    if shard is None:
        return base
    if isinstance(base, Ordered):
        raise UsageError("--shard with --budget or a gate: the items' order spans every shard")
    return Shard(base, *shard)
