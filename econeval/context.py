"""The run-level settings every task sees while it prepares and runs (the seed, task options,
the roles' factories), and the check of the task options given. The runner, the
readers of finished folders (verify.py) and `score` build one; nothing here runs a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import UsageError
from .types import Prepared, Task


DEFAULT_SEED = 1234


MAX_SEED = 2**63 - 1  # a seed is stored as JSON's and the samplers' signed 64-bit integer
MAX_BOOTSTRAP = 100_000  # resamples for the intervals


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def given_seed(seed: int | None) -> tuple[int, bool]:
    """(the run's seed, whether one was given): no --seed is DEFAULT_SEED, and lets a task whose
    authors' protocol names a seed use that one (RunContext.seed_for). A seed that is no whole
    number from 0 to MAX_SEED is refused (UsageError) before anything is written."""
    if seed is None:
        return DEFAULT_SEED, False
    if not _whole(seed) or not 0 <= seed <= MAX_SEED:
        raise UsageError(f"seed {seed!r}: a whole number from 0 to 2**63 - 1")
    return seed, True


def check_bootstrap(n: int) -> int:
    """The resamples for the intervals, a whole number from 0 (none) to MAX_BOOTSTRAP, or UsageError."""
    if not _whole(n) or not 0 <= n <= MAX_BOOTSTRAP:
        raise UsageError(f"bootstrap {n!r}: a whole number of resamples from 0 (none) to {MAX_BOOTSTRAP:,}")
    return n


def protocol_shift(seed: int, given: bool) -> int:
    """How far a task's authors' seed moves in a run of `seed` (`given`: --seed was): without
    --seed a run's seed is the default but in epoch k > 1 of --epochs, the default + k - 1
    (store/epochs.py), so its distance from the default is that epoch's k - 1; with --seed, 0
    (the seed given is every task's)."""
    return 0 if given else seed - DEFAULT_SEED


@dataclass
class RunContext:
    """Run-level settings shared by the tasks: the seed, task options and the roles' factories
    (made on first use). Which items run is the run's Selection (selection.py), not the tasks'
    business."""

    seed: int = DEFAULT_SEED
    seed_given: bool = True  # False: no --seed was given, so a task whose authors' protocol names a seed uses it
    protocol_shift: int = 0  # without --seed, how far the authors' seeds move (epoch k of --epochs: k - 1)
    bootstrap: int = 1000  # resamples for the headline numbers' intervals (0: none)
    task_options: dict[str, Any] = field(default_factory=dict)  # option name → value, for every task declaring it
    per_task: dict[str, dict[str, Any]] = field(default_factory=dict)  # task → its own option values (a gate's baseline)
    given: frozenset[str] = frozenset()  # the roles a model was named for (--judge, --role NAME=MODEL); the others fall back
    factories: dict[str, Callable[[], Any]] = field(default_factory=dict)  # role → factory
    _made: dict[str, Any] = field(default_factory=dict)

    def options_for(self, task: Task) -> dict[str, Any]:
        """The task's option values: the ones given (parsed by the option), defaults for the rest;
        an option added after runs were recorded is left out at its default (`recorded_at_default`)."""
        out = {}
        given = {**self.task_options, **self.per_task.get(task.name, {})}
        for opt in task.options:
            if opt.name in given:
                try:
                    out[opt.name] = opt.parse(given[opt.name])
                except ValueError as exc:
                    raise UsageError(f"task option {opt.name} of {task.name}: {exc}") from None
            else:
                out[opt.name] = opt.default
            if not opt.recorded_at_default and out[opt.name] == opt.default:
                del out[opt.name]
        return out

    def prepare(self, task: Task) -> Prepared:
        """The task prepared in this context: its data loaded and its options settled (the one way
        a task is prepared: for a run, for a finished run's reader, for the prompts' export)."""
        prep = task.prepare(self)
        prep.options = self.options_for(task)
        return prep

    def seed_for(self, task: Task) -> int:
        """The seed of the task's own draws: the one given, else its authors' (`Task.protocol_seed`)
        moved by `protocol_shift` (epoch k of --epochs without --seed: k - 1, store/epochs.py), else
        the run's."""
        if not self.seed_given and task.protocol_seed is not None:
            return task.protocol_seed + self.protocol_shift
        return self.seed

    def role(self, name: str):
        if name not in self._made:
            if name not in self.factories:
                from .registry import role

                need = role(name)
                raise UsageError(f"this task needs {need.what or f'a model for the role {name!r}'}", hint=f"pass {need.flag}")
            self._made[name] = self.factories[name]()
        return self._made[name]

    def role_made(self, name: str, backend):
        """Record a role's backend made elsewhere (the evaluated model); returns it."""
        self._made[name] = backend
        self.factories.setdefault(name, lambda: backend)
        return backend

    def made(self, name: str) -> bool:
        return name in self._made

    def close(self) -> None:
        """Close every backend this context made (each once: the judge may be the evaluated model)."""
        closed: set[int] = set()
        for obj in self._made.values():
            if id(obj) not in closed and hasattr(obj, "close"):
                closed.add(id(obj))
                obj.close()
        self._made.clear()


def check_task_options(tasks: list[Task], given: dict[str, Any]) -> None:
    """Every option given must be declared by at least one selected task, and parse there."""
    declared = {o.name for t in tasks for o in t.options}
    for name in given:
        if name not in declared:
            from .registry import did_you_mean

            owners = sorted({f"{o.name} ({t.name})" for t in tasks for o in t.options}) or ["none"]
            raise UsageError(f"no selected task has the option '{name}'",
                             hint=did_you_mean(name, declared) or f"options of the selected tasks: {', '.join(owners)}")
