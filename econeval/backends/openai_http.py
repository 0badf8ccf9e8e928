"""Served and hosted models behind an OpenAI-compatible HTTP API (/v1/completions,
/v1/chat/completions): vLLM, llama.cpp's servers, TGI, SGLang, Ollama, hosted APIs.

Requests go out `concurrency` at a time (httpx, one pooled client); results come back in request
order whatever order they finish in. Generation is greedy (temperature 0, the run's seed).

Faults: 408/429/5xx, timeouts, dropped connections and unparseable answers are retried with
exponential backoff and full jitter (a server's `Retry-After` is honoured), up to `max_retries`
times per request; then the run stops with one line naming the server and the last fault (the
run folder keeps every finished chunk: rerunning the command resumes). Redirects are never
followed (the key would travel with them). Anything a server echoes is redacted before it is
shown. A prompt is "too long for the context" only when the server says so explicitly
(error code `context_length_exceeded` / type `exceed_context_size_error`).

Faithful requests: stop strings the task means "after the answer starts" are applied client-side
when they begin with whitespace (a server would apply them from the first character); the
repetition penalty goes out under the server's name for it (llama.cpp: `repeat_penalty`, always
sent since llama-cpp-python's server defaults to 1.1; vLLM: `repetition_penalty`) or a task that
needs one is refused. Option scores come from the top log-probabilities of one generated token
(20, or 5 where a server allows no more): tokens stripped of non-alphanumerics (" C" counts as
"C"), the max over duplicates kept; an option outside the top list gets no score (probability 0),
as in the STEER-ME authors' scoring. A server that returns no log-probabilities gets its text
passed on instead (scorers read the answer from it). `counters()` says how often each fallback
was used; run.json records them.

Endpoints: base URLs with or without a trailing `/v1` both work. `chat = "on"` sends every
request to /v1/chat/completions; "off" and "auto" use /v1/completions (a served model's chat
template is not known to econeval: "auto" sends the raw prompt as the papers' code did), except
for OpenAI's reasoning models, which are served on chat completions only.

Reasoning models (econeval/reasoning.py): the answer is read after the reasoning, from the
message's `reasoning` / `reasoning_content` field beside the content, inline `<think>` blocks, or
reasoning the server only counts (`usage.completion_tokens_details.reasoning_tokens`). A model
that reasons (`--reasoning on`, OpenAI's o-series and GPT-5 family by name, or in `auto` the
first answer that shows reasoning, which is then asked again) gets the reasoning budget on top
of each answer budget, no stop strings on the server (they would cut the reasoning: they apply
to the answer here) and option questions answered in text (the first token's log-probabilities
are the reasoning's). `--reasoning on|off` goes to the server's chat template as
`chat_template_kwargs` (`enable_thinking`, `thinking`) on chat requests. OpenAI's reasoning
contract: `max_completion_tokens` instead of `max_tokens`, no temperature, no log-probabilities;
a server that refuses a field with `unsupported_parameter` / `unsupported_value` is asked again
without it, and the run remembers it (run.json's `backend.reasoning.contract`).
"""

from __future__ import annotations

import math
import os
import re
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

from .. import registry
from ..errors import ModelError, UsageError
from ..types import BackendInfo, Completion, Generate, OptionLogprobs, OptionScores, chat_messages
from .base import Backend, Settings, option
from .http_client import CONTEXT, HTTPError, ServedClient, ServedOptions, reasoning_of, split_stops

TOP_LOGPROBS = (20, 5)  # asked in this order: OpenAI's legacy completions allow at most 5
PENALTY_PARAMS = ("repeat_penalty", "repetition_penalty", "none")
# what /v1/models' owned_by says about the server's name for the repetition penalty
OWNERS = {"vllm": "repetition_penalty", "sglang": "repetition_penalty", "llamacpp": "repeat_penalty",
          "me": "repeat_penalty"}  # "me": llama-cpp-python's server
