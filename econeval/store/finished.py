"""A run folder opened to be judged or shown — by report, compare, gate, merge, view, runs and the
exports: `open_run(path)` reads its record (record.py) at once; its results, its samples and its
tasks prepared as the run prepared them are read when first asked for, each once.

`checked()` is what gate, compare, merge and the exports trust: every task known to this
econeval, no sample line of a task the run does not have, every scored record re-derived from its
stored response with the task's own scorer (verify.py). `verified()` is what report and the
exports publish: that, and every number of the results files recomputed from the records it counts.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from .. import registry
from ..errors import UsageError
from .folder import read_samples
from .items import ItemView, item_view
from .record import RoleEntry, RunRecord
from .runfiles import SAMPLES, ResultSource, folder_results
from ..types import Prepared
from ..version import __version__
from .verify import EDITED, check_intervals, check_records, check_result, counted_records, prepared_from


class FinishedRun:
    """A run folder: its record, and (read lazily) results, samples and prepared tasks."""

    def __init__(self, path: Path, record: RunRecord, samples: dict[str, dict[str, dict]] | None = None,
                 preps: dict[str, Prepared] | None = None):
        self.path, self.record = Path(path), record
        self.label = ""  # how a report names the run (report.py sets it)
        if samples is not None:  # records already in hand (a live gate's): not read again
            self.__dict__["samples"] = samples
        if preps is not None:
            self.__dict__["preps"] = preps

    @cached_property
    def _results(self) -> tuple[dict[str, Any], dict[str, ResultSource]]:
        return folder_results(self.path)

    @property
    def results(self) -> dict[str, dict]:
        """Each task's result in the folder's results files (runfiles.folder_results)."""
        return self._results[0]

    @property
    def result_sources(self) -> dict[str, ResultSource]:
        """Where each task's result was read: its file and that file's selection."""
        return self._results[1]

    @cached_property
    def samples(self) -> dict[str, dict[str, dict]]:
        """task → item id → its sample line."""
        path = self.path / SAMPLES
        if not path.is_file():
            raise UsageError(f"{self.path} has no samples.jsonl")
        out: dict[str, dict[str, dict]] = {}
        for (task, item), rec in read_samples(path)[0].items():
            out.setdefault(task, {})[item] = rec
        return out

    @cached_property
    def preps(self) -> dict[str, Prepared]:
        """Each of the run's tasks prepared as the run prepared it (data, options, seed)."""
        out = {}
        for name in self.record.tasks:
            try:
                task = registry.get_task(name)
            except UsageError:
                raise UsageError(f"{self.path}: the run has task {name!r}, which this econeval does not know") from None
            out[name] = prepared_from(self.record, task)
        return out

    def items(self, task: str) -> list[ItemView]:
        """The task's sample lines, in the folder's order, each as one typed view (items.py)."""
        known = registry.get_task(task)
        return [item_view(known, rec) for rec in self.samples.get(task, {}).values()]

    @property
    def model(self) -> str:
        """The model's name; a folder written by `econeval score --out` has none: its folder name."""
        return self.record.model_name or self.path.name

    def role(self, name: str) -> RoleEntry:
        """What the record keeps of the model that filled a role (the judge, the embedder)."""
        return self.record.role(name)

    def checked(self) -> "FinishedRun":
        """The run, its records re-derived from their stored responses (or one clear line): a folder
        of another run format, or a task run with another prompt version, is named as such (another
        econeval's)."""
        self.record.check_format(self.path)
        for name in self.record.tasks:
            self._check_prompt_version(name)
        strays = sorted(set(self.samples) - set(self.record.tasks))
        if strays:
            raise UsageError(f"{self.path}: samples.jsonl holds items of {', '.join(map(str, strays))}, a task the run does "
                             "not have: the folder contradicts itself", hint="the samples were edited or written by another tool")
        for name, prep in self.preps.items():
            check_records(registry.get_task(name), prep, self.samples.get(name, {}), self.path)
        return self

    def verified(self) -> "FinishedRun":
        """The run checked (checked()), and each task's results recomputed from the records they
        count (or one clear line): what report and the exports publish are numbers its samples make.
        (gate and compare judge the samples themselves, never the results' numbers.)"""
        self.checked()
        for name, result in self.results.items():
            source = self.result_sources[name]
            if name not in self.preps:
                raise UsageError(f"{source.file} holds results of {name}, a task the run does not have: the folder "
                                 "contradicts itself", hint=EDITED)
            task = registry.get_task(name)
            counted = counted_records(task, self.preps[name], self.samples.get(name, {}), source, self.record.run_seed)
            check_result(task, self.preps[name], result, counted, source.file)
            ids = {id(r) for r in counted}
            in_file = [r for r in self.samples.get(name, {}).values() if id(r) in ids]  # the order they were written
            check_intervals(task, self.preps[name], result, counted, in_file, self.record, source.file)
        return self

    def _check_prompt_version(self, name: str) -> None:
        """A task run with another prompt version than this econeval's sends other prompts: its
        records are another econeval's to re-derive, said as such (not as an edit)."""
        task = registry.tasks().get(name)
        ran = self.record.task(name).prompt_version
        if task is not None and isinstance(ran, str) and ran != task.prompt_version:
            raise UsageError(f"{self.path}: {name} was run with its prompts of {ran} (econeval {self.record.econeval_version or '?'}); "
                             f"this econeval ({__version__}) sends {task.prompt_version}, so it cannot re-derive its records",
                             hint="read it with the econeval that wrote it, or rerun the task into a new folder")


def open_run(path: Path | str, strict: bool = True) -> FinishedRun:
    """A run folder, its record read (`strict`: a field of another type than econeval writes is
    refused; otherwise it is read as absent, as a report or a listing shows what is there)."""
    return FinishedRun(Path(path), RunRecord.read(Path(path), strict=strict))


def open_checked(path: Path | str) -> FinishedRun:
    """A run folder to judge: its record strict, its samples present and re-derived."""
    return open_run(path).checked()


def open_verified(path: Path | str) -> FinishedRun:
    """A run folder to publish: checked, and its results recomputed from its samples (verified())."""
    return open_run(path).verified()
