"""Anthropic's Messages API (POST /v1/messages), on the shared served-model client: the same
concurrency, retries (429 and 529 "overloaded" included), redaction, redirect refusal and
client-side stop handling. Differences: the key goes in `x-api-key`; every prompt is a user
message (the API has no raw completions, so `chat` is always on); there are no log-probabilities,
so option questions are answered in text and read by the task's text reader (run.json says so);
there is no seed and no repetition penalty (a task that needs one is refused). The API has no
explicit context-overflow code, so a too-long prompt stops the run with the server's message.

Reasoning: `--reasoning on` sends `thinking: {type: enabled, budget_tokens: N}` (the reasoning
budget, at least the API's 1,024) with `max_tokens` the budget plus the task's answer budget and
no temperature; a model that refuses it (adaptive thinking only, Claude Opus 4.7 and later) is
sent `thinking: {type: adaptive}`, learnt from its 400. `-M reasoning_effort=` goes out as
`output_config: {effort}`. `off` sends `thinking: {type: disabled}` (refused in one line by a model
that cannot stop). In `auto` nothing is sent; a model that thinks by default is detected before
the first scored request (a probe) or in a reply, and asked again with the budget. A field the
API refuses (`temperature` on newer models) is left out for the run; a request is never sent
again unchanged after a refusal. The `thinking` blocks are the reasoning, the `text` blocks the
answer (a thinking block whose display is omitted, empty text and a signature, is reasoning
hidden); the reasoning's tokens are estimated from `output_tokens` (the API counts no thinking
tokens apart).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .. import registry
from ..reasoning import estimate_tokens
from ..errors import ModelError, UsageError
from ..types import BackendInfo, Completion, Generate, OptionLogprobs, OptionScores, chat_messages
from .base import Backend, Overlap, Settings, option
from .http_client import Detection, HTTPError, Reading, ServedClient, ServedOptions, reasoning_of, split_stops, token_count

API_VERSION = "2023-06-01"
DEFAULT_URL = "https://api.anthropic.com"
UNCAPPED_TOKENS = 4096  # the Messages API needs a max_tokens: an "uncapped" text answer gets this many
MIN_THINKING = 1024  # the API's least budget_tokens
EFFORTS = ("low", "medium", "high", "xhigh", "max")
MAX_LEARN = 6
PROBE = "Question: Is water wet? Answer Yes or No.\nAnswer:"


@dataclass(frozen=True)
class AnthropicOptions(ServedOptions):
    reasoning_effort: str | None = option(None, "Claude's effort (output_config.effort): " + ", ".join(EFFORTS))

    def check(self, where: str) -> None:
        super().check(where)
        if self.reasoning_effort is not None and self.reasoning_effort not in EFFORTS:
            raise UsageError(f"{where}: reasoning_effort must be one of {', '.join(EFFORTS)}, not {self.reasoning_effort!r}")


@registry.backend("anthropic")
class AnthropicBackend(Backend[AnthropicOptions]):
    prefix = "anthropic"
    runs_elsewhere = True
    overlaps = True  # the server batches requests from two chunks in flight (ServedClient.map)
    Options = AnthropicOptions
    description = "a model behind Anthropic's Messages API"

    @classmethod
    def from_prefix(cls, name: str) -> dict:
        env = {"api_key_env": "ANTHROPIC_API_KEY"} if os.environ.get("ANTHROPIC_API_KEY") else {}
        return {"api_model": name, "base_url": DEFAULT_URL, **env}

    @classmethod
    def validate(cls, spec, options: AnthropicOptions, settings: Settings) -> None:
        options.check_key(spec.name)
        if options.reasoning == "on" and options.reasoning_tokens is not None and options.reasoning_tokens < MIN_THINKING:
            raise UsageError(f"model '{spec.name}': Anthropic's thinking budget is at least {MIN_THINKING:,} tokens, "
                             f"not {options.reasoning_tokens}", hint=f"--reasoning-tokens {MIN_THINKING} or more")

    def __init__(self, spec, options: AnthropicOptions | None = None, settings: Settings | None = None,
                 warn: Callable[[str], None] | None = None):
        super().__init__(spec, options, settings)
        options, settings = self.options, self.settings
        key = options.key()
        headers = {"anthropic-version": API_VERSION, **({"x-api-key": key} if key else {})}
        self.client = ServedClient(options, headers, _as_completion, warn)
        self.client.n.update(client_side_stops=0, text_only_answers=0, oversized_answers=0, reasoning_retries=0,
                             reasoning_probes=0, contract_retries=0)
        self.thinks = options.reasoning == "on"
        self.detected = "--reasoning on" if self.thinks else ""
        self.thinking = "enabled"  # the thinking contract in force for --reasoning on: enabled (budget_tokens) | adaptive
        self.dropped: set[str] = set()
        self.contract: set[str] = set()
        self.lock = threading.Lock()
        self.detection = Detection()  # the probe before the first scored request, once
        self.served = self.client.check_server()

    def budget(self, request: Any = None) -> int:
        """The thinking budget of a request (its task's own, else the model's), at least Anthropic's minimum."""
        return max(MIN_THINKING, self.options.budget_for(request))

    def _build(self, r, max_tokens: int, stops: list[str], sent: dict) -> dict:
        o = self.options
        with self.lock:
            thinks = self.thinks
            body: dict = {"model": o.api_model, "max_tokens": max_tokens + (self.budget(r) if thinks else 0),
                          "messages": chat_messages(r.prompt, r.turns)}
            if o.reasoning == "on":
                body["thinking"] = {"type": "enabled", "budget_tokens": self.budget(r)} if self.thinking == "enabled" \
                    else {"type": "adaptive"}
            elif o.reasoning == "off":
                body["thinking"] = {"type": "disabled"}
            if not thinks and "temperature" not in self.dropped:
                body["temperature"] = 0  # the API allows no other temperature with thinking
            if o.reasoning_effort:
                body["output_config"] = {"effort": o.reasoning_effort}
            if stops and not thinks:
                body["stop_sequences"] = stops
            sent.update(thinks=thinks, stops=stops if not thinks else [])
        return body

    def _post(self, r, max_tokens: int, stops: list[str], sent: dict) -> Any:
        """Send r's message; a refusal that names what to change is learnt for the run, and the
        message built again and sent after a backoff; never sent again unchanged."""
        refused: list[tuple[dict, HTTPError]] = []
        for attempt in range(MAX_LEARN + 1):
            body = self._build(r, max_tokens, stops, sent)
            again = next((exc for sent_before, exc in refused if sent_before == body), None)
            if again is not None:
                raise again  # what was refused is never sent again unchanged
            try:
                return self.client.post("/v1/messages", body)
            except HTTPError as exc:
                if attempt == MAX_LEARN or not self._learn(exc, body):
                    raise
                refused.append((body, exc))
                self.client.count("contract_retries")
                self.client.backoff(attempt, f"HTTP {exc.code}, {str(exc.error.get('message'))[:80]}")
        raise AssertionError("unreachable")

    def _learn(self, exc: HTTPError, body: dict) -> bool:
        """Anthropic's current thinking contract from its 400s: temperature refused, budget_tokens
        refused (adaptive thinking only), adaptive refused (an older model), disabled refused."""
        if exc.code != 400:
            return False
        msg = str(exc.error.get("message") or "")
        kind = (body.get("thinking") or {}).get("type")
        with self.lock:
            if "temperature" in msg and "temperature" in body:
                self.dropped.add("temperature")
                self.contract.add("the API refused temperature: the model's own sampling (no temperature sent)")
                return True
            if kind == "enabled" and ("thinking.type.enabled" in msg or "budget_tokens" in msg or "adaptive" in msg):
                self.thinking = "adaptive"
                self.contract.add("the API refused thinking type enabled (budget_tokens): adaptive thinking sent; the "
                                  "reasoning budget bounds it through max_tokens")
                return True
            if kind == "adaptive" and "adaptive" in msg:
                self.thinking = "enabled"
                self.contract.add("the API refused adaptive thinking: thinking enabled with budget_tokens")
                return True
        if kind == "disabled" and "disabled" in msg:
            raise UsageError(f"model '{self.spec.name}' cannot stop thinking (the API refused thinking type disabled): "
                             "--reasoning off cannot switch it off",
                             hint="run it with --reasoning auto (its thinking is read apart from its answer)")
        if "output_config" in body and ("output_config" in msg or "effort" in msg):
            refusal = ModelError(f"{self.client.base} refuses reasoning effort for '{self.options.api_model}': {msg[:200]}",
                                 hint="leave -M reasoning_effort out for this model")
            refusal.definitive = True  # type: ignore[attr-defined]
            raise refusal
        return False

    def _ensure_detected(self) -> None:
        """Before the first scored request (auto): one probe shows whether the model thinks by default."""
        self.detection.run(self._probe)

    def _probe(self) -> None:
        if self.options.reasoning != "auto":
            return
        self.client.count("reasoning_probes")
        resp = self._post(Generate(prompt=PROBE, max_tokens=16), 16, [], {})
        if _thought(resp).reasoning is not None:
            with self.lock:
                self.thinks, self.detected = True, "before the first request: the probe's reply had thinking blocks"

    def _observed(self) -> None:
        with self.lock:
            if not self.thinks:
                self.thinks, self.detected = True, "seen in an answer (thinking blocks)"
        self.client.count("reasoning_retries")

    def _ask(self, r, max_tokens: int, stops: list[str]) -> tuple[Any, dict]:
        for _ in range(2):
            sent: dict = {}
            resp = self._post(r, max_tokens, stops, sent)
            if _thought(resp).reasoning is not None and not sent["thinks"]:
                self._observed()  # it thinks: asked again with the budget
                continue
            return resp, sent
        raise AssertionError("a reply showed thinking after the model was known to think")

    def _generate(self, r: Generate) -> Completion:
        if r.repeat_penalty != 1.0:
            raise ModelError(f"a task asks for repetition penalty {r.repeat_penalty:g}, which the Messages API does not offer")
        resp, sent = self._ask(r, r.max_tokens, split_stops(r))
        return self.client.completion(resp, r, sent["stops"], Reading(thinks=sent["thinks"]))

    def _one(self, r):
        if isinstance(r, OptionLogprobs):  # no log-probabilities: the letter is read from the text
            self.client.count("text_only_answers")
            resp, sent = self._ask(r, r.text_tokens or UNCAPPED_TOKENS, [])
            n_prompt = token_count(resp.get("usage"), "prompt_tokens")
            thought = _thought(resp, sent["thinks"])
            if thought.reasoning is None:
                return OptionScores(text=thought.answer, n_prompt_tokens=n_prompt)
            return OptionScores(text=thought.answer, reasoning=thought.reasoning, n_reasoning_tokens=thought.tokens,
                                reasoning_ended=thought.ended, n_prompt_tokens=n_prompt)
        return self._generate(r)

    def reasoning_tokens_for(self, request) -> int:
        return self.budget(request) if self.thinks else 0

    def evaluate(self, requests: Sequence[Generate | OptionLogprobs], on_done=None, overlap: Overlap | None = None) -> list:
        return self.client.map(self._one, requests, on_done, overlap, before=self._ensure_detected if requests else None)

    def info(self) -> BackendInfo:
        self.detection.before_record(self._probe)
        o = self.options
        switch = ((f"thinking enabled, budget_tokens {self.budget()}" if self.thinking == "enabled" else
                   "adaptive thinking (max_tokens: the budget plus the answer's)") if o.reasoning == "on" else
                  "thinking disabled" if o.reasoning == "off" else "none: no thinking sent")
        record = o.reasoning_record(self.thinks, self.detected or "not seen: the model did not think", switch,
                                    effort=o.reasoning_effort, contract=sorted(self.contract) or None,
                                    token_counts="estimated from output_tokens (the API counts no thinking tokens apart)"
                                    if self.thinks else None)
        return self.client.info(self.kind, self.spec, self.served, True, {
            "reasoning": record,
            "backend": "Anthropic Messages API", "endpoint": "/v1/messages",
            "decoding": "temperature 0 (no seed in the API); option questions answered in text", "repeat_penalty_param": "none",
            "fallbacks": ["no log-probabilities in the Messages API: options read from the generated text"]
            + sorted(self.client.fallbacks)}, settings=o.reasoning_identity(effort=o.reasoning_effort))

    def counters(self) -> dict[str, int]:
        with self.client.lock:
            return dict(self.client.n)

    def close(self) -> None:
        self.client.close()


def _thought(resp: dict, thinks: bool = False):
    """A reply's thinking and answer (reasoning None: it did not think)."""
    return reasoning_of(resp["choices"][0], resp.get("usage") or {}, Reading(thinks=thinks))


def _as_completion(doc) -> dict | None:
    """A Messages API answer as a completion: the text blocks the answer, the thinking blocks the
    reasoning. A thinking block whose display was omitted (adaptive thinking's default on newer
    models: empty text and a signature) is reasoning hidden; its tokens, counted in output_tokens,
    are all but the answer's (an estimate, given as the completion's reasoning count)."""
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
    out = {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")}
    if thinking and not reasoning.strip():  # thought, display omitted
        out["reasoning_tokens"] = max(1, estimate_tokens(usage.get("output_tokens"), "", text) or 0)
    return {"choices": [{"text": text, "finish_reason": finish, **({"reasoning_content": reasoning} if reasoning.strip() else {})}],
            "usage": out}
