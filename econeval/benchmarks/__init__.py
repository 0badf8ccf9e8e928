"""Benchmark registry: one module per benchmark, each exposing `build(src)` and `TASKS`."""

from __future__ import annotations

from types import ModuleType

from ..errors import UsageError
from ..types import Task
from . import cfbenchmark, econlogicqa, econnli, steer_me

MODULES: dict[str, ModuleType] = {}
TASKS: dict[str, Task] = {}


def register(module: ModuleType) -> None:
    if module.BENCHMARK in MODULES:
        raise ValueError(f"benchmark {module.BENCHMARK} registered twice")
    MODULES[module.BENCHMARK] = module
    for task in module.TASKS:
        if task.name in TASKS:
            raise ValueError(f"task {task.name} registered twice")
        TASKS[task.name] = task


for _m in (econnli, econlogicqa, cfbenchmark, steer_me):
    register(_m)


def suites() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for t in TASKS.values():
        out.setdefault(t.suite, []).append(t.name)
    out["all"] = list(TASKS)
    return out


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise UsageError(f"unknown task '{name}'", hint="`econeval list` shows suites and tasks")
    return TASKS[name]


def select(suite: str | None, tasks: tuple[str, ...]) -> list[Task]:
    """Tasks named by --task (repeatable) or by --suite (default: all)."""
    if tasks:
        return [get_task(t) for t in tasks]
    s = suites()
    if (suite or "all") not in s:
        raise UsageError(f"unknown suite '{suite}'", hint=f"suites: {', '.join(s)}")
    return [TASKS[n] for n in s[suite or "all"]]


def builder_for(benchmark: str):
    if benchmark not in MODULES:
        raise UsageError(f"no builder for benchmark '{benchmark}'")
    return MODULES[benchmark].build
