"""Registries of tasks, benchmarks and backends.

Nothing here is a hand-kept list: each benchmark module registers its tasks (`@task`) and its
benchmark (`benchmark(NAME, build=..., tables=..., commands=...)`) where they are defined, each
backend module registers its kind (`@backend("llamacpp")`), a plugin that is no benchmark its
tables and commands (`plugin(NAME, tables=..., commands=...)`), and `discover()` imports every
module of `econeval.benchmarks`, `econeval.backends` and the built-in plugins of
`econeval.plugins`, the modules of installed plugins (entry point group `econeval`) and the
modules named in `ECONEVAL_PLUGINS` (comma-separated). Backend modules import their heavy
libraries only when a backend is made.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .errors import UsageError
from .types import MODEL, SHARED_ROLES, Role, Task

if TYPE_CHECKING:  # the backends import the registry: the class is named for the type checker only
    from .backends.base import Backend

    BackendClass = type[Backend[Any]]

TASKS: dict[str, Task] = {}
BENCHMARKS: dict[str, "Benchmark"] = {}
PLUGINS: dict[str, "Benchmark"] = {}  # what a plugin that is no benchmark registers: its tables and commands
BACKENDS: "dict[str, BackendClass]" = {}  # kind → backend class
_discovered = False


@dataclass
class Benchmark:
    """What a benchmark registers besides its tasks.

    build     build(source_folder) -> {file name: rows}: its data package step (`econeval data build`)
    tables    tables(runs: list[finished.FinishedRun]) -> list[tables.Table]: its paper tables (`econeval report`)
    commands  "module:attribute" of a click command or group added to the CLI (imported by the CLI only)
    upstreams {name: build}: the builders of the other releases its manifest names (`upstreams`; `data
              build --upstream NAME`)
    """

    name: str
    build: Callable | None = None
    tables: Callable | None = None
    commands: str | None = None
    upstreams: dict[str, Callable] | None = None


def task(cls: type[Task]) -> type[Task]:
    """Class decorator: register one instance of a Task subclass under its `name`."""
    inst = cls()
    if not inst.name or not inst.suite:
        raise ValueError(f"{cls.__name__} needs a name and a suite")
    if inst.name in TASKS and type(TASKS[inst.name]) is not cls:
        raise ValueError(f"task {inst.name} registered twice")
    TASKS[inst.name] = inst
    return cls


def benchmark(name: str, build: Callable | None = None, tables: Callable | None = None, commands: str | None = None,
              upstreams: dict[str, Callable] | None = None) -> None:
    """Register a benchmark's data builder (and those of its other releases), paper tables and CLI
    commands (each optional)."""
    BENCHMARKS[name] = Benchmark(name, build, tables, commands, upstreams)


def plugin(name: str, tables: Callable | None = None, commands: str | None = None) -> None:
    """Register the report tables and CLI commands of a plugin that is no benchmark (built-in:
    auto-STEER in `econeval.plugins.auto_steer`) or of a backend (the ONNX embedder's `models
    add-embedder`). A group of commands adds its subcommands to the CLI's group of the same name."""
    PLUGINS[name] = Benchmark(name, None, tables, commands)


def extensions() -> list[Benchmark]:
    """What benchmarks and plugins register besides tasks (their tables and commands), benchmarks first."""
    discover()
    return [*BENCHMARKS.values(), *PLUGINS.values()]


def backend(kind: str):
    """Class decorator: register a backend under a kind (the `kind` of a models.toml entry).
    The class may declare `prefix` (`--model PREFIX:NAME`) and `implied_by` (models.toml keys
    that imply this kind when an entry names none)."""
    def wrap(cls: "BackendClass") -> "BackendClass":
        if kind in BACKENDS and BACKENDS[kind] is not cls:
            raise ValueError(f"backend kind {kind} registered twice")
        cls.kind = kind
        BACKENDS[kind] = cls
        return cls
    return wrap


def _import_package(pkg: str) -> None:
    """Every module of a package but its command modules (`*commands`: click, which the CLI alone
    imports, when it adds the commands they register)."""
    mod = importlib.import_module(pkg)
    for info in pkgutil.iter_modules(mod.__path__):
        if not info.name.startswith("_") and not info.name.endswith("commands"):
            importlib.import_module(f"{pkg}.{info.name}")


def _load_plugin(what: str, load: Callable[[], object]) -> None:
    try:
        load()
    except Exception as exc:  # noqa: BLE001 - a broken plugin is the user's input: one line naming it
        detail = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{what} cannot be loaded ({detail})",
                         hint="fix or remove the plugin (ECONEVAL_PLUGINS, or the package's 'econeval' entry point)") from None


def discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    _import_package("econeval.benchmarks")
    _import_package("econeval.backends")
    _import_package("econeval.plugins")
    from importlib.metadata import entry_points

    for ep in entry_points(group="econeval"):
        _load_plugin(f"plugin entry point '{ep.name}' ({ep.value})", ep.load)
    for name in filter(None, (s.strip() for s in os.environ.get("ECONEVAL_PLUGINS", "").split(","))):
        _load_plugin(f"ECONEVAL_PLUGINS names module '{name}', which", functools.partial(importlib.import_module, name))


def tasks() -> dict[str, Task]:
    discover()
    return TASKS


def roles() -> dict[str, Role]:
    """The roles a run can fill besides the evaluated model: the shared ones (the judge, the
    embedder) and those the registered tasks define (`Task.new_roles`)."""
    out = {r.name: r for r in SHARED_ROLES}
    for t in tasks().values():
        for r in t.new_roles:
            if r.name == MODEL or (r.name in out and out[r.name] != r):
                raise ValueError(f"task {t.name} defines the role '{r.name}', which is defined already")
            out[r.name] = r
    return out


def role(name: str) -> Role:
    """A role by name; the evaluated model is the role MODEL (a text model)."""
    if name == MODEL:
        return Role(MODEL, MODEL, None, "the evaluated model")
    known = roles()
    if name not in known:
        hint = did_you_mean(name, known)
        raise UsageError(f"no task uses a role '{name}'", hint=hint or f"roles: {', '.join(known)}")
    return known[name]


def suites() -> dict[str, list[str]]:
    """Suite → task names, in registration order; `all` holds every task of a suite but those run
    by name only (`Task.in_all`). A tool's tasks (`Task.in_suites` False: auto-STEER's writer and
    checker) are in no suite: their commands run them."""
    out: dict[str, list[str]] = {}
    for t in tasks().values():
        if t.in_suites:
            out.setdefault(t.suite, []).append(t.name)
    out["all"] = [n for n, t in TASKS.items() if t.in_suites and t.in_all]
    return out


def did_you_mean(name: str, known) -> str | None:
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f"did you mean '{close[0]}'?" if close else None


def get_task(name: str) -> Task:
    if name not in tasks():
        hint = did_you_mean(name, TASKS)
        raise UsageError(f"unknown task '{name}'", hint=(hint + "; " if hint else "") + "`econeval list` shows suites and tasks")
    return TASKS[name]


def select(suite: str | None, names: "Sequence[str | Task]" = ()) -> list[Task]:
    """Tasks named by --task (repeatable; duplicates run once), given as Task objects (the Python
    API, as inspect_ai's `eval()` takes them), or by --suite (default: all). Both at once is a
    usage error (one would silently override the other)."""
    if names and suite:
        raise UsageError("give --suite or --task, not both")
    if names:
        picked: dict[str, Task] = {}
        for n in names:
            if not isinstance(n, (str, Task)):
                raise UsageError(f"a task is named by a string or given as a Task, not {type(n).__name__}")
            t = n if isinstance(n, Task) else get_task(n)
            if not t.name:
                raise UsageError(f"the task {type(t).__name__} has no name")
            if t.name in picked and picked[t.name] is not t:
                raise UsageError(f"two different tasks are named {t.name!r}")
            picked[t.name] = t
        return list(picked.values())
    s = suites()
    if (suite or "all") not in s:
        hint = did_you_mean(suite or "all", s)
        raise UsageError(f"unknown suite '{suite}'", hint=(hint + "; " if hint else "") + f"suites: {', '.join(s)}")
    return [TASKS[n] for n in s[suite or "all"]]


def benchmarks() -> dict[str, Benchmark]:
    discover()
    return BENCHMARKS


def builder(name: str, upstream: str | None = None) -> Callable:
    """A benchmark's data builder: of its manifest's own upstream, or of the named one."""
    b = benchmarks().get(name)
    if b is None or b.build is None:
        raise UsageError(f"no data builder for benchmark '{name}'")
    if upstream is None:
        return b.build
    got = (b.upstreams or {}).get(upstream)
    if got is None:
        raise UsageError(f"{name}: econeval has no builder for upstream '{upstream}' yet",
                         hint="its manifest entry says what the release is and what is missing (econeval data list)")
    return got


def backends() -> "dict[str, BackendClass]":
    discover()
    return BACKENDS


def backend_class(kind: str) -> "BackendClass":
    if kind not in backends():
        raise UsageError(f"unknown backend kind '{kind}'", hint=f"kinds: {', '.join(sorted(BACKENDS))}")
    return BACKENDS[kind]


def prefixes() -> "dict[str, BackendClass]":
    """`--model PREFIX:NAME` → the backend class that registered the prefix."""
    return {cls.prefix: cls for cls in backends().values() if cls.prefix}


def implied_kind(keys) -> list[str]:
    """The kinds a models.toml entry without `kind` may mean, by the keys it has."""
    return [k for k, cls in backends().items() if set(cls.implied_by) & set(keys)]
