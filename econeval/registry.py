"""Registries of tasks, benchmark data builders and model backends.

Nothing here is a hand-kept list: each benchmark module registers its tasks and its data
builder where they are defined (`@task`, `benchmark(...)`), each backend module registers its
kind (`@backend("llamacpp")`), and `discover()` imports every module of `econeval.benchmarks`
and `econeval.backends`, the modules of installed plugins (entry point group `econeval`) and the
modules named in `ECONEVAL_PLUGINS` (comma-separated). Backend modules import their heavy
libraries only when a backend is made.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from typing import Callable

from .errors import UsageError
from .types import Task

TASKS: dict[str, Task] = {}
BUILDERS: dict[str, Callable] = {}  # benchmark → build(source_folder) -> {file name: rows}
BACKENDS: dict[str, type] = {}  # kind → backend class
_discovered = False


def task(cls: type[Task]) -> type[Task]:
    """Class decorator: register one instance of a Task subclass under its `name`."""
    inst = cls()
    if not inst.name or not inst.suite:
        raise ValueError(f"{cls.__name__} needs a name and a suite")
    if inst.name in TASKS and type(TASKS[inst.name]) is not cls:
        raise ValueError(f"task {inst.name} registered twice")
    TASKS[inst.name] = inst
    return cls


def benchmark(name: str, build: Callable) -> None:
    """Register the data builder of a benchmark (its committed manifest lives in datasets_bundled/)."""
    BUILDERS[name] = build


def backend(kind: str):
    """Class decorator: register a model backend under a kind (the `kind` of a models.toml entry)."""
    def wrap(cls):
        cls.kind = kind
        BACKENDS[kind] = cls
        return cls
    return wrap


def _import_package(pkg: str) -> None:
    mod = importlib.import_module(pkg)
    for info in pkgutil.iter_modules(mod.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{pkg}.{info.name}")


def discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    _import_package("econeval.benchmarks")
    _import_package("econeval.backends")
    from importlib.metadata import entry_points

    for ep in entry_points(group="econeval"):
        ep.load()
    for name in filter(None, (s.strip() for s in os.environ.get("ECONEVAL_PLUGINS", "").split(","))):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise UsageError(f"ECONEVAL_PLUGINS names module '{name}', which cannot be imported: {exc}") from None


def tasks() -> dict[str, Task]:
    discover()
    return TASKS


def suites() -> dict[str, list[str]]:
    """Suite → task names, in registration order; `all` holds every task."""
    out: dict[str, list[str]] = {}
    for t in tasks().values():
        out.setdefault(t.suite, []).append(t.name)
    out["all"] = list(TASKS)
    return out


def get_task(name: str) -> Task:
    if name not in tasks():
        raise UsageError(f"unknown task '{name}'", hint="`econeval list` shows suites and tasks")
    return TASKS[name]


def select(suite: str | None, names: tuple[str, ...] | list[str] = ()) -> list[Task]:
    """Tasks named by --task (repeatable; duplicates run once) or by --suite (default: all).
    Both at once is a usage error (one would silently override the other)."""
    if names and suite:
        raise UsageError("give --suite or --task, not both")
    if names:
        return [get_task(n) for n in dict.fromkeys(names)]
    s = suites()
    if (suite or "all") not in s:
        raise UsageError(f"unknown suite '{suite}'", hint=f"suites: {', '.join(s)}")
    return [TASKS[n] for n in s[suite or "all"]]


def builder(name: str) -> Callable:
    discover()
    if name not in BUILDERS:
        raise UsageError(f"no data builder for benchmark '{name}'")
    return BUILDERS[name]


def backend_class(kind: str) -> type:
    discover()
    if kind not in BACKENDS:
        raise UsageError(f"unknown backend kind '{kind}'", hint=f"kinds: {', '.join(sorted(BACKENDS))}")
    return BACKENDS[kind]
