"""Anthropic's Messages API (POST /v1/messages), on the served-model adapter's client: the same
concurrency, retries (429 and 529 "overloaded" included), redaction, redirect refusal and
client-side stop handling. Differences: the key goes in `x-api-key`; every prompt is a user
message (the API has no raw completions, so `chat` is always on); there are no log-probabilities,
so option questions are answered in text and read by the task's text reader (run.json says so);
there is no seed and no repetition penalty (a task that needs one is refused). The API has no
explicit context-overflow code, so a too-long prompt stops the run with the server's message.
"""

from __future__ import annotations

from .. import registry
from ..config import ModelSpec
from .openai_http import OpenAIHTTPBackend

API_VERSION = "2023-06-01"  # the base URL defaults to Anthropic's in config.SERVED_PREFIXES


@registry.backend("anthropic")
class AnthropicBackend(OpenAIHTTPBackend):
    def __init__(self, spec: ModelSpec, load=None, warn=None):
        super().__init__(spec, load, warn)
        self.use_chat = True
        self.top_logprobs = 0  # none: text answers
        self.penalty_param = "none"
        self.fallbacks.add("no log-probabilities in the Messages API: options read from the generated text")

    def _headers(self, key: str) -> dict:
        return {"x-api-key": key, "anthropic-version": API_VERSION} if key else {"anthropic-version": API_VERSION}

    def _fixed(self) -> dict:
        return {"model": self.spec.api_model, "temperature": 0}

    def _body(self, prompt: str, **kw) -> tuple[str, dict]:
        kw.pop("logprobs", None)
        if "stop" in kw:
            kw["stop_sequences"] = kw.pop("stop")
        return "/v1/messages", {"messages": [{"role": "user", "content": prompt}], **kw}

    def _as_completion(self, doc) -> dict | None:
        if not isinstance(doc, dict) or not isinstance(doc.get("content"), list):
            return None
        text = "".join(b.get("text", "") for b in doc["content"] if isinstance(b, dict) and b.get("type") == "text")
        usage = doc.get("usage") or {}
        finish = "stop" if doc.get("stop_reason") in ("end_turn", "stop_sequence") else "length"
        return {"choices": [{"text": text, "finish_reason": finish}],
                "usage": {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")}}

    def info(self):
        info = super().info()
        info.details.update(backend="Anthropic Messages API", endpoint="/v1/messages",
                            decoding="temperature 0 (no seed in the API); option questions answered in text")
        return info