# OpenAI's reasoning models, by name: o1, o3-mini, o4-mini, gpt-5, gpt-5.1-mini, ... (a dated version too)
REASONING_NAMES = re.compile(r"^(?:o\d+(?:-|$)|gpt-5(?:[.\-]|$))")
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
CONTRACT_CODES = ("unsupported_parameter", "unsupported_value")
CONTRACT_PARAMS = ("max_tokens", "temperature", "logprobs", "top_logprobs", "stop")
UNCAPPED_TOKENS = 4096  # a reasoning model's text answer with no cap of its own gets this many beside the reasoning


@dataclass(frozen=True)
class OpenAIOptions(ServedOptions):
    repeat_penalty_param: str | None = option(None, "the server's name for the repetition penalty: "
                                                    + ", ".join(PENALTY_PARAMS) + " (default: from /v1/models owned_by)")
    reasoning_effort: str | None = option(None, "a reasoning model's reasoning_effort, sent with every request: "
                                                + ", ".join(EFFORTS))

    def check(self, where: str) -> None:
        super().check(where)
        if self.repeat_penalty_param is not None and self.repeat_penalty_param not in PENALTY_PARAMS:
            raise UsageError(f"{where}: repeat_penalty_param must be one of {', '.join(PENALTY_PARAMS)}")
        if self.reasoning_effort is not None and self.reasoning_effort not in EFFORTS:
            raise UsageError(f"{where}: reasoning_effort must be one of {', '.join(EFFORTS)}, not {self.reasoning_effort!r}")


