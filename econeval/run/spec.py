"""What a run is made with, beside which items it runs: the evaluated model (resolved once), its
options, the models named for roles, the context length and the chat mode, how the run shows
itself, and how it was asked for. One frozen value: `econeval run` and `econeval gate` build it
from their flags and hand it to `api.evaluate` unchanged (a gate's folder name, its checks and
the candidate's run all read the same fields); a Python caller builds one the same way."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

from .. import config
from ..types import MODEL
from . import roles as role_specs


@dataclass(frozen=True)
class RunSpec:
    """The evaluated model (`model`: a file, a models.toml name, PREFIX:NAME; None: the
    registry's default) and its `model_options` (-M), `n_ctx`, `chat`; the models named for
    roles (`judge`, `embedder`, `roles`: --role NAME=MODEL); `progress` (True: shown on stderr,
    False: not, None: when stderr is a terminal; a callable gets the progress figures instead,
    one call at a time but, for a served model with two chunks in flight, from their threads),
    `new` (a new timestamped folder in place of the run's own); how it was asked for, as run.json
    records it: `argv` (the command line, also the resume hint's) and `config_file` (a --config file's
    settings, runconfig.py)."""

    model: str | config.ModelSpec | None = None
    model_options: dict[str, Any] = field(default_factory=dict)
    n_ctx: int | None = None
    chat: str | None = None
    judge: str | None = None
    embedder: str | None = None
    roles: dict[str, str] = field(default_factory=dict)
    progress: bool | Callable[[dict], None] | None = None
    argv: tuple[str, ...] = ()
    new: bool = False
    config_file: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.argv, str) or not all(isinstance(a, str) for a in self.argv):
            raise TypeError("RunSpec: argv is the command line as a sequence of strings")
        object.__setattr__(self, "argv", tuple(self.argv))
        if self.config_file is not None and not isinstance(self.config_file, dict):
            raise TypeError("RunSpec: config_file is what run.json records of a --config file (a dict), "
                            "as runconfig.defaults gives it")

    @cached_property
    def model_spec(self) -> config.ModelSpec:
        """The evaluated model's spec, resolved once (its options not yet applied: api.evaluate's)."""
        if isinstance(self.model, config.ModelSpec):
            return self.model
        return role_specs.resolve(self.model, MODEL)

    @cached_property
    def named(self) -> dict[str, str]:
        """The models named for roles, by role (--judge and --embedder as shortcuts of --role)."""
        return role_specs.role_args(self.roles, self.judge, self.embedder)

    def asked_reasoning(self) -> tuple[str, str | None]:
        """The reasoning mode the run asks of its model and its budget, as given (the model entry's
        options under -M's): ("auto", None) where none is given."""
        given = {**self.model_spec.options, **self.model_options}
        tokens = given.get("reasoning_tokens")
        return str(given.get("reasoning", "auto")), None if tokens is None else str(tokens)

    def identity(self) -> dict[str, Any]:
        """What names a gate's own folder beside its baseline (the model as given, its options,
        the context, the chat mode and the models named for roles)."""
        model = self.model.name if isinstance(self.model, config.ModelSpec) else self.model
        return {"model": model, "model_options": self.model_options, "n_ctx": self.n_ctx, "chat": self.chat,
                "embedder": self.embedder, "judge": self.judge, **({"roles": self.roles} if self.roles else {})}
