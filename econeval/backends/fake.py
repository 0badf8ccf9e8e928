"""A deterministic stand-in for a model (`--model fake:NAME`): no weights, no engine, instant.
For tests of everything around a model (orchestration, folders, reports, the gate) and for
trying a pipeline; its numbers mean nothing.

- A generation answers with one of `answers` (comma-separated; default "Yes,No,A,B,C,D"), chosen
  by a hash of the model's name and the prompt, so the same prompt always gets the same text and
  two fake models of different names answer differently.
- Option log-probabilities are a softmax of hashed logits over the options plus one unseen token
  (so they sum to less than 1, as a real model's do); `top` is the largest.
- Turns of a conversation count: a later turn's answer depends on what came before it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Callable, Sequence

from .. import registry
from ..types import BackendInfo, Completion, Generate, OptionLogprobs, OptionScores
from .base import Backend, BackendOptions, option


@dataclass(frozen=True)
class FakeOptions(BackendOptions):
    answers: str = option("Yes,No,A,B,C,D", "the texts a generation picks from (comma-separated)")


@registry.backend("fake")
class FakeBackend(Backend[FakeOptions]):
    prefix = "fake"
    Options = FakeOptions
    description = "a deterministic stand-in for a model: hashed answers and log-probabilities, no weights (tests, pipelines)"

    @classmethod
    def from_prefix(cls, name: str) -> dict:
        return {}

    def _hash(self, *parts: str) -> int:
        return int(hashlib.sha256("\x00".join((self.spec.name, *parts)).encode()).hexdigest()[:12], 16)

    def _text(self, r: Generate | OptionLogprobs) -> str:
        return str(r.prompt) + "".join(f"\x01{t}" for t in getattr(r, "turns", ()) or ())

    def evaluate(self, requests: Sequence, on_done: Callable[[int], None] | None = None) -> list:
        choices = [a for a in self.options.answers.split(",") if a] or ["Yes"]
        out: list = []
        for i, r in enumerate(requests):
            text = self._text(r)
            if isinstance(r, OptionLogprobs):
                logits = {o: (self._hash(text, o) % 1000) / 250.0 for o in r.options}
                total = math.log(sum(math.exp(v) for v in logits.values()) + 1.0)
                out.append(OptionScores(scores={o: v - total for o, v in logits.items()}, top=max(logits.values()) - total,
                                        n_prompt_tokens=len(text) // 4))
            else:
                answer = choices[self._hash(text) % len(choices)]
                out.append(Completion(text=answer, n_prompt_tokens=len(text) // 4, n_tokens=1))
            if on_done:
                on_done(i)
        return out

    def info(self) -> BackendInfo:
        ident = {"name": self.spec.name, "answers": self.options.answers}
        return BackendInfo(kind=self.kind, model={"name": self.spec.name, "identity": ident}, n_ctx=None, device="none",
                           schedule="fake: hashed answers, one request at a time", chat_template_applied=False,
                           composition_matters=False, settings={"answers": self.options.answers})
