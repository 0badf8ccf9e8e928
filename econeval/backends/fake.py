"""A deterministic stand-in for a model (`--model fake:NAME`): no weights, no engine, instant.
For tests of everything around a model (orchestration, folders, reports, the gate) and for
trying a pipeline; its numbers mean nothing.

- A generation answers with one of `answers` (comma-separated; default "Yes,No,A,B,C,D"), chosen
  by a hash of the model's name and the prompt, so the same prompt always gets the same text and
  two fake models of different names answer differently.
- Option log-probabilities are a softmax of hashed logits over the options plus one unseen token
  (so they sum to less than 1, as a real model's do); `top` is the largest.
- `respond=module:function` (tests): a generation's text is what that function returns for its
  prompt, e.g. a deterministic writer of STEER-ME templates (steer_me/fake_writer.py).
- Turns of a conversation count: a later turn's answer depends on what came before it.
- An answer that reasons inline (`<think>why</think>No`) makes a reasoning model: the reply is
  split into its reasoning and its answer (econeval/reasoning.py); a reasoning longer than the
  reasoning budget (4 characters a token) never ends, and leaves the item unanswered, as a
  served model's does. It cannot be switched off (`--reasoning off` is refused); a fake model
  whose answers do not reason refuses `--reasoning on`.
- A stop (a signal, a `--budget`'s deadline) takes effect between its requests, as a llama.cpp
  model's does between its steps.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Callable, Sequence

from .. import registry
from ..errors import UsageError
from ..reasoning import split
from ..signals import raise_if_stopped
from ..types import BackendInfo, Completion, Generate, OptionLogprobs, OptionScores
from .base import Backend, ReasoningOptions, option


@dataclass(frozen=True)
class FakeOptions(ReasoningOptions):
    answers: str = option("Yes,No,A,B,C,D", "the texts a generation picks from (comma-separated)")
    respond: str | None = option(None, "module:function that writes each generation's text from its prompt (a deterministic "
                                       "writer or checker for tests); answers then apply to option log-probabilities only")


@registry.backend("fake")
class FakeBackend(Backend[FakeOptions]):
    prefix = "fake"
    Options = FakeOptions
    description = "a deterministic stand-in for a model: hashed answers and log-probabilities, no weights (tests, pipelines)"

    @classmethod
    def from_prefix(cls, name: str) -> dict:
        return {}

    @classmethod
    def reasons(cls, options: FakeOptions) -> bool:
        return any(split(a).reasoning is not None for a in options.answers.split(","))

    @classmethod
    def validate(cls, spec, options: FakeOptions, settings) -> None:
        if options.reasoning == "off" and cls.reasons(options):
            raise UsageError(f"model '{spec.name}' always reasons (its answers do): --reasoning off cannot switch it off")
        if options.reasoning == "on" and not cls.reasons(options):
            raise UsageError(f"model '{spec.name}' does not reason: --reasoning on has nothing to switch on")

    def _reply(self, raw: str, budget: int) -> dict:
        """A reply's answer and reasoning, the reasoning cut at the budget (4 characters a token)."""
        part = split(raw)
        if part.reasoning is None:
            return {"text": raw}
        n = max(1, len(part.reasoning) // 4)
        if n > budget:
            return {"text": "", "reasoning": part.reasoning[: 4 * budget], "n_reasoning_tokens": budget, "reasoning_ended": False}
        return {"text": part.answer, "reasoning": part.reasoning, "n_reasoning_tokens": n, "reasoning_ended": part.ended}

    @staticmethod
    def _finish(reply: dict) -> str:
        return "stop" if reply.get("reasoning_ended", True) else "length"

    def _hash(self, *parts: str) -> int:
        return int(hashlib.sha256("\x00".join((self.spec.name, *parts)).encode()).hexdigest()[:12], 16)

    def _text(self, r: Generate | OptionLogprobs) -> str:
        return str(r.prompt) + "".join(f"\x01{t}" for t in getattr(r, "turns", ()) or ())

    def evaluate(self, requests: Sequence, on_done: Callable[[int], None] | None = None) -> list:
        choices = [a for a in self.options.answers.split(",") if a] or ["Yes"]
        out: list = []
        for i, r in enumerate(requests):
            text = self._text(r)
            if isinstance(r, OptionLogprobs) and self.reasons(self.options):  # a reasoning model answers in text
                reply = self._reply(choices[self._hash(text) % len(choices)], self.options.budget_for(r))
                out.append(OptionScores(n_prompt_tokens=len(text) // 4, **reply))
            elif isinstance(r, OptionLogprobs):
                logits = {o: (self._hash(text, o) % 1000) / 250.0 for o in r.options}
                total = math.log(sum(math.exp(v) for v in logits.values()) + 1.0)
                out.append(OptionScores(scores={o: v - total for o, v in logits.items()}, top=max(logits.values()) - total,
                                        n_prompt_tokens=len(text) // 4))
            else:
                raw = self._respond(r) if self.options.respond else choices[self._hash(text) % len(choices)]
                reply = self._reply(raw, self.options.budget_for(r))
                out.append(Completion(n_prompt_tokens=len(text) // 4, n_tokens=int(reply.get("reasoning_ended", True)),
                                      finish=self._finish(reply), **reply))
            if on_done:
                on_done(i)
            raise_if_stopped()  # a stop (a signal, a --budget's deadline) takes effect between requests
        return out

    def _respond(self, r: Generate) -> str:
        """The text the `respond` function writes for a generation (imported once)."""
        if not hasattr(self, "_responder"):
            import importlib

            module, _, attr = (self.options.respond or "").partition(":")
            try:
                self._responder = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError, ValueError) as exc:
                raise UsageError(f"model '{self.spec.name}': respond={self.options.respond!r} names no function "
                                 f"({type(exc).__name__})", hint="respond=module:function") from None
        return str(self._responder(self._text(r)))

    def info(self) -> BackendInfo:
        ident = {"name": self.spec.name, "answers": self.options.answers,
                 **({"respond": self.options.respond} if self.options.respond else {})}
        reasons = self.reasons(self.options)
        return BackendInfo(kind=self.kind, model={"name": self.spec.name, "identity": ident}, n_ctx=None, device="none",
                           schedule="fake: hashed answers, one request at a time", chat_template_applied=False,
                           composition_matters=False,
                           settings={"answers": self.options.answers, **{k: v for k, v in ident.items() if k == "respond"},
                                     **self.options.reasoning_identity()},
                           details={"reasoning": self.options.reasoning_record(
                               reasons, "its answers reason inline" if reasons else "its answers do not reason",
                               "none: a fake model cannot be switched")})
