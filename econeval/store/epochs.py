"""A run repeated with N seeds (`econeval run --epochs N`, inspect_ai's name): N ordinary run
folders under one parent, OUT/epoch-1 … OUT/epoch-N, each resumed on its own as any run folder is.
Epoch 1 is the command as given; epoch k > 1 is the same command with its seeds moved by k-1: the
run's S+k-1 (S: --seed, or the default seed), and without --seed a task's authors' seed + k-1
(seed_of). A report (publish/report.py) reads the parent as one row per task: each
number the mean over the epochs, with its standard deviation, as the EconNLI paper reports
repeated runs (Table 3: mean ± std over three runs).

Nothing here runs a model: the runner's side is api.evaluate, the reader's `EpochGroup`.
"""

from __future__ import annotations

import math
import re
import statistics
from functools import cached_property
from pathlib import Path
from typing import Any

from ..context import DEFAULT_SEED
from ..errors import UsageError
from .finished import FinishedRun, open_run
from .record import RoleEntry
from .runfiles import RUN_JSON

FOLDER = re.compile(r"epoch-([1-9][0-9]*)")
MAX_EPOCHS = 100


def folder_for(parent: Path, epoch: int) -> Path:
    return Path(parent) / f"epoch-{epoch}"


def seed_of(seed: int | None, epoch: int) -> tuple[int | None, bool]:
    """Epoch k's seed (None: as given) and whether it counts as given: epoch 1 runs as the command
    asks, epoch k > 1 with the seed S + k - 1, S being --seed or the default. Without --seed no
    epoch's is given, so a task with its authors' seed draws with it moved as far (RunContext.seed_for:
    STEER-ME's 42, 43, 44 beside the run's 1234, 1235, 1236)."""
    if epoch == 1:
        return seed, seed is not None
    return (DEFAULT_SEED if seed is None else seed) + epoch - 1, seed is not None


def epochs_in(parent: Path) -> dict[int, Path]:
    """The epoch folders under a parent, by epoch number; {} for a folder that is none."""
    parent = Path(parent)
    if not parent.is_dir() or (parent / RUN_JSON).exists():
        return {}
    return dict(sorted((int(m.group(1)), p) for p in parent.iterdir() if p.is_dir() and (m := FOLDER.fullmatch(p.name))))


def check_parent(parent: Path) -> None:
    """A folder --epochs may write into: new, empty, or holding epoch folders only."""
    parent = Path(parent)
    if not parent.exists():
        return
    if not parent.is_dir():
        raise UsageError(f"{parent} is not a folder", hint="--epochs writes its epochs' run folders into a folder of their own")
    if (parent / RUN_JSON).exists():
        raise UsageError(f"{parent} is a run folder: --epochs writes its epochs' run folders (epoch-1, epoch-2, …) into a "
                         "folder of their own", hint="choose another --out")
    strays = sorted(p.name for p in parent.iterdir() if not (p.is_dir() and FOLDER.fullmatch(p.name)))
    if strays:
        raise UsageError(f"{parent} holds {', '.join(strays[:3])}{' …' if len(strays) > 3 else ''}, which is not an epoch's "
                         "run folder", hint="--epochs writes into a new folder, or one holding its epoch-K folders only")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def mean(values: list[Any]) -> Any:
    """The mean over epochs of one value of their results, structure kept: a number the mean (the
    value itself where every epoch has it: counts stay whole), a dict or a list each part's, None
    where an epoch has none; anything else the first epoch's where all agree, else None."""
    first = values[0]
    if all(isinstance(v, dict) for v in values):
        return {k: mean([v[k] for v in values]) for k in first if all(k in v for v in values)}
    if all(isinstance(v, list) for v in values) and len({len(v) for v in values}) == 1:
        return [mean(list(col)) for col in zip(*values)]
    if all(_number(v) for v in values):
        if all(v == first for v in values):
            return first
        finite = [float(v) for v in values]
        return statistics.fmean(finite) if all(math.isfinite(v) for v in finite) else None
    return first if all(v == first for v in values) else None


def spread(values: list[Any]) -> tuple[float | None, float | None]:
    """Mean and standard deviation (n - 1: the paper's repeated runs) of one table cell over the
    epochs; (None, None) where an epoch has no number there."""
    if not values or not all(_number(v) and math.isfinite(v) for v in values):
        return None, None
    nums = [float(v) for v in values]
    return statistics.fmean(nums), statistics.stdev(nums) if len(nums) > 1 else 0.0


class EpochGroup(FinishedRun):
    """An --epochs parent read as one run: the record, samples and prepared tasks of epoch 1 (what
    the runs share but the seed), the results the mean over the epochs (`mean`); `epochs` holds
    each epoch's run, for what is computed per epoch (a report's cells: mean and std)."""

    def __init__(self, path: Path, epochs: list[FinishedRun]):
        super().__init__(path, epochs[0].record)
        self.epochs = epochs

    @cached_property
    def results(self) -> dict[str, dict]:
        per = [e.results for e in self.epochs]
        return {task: mean([r[task] for r in per]) for task in per[0] if all(task in r for r in per)}

    @cached_property
    def samples(self) -> dict[str, dict[str, dict]]:
        return self.epochs[0].samples

    @cached_property
    def preps(self):  # type: ignore[override]
        return self.epochs[0].preps

    @property
    def seeds(self) -> list[Any]:
        return [e.record.seed for e in self.epochs]

    def role(self, name: str) -> RoleEntry:
        return self.epochs[0].role(name)


def open_group(parent: Path, strict: bool = True) -> EpochGroup | None:
    """An --epochs parent as one EpochGroup; None for a folder that holds no epoch folders."""
    found = epochs_in(parent)
    if not found:
        return None
    missing = [k for k in range(1, max(found) + 1) if k not in found]
    if missing:
        raise UsageError(f"{parent} holds epochs up to {max(found)} but not epoch-{missing[0]}",
                         hint="rerun the --epochs command to finish it")
    return EpochGroup(Path(parent), [open_run(p, strict=strict) for p in found.values()])
