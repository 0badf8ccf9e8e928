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
template is not known to econeval: "auto" sends the raw prompt as the papers' code did).
"""

from __future__ import annotations

import math
import os
import queue
import random
import re
import sys
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Callable, Sequence

from .. import registry
from ..config import ModelSpec
from ..errors import ModelError, UsageError
from ..types import BackendInfo, Completion, Generate, OptionLogprobs, OptionScores
from .llamacpp_batch import stop_at

TOP_LOGPROBS = (20, 5)  # asked in this order: OpenAI's legacy completions allow at most 5
DEFAULT_CONCURRENCY = 8
DEFAULT_TIMEOUT = 120.0  # seconds per request (a long generation on a loaded server)
DEFAULT_MAX_RETRIES = 5
BACKOFF_BASE, BACKOFF_CAP, RETRY_AFTER_CAP = 0.5, 30.0, 120.0
RETRY_STATUS = (408, 409, 425, 429, 500, 502, 503, 504, 529)  # 529: Anthropic's "overloaded"
TEXT_ANSWER_TOKENS = 8
PENALTY_PARAMS = ("repeat_penalty", "repetition_penalty", "none")
# what /v1/models' owned_by says about the server's name for the repetition penalty
OWNERS = {"vllm": "repetition_penalty", "sglang": "repetition_penalty", "llamacpp": "repeat_penalty",
          "me": "repeat_penalty"}  # "me": llama-cpp-python's server
_CONTEXT = object()  # a request the server refused as longer than its context


def normalise_base_url(url: str) -> str:
    """`http://host:8000`, `http://host:8000/` and `http://host:8000/v1` name the same API."""
    base = url.strip().rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


class Redactor:
    """Removes credentials from anything a server sends back before it is shown or stored."""

    PATTERNS = (re.compile(r"(?i)(bearer\s+)[^\s\"',}]+"), re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"),
                re.compile(r"(?i)((?:api[_-]?key|authorization|token|secret)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"))

    def __init__(self, key: str):
        self.key = key

    def __call__(self, text: str) -> str:
        if self.key:
            text = text.replace(self.key, "[redacted]")
        for p in self.PATTERNS:
            text = p.sub(lambda m: (m.group(1) if m.groups() else "") + "[redacted]", text)
        return text


@registry.backend("openai")
class OpenAIHTTPBackend:
    @staticmethod
    def validate(spec: ModelSpec, load) -> None:
        if not spec.base_url or not spec.api_model:
            raise UsageError(f"model '{spec.name}' (kind {spec.kind}) needs base_url and api_model")
        if not re.match(r"(?i)^https?://[^/\s]+", spec.base_url.strip()):
            raise UsageError(f"model '{spec.name}': base_url must be an http:// or https:// URL, not {spec.base_url!r}")
        if load.n_gpu_layers is not None:
            raise UsageError("--n-gpu-layers applies to local GGUF models only")
        if load.parallel is not None:
            raise UsageError("--parallel applies to local GGUF models; use --concurrency for served models")
        if spec.api_key_env and not os.environ.get(spec.api_key_env):
            raise ModelError(f"model '{spec.name}' needs an API key in the environment variable {spec.api_key_env}")
        param = spec.options.get("repeat_penalty_param")
        if param is not None and param not in PENALTY_PARAMS:
            raise UsageError(f"model '{spec.name}': options.repeat_penalty_param must be one of {', '.join(PENALTY_PARAMS)}")

    def __init__(self, spec: ModelSpec, load=None, warn: Callable[[str], None] | None = None):
        import httpx

        from . import LoadOptions

        load = load or LoadOptions()
        self.validate(spec, load)
        self.spec, self.seed = spec, load.seed
        self.base = normalise_base_url(spec.base_url)
        self.concurrency = load.concurrency or DEFAULT_CONCURRENCY
        self.timeout = load.timeout or DEFAULT_TIMEOUT
        self.max_retries = DEFAULT_MAX_RETRIES if load.max_retries is None else load.max_retries
        key = os.environ.get(spec.api_key_env, "") if spec.api_key_env else ""
        self.redact = Redactor(key)
        self.use_chat = spec.chat == "on"
        self.client = httpx.Client(headers=self._headers(key), follow_redirects=False,
                                   timeout=httpx.Timeout(self.timeout, connect=min(10.0, self.timeout)),
                                   limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency))
        self._httpx = httpx
        self._lock = threading.Lock()
        self._rng = random.Random()  # jitter only: never affects results
        self._warned = 0.0
        self.warn = warn or (lambda msg: print(f"econeval: {msg}", file=sys.stderr, flush=True))
        self.n = {"requests": 0, "retries": 0, "client_side_stops": 0, "text_only_answers": 0}
        self.fingerprints: set[str] = set()
        self.top_logprobs = TOP_LOGPROBS[0]
        self.fallbacks: set[str] = set()
        self._stop = threading.Event()  # set when the current evaluate() call ends
        self.served = self._check_server()
        param = spec.options.get("repeat_penalty_param")
        owner = (self.served or {}).get("owned_by")
        self.penalty_param = param or OWNERS.get(str(owner).lower(), "none")

    # ---- what differs between APIs (AnthropicBackend overrides these) ---------------------
    def _headers(self, key: str) -> dict:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _fixed(self) -> dict:
        """Fields every request carries."""
        return {"model": self.spec.api_model, "temperature": 0, "seed": self.seed}

    def _as_completion(self, doc) -> dict | None:
        """A 200 answer as a completion ({"choices": [...], "usage": ...}), or None if it is not one."""
        if isinstance(doc, dict) and isinstance(doc.get("choices"), list) and doc["choices"] and isinstance(doc["choices"][0], dict):
            return doc
        return None

    # ---- the server -----------------------------------------------------------------------
    def _check_server(self) -> dict | None:
        """Ask /v1/models: fail fast when the server is unreachable or does not serve the model.
        Returns the model's entry (what identifies it beyond its name), or None when the server
        has no model list."""
        url = self.base + "/v1/models"
        try:
            resp = self.client.get(url, timeout=min(15.0, self.timeout))
        except self._httpx.HTTPError as exc:
            raise ModelError(f"cannot reach {self.base}: {type(exc).__name__}{': ' + self.redact(str(exc)) if str(exc) else ''}",
                             hint="check the base URL and that the server is running") from None
        if 300 <= resp.status_code < 400:
            raise self._redirect_error(url, resp)
        if resp.status_code in (401, 403):
            raise ModelError(f"{url} answered HTTP {resp.status_code}: {self._detail(resp)}",
                             hint=f"check the API key{' in ' + self.spec.api_key_env if self.spec.api_key_env else ''}")
        if resp.status_code != 200:
            return None  # no model list here (some gateways): the first request will tell
        try:
            models = [m for m in resp.json().get("data", []) if isinstance(m, dict)]
        except (ValueError, AttributeError, TypeError):  # not JSON, or not a model list
            return None
        for m in models:
            if m.get("id") == self.spec.api_model:
                return {k: m[k] for k in ("id", "owned_by", "root", "parent", "max_model_len") if m.get(k) is not None}
        if models:
            names = ", ".join(str(m.get("id")) for m in models[:10])
            raise ModelError(f"{self.base} does not serve model '{self.spec.api_model}' (it serves: {names})")
        return None

    def _detail(self, resp) -> str:
        return self.redact(resp.text[:300]).strip().replace("\n", " ")[:200] or "(empty body)"

    def _redirect_error(self, url: str, resp) -> ModelError:
        where = self.redact(resp.headers.get("location", "?"))
        return ModelError(f"{url} redirected (HTTP {resp.status_code}) to {where}: econeval does not follow redirects, "
                          "which would carry the API key to another address", hint="set base_url to the final address")

    def _note(self, msg: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._warned < 10:
                return
            self._warned = now
        self.warn(msg)

    def _post(self, path: str, body: dict) -> dict | object:
        """One request with retries. Returns the answer (a dict with `choices`), or _CONTEXT."""
        url = self.base + path
        stop = self._stop
        body = {**self._fixed(), **body}
        last = ""
        for attempt in range(self.max_retries + 1):
            wait = self._rng.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** attempt))  # full jitter
            try:
                resp = self.client.post(url, json=body)
            except self._httpx.TimeoutException:
                last = f"no answer within {self.timeout:g} s"
            except self._httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__})"
            else:
                with self._lock:
                    self.n["requests"] += 1
                code = resp.status_code
                if 300 <= code < 400:
                    raise self._redirect_error(url, resp)
                if code == 200:
                    try:
                        doc = resp.json()
                    except ValueError:
                        doc = None
                    doc = self._as_completion(doc)
                    if doc is not None:
                        if doc.get("system_fingerprint"):
                            self.fingerprints.add(str(doc["system_fingerprint"]))
                        return doc
                    last = "HTTP 200 with an answer that is not a completion (no choices)"
                elif code == 400 and _context_overflow(resp):
                    return _CONTEXT
                elif code in RETRY_STATUS:
                    last = f"HTTP {code}"
                    after = _retry_after(resp.headers.get("retry-after"))
                    if after is not None:
                        wait = min(after, RETRY_AFTER_CAP)
                else:
                    raise _HTTPError(code, f"{url} answered HTTP {code}: {self._detail(resp)}")
            if attempt == self.max_retries:
                break
            with self._lock:
                self.n["retries"] += 1
            self._note(f"{url}: {last}; retrying in {wait:.1f} s (attempt {attempt + 2} of {self.max_retries + 1})")
            if stop.wait(wait):  # the call ended (an error elsewhere, an interrupt): give up quietly
                raise ModelError(f"{self.base}: stopped while retrying")
        raise ModelError(f"{self.base} failed {self.max_retries + 1} times in a row; last: {last}",
                         hint="finished items are kept: rerun the same command to resume (--max-retries, --timeout)")

    def _body(self, prompt: str, **kw) -> tuple[str, dict]:
        if self.use_chat:
            if "logprobs" in kw:
                kw["logprobs"], kw["top_logprobs"] = True, kw["logprobs"]
            return "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}], **kw}
        return "/v1/completions", {"prompt": prompt, **kw}

    def _penalty(self, value: float) -> dict:
        if self.penalty_param == "repeat_penalty":
            return {"repeat_penalty": value}  # always: llama-cpp-python's server defaults to 1.1
        if value == 1.0:
            return {}
        if self.penalty_param == "repetition_penalty":
            return {"repetition_penalty": value}
        raise ModelError(f"a task asks for repetition penalty {value:g}, and econeval does not know how "
                         f"{self.base} names it", hint="set options.repeat_penalty_param = \"repeat_penalty\" (llama.cpp) or "
                         "\"repetition_penalty\" (vLLM) in the model's models.toml entry")

    # ---- requests -------------------------------------------------------------------------
    def _generate(self, r: Generate) -> Completion:
        stops = list(r.stop)
        server_stops = [s for s in stops if s and not s[0].isspace()] if r.stop_after_text else stops
        kw = {"max_tokens": r.max_tokens, **self._penalty(r.repeat_penalty)}
        if server_stops:
            kw["stop"] = server_stops
        path, body = self._body(r.prompt, **kw)
        resp = self._post(path, body)
        if resp is _CONTEXT:
            return Completion(text="", finish="context")
        choice = resp["choices"][0]
        text = _text(choice)
        finish = "stop" if choice.get("finish_reason") == "stop" else "length"
        cut = stop_at(text, stops, after_text=r.stop_after_text)
        if cut is not None and len(cut) < len(text):
            text, finish = cut, "stop"
            if len(server_stops) < len(stops):
                with self._lock:
                    self.n["client_side_stops"] += 1
                    self.fallbacks.add("stop strings that begin with whitespace applied client-side (after the answer starts)")
        usage = resp.get("usage") or {}
        return Completion(text=text, n_prompt_tokens=usage.get("prompt_tokens") or 0,
                          n_tokens=usage.get("completion_tokens") or 0, finish=finish)

    def _option_scores(self, r: OptionLogprobs) -> OptionScores:
        while True:
            k = self.top_logprobs
            # without log-probabilities the letter is read from the text: room for "(B)" or "B."
            path, body = self._body(r.prompt, max_tokens=1 if k else TEXT_ANSWER_TOKENS, **({"logprobs": k} if k else {}),
                                    **self._penalty(1.0))
            try:
                resp = self._post(path, body)
                break
            except _HTTPError as exc:  # a server that refuses this many log-probabilities: ask for fewer
                if exc.code != 400 or not k:
                    raise
                with self._lock:
                    if self.top_logprobs == k:
                        smaller = [n for n in TOP_LOGPROBS if n < k]
                        self.top_logprobs = smaller[0] if smaller else 0
                        self.fallbacks.add(f"the server refused {k} log-probabilities: asked for "
                                           f"{self.top_logprobs or 'none (text answers)'}")
        if resp is _CONTEXT:
            return OptionScores(fits=False)
        choice = resp["choices"][0]
        top = _top_logprobs(choice)
        if not top:  # no log-probabilities: hand back the text instead
            with self._lock:
                self.n["text_only_answers"] += 1
                self.fallbacks.add("no log-probabilities from the server: options read from the generated text")
            return OptionScores(text=_text(choice))
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in top.values()):
            return OptionScores(error=f"the server returned non-finite log-probabilities ({self.base})")
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
        """All requests, `concurrency` in flight at a time; results in request order. The workers
        are daemon threads: on an error or an interrupt the call returns at once (no new request
        starts, retry waits end) instead of waiting for answers still in flight."""
        if not requests:
            return []
        stop = self._stop = threading.Event()
        todo = iter(enumerate(requests))
        take = threading.Lock()
        results: queue.Queue = queue.Queue()

        def worker():
            while not stop.is_set():
                with take:
                    nxt = next(todo, None)
                if nxt is None:
                    return
                i, req = nxt
                try:
                    results.put((i, self._one(req), None))
                except BaseException as exc:  # handed to the caller's thread
                    results.put((i, None, exc))

        for _ in range(min(self.concurrency, len(requests))):
            threading.Thread(target=worker, daemon=True, name="econeval-http").start()
        out: list = [None] * len(requests)
        try:
            for _ in range(len(requests)):
                i, res, exc = results.get()
                if exc is not None:
                    raise exc
                out[i] = res
                if on_done:
                    on_done(i)
        finally:
            stop.set()
        return out

    def generate(self, requests: Sequence[Generate]) -> list[Completion]:
        return self.evaluate(requests)

    def option_logprobs(self, requests: Sequence[OptionLogprobs]) -> list[OptionScores]:
        return self.evaluate(requests)

    def info(self) -> BackendInfo:
        served = {"base_url": self.base, "api_model": self.spec.api_model, "served": self.served}
        return BackendInfo(
            kind=self.kind,
            model={"name": self.spec.name, "api_model": self.spec.api_model, "base_url": self.base,
                   "source": self.spec.source, "sha256": None, "served": self.served, "identity": served},
            n_ctx=None, device="remote", schedule="server-side (not controlled by econeval)",
            chat_template_applied=self.use_chat, parallel=self.concurrency, composition_matters=False,
            details={"backend": "OpenAI-compatible HTTP API",
                     "chat_mode": self.spec.chat,
                     "endpoint": "/v1/chat/completions" if self.use_chat else "/v1/completions",
                     "decoding": f"temperature 0 and seed on the server; option scores from the top-{TOP_LOGPROBS[0]} "
                                 "log-probabilities of one token",
                     "concurrency": self.concurrency, "timeout_s": self.timeout, "max_retries": self.max_retries,
                     "repeat_penalty_param": self.penalty_param,
                     "fallbacks": sorted(self.fallbacks),
                     "system_fingerprints": sorted(self.fingerprints)},
        )

    def counters(self) -> dict[str, int]:
        with self._lock:
            return dict(self.n)

    def close(self) -> None:
        self.client.close()


class _HTTPError(ModelError):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def _context_overflow(resp) -> bool:
    """Only the server's explicit word for it (OpenAI, vLLM, llama-cpp-python: code
    context_length_exceeded; llama.cpp's server: type exceed_context_size_error)."""
    try:
        err = resp.json().get("error")
    except (ValueError, AttributeError):
        return False
    if not isinstance(err, dict):
        return False
    return err.get("code") == "context_length_exceeded" or err.get("type") == "exceed_context_size_error"


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (a number of seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _text(choice: dict) -> str:
    if "text" in choice:
        return choice.get("text") or ""
    return ((choice.get("message") or {}).get("content")) or ""


def _top_logprobs(choice: dict) -> dict[str, float]:
    lp = choice.get("logprobs") or {}
    if lp.get("top_logprobs"):  # completions API: [{token: logprob, ...}]
        first = lp["top_logprobs"][0]
        return dict(first) if isinstance(first, dict) else {}
    content = lp.get("content") or []  # chat API: [{"top_logprobs": [{"token", "logprob"}]}]
    return {t["token"]: t["logprob"] for t in content[0].get("top_logprobs") or []} if content else {}
