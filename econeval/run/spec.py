"""What a run is made with, beside which items it runs: the evaluated model (resolved once), its
options, the models named for roles, the context length and the chat mode, and how the run shows
itself. One frozen value: `econeval gate` builds it from its flags and hands it on to the API
unchanged (its folder's name, its checks and the candidate's run all read the same fields);
nothing passes these settings as loose keyword arguments."""

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
    roles (`judge`, `embedder`, `roles`: --role NAME=MODEL); `progress` (api.evaluate's),
    `argv` (the command line, for run.json and the resume hint) and `new` (a new folder)."""

    model: str | None = None
    model_options: dict[str, Any] = field(default_factory=dict)
    n_ctx: int | None = None
    chat: str | None = None
    judge: str | None = None
    embedder: str | None = None
    roles: dict[str, str] = field(default_factory=dict)
    progress: bool | Callable[[dict], None] | None = None
    argv: tuple[str, ...] = ()
    new: bool = False

    @cached_property
    def model_spec(self) -> config.ModelSpec:
        """The evaluated model's spec, resolved once (its options not yet applied: api.evaluate's)."""
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
        return {"model": self.model, "model_options": self.model_options, "n_ctx": self.n_ctx, "chat": self.chat,
                "embedder": self.embedder, "judge": self.judge, **({"roles": self.roles} if self.roles else {})}

    def evaluate_args(self) -> dict[str, Any]:
        """The keyword arguments of api.evaluate that this spec fills."""
        return {"model": self.model_spec, "model_options": self.model_options, "n_ctx": self.n_ctx, "chat": self.chat,
                "judge": self.judge, "embedder": self.embedder, "roles": self.roles or None, "progress": self.progress,
                "argv": list(self.argv) or None, "new": self.new}
