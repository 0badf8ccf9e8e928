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

Reasoning models (econeval/reasoning.py, docs/reasoning.md): before the first scored request the
model's reasoning is detected: the chat template where the server renders it (llama.cpp's
/apply-template, vLLM's /tokenize), one probe request with room to reason, and the model's name.
A model that reasons gets the reasoning budget on top of each answer budget (and on vLLM and
llama.cpp's server their own budget, `thinking_token_budget` / `thinking_budget_tokens`, so an
overrun is closed by the server and answered), no stop strings on the server (they would cut the
reasoning: they apply to the answer here), and its option questions answered in text. The answer
is read after the reasoning: a `reasoning` / `reasoning_content` field beside the content, inline
markers of every known family or the user's (`-M think_end=…`), harmony as it arrives with its
special tokens dropped, a count in usage. Any reply that shows reasoning when none was expected is
asked again as to a reasoning model; an option's log-probabilities are never read at a reasoning
marker; a reply whose reasoning never closed is unanswered. `--reasoning on|off` goes to the
server as `chat_template_kwargs` (`enable_thinking`, `thinking`, `thinking_budget`), as
`reasoning_effort: none` on llama.cpp's server, Ollama (its only switch) and OpenAI's GPT-5.1 and
later; an `off` the model does not honour is refused (the probe reasoned) or said and recorded (a
later reply did). The probe asks vLLM to keep special tokens (`skip_special_tokens: false`), so
that markers such as Magistral's `[THINK]` show; a model whose special-token markers the server
drops and will not keep is refused, never read.