@registry.backend("openai")
class OpenAIHTTPBackend(Backend[OpenAIOptions]):
    prefix = "openai"
    implied_by = ("base_url",)
    Options = OpenAIOptions
    description = "a model behind an OpenAI-compatible HTTP API"

    @classmethod
    def from_prefix(cls, name: str) -> dict:
        return {"api_model": name, **({"api_key_env": "OPENAI_API_KEY"} if os.environ.get("OPENAI_API_KEY") else {})}

    @classmethod
    def describe_spec(cls, spec) -> str:
        return f"API {spec.options.get('base_url')} model {spec.options.get('api_model')}  ({cls.kind}; chat {spec.chat})"

    @classmethod
    def validate(cls, spec, options: OpenAIOptions, settings: Settings) -> None:
        options.check_key(spec.name)
        if options.reasoning == "off" and REASONING_NAMES.match(options.api_model or ""):
            raise UsageError(f"model '{spec.name}' ({options.api_model}) is one of OpenAI's reasoning models, which always "
                             "reason: --reasoning off cannot switch it off",
                             hint="for the least reasoning: -M reasoning_effort=minimal (GPT-5) or low (o-series)")

    @classmethod
    def check(cls, spec, options, settings) -> str:
        backend = cls(spec, options, settings)
        try:
            info = backend.info()
            served = info.model.get("served")
            return (f"{spec.name}: {info.model['base_url']} serves '{options.api_model}'"
                    + (f" ({', '.join(f'{k} {v}' for k, v in served.items() if k != 'id')})" if served else
                       " (the server lists no models: not verified beyond reachability)")
                    + "".join(f"; {line}" for line in backend.check_notes()))
        finally:
            backend.close()

    def __init__(self, spec, options: OpenAIOptions | None = None, settings: Settings | None = None,
                 warn: Callable[[str], None] | None = None):
        super().__init__(spec, options, settings)
        options, settings = self.options, self.settings
        self.seed = settings.seed
        self.by_name = bool(REASONING_NAMES.match(options.api_model or ""))  # served on chat completions only
        self.use_chat = spec.chat == "on" or (spec.chat == "auto" and self.by_name)
        self.client = ServedClient(options, self._headers(options.key()), self._as_completion, warn)
        self.client.n.update(client_side_stops=0, text_only_answers=0, oversized_answers=0, reasoning_retries=0)
        self.top_logprobs = 0 if self.by_name else TOP_LOGPROBS[0]
        # reasoning: whether the model reasons (known from the start, or seen in an answer), and the
        # fields of OpenAI's reasoning contract in force (the run keeps what a refusal taught it)
        self.thinks = self.starts_thinking = options.reasoning == "on" or self.by_name
        self.detected = ("--reasoning on" if options.reasoning == "on" else
                         "by name: one of OpenAI's reasoning models" if self.by_name else "")
        self.token_param = "max_completion_tokens" if self.by_name else "max_tokens"
        self.dropped: set[str] = {"temperature"} if self.by_name else set()
        self.contract: set[str] = {"by name: max_completion_tokens, no temperature, no log-probabilities"} if self.by_name else set()
        self.state_lock = threading.Lock()
        self.served = self.client.check_server()
        param = getattr(options, "repeat_penalty_param", None)
        owner = (self.served or {}).get("owned_by")
        self.penalty_param = param or OWNERS.get(str(owner).lower(), "none")

    def check_notes(self) -> list[str]:
        return [f"repetition penalty sent as {self.penalty_param}"]

    def _headers(self, key: str) -> dict:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _fixed(self) -> dict:
        """Fields every request carries: the model, greedy decoding and the seed, the reasoning switch."""
        out: dict = {"model": self.options.api_model, **({} if "temperature" in self.dropped else {"temperature": 0}),
                     "seed": self.seed}
        if self.options.reasoning_effort:
            out["reasoning_effort"] = self.options.reasoning_effort
        if self.use_chat and not self.by_name and self.options.reasoning in ("on", "off"):
            on = self.options.reasoning == "on"
            out["chat_template_kwargs"] = {"enable_thinking": on, "thinking": on}
        return out

    def _limit(self, answer_tokens: int | None) -> dict:
        """The token limit of a request: the answer's budget, and the reasoning budget on top while the model reasons."""
        if not answer_tokens:
            return {}
        return {self.token_param: answer_tokens + (self.options.reasoning_budget if self.thinks else 0)}

    def _post(self, build: Callable[[], tuple[str, dict]]):
        """Send build()'s request; a field the server refuses under OpenAI's reasoning contract is left
        out (and stays out for the run) and the request built again."""
        while True:
            path, body = build()
            try:
                return self.client.post(path, body)
            except HTTPError as exc:
                if not self._adapt(exc, body):
                    raise

    def _adapt(self, exc: HTTPError, body: dict) -> bool:
        param, code = exc.error.get("param"), exc.error.get("code")
        if exc.code != 400 or code not in CONTRACT_CODES or param not in CONTRACT_PARAMS or param not in body:
            return False
        with self.state_lock:
            if param == "max_tokens":
                self.token_param = "max_completion_tokens"
                if not self.thinks:  # the contract of a reasoning model
                    self.thinks, self.detected = True, "the server refused max_tokens (OpenAI's reasoning-model contract)"
            elif param in ("logprobs", "top_logprobs"):
                self.top_logprobs = 0
            else:
                self.dropped.add(param)
            self.contract.add(f"the server refused {param} ({code}): "
                              + {"max_tokens": "max_completion_tokens sent", "temperature": "no temperature sent (the server's default)",
                                 "stop": "stop strings applied client-side"}.get(param, "options answered in text"))
        return True

    def _observed(self) -> None:
        """An answer showed reasoning in `auto`: the model reasons, from now on with the budget."""
        with self.state_lock:
            if not self.thinks:
                self.thinks, self.detected = True, "seen in an answer (a reasoning field, inline reasoning or a count)"
        self.client.count("reasoning_retries")

    @staticmethod
    def _as_completion(doc) -> dict | None:
        """A 200 answer as a completion ({"choices": [...], "usage": ...}), or None if it is not one
        (then it is retried like a fault): every field econeval reads must have its type."""
        def opt(v, t):
            return v is None or (isinstance(v, t) and not isinstance(v, bool))

        if not (isinstance(doc, dict) and isinstance(doc.get("choices"), list) and doc["choices"]
                and isinstance(doc["choices"][0], dict)):
            return None
        c = doc["choices"][0]
        usage, message, lp = doc.get("usage"), c.get("message"), c.get("logprobs")
        if not (opt(usage, dict) and opt(c.get("text"), str) and opt(c.get("finish_reason"), str) and opt(message, dict)
                and opt(lp, dict)):
            return None
        if message is not None and not opt(message.get("content"), str):
            return None
        if usage is not None and not all(opt(usage.get(k), int) for k in ("prompt_tokens", "completion_tokens")):
            return None
        top, content = (lp or {}).get("top_logprobs"), (lp or {}).get("content")
        if not (opt(top, list) and opt(content, list)):
            return None
        if top and not all(isinstance(x, dict) and all(isinstance(k, str) for k in x) for x in top):
            return None
        for x in content or []:
            if not (isinstance(x, dict) and opt(x.get("top_logprobs"), list)):
                return None
            if not all(isinstance(t, dict) and isinstance(t.get("token"), str) and "logprob" in t for t in x.get("top_logprobs") or []):
                return None
        return doc

    def _body(self, r: Generate | OptionLogprobs, **kw) -> tuple[str, dict]:
        if self.use_chat:
            if "logprobs" in kw:
                kw["logprobs"], kw["top_logprobs"] = True, kw["logprobs"]
            return "/v1/chat/completions", {"messages": chat_messages(r.prompt, r.turns), **kw}
        return "/v1/completions", {"prompt": r.prompt, **kw}

    def _penalty(self, value: float) -> dict:
        if self.penalty_param == "repeat_penalty":
            return {"repeat_penalty": value}  # always: llama-cpp-python's server defaults to 1.1
        if value == 1.0:
            return {}
        if self.penalty_param == "repetition_penalty":
            return {"repetition_penalty": value}
        raise ModelError(f"a task asks for repetition penalty {value:g}, and econeval does not know how "
                         f"{self.client.base} names it", hint="set options.repeat_penalty_param = \"repeat_penalty\" (llama.cpp) or "
                         "\"repetition_penalty\" (vLLM) in the model's models.toml entry")

    # ---- requests -------------------------------------------------------------------------
    def _generate(self, r: Generate) -> Completion:
        while True:
            sent: dict = {}

            def build() -> tuple[str, dict]:
                thinks = self.thinks
                # while the model reasons the server is sent no stop strings: they would cut the reasoning
                stops = [] if thinks or "stop" in self.dropped else split_stops(r)
                kw = {**self._limit(r.max_tokens), **self._penalty(r.repeat_penalty)}
                if stops:
                    kw["stop"] = stops
                sent.update(thinks=thinks, stops=stops)
                path, body = self._body(r, **kw)
                return path, {**self._fixed(), **body}

            comp = self.client.completion(self._post(build), r, sent["stops"])
            if comp.reasoning is not None and not sent["thinks"]:
                self._observed()  # asked again with the reasoning budget and without server stops
                continue
            return comp

    def _option_text(self, r: OptionLogprobs) -> OptionScores:
        """A reasoning model's option answer: in text after its reasoning (the first token's
        log-probabilities would be the reasoning's), read by the task's text reader."""
        def build() -> tuple[str, dict]:
            path, body = self._body(r, **self._limit(r.text_tokens or UNCAPPED_TOKENS), **self._penalty(1.0))
            return path, {**self._fixed(), **body}

        resp = self._post(build)
        if resp is CONTEXT:
            return OptionScores(fits=False)
        self.client.count("text_only_answers")
        with self.client.lock:
            self.client.fallbacks.add("a reasoning model: options read from the text answer after its reasoning")
        usage = resp.get("usage") if isinstance(resp.get("usage"), dict) else {}
        thought = reasoning_of(resp["choices"][0], usage)
        if thought.reasoning is None:
            return OptionScores(text=thought.answer)
        return OptionScores(text=thought.answer, reasoning=thought.reasoning, n_reasoning_tokens=thought.tokens,
                            reasoning_ended=thought.ended)

    def _option_scores(self, r: OptionLogprobs) -> OptionScores:
        while True:
            if self.thinks:
                return self._option_text(r)
            k = self.top_logprobs
            # without log-probabilities the letter is read from the text: room for "(B)" or "B."

            def build() -> tuple[str, dict]:
                cap = self._limit(1) if k else self._limit(r.text_tokens)
                path, body = self._body(r, **cap, **({"logprobs": k} if k else {}), **self._penalty(1.0))
                return path, {**self._fixed(), **body}

            try:
                resp = self._post(build)
            except HTTPError as exc:  # a server that refuses this many log-probabilities: ask for fewer
                if exc.code != 400 or not k:
                    raise
                with self.client.lock:
                    if self.top_logprobs == k:
                        smaller = [n for n in TOP_LOGPROBS if n < k]
                        self.top_logprobs = smaller[0] if smaller else 0
                        self.client.fallbacks.add(f"the server refused {k} log-probabilities: asked for "
                                           f"{self.top_logprobs or 'none (text answers)'}")
                continue
            if resp is CONTEXT:
                return OptionScores(fits=False)
            choice = resp["choices"][0]
            usage = resp.get("usage") if isinstance(resp.get("usage"), dict) else {}
            thought = reasoning_of(choice, usage)
            if thought.reasoning is not None:  # the reply began a reasoning: the model reasons
                self._observed()
                continue
            top = _top_logprobs(choice)
            if not top and k:  # a server that ignores the request for log-probabilities: answers in text from now on
                with self.client.lock:
                    self.top_logprobs = 0
                continue
            if not top:  # no log-probabilities: hand back the text instead
                self.client.count("text_only_answers")
                with self.client.lock:
                    self.client.fallbacks.add("no log-probabilities from the server: options read from the generated text")
                return OptionScores(text=thought.answer)
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in top.values()):
                return OptionScores(error=f"the server returned non-finite log-probabilities ({self.client.base})")
            scores: dict = {}
            for token, lp in top.items():
                key = "".join(ch for ch in token if ch.isalnum())
                for opt in r.options:
                    if key and key == "".join(ch for ch in opt if ch.isalnum()):
                        scores[opt] = max(scores.get(opt, float("-inf")), lp)
            return OptionScores(scores=scores, top=max(top.values()))

    def _one(self, r):
        return self._option_scores(r) if isinstance(r, OptionLogprobs) else self._generate(r)

    def evaluate(self, requests: Sequence[Generate | OptionLogprobs], on_done=None) -> list:
        """All requests, `concurrency` in flight at a time; results in request order."""
        return self.client.map(self._one, requests, on_done)

    def reasoning_tokens_for(self, request) -> int:
        return self.options.reasoning_budget if self.thinks else 0

    def reasoning_record(self) -> dict:
        o = self.options
        switch = ("chat_template_kwargs enable_thinking/thinking " + ("true" if o.reasoning == "on" else "false")
                  + " on every chat request" if self.use_chat and not self.by_name and o.reasoning in ("on", "off") else
                  "none: raw prompts on /v1/completions have no chat template to switch" if o.reasoning in ("on", "off")
                  and not self.use_chat else "none: the model as it is served")
        with self.state_lock:
            return o.reasoning_record(self.thinks, self.detected or "no answer showed reasoning", switch,
                                      effort=o.reasoning_effort, contract=sorted(self.contract) or None,
                                      hidden=True if self.by_name else None)

    def info(self) -> BackendInfo:
        return self.client.info(self.kind, self.spec, self.served, self.use_chat, {
            "reasoning": self.reasoning_record(),
            "backend": "OpenAI-compatible HTTP API",
            "endpoint": "/v1/chat/completions" if self.use_chat else "/v1/completions",
            "decoding": f"temperature 0 and seed on the server; option scores from the top-{TOP_LOGPROBS[0]} "
                        "log-probabilities of one token",
            "repeat_penalty_param": self.penalty_param, "fallbacks": sorted(self.client.fallbacks)},
            settings=self.options.reasoning_identity(effort=self.options.reasoning_effort))

    def counters(self) -> dict[str, int]:
        with self.client.lock:
            return dict(self.client.n)

    def close(self) -> None:
        self.client.close()


def _top_logprobs(choice: dict) -> dict[str, float]:
    lp = choice.get("logprobs") or {}
    if lp.get("top_logprobs"):  # completions API: [{token: logprob, ...}]
        first = lp["top_logprobs"][0]
        return dict(first) if isinstance(first, dict) else {}
    content = lp.get("content") or []  # chat API: [{"top_logprobs": [{"token", "logprob"}]}]
    return {t["token"]: t["logprob"] for t in content[0].get("top_logprobs") or []} if content else {}
