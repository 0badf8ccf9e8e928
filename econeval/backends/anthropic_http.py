"""Anthropic's Messages API (POST /v1/messages), on the shared served-model client: the same
concurrency, retries (429 and 529 "overloaded" included), redaction, redirect refusal and
client-side stop handling. Differences: the key goes in `x-api-key`; every prompt is a user
message (the API has no raw completions, so `chat` is always on); there are no log-probabilities,
so option questions are answered in text and read by the task's text reader (run.json says so);
there is no seed and no repetition penalty (a task that needs one is refused). The API has no
explicit context-overflow code, so a too-long prompt stops the run with the server's message.

Reasoning: Claude reasons only when asked. `--reasoning on` sends `thinking: {type: enabled,
budget_tokens: N}` (the reasoning budget, at least the API's 1,024) with `max_tokens` the budget
plus the task's answer budget and no temperature (the API allows none with thinking); the
`thinking` blocks are kept as the reasoning, the `text` blocks are the answer. `auto` and `off`
send no thinking.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from .. import registry
from ..errors import ModelError, UsageError
from ..types import BackendInfo, Completion, Generate, OptionLogprobs, OptionScores, chat_messages
from .base import Backend, Settings
from .http_client import ServedClient, ServedOptions, reasoning_of, split_stops

API_VERSION = "2023-06-01"
DEFAULT_URL = "https://api.anthropic.com"
UNCAPPED_TOKENS = 4096  # the Messages API needs a max_tokens: an "uncapped" text answer gets this many
MIN_THINKING = 1024  # the API's least budget_tokens


@registry.backend("anthropic")
class AnthropicBackend(Backend[ServedOptions]):
    prefix = "anthropic"
    Options = ServedOptions
    description = "a model behind Anthropic's Messages API"

    @classmethod
    def from_prefix(cls, name: str) -> dict:
        env = {"api_key_env": "ANTHROPIC_API_KEY"} if os.environ.get("ANTHROPIC_API_KEY") else {}
        return {"api_model": name, "base_url": DEFAULT_URL, **env}

    @classmethod
    def validate(cls, spec, options: ServedOptions, settings: Settings) -> None:
        options.check_key(spec.name)
        if options.reasoning == "on" and options.reasoning_tokens is not None and options.reasoning_tokens < MIN_THINKING:
            raise UsageError(f"model '{spec.name}': Anthropic's thinking budget is at least {MIN_THINKING:,} tokens, "
                             f"not {options.reasoning_tokens}", hint=f"--reasoning-tokens {MIN_THINKING} or more")

    def __init__(self, spec, options: ServedOptions | None = None, settings: Settings | None = None,
                 warn: Callable[[str], None] | None = None):
        super().__init__(spec, options, settings)
        options, settings = self.options, self.settings
        key = options.key()
        headers = {"anthropic-version": API_VERSION, **({"x-api-key": key} if key else {})}
        self.client = ServedClient(options, headers, _as_completion, warn)
        self.client.n.update(client_side_stops=0, text_only_answers=0, oversized_answers=0)
        self.served = self.client.check_server()

    @property
    def thinks(self) -> bool:
        return self.options.reasoning == "on"

    def _message(self, r: Generate | OptionLogprobs, max_tokens: int, **kw) -> Any:
        if not self.thinks:
            return self.client.post("/v1/messages", {"model": self.options.api_model, "temperature": 0, "max_tokens": max_tokens,
                                                     "messages": chat_messages(r.prompt, r.turns), **kw})
        budget = max(MIN_THINKING, self.options.reasoning_budget)
        return self.client.post("/v1/messages", {"model": self.options.api_model, "max_tokens": max_tokens + budget,
                                                 "thinking": {"type": "enabled", "budget_tokens": budget},
                                                 "messages": chat_messages(r.prompt, r.turns), **kw})

    def _generate(self, r: Generate) -> Completion:
        if r.repeat_penalty != 1.0:
            raise ModelError(f"a task asks for repetition penalty {r.repeat_penalty:g}, which the Messages API does not offer")
        server_stops = split_stops(r)
        resp = self._message(r, max_tokens=r.max_tokens, **({"stop_sequences": server_stops} if server_stops else {}))
        return self.client.completion(resp, r, server_stops)

    def _one(self, r):
        if isinstance(r, OptionLogprobs):  # no log-probabilities: the letter is read from the text
            self.client.count("text_only_answers")
            resp = self._message(r, max_tokens=r.text_tokens or UNCAPPED_TOKENS)
            thought = reasoning_of(resp["choices"][0], resp.get("usage") or {})
            if thought.reasoning is None:
                return OptionScores(text=thought.answer)
            return OptionScores(text=thought.answer, reasoning=thought.reasoning, n_reasoning_tokens=thought.tokens,
                                reasoning_ended=thought.ended)
        return self._generate(r)

    def reasoning_tokens_for(self, request) -> int:
        return max(MIN_THINKING, self.options.reasoning_budget) if self.thinks else 0

    def evaluate(self, requests: Sequence[Generate | OptionLogprobs], on_done=None) -> list:
        return self.client.map(self._one, requests, on_done)

    def info(self) -> BackendInfo:
        o = self.options
        record = o.reasoning_record(self.thinks, "--reasoning on" if self.thinks else "not asked: Claude reasons only when asked",
                                    f"thinking enabled, budget_tokens {max(MIN_THINKING, o.reasoning_budget)}" if self.thinks
                                    else "none: no thinking sent")
        return self.client.info(self.kind, self.spec, self.served, True, {
            "reasoning": record,
            "backend": "Anthropic Messages API", "endpoint": "/v1/messages",
            "decoding": "temperature 0 (no seed in the API); option questions answered in text", "repeat_penalty_param": "none",
            "fallbacks": ["no log-probabilities in the Messages API: options read from the generated text"]
            + sorted(self.client.fallbacks)}, settings=o.reasoning_identity())

    def counters(self) -> dict[str, int]:
        with self.client.lock:
            return dict(self.client.n)

    def close(self) -> None:
        self.client.close()


def _as_completion(doc) -> dict | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("content"), list):
        return None
    blocks = [b for b in doc["content"] if isinstance(b, dict) and b.get("type") == "text"]
    if not all(isinstance(b.get("text", ""), str) for b in blocks) or not isinstance(doc.get("usage", {}), dict):
        return None  # not an answer of this API: retried like a fault
    text = "".join(b.get("text", "") for b in blocks)
    thinking = [b.get("thinking") if b.get("type") == "thinking" else "(redacted by the API)"
                for b in doc["content"] if isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking")]
    reasoning = "\n".join(t for t in thinking if isinstance(t, str))
    given = doc.get("usage")
    usage: dict = given if isinstance(given, dict) else {}
    finish = "stop" if doc.get("stop_reason") in ("end_turn", "stop_sequence") else "length"
    return {"choices": [{"text": text, "finish_reason": finish, **({"reasoning_content": reasoning} if reasoning else {})}],
            "usage": {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")}}