OpenAI's contract: o-series and GPT-5 models (by name) are sent `max_completion_tokens`, no
temperature and no log-probabilities, on chat completions; the -pro models on the Responses API.
A server that refuses a field (`400` naming it) is asked again without it, after a backoff, and
the run keeps that (run.json's `backend.reasoning.contract`); a request is never sent again
unchanged after a refusal, and a refusal that teaches nothing stops the run.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .. import reasoning as rz
from .. import registry
from ..errors import ModelError, UsageError
from ..types import BackendInfo, Completion, Generate, OptionLogprobs, OptionScores, chat_messages
from .base import Backend, Overlap, Settings, option
from .http_client import CONTEXT, Detection, HTTPError, Reading, ServedClient, ServedOptions, choice_text, reasoning_of, split_stops, token_count

TOP_LOGPROBS = (20, 5)  # asked in this order: OpenAI's legacy completions allow at most 5
PENALTY_PARAMS = ("repeat_penalty", "repetition_penalty", "none")
# what /v1/models' owned_by says about the server's name for the repetition penalty
OWNERS = {"vllm": "repetition_penalty", "sglang": "repetition_penalty", "llamacpp": "repeat_penalty",
          "me": "repeat_penalty"}  # "me": llama-cpp-python's server
# OpenAI's reasoning models, by name: o1, o3-mini, o4-mini, gpt-5, gpt-5.1-mini, ... (a dated version too)
REASONING_NAMES = re.compile(r"^(?:o\d+(?:-|$)|gpt-5(?:[.\-]|$))")
NONE_NAMES = re.compile(r"^gpt-(?:5\.[1-9]|[6-9])")  # GPT-5.1 and later: effort "none", their default, is accepted
RESPONSES_NAMES = re.compile(r"^(?:o\d+|gpt-5(?:\.\d+)?)-pro(?:-|$)")  # served on the Responses API only
RESPONSES_MIN_OUTPUT = 16  # the Responses API's least max_output_tokens
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
UNCAPPED_TOKENS = 4096  # a reasoning model's text answer with no cap of its own gets this many beside the reasoning
PROBE = "Question: Is water wet? Answer Yes or No.\nAnswer:"
PROBE_TOKENS, PROBE_RAW_REASONING = 16, 512  # the probe's answer room; its reasoning room on raw prompts (the chat: the budget)
MAX_LEARN = 12  # refusals one request may learn from before the run stops
# fields a server may refuse that econeval can do without (the run remembers the refusal)
OPTIONAL = {"temperature": "no temperature sent (the server's default)", "stop": "stop strings applied client-side",
            "seed": "no seed sent", "thinking_token_budget": "no server-side reasoning budget",
            "thinking_budget_tokens": "no server-side reasoning budget", "skip_special_tokens": "special tokens as the server sends them",
            "chat_template_kwargs": "no template switch sent"}


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
        if self.reasoning_effort == "none" and self.reasoning == "on":
            raise UsageError(f"{where}: reasoning_effort none with --reasoning on: none switches reasoning off")


@registry.backend("openai")
class OpenAIHTTPBackend(Backend[OpenAIOptions]):
    prefix = "openai"
    runs_elsewhere = True
    implied_by = ("base_url",)
    overlaps = True  # the server batches requests from two chunks in flight (ServedClient.map)
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
        name = options.api_model or ""
        if options.reasoning == "off" and REASONING_NAMES.match(name) and not NONE_NAMES.match(name):
            raise UsageError(f"model '{spec.name}' ({name}) is one of OpenAI's reasoning models, which always reason: "
                             "--reasoning off cannot switch it off",
                             hint="for the least reasoning: -M reasoning_effort=minimal (GPT-5) or low (o-series); "
                                  "GPT-5.1 and later take --reasoning off (effort none)")

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
        name = options.api_model or ""
        self.by_name = bool(REASONING_NAMES.match(name))  # OpenAI's contract, served on chat completions only
        self.api = "responses" if RESPONSES_NAMES.match(name) else \
            "chat" if spec.chat == "on" or (spec.chat == "auto" and self.by_name) else "completions"
        self.client = ServedClient(options, self._headers(options.key()), self._as_completion, warn)
        self.client.n.update(client_side_stops=0, text_only_answers=0, oversized_answers=0, reasoning_retries=0,
                             reasoning_probes=0, contract_retries=0)
        self.top_logprobs = 0 if self.by_name else TOP_LOGPROBS[0]
        # reasoning: whether the model reasons (known from the start, detected before the first scored
        # request, or seen in an answer), how its replies are read, and the contract in force
        self.default_off = bool(NONE_NAMES.match(name))  # GPT-5.1+: no reasoning unless asked
        self.thinks = options.reasoning == "on" or (self.by_name and not self.default_off)
        self.hidden = self.by_name
        self.detected = ("--reasoning on" if options.reasoning == "on" else
                         "by name: one of OpenAI's reasoning models" if self.thinks else "")
        self.opened: rz.Markers | None = None  # the template opens the reasoning: a reply without the end marker never closed it
        self.extra = options.markers
        known = rz.by_name(name)
        self.name_family: rz.Markers | None = known[0] if known else None
        self.name_opens = bool(known and known[1])
        self.token_param = "max_completion_tokens" if self.by_name else "max_tokens"
        self.dropped: set[str] = {"temperature"} if self.by_name else set()
        if self.api == "responses":
            self.dropped |= {"seed", "temperature"}
        self.contract: set[str] = {"by name: max_completion_tokens, no temperature, no log-probabilities"} if self.by_name else set()
        if self.api == "responses":
            self.contract.add("by name: the Responses API (/v1/responses)")
        self.off_note: str | None = None  # --reasoning off not honoured: what was seen
        self.probe_note = ""
        self.state_lock = threading.Lock()
        self.detection = Detection()  # the probe before the first scored request, once
        self.served = self.client.check_server()
        param = getattr(options, "repeat_penalty_param", None)
        owner = str((self.served or {}).get("owned_by") or "").lower()
        self.server = owner if owner in ("vllm", "llamacpp", "sglang") else "ollama" if owner == "library" else \
            "openai" if owner in ("openai", "system", "openai-internal") else ""
        self.penalty_param = param or OWNERS.get(owner, "none")
        # the family whose markers are special tokens: they arrive only when the server keeps them (vLLM:
        # skip_special_tokens false); known by name, or from the probe
        self.specials: rz.Markers | None = self.name_family if self.name_family and self.name_family.special else None

    @property
    def use_chat(self) -> bool:
        return self.api != "completions"

    def check_notes(self) -> list[str]:
        return [f"repetition penalty sent as {self.penalty_param}"]

    def _headers(self, key: str) -> dict:
        return {"Authorization": f"Bearer {key}"} if key else {}

    # ---- what a request carries --------------------------------------------------------------
    def _switch(self) -> dict:
        """The fields that put --reasoning on|off and -M reasoning_effort into effect."""
        o = self.options
        out: dict[str, Any] = {}
        effort = o.reasoning_effort
        if self.by_name or self.server == "openai":
            if o.reasoning == "off" and self.default_off:
                effort = "none"
            elif o.reasoning == "on" and self.default_off and not effort:
                effort = "medium"  # GPT-5.1+ do not reason unless asked; medium is the earlier models' default
        elif self.use_chat and o.reasoning in ("on", "off"):
            on = o.reasoning == "on"
            if self.server != "ollama":  # Ollama's OpenAI-compatible chat ignores chat_template_kwargs
                out["chat_template_kwargs"] = {"enable_thinking": on, "thinking": on, **({} if on else {"thinking_budget": 0})}
            if not on and self.server in ("llamacpp", "ollama") and not effort:
                # llama.cpp's server: reasoning_effort none disables reasoning; Ollama's chat: its only switch (none: off)
                effort = "none"
        if effort:
            if self.api == "responses":
                out["reasoning"] = {"effort": effort}
            else:
                out["reasoning_effort"] = effort
        return out

    def _build(self, r, kind: str, sent: dict) -> tuple[str, dict]:
        """The request for `r` as the run's state now stands. kind: generate | lp (an option's
        log-probabilities) | text (an option answered in text) | probe. `sent` records what
        the reply must be read against."""
        with self.state_lock:
            thinks = self.thinks or kind == "probe"
            k = self.top_logprobs if kind == "lp" else 0
            kw: dict = {"model": self.options.api_model}
            if "temperature" not in self.dropped:
                kw["temperature"] = 0
            if "seed" not in self.dropped:
                kw["seed"] = self.seed
            kw.update(self._switch())
            answer: int | None
            if kind == "probe":
                answer = PROBE_TOKENS
                budget = self.options.reasoning_budget if self.use_chat else min(PROBE_RAW_REASONING, self.options.reasoning_budget)
            else:
                answer = r.max_tokens if kind == "generate" else \
                    (1 if k else r.text_tokens or (UNCAPPED_TOKENS if thinks else None))
                budget = self.options.budget_for(r)
            if answer and self.api == "responses":  # the API refuses a max_output_tokens under its least
                kw["max_output_tokens"] = max(RESPONSES_MIN_OUTPUT, answer + (budget if thinks else 0))
            elif answer:
                kw[self.token_param] = answer + (budget if thinks else 0)
            stops = split_stops(r) if kind == "generate" and not thinks and "stop" not in self.dropped else []
            if stops:
                kw["stop"] = stops
            if thinks and not self.hidden:
                field = {"vllm": "thinking_token_budget", "llamacpp": "thinking_budget_tokens" if self.use_chat else None}.get(self.server)
                if field and field not in self.dropped:
                    kw[field] = budget
            if (self.specials or kind == "probe") and self._keeps_specials():
                kw["skip_special_tokens"] = False  # the probe too: a model that reasons between special tokens shows them
            kw.update(self._penalty(r.repeat_penalty if kind == "generate" else 1.0))
            for f in self.dropped:
                kw.pop(f, None)
            sent.update(thinks=thinks, stops=stops, k=k)
        if self.api == "responses":
            return "/v1/responses", {**kw, "input": chat_messages(r.prompt, r.turns)}
        if self.api == "chat":
            if k:
                kw["logprobs"], kw["top_logprobs"] = True, k
            return "/v1/chat/completions", {**kw, "messages": chat_messages(r.prompt, r.turns)}
        if k:
            kw["logprobs"] = k
        return "/v1/completions", {**kw, "prompt": r.prompt}

    def _reading(self, sent: dict) -> Reading:
        return Reading(self.opened, self.extra, bool(sent.get("thinks")))

    def _post(self, r, kind: str, sent: dict):
        """Send r's request; a refusal that names what to change (a field the server does not take,
        another endpoint) is learnt, for the run, and the request built again and sent after a
        backoff. A request is never sent again unchanged: a refusal that teaches nothing, or more
        than MAX_LEARN of them, stops the run with the server's message."""
        refused: list[tuple[dict, HTTPError]] = []
        for attempt in range(MAX_LEARN + 1):
            path, body = self._build(r, kind, sent)
            again = next((exc for sent_before, exc in refused if sent_before == body), None)
            if again is not None:
                raise again  # what was refused is never sent again unchanged
            try:
                return self.client.post(path, body)
            except HTTPError as exc:
                if attempt == MAX_LEARN or not self._learn(exc, body, kind):
                    raise
                refused.append((body, exc))
                self.client.count("contract_retries")
                self.client.backoff(attempt, f"HTTP {exc.code}, {self._lesson(exc)}")
        raise AssertionError("unreachable")

    @staticmethod
    def _lesson(exc: HTTPError) -> str:
        return str(exc.error.get("param") or exc.error.get("message") or "")[:80]

    def _learn(self, exc: HTTPError, body: dict, kind: str) -> bool:
        """What a refusal teaches the run; True: the state changed (the request is built anew)."""
        err = exc.error
        param, message = err.get("param"), str(err.get("message") or "")
        low = message.lower()
        with self.state_lock:
            if exc.code in (400, 404) and "v1/responses" in low and self.api != "responses":
                self.api = "responses"
                self.dropped |= {"seed", "temperature"}
                self.contract.add("the server refused chat completions for this model: the Responses API (/v1/responses)")
                return True
            if exc.code == 404 and "chat model" in low and self.api == "completions":
                self.api = "chat"
                self.contract.add("the server serves this model on chat completions only (/v1/completions refused)")
                return True
            if exc.code != 400:
                return False
            if param is None:  # a server that names no param: a field named in its message, quoted
                param = next((f for f in (*OPTIONAL, "max_tokens", "logprobs", "top_logprobs", "reasoning_effort")
                              if f in body and (f"'{f}'" in message or f'"{f}"' in message or f"`{f}`" in message)), None)
            if param in ("reasoning_effort", "reasoning.effort", "reasoning"):
                effort = (body.get("reasoning") or {}).get("effort") if "reasoning" in body else body.get("reasoning_effort")
                if self.options.reasoning == "off" and effort == "none" and not self.options.reasoning_effort:
                    raise UsageError(f"model '{self.spec.name}' refuses reasoning effort none ({self._lesson(exc)}): "
                                     "--reasoning off cannot switch it off",
                                     hint="run it with --reasoning auto, or -M reasoning_effort=minimal / low for the least")
                refusal = ModelError(f"{self.client.base} refuses reasoning_effort {effort!r} for '{self.options.api_model}': "
                                     f"{message[:200]}", hint="-M reasoning_effort= one the model takes, or none given")
                refusal.definitive = True  # type: ignore[attr-defined]
                raise refusal
            if param not in body or param in self.dropped:
                return False
            if param == "max_tokens":
                self.token_param = "max_completion_tokens"
                if not self.thinks:  # the contract of a reasoning model
                    self.thinks, self.detected = True, "the server refused max_tokens (OpenAI's reasoning-model contract)"
                self.contract.add("the server refused max_tokens: max_completion_tokens sent")
            elif param in ("logprobs", "top_logprobs"):
                self.top_logprobs = 0
                self.contract.add(f"the server refused {param}: options answered in text")
            elif param == "skip_special_tokens" and rz.vanishes(self.specials):
                raise self._unreadable(self.specials)  # type: ignore[arg-type]
            elif param in OPTIONAL:
                self.dropped.add(param)
                self.contract.add(f"the server refused {param}: {OPTIONAL[param]}")
            else:
                return False
        return True

    # ---- detection -------------------------------------------------------------------------
    def _ensure_detected(self) -> None:
        """Before the first scored request: read the chat template where the server renders it, and
        send one probe with room to reason (the mode's switch on it); then the run knows whether the
        model reasons, how its replies are read, and whether --reasoning off holds."""
        self.detection.run(self._detect)

    def _template_tail(self) -> str | None:
        """The generation prompt's end as the server's chat template renders it, or None."""
        msgs = [{"role": "user", "content": "?"}]
        kwargs = self._switch().get("chat_template_kwargs")
        extra = {"chat_template_kwargs": kwargs} if kwargs else {}
        if self.server in ("llamacpp", ""):
            doc = self.client.get_json("/apply-template", {"messages": msgs, **extra})
            if isinstance(doc, dict) and isinstance(doc.get("prompt"), str):
                return doc["prompt"]
        if self.server in ("vllm", "sglang", ""):
            doc = self.client.get_json("/tokenize", {"model": self.options.api_model, "messages": msgs, "add_generation_prompt": True,
                                                     "return_token_strs": True, **extra})
            strs = doc.get("token_strs") if isinstance(doc, dict) else None
            if isinstance(strs, list) and all(isinstance(t, str) for t in strs):
                return "".join(strs).replace("Ċ", "\n").replace("Ġ", " ")
        return None

    def _detect(self) -> None:
        o = self.options
        template = None
        if self.use_chat and self.api == "chat" and not self.by_name and self.server != "openai":
            tail = self._template_tail()
            for m in rz.families(self.extra) if tail is not None else ():
                if not m.open.strip() or m.anchored:
                    continue
                state = rz.prompt_state(tail, m)  # type: ignore[arg-type]
                if state != "none":
                    template = (m, state)
                    break
        if template and template[1] == "open":
            self.opened = template[0]
        sent: dict = {}
        probe = Generate(prompt=PROBE, max_tokens=PROBE_TOKENS)
        self.client.count("reasoning_probes")
        resp = self._post(probe, "probe", sent)
        thought = None
        if resp is not CONTEXT:
            choice = resp["choices"][0]
            usage = resp.get("usage") if isinstance(resp.get("usage"), dict) else {}
            thought = reasoning_of(choice, usage, Reading(self.opened, self.extra, False))
            shown = next((m for m in rz.families() if m.family == thought.family and m.special), None)
            if shown is not None and self._keeps_specials():
                self.specials = shown  # the probe showed special-token markers: every request keeps them
        reasons = thought is not None and thought.reasoning is not None
        how = ""
        if template and template[1] == "open":
            reasons, how = True, f"the chat template opens the reasoning ({template[0].family} markers)"
        elif reasons and thought is not None:
            how = "the probe reasoned (" + _shown(thought) + ")"
            if thought.opened and self.opened is None:
                self.opened = next((m for m in rz.families(self.extra) if m.family == thought.family), None)
        elif thought is not None and self.name_family and resp is not CONTEXT \
                and resp["choices"][0].get("finish_reason") == "length":
            # the probe ran out of room showing no marker: the name says how the model reasons
            reasons, how = True, f"by name ({self.name_family.family} markers); the probe's reply did not end within its budget"
            if self.name_opens:
                self.opened = self.name_family
        self.probe_note = how or ("the probe did not reason" if thought is not None else "the probe did not fit the context")
        if not reasons and rz.vanishes(self.name_family) and not self._keeps_specials():
            raise self._unreadable(self.name_family)  # type: ignore[arg-type]
        if o.reasoning == "off" and reasons:
            raise UsageError(f"model '{self.spec.name}' reasons with --reasoning off: {self._switch_words()} did not stop it "
                             f"({how})", hint="run it with --reasoning auto (its reasoning is read apart from its answer)")
        with self.state_lock:
            if reasons and not self.thinks:
                self.thinks, self.detected = True, f"before the first request: {how}"
            if thought is not None and thought.reasoning == "" and reasons:
                self.hidden = True

    def _keeps_specials(self) -> bool:
        """Whether the server keeps special tokens in the text when asked (vLLM, until it refuses)."""
        return self.server == "vllm" and "skip_special_tokens" not in self.dropped

    def _unreadable(self, m: rz.Markers) -> UsageError:
        """A model that reasons between special tokens the server drops: no text of it can be scored."""
        return UsageError(f"model '{self.spec.name}' reasons between special tokens ({m.open} … {m.close}), which "
                          f"{self.client.base} drops from its text and cannot be asked to keep: its answers cannot be "
                          "told from its reasoning",
                          hint="serve it with a reasoning parser (vLLM --reasoning-parser mistral, llama.cpp "
                               "--reasoning-format), or on vLLM, which keeps them when asked (skip_special_tokens false)")

    def _switch_words(self) -> str:
        sw = self._switch()
        if not sw:
            return "nothing econeval can send (raw prompts on /v1/completions have no chat template to switch)"
        return "; ".join(f"{k} {json.dumps(v)}" for k, v in sw.items())

    def _observed(self, what: str) -> None:
        """A reply showed reasoning when none was expected: from now on the model reasons (asked
        with the budget). With --reasoning off, the switch did not hold: said once, recorded."""
        say = None
        with self.state_lock:
            if not self.thinks:
                self.thinks, self.detected = True, f"seen in an answer ({what})"
            if self.options.reasoning == "off" and self.off_note is None:
                self.off_note = say = f"a reply reasoned ({what}) although {self._switch_words()} was sent"
        self.client.count("reasoning_retries")
        if say:
            self.client.warn(f"model '{self.spec.name}' reasons with --reasoning off: {say}; its reasoning is read apart "
                             "from its answer, and run.json records the switch as not honoured")

    @staticmethod
    def _as_completion(doc) -> dict | None:
        """A 200 answer as a completion ({"choices": [...], "usage": ...}), or None if it is not one
        (then it is retried like a fault): every field econeval reads must have its type. A
        Responses API answer is made one: its message's output text the content, its reasoning
        items hidden reasoning, its usage's reasoning tokens the count."""
        def opt(v, t):
            return v is None or (isinstance(v, t) and not isinstance(v, bool))

        if isinstance(doc, dict) and doc.get("object") == "response" and isinstance(doc.get("output"), list):
            return _from_responses(doc)
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
        for _ in range(3):
            sent: dict = {}
            comp = self.client.completion(self._post(r, "generate", sent), r, sent["stops"], self._reading(sent))
            if comp.reasoning is not None and not sent["thinks"]:
                self._observed("a reasoning field, inline reasoning or a count")  # asked again with the budget, no server stops
                continue
            return comp
        raise AssertionError("a reply showed reasoning after the model was known to reason")

    def _option_text(self, r: OptionLogprobs) -> OptionScores:
        """A reasoning model's option answer: in text after its reasoning (the first token's
        log-probabilities would be the reasoning's), read by the task's text reader."""
        sent: dict = {}
        resp = self._post(r, "text", sent)
        if resp is CONTEXT:
            return OptionScores(fits=False)
        self.client.count("text_only_answers")
        with self.client.lock:
            self.client.fallbacks.add("a reasoning model: options read from the text answer after its reasoning")
        usage = resp.get("usage") if isinstance(resp.get("usage"), dict) else {}
        n_prompt = token_count(usage, "prompt_tokens")
        thought = reasoning_of(resp["choices"][0], usage, self._reading(sent))
        if thought.reasoning is None:
            return OptionScores(text=thought.answer, n_prompt_tokens=n_prompt)
        return OptionScores(text=thought.answer, reasoning=thought.reasoning, n_reasoning_tokens=thought.tokens,
                            reasoning_ended=thought.ended, n_prompt_tokens=n_prompt)

    def _option_scores(self, r: OptionLogprobs) -> OptionScores:
        for _ in range(len(TOP_LOGPROBS) + 4):  # each turn learns one thing: it reasons, fewer or no log-probabilities
            if self.thinks:
                return self._option_text(r)
            sent: dict = {}
            try:
                resp = self._post(r, "lp", sent)
            except HTTPError as exc:  # a server that refuses this many log-probabilities: ask for fewer
                k = sent.get("k")
                if exc.code != 400 or not k:
                    raise
                with self.client.lock:
                    if self.top_logprobs == k:
                        smaller = [n for n in TOP_LOGPROBS if n < k]
                        self.top_logprobs = smaller[0] if smaller else 0
                        self.client.fallbacks.add(f"the server refused {k} log-probabilities: asked for "
                                                  f"{self.top_logprobs or 'none (text answers)'}")
                self.client.backoff(0, f"HTTP 400 for {k} log-probabilities")
                continue
            if resp is CONTEXT:
                return OptionScores(fits=False)
            choice = resp["choices"][0]
            usage = resp.get("usage") if isinstance(resp.get("usage"), dict) else {}
            n_prompt = token_count(usage, "prompt_tokens")
            thought = reasoning_of(choice, usage, self._reading(sent))
            top = _top_logprobs(choice)
            first = max(top, key=lambda t: top[t]) if top else None
            if thought.reasoning is not None or (first is not None and rz.marker_token(first, self.extra)) \
                    or rz.marker_token(choice_text(choice), self.extra):
                # the reply began a reasoning: its first token's log-probabilities are the reasoning's, never the answer's
                self._observed("an option's first token opened a reasoning" if thought.reasoning is None else
                               "a reasoning field, inline reasoning or a count")
                continue
            if not top and sent["k"]:  # a server that ignores the request for log-probabilities: answers in text from now on
                with self.client.lock:
                    self.top_logprobs = 0
                continue
            if not top:  # no log-probabilities: hand back the text instead
                self.client.count("text_only_answers")
                with self.client.lock:
                    self.client.fallbacks.add("no log-probabilities from the server: options read from the generated text")
                return OptionScores(text=thought.answer, n_prompt_tokens=n_prompt)
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in top.values()):
                return OptionScores(error=f"the server returned non-finite log-probabilities ({self.client.base})")
            scores: dict = {}
            for token, lp in top.items():
                key = "".join(ch for ch in token if ch.isalnum())
                for opt in r.options:
                    if key and key == "".join(ch for ch in opt if ch.isalnum()):
                        scores[opt] = max(scores.get(opt, float("-inf")), lp)
            return OptionScores(scores=scores, top=max(top.values()), n_prompt_tokens=n_prompt)
        raise ModelError(f"{self.client.base}: an option question was refused or answered oddly past every fallback")

    def _one(self, r):
        return self._option_scores(r) if isinstance(r, OptionLogprobs) else self._generate(r)

    def evaluate(self, requests: Sequence[Generate | OptionLogprobs], on_done=None, overlap: Overlap | None = None) -> list:
        """All requests, `concurrency` in flight at a time; results in request order (the model's
        reasoning detected first)."""
        return self.client.map(self._one, requests, on_done, overlap, before=self._ensure_detected if requests else None)

    def reasoning_tokens_for(self, request) -> int:
        return self.options.budget_for(request) if self.thinks else 0

    def reasoning_record(self) -> dict:
        o = self.options
        sw = self._switch()
        switch = ("; ".join(f"{k} {json.dumps(v)}" for k, v in sw.items()) + " on every request" if sw else
                  "none: raw prompts on /v1/completions have no chat template to switch" if o.reasoning in ("on", "off")
                  and not self.use_chat else "none: the model as it is served")
        with self.state_lock:
            budget = [f for f in ("thinking_token_budget", "thinking_budget_tokens") if f not in self.dropped and
                      {"vllm": "thinking_token_budget", "llamacpp": "thinking_budget_tokens"}.get(self.server) == f]
            return o.reasoning_record(
                self.thinks, self.detected or "no answer showed reasoning", switch, effort=o.reasoning_effort,
                contract=sorted(self.contract) or None, hidden=True if self.hidden and self.thinks else None,
                probe=self.probe_note or None, opened=self.opened.family if self.opened else None,
                honoured=(False if self.off_note else True) if o.reasoning == "off" else None, not_honoured=self.off_note,
                server_budget=f"{budget[0]} (the reasoning budget) sent while the model reasons" if budget and self.thinks else None,
                markers=self.extra.close if self.extra else None)

    def info(self) -> BackendInfo:
        self.detection.before_record(self._detect)
        endpoint = {"chat": "/v1/chat/completions", "completions": "/v1/completions", "responses": "/v1/responses"}[self.api]
        return self.client.info(self.kind, self.spec, self.served, self.use_chat, {
            "reasoning": self.reasoning_record(),
            "backend": "OpenAI-compatible HTTP API",
            "endpoint": endpoint,
            "decoding": f"temperature 0 and seed on the server; option scores from the top-{TOP_LOGPROBS[0]} "
                        "log-probabilities of one token",
            "repeat_penalty_param": self.penalty_param, "fallbacks": sorted(self.client.fallbacks)},
            settings=self.options.reasoning_identity(effort=self.options.reasoning_effort))

    def counters(self) -> dict[str, int]:
        with self.client.lock:
            return dict(self.client.n)

    def close(self) -> None:
        self.client.close()


