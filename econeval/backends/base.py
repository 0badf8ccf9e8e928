"""What every backend is: a registered kind with its own options class, evaluating requests in
batches. The shared layers know only this.

- `Settings`: the few run-wide settings every backend shares (seed, n_ctx).
- `BackendOptions`: a backend's own settings, a dataclass; each field is one option, set from a
  models.toml entry (top-level keys or `[models.NAME.options]`) and from `-M key=value`, parsed
  and validated here by the field's type and the backend's `check`. A field's metadata may give
  `help` and `flags` (command-line aliases such as `--parallel`).
- `Backend`: `evaluate(requests)` (the one method a backend must have; `generate` and
  `option_logprobs` default to it), `info()`, `counters()`, `close()`; class attributes `prefix`
  (`--model PREFIX:NAME`), `implied_by` (models.toml keys that imply the kind) and `serves` (the
  kinds of model it can be: MODEL, a text model, for the evaluated model and every role that takes
  one; EMBEDDER, a sentence embedder); `overlaps` (whether the runner may keep two chunks in
  flight on it: `Overlap`).
"""

from __future__ import annotations

import re

import dataclasses
import threading
import typing
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Generic, Sequence, TypeVar

from .. import reasoning as reasoning_modes
from ..errors import UsageError
from ..types import EMBEDDER, JUDGE, MODEL, BackendInfo, Completion, Generate, OptionLogprobs, OptionScores, parse_bool

_TYPE_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


@dataclass(frozen=True)
class Settings:
    """Run-wide settings every backend shares."""

    seed: int = 0
    n_ctx: int | None = None  # the context length; None: the model entry's


def option(default: Any = None, help: str = "", flags: tuple[str, ...] = (), multiple: bool = False) -> Any:
    """A field of a BackendOptions class. `multiple`: it may hold several values (a list in
    models.toml, the flag given more than once, or comma-separated after -M); then its value is
    a tuple."""
    return dataclasses.field(default=default, metadata={"help": help, "flags": flags, "multiple": multiple})


def _base_type(hint: Any) -> type:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint


def _convert(value: Any, want: type, key: str, where: str) -> Any:
    """A value from models.toml (typed) or from the command line (a string) as `want`."""
    if isinstance(value, str) and want is not str:
        text = value.strip()
        try:
            return parse_bool(text) if want is bool else want(text)
        except ValueError:
            raise UsageError(f"{where}: {key} must be {_TYPE_WORDS.get(want, want.__name__)}, not {value!r}") from None
    ok = isinstance(value, want) and (want is bool or not isinstance(value, bool))
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        raise UsageError(f"{where}: {key} must be {_TYPE_WORDS.get(want, want.__name__)}, not {value!r}")
    return value


OptionsT = TypeVar("OptionsT", bound="BackendOptions")


