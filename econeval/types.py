"""Core types shared by benchmarks, backends and the runner. No heavy imports here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence


@dataclass(frozen=True)
class Generate:
    """Greedy generation. `prefix` is a leading part of `prompt` that many items share: a backend
    may evaluate it once and reuse it (a fixed schedule: prefix, then the rest, so scores do not
    depend on item order)."""

    prompt: str
    max_tokens: int
    stop: tuple[str, ...] = ()
    prefix: str = ""
    repeat_penalty: float = 1.0  # HF-style, over the whole context
    stop_after_text: bool = True  # stop strings apply only once non-blank text was generated
    chat: bool = False  # the task asks for the chat template (applied when the model allows)


TOP_TOKEN = "<top>"  # reserved key of an option-logprobs result: the most likely token's log-probability
TEXT_ONLY = "<text>"  # reserved key: the backend had no log-probabilities; this is the text it generated


@dataclass(frozen=True)
class OptionLogprobs:
    """Log-probability of each option as the next text after `prompt` (one forward pass).
    Each option is scored as written and with a leading space; the larger counts."""

    prompt: str
    options: tuple[str, ...]
    prefix: str = ""
    chat: bool = False


@dataclass(frozen=True)
class Completion:
    text: str
    n_prompt_tokens: int = 0
    n_tokens: int = 0
    finish: str = "stop"  # stop | length | context


class Backend(Protocol):
    """One batch method per request kind; the runner groups requests by kind."""

    def generate(self, requests: Sequence[Generate]) -> list[Completion]: ...

    def option_logprobs(self, requests: Sequence[OptionLogprobs]) -> list[dict[str, float]]: ...

    def describe(self) -> dict[str, Any]: ...


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> Any: ...  # (n, d) float32, rows L2-normalised

    def describe(self) -> dict[str, Any]: ...


@dataclass
class Prepared:
    """What a task settles before running: its items (in order) and run-level settings
    recorded in run.json (few-shot example ids, decoding settings, conventions)."""

    items: list[dict]
    settings: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)  # not recorded (prompt prefixes, ...)


class Task:
    """One task name of the public interface (e.g. `econnli-zero`).

    The runner calls `requests(item, prep, outputs)` once per stage (`stages` > 1 for
    multi-call prompting); each named request's output is stored under its name ("response":
    the generated text, "option_logprobs": {option: logprob}). `score(item, outputs, prep)`
    turns outputs into a sample record; `finalize(records, ctx)` may add batch-computed
    scores (embeddings); `aggregate(records, prep)` builds the paper's table.
    """

    name: str = ""
    suite: str = ""
    benchmark: str = ""
    prompt_version: str = ""
    description: str = ""
    stages: int = 1
    needs_embedder: bool = False
    needs_judge: bool = False

    def prepare(self, ctx: Any) -> Prepared:
        raise NotImplementedError

    def limit_items(self, items: list[dict], limit: int) -> list[dict]:
        """What `--limit N` keeps: the first N items."""
        return items[:limit]

    def requests(self, item: dict, prep: Prepared, outputs: dict) -> dict[str, Generate | OptionLogprobs]:
        raise NotImplementedError

    def score(self, item: dict, outputs: dict, prep: Prepared) -> dict:
        raise NotImplementedError

    def finalize(self, records: list[dict], ctx: Any) -> None:
        return None

    def aggregate(self, records: list[dict], prep: Prepared) -> dict:
        raise NotImplementedError

    def headline(self, result: dict) -> dict[str, float | None]:
        """A few numbers of `result` for the summary table printed after a run."""
        return {}