def _shown(thought) -> str:
    """How a reply showed its reasoning, in words."""
    if thought.reasoning == "":
        return "hidden: " + ("its tokens estimated from usage" if thought.estimated else "counted in usage")
    return f"{thought.family} markers" if thought.family else "a reasoning field"


def _from_responses(doc: dict) -> dict | None:
    """A Responses API answer as a chat completion."""
    texts: list[str] = []
    reasoning: list[str] = []
    for item in doc["output"]:
        if not isinstance(item, dict):
            return None
        if item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
        elif item.get("type") == "reasoning":
            reasoning += [p["text"] for p in item.get("summary") or [] if isinstance(p, dict) and isinstance(p.get("text"), str)]
    given = doc.get("usage")
    usage: dict = given if isinstance(given, dict) else {}
    given = usage.get("output_tokens_details")
    details: dict = given if isinstance(given, dict) else {}
    finish = "stop" if doc.get("status") == "completed" else "length"
    message = {"role": "assistant", "content": "".join(texts), **({"reasoning_content": "\n".join(reasoning)} if reasoning else {})}
    return {"model": doc.get("model"), "choices": [{"message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens"),
                      "completion_tokens_details": {"reasoning_tokens": details.get("reasoning_tokens")}}}


def _top_logprobs(choice: dict) -> dict[str, float]:
    """The first token's top log-probabilities, each a float: a value that is no number, or an
    integer past any float (JSON has no limit), is NaN, which makes the item an error."""
    lp = choice.get("logprobs") or {}
    if lp.get("top_logprobs"):  # completions API: [{token: logprob, ...}]
        first = lp["top_logprobs"][0]
        given = dict(first) if isinstance(first, dict) else {}
    else:
        content = lp.get("content") or []  # chat API: [{"top_logprobs": [{"token", "logprob"}]}]
        given = {t["token"]: t["logprob"] for t in content[0].get("top_logprobs") or []} if content else {}
    return {t: _as_float(v) for t, v in given.items()}


def _as_float(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return math.nan
    try:
        return float(v)
    except OverflowError:
        return math.nan