@dataclass(frozen=True)
class BackendOptions:
    """Base of a backend's options class (no options)."""

    @classmethod
    def fields(cls) -> dict[str, dataclasses.Field]:
        return {f.name: f for f in dataclasses.fields(cls)}

    @classmethod
    def option_types(cls) -> dict[str, type]:
        """Each option's value type (an Optional's inner type)."""
        hints = typing.get_type_hints(cls)
        return {name: _base_type(hints[name]) for name in cls.fields()}

    @classmethod
    def parse(cls: type[OptionsT], values: dict[str, Any], backend: str, where: str) -> OptionsT:
        """The options from a mapping; an option the class does not declare is refused, naming
        the backend and its options."""
        fields = cls.fields()
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise UsageError(f"{where}: backend {backend} has no option {', '.join(repr(k) for k in unknown)}",
                             hint=f"its options: {', '.join(fields) or 'none'}")
        hints = typing.get_type_hints(cls)
        parsed: dict[str, Any] = {}
        for k, v in values.items():
            want = _base_type(hints[k])
            if v is not None and fields[k].metadata.get("multiple"):
                many = v.split(",") if isinstance(v, str) else v
                if not isinstance(many, (list, tuple)) or not many:
                    raise UsageError(f"{where}: {k} must be {_TYPE_WORDS.get(want, want.__name__)} or a list of them")
                parsed[k] = tuple(_convert(x, want, k, where) for x in many)
            else:
                parsed[k] = None if v is None else _convert(v, want, k, where)
        opts = cls(**parsed)
        opts.check(where)
        return opts

    def check(self, where: str) -> None:
        """Refuse values out of range (UsageError naming `where`)."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ReasoningOptions(BackendOptions):
    """The reasoning options every text backend takes (`--reasoning`, `--reasoning-tokens`, also
    `-M`, models.toml and `--config`); what each mode does is the backend's (econeval/reasoning.py)."""

    reasoning: str = option("auto", "reasoning: auto (the model as it is served by default), on (switched on; a model "
                                    "without reasoning is refused), off (switched off; a model that cannot stop is refused)",
                            ("--reasoning",))
    reasoning_tokens: int | None = option(None, "the reasoning budget in tokens, on top of each task's own answer budget "
                                                f"(default {reasoning_modes.DEFAULT_TOKENS})", ("--reasoning-tokens",))
    task_reasoning_tokens: str | None = option(None, "a task's own reasoning budget over --reasoning-tokens, TASK=N "
                                                     "(several comma-separated)", ("--task-reasoning-tokens",))
    think_end: str | None = option(None, "the text that ends the model's reasoning, where its family is not one econeval "
                                         "knows (as lm-eval's think_end_token): the answer is read after it")
    think_start: str | None = option(None, "the text that opens the model's reasoning (with think_end)")

    def check(self, where: str) -> None:
        if self.reasoning not in reasoning_modes.MODES:
            raise UsageError(f"{where}: reasoning must be one of {', '.join(reasoning_modes.MODES)}, not {self.reasoning!r}")
        if self.reasoning_tokens is not None and not 1 <= self.reasoning_tokens <= 1 << 20:
            raise UsageError(f"{where}: reasoning_tokens {self.reasoning_tokens} is out of range (1 to {1 << 20})")
        self.task_budgets(where)
        for name in ("think_end", "think_start"):
            value = getattr(self, name)
            if value is not None and (not value.strip() or len(value) > 64):
                raise UsageError(f"{where}: {name} must be the marker's text (1 to 64 characters), not {value!r}")
        if self.think_start is not None and self.think_end is None:
            raise UsageError(f"{where}: think_start needs think_end (the text that ends the reasoning)")

    @property
    def markers(self) -> "reasoning_modes.Markers | None":
        """The markers the user named (think_end, think_start), or None."""
        return reasoning_modes.custom(self.think_end, self.think_start or "") if self.think_end else None

    @property
    def reasoning_budget(self) -> int:
        return self.reasoning_tokens or reasoning_modes.DEFAULT_TOKENS

    def task_budgets(self, where: str = "task_reasoning_tokens") -> dict[str, int]:
        """task → its own reasoning budget (`task_reasoning_tokens`, TASK=N,...); the runner checks
        that each name is a task."""
        out: dict[str, int] = {}
        for pair in (self.task_reasoning_tokens or "").split(","):
            if not pair.strip():
                continue
            name, _, value = pair.partition("=")
            name = name.strip()
            if not re.fullmatch(r"[0-9]{1,8}", value.strip()) or not 1 <= int(value) <= 1 << 20:  # ASCII digits ("²" is a digit to str.isdigit)
                raise UsageError(f"{where}: task_reasoning_tokens {pair.strip()!r}: expected TASK=N, N from 1 to {1 << 20}")
            out[name] = int(value)
        return out

    def budget_for(self, request: Any) -> int:
        """A request's reasoning budget: its task's own, else the model's."""
        return getattr(request, "reasoning_tokens", None) or self.reasoning_budget

    def reasoning_record(self, reasons: bool, detected: str, switch: str, **more: Any) -> dict:
        """run.json's `backend.reasoning`: the mode, the budget, whether the model reasoned, how that
        was detected and how the mode was put into effect."""
        more = {"per_task": self.task_budgets() or None, **more}
        return {"mode": self.reasoning, "tokens": self.reasoning_budget, "reasons": reasons, "detected": detected,
                "switch": switch, **{k: v for k, v in more.items() if v is not None}}

    def reasoning_identity(self, **more: Any) -> dict:
        """The part of a backend's identity settings that its reasoning options make: what was asked
        (empty for a model run as it is served, so such runs keep their identity; whether it reasoned
        is in run.json's `backend.reasoning`, which compare and gate check)."""
        more = {"think_end": self.think_end, "think_start": self.think_start, "per_task": self.task_budgets() or None, **more}
        if self.reasoning == "auto" and self.reasoning_tokens is None and not any(more.values()):
            return {}
        return {"reasoning": {"mode": self.reasoning, "tokens": self.reasoning_budget,
                              **{k: v for k, v in more.items() if v is not None}}}


@dataclass(frozen=True)
class Overlap:
    """What the runner hands `evaluate` of a backend that `overlaps` while two chunks are in flight:
    `stop`, set to end the call at once (no request is sent after it, retry waits end, the call
    raises); `sent`, called once when every request of the call is in flight (the next chunk may
    start: the runner's window)."""

    stop: threading.Event
    sent: Callable[[], None] | None = None


O = TypeVar("O", bound=BackendOptions)


