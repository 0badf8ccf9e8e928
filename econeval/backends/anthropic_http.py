"""Anthropic's Messages API (POST /v1/messages), on the shared served-model client: the same
concurrency, retries (429 and 529 "overloaded" included), redaction, redirect refusal and
client-side stop handling. Differences: the key goes in `x-api-key`; every prompt is a user
message (the API has no raw completions, so `chat` is always on); there are no log-probabilities,
so option questions are answered in text and read by the task's text reader (run.json says so);
there is no seed and no repetition penalty (a task that needs one is refused). The API has no
explicit context-overflow code, so a too-long prompt stops the run with the server's message.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from .. import registry
from ..errors import ModelError
from ..types import BackendInfo, Completion, Generate, OptionLogprobs, OptionScores, chat_messages
from .base import Backend, Settings
from .http_client import ServedClient, ServedOptions, split_stops

API_VERSION = "2023-06-01"
DEFAULT_URL = "https://api.anthropic.com"
UNCAPPED_TOKENS = 4096  # the Messages API needs a max_tokens: an "uncapped" text answer gets this many


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

    def __init__(self, spec, options: ServedOptions | None = None, settings: Settings | None = None,
                 warn: Callable[[str], None] | None = None):
        super().__init__(spec, options, settings)
        options, settings = self.options, self.settings
        key = options.key()
        headers = {"anthropic-version": API_VERSION, **({"x-api-key": key} if key else {})}
        self.client = ServedClient(options, headers, _as_completion, warn)
        self.client.n.update(client_side_stops=0, text_only_answers=0, oversized_answers=0)
        self.served = self.client.check_server()

    def _message(self, r: Generate | OptionLogprobs, **kw) -> Any:
        return self.client.post("/v1/messages", {"model": self.options.api_model, "temperature": 0,
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
            choice = self._message(r, max_tokens=r.text_tokens or UNCAPPED_TOKENS)["choices"][0]
            return OptionScores(text=choice.get("text") or "")
        return self._generate(r)

    def evaluate(self, requests: Sequence[Generate | OptionLogprobs], on_done=None) -> list:
        return self.client.map(self._one, requests, on_done)

    def info(self) -> BackendInfo:
        return self.client.info(self.kind, self.spec, self.served, True, {
            "backend": "Anthropic Messages API", "endpoint": "/v1/messages",
            "decoding": "temperature 0 (no seed in the API); option questions answered in text", "repeat_penalty_param": "none",
            "fallbacks": ["no log-probabilities in the Messages API: options read from the generated text"]
            + sorted(self.client.fallbacks)})

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
    given = doc.get("usage")
    usage: dict = given if isinstance(given, dict) else {}
    finish = "stop" if doc.get("stop_reason") in ("end_turn", "stop_sequence") else "length"
    return {"choices": [{"text": text, "finish_reason": finish}],
            "usage": {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")}}