class Backend(Generic[O]):
    """Base of every backend (evaluated model, judge, embedder), generic in its options class:
    `class LlamaCpp(Backend[LlamaCppOptions])` types `self.options` and the classmethods'
    `options` as that class."""

    kind: ClassVar[str] = ""  # set by @registry.backend
    prefix: ClassVar[str | None] = None  # `--model PREFIX:NAME` makes a spec of this kind
    implied_by: ClassVar[tuple[str, ...]] = ()  # models.toml keys that imply this kind
    serves: ClassVar[tuple[str, ...]] = (MODEL,)  # the kinds of model it can be: MODEL (text), EMBEDDER
    Options: ClassVar[type[BackendOptions]] = BackendOptions
    description: ClassVar[str] = ""
    engine_name: ClassVar[str | None] = None  # an engine whose build `econeval --version` names (engine_version())
    # what an Every Eval Ever export says of a run on it: whether its model runs on a server someone
    # else manages, whether it is a weights file the user holds, and the engine that ran it (its
    # build: run.json's backend record)
    runs_elsewhere: ClassVar[bool] = False
    open_weights: ClassVar[bool] = False
    engine_label: ClassVar[str | None] = None
    # whether evaluate() may run on two threads at once, taking `overlap=Overlap(...)`: a served model
    # whose server batches requests from both (the runner then sends the next chunk's requests while
    # this one's last answers are out: run/runner.py); never an in-process engine (one thread)
    overlaps: ClassVar[bool] = False

    @staticmethod
    def engine_version() -> str:
        return ""

    @classmethod
    def from_prefix(cls, name: str) -> dict[str, Any]:
        """The options of `--model PREFIX:NAME`."""
        raise UsageError(f"backend {cls.kind} has no --model prefix")

    @classmethod
    def from_path(cls, path: str) -> dict[str, Any] | None:
        """The options for `--model PATH` if this backend takes such a file or folder, else None."""
        return None

    @classmethod
    def validate(cls, spec, options: O, settings: Settings) -> None:
        """Everything that can be checked before anything is loaded (UsageError / ModelError)."""

    @classmethod
    def preview(cls, spec, options: O, settings: Settings) -> dict:
        """The part of `info().identity()` known before the backend is made (a resumed folder is
        checked against it before a model loads); keys it leaves out are checked after."""
        return {"kind": cls.kind}

    @classmethod
    def check(cls, spec, options: O, settings: Settings) -> str:
        """`econeval models check`: what can be verified without evaluating anything, as one line."""
        cls.validate(spec, options, settings)
        return f"{spec.name}: {cls.kind} model: ok"

    @classmethod
    def describe_spec(cls, spec) -> str:
        """`econeval models list`: where the model is, in a few words."""
        return ", ".join(f"{k} {v}" for k, v in spec.options.items()) or cls.kind

    def __init__(self, spec, options: O | None = None, settings: Settings | None = None):
        """Options parsed from the spec and the backend's `validate` when no options are given
        (options given come from `roles.plan`, which parsed and validated them once); a backend's
        own __init__ calls this first, then loads or connects."""
        settings = settings or Settings()
        if options is None:
            parsed = typing.cast(O, self.Options.parse(spec.options, self.kind, f"model '{spec.name}'"))
            self.validate(spec, parsed, settings)
        else:
            parsed = options
        self.spec, self.settings = spec, settings
        self.options: O = parsed

    def evaluate(self, requests: Sequence, on_done: Callable[[int], None] | None = None) -> list:
        """Results of the requests, in order (Completion, OptionScores or a similarity);
        `on_done(i)` as request i finishes."""
        raise NotImplementedError

    def generate(self, requests: Sequence[Generate]) -> list[Completion]:
        return self.evaluate(requests)

    def option_logprobs(self, requests: Sequence[OptionLogprobs]) -> list[OptionScores]:
        return self.evaluate(requests)

    def info(self) -> BackendInfo:
        raise NotImplementedError

    def counters(self) -> dict[str, int]:
        return {}

    def reasoning_tokens_for(self, request) -> int:
        """The reasoning budget this request gets on top of its own (the projection counts it):
        the budget where the model reasons, else 0."""
        return 0

    def over_context(self, requests: Sequence) -> list[int]:
        """For each request, the tokens its prompt and generation budget need where that is more
        than the context this backend holds, else 0 (the run refuses such items before it starts;
        a backend without a context of its own: all 0)."""
        return [0] * len(requests)

    def project(self, chunks: dict[str, list[list]], lengths: dict[str, list[int]], seed: int) -> dict | None:
        """The run's projected time (projection.py): for each task's sampled chunks (their
        first-stage requests), the seconds they take on this device, measured now in a few seconds
        at most (`seconds_low` / `seconds_high`: every generation stopping after a token / using its
        whole budget; `seconds_likely`: generated lengths drawn from `lengths`, the task's measured
        ones, where given), the prompt tokens evaluated and the generation budget; None: a backend
        that cannot tell (a served model)."""
        return None

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


__all__ = ["Backend", "BackendOptions", "Overlap", "ReasoningOptions", "Settings", "option", "MODEL", "JUDGE", "EMBEDDER"]
