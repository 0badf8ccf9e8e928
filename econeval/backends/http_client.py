"""The client every served-model backend composes: one pooled httpx client, requests in flight on
worker threads up to a limit that is fixed (`--concurrency N`) or adapts to the server (the
default: `concurrency.py`), results in request order whatever the limit, retries with exponential
backoff and full jitter on 408/409/425/429/5xx/529, timeouts, dropped connections and answers
that are not completions (a server's `Retry-After` honoured), redirects never followed (the key
would travel with them), and everything a server echoes redacted before it is shown. Every
request is read within a deadline of its own (`http_deadline.py`) and a size cap, whatever the
endpoint; an answer no retry would mend makes its item an error (`ItemError`).

`ServedOptions` are the options every served backend shares (base URL, model name, key variable,
concurrency and its cap, timeout, retries); a backend's own options class may extend them.
"""

from __future__ import annotations

import os
import queue
import random
import re
import threading
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Sequence

from .. import errors
from ..errors import ModelError, UsageError
from ..reasoning import Markers
from ..signals import signalled
from .base import Overlap, ReasoningOptions, option
from .concurrency import CAP_LOCAL, CAP_MAX, CAP_REMOTE, Limiter, Policy, served_engine
from .http_deadline import deadline, install

DEFAULT_TIMEOUT = 120.0  # seconds per request (a long generation on a loaded server)
MAX_TIMEOUT = 86400.0  # a day: the longest --timeout taken (a deadline must be a time a clock can reach)
DEFAULT_MAX_RETRIES = 5
BACKOFF_BASE, BACKOFF_CAP, RETRY_AFTER_CAP = 0.5, 30.0, 120.0
RETRY_STATUS = (408, 409, 425, 429, 500, 502, 503, 504, 529)  # 529: Anthropic's "overloaded"
OVERLOAD_STATUS = (408, 429, 502, 503, 504, 529)  # retried, and the adaptive concurrency cut
CONTEXT = object()  # a request the server refused as longer than its context
MAX_BODY = 16 << 20  # bytes of one answer, after decompression: a completion is never near this
CHARS_PER_TOKEN = 128  # a stored text is cut at max_tokens × this (no token decodes to more)
MAX_COUNT = 1 << 53  # a token count past this is no count (JSON readers lose integers beyond it)
POLL = 0.1  # seconds: how often a call that another thread may stop looks at its stop
SHOWN = 80  # characters of a value a server sent (a model name, a fingerprint) shown in a message
_SURROGATE = re.compile("[\ud800-\udfff]")  # what json.loads leaves of a lone "\\ud800" escape
MIN_SECRET = 8  # characters: a shorter key is a placeholder (EMPTY, ollama), left in the answers it would change


class Answer:
    """A server's answer, read whole within the attempt's deadline and the size cap."""

    def __init__(self, status_code: int, headers, content: bytes):
        self.status_code, self.headers, self.content = status_code, headers, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self):
        """The answer's JSON (ValueError: not JSON; TooDeep, a ValueError: nested deeper than the
        parser goes), a lone surrogate escape (valid JSON, no character: "\\ud800") in any of its
        strings replaced by U+FFFD, so that it can be stored and sent on."""
        import json

        text = self.content.decode("utf-8-sig", "replace")  # bytes of a surrogate are no UTF-8: replaced here
        try:
            doc = json.loads(text)
        except RecursionError:
            raise TooDeep("JSON nested too deep") from None
        if re.search(r"\\u[dD][89abcdefABCDEF]", text):
            doc = _without_surrogates(doc)
        return doc


def _without_surrogates(doc: Any) -> Any:
    """`doc` with each lone surrogate of its strings (keys too) replaced by U+FFFD, in place; walked
    without recursion (a parsed document may be nested almost as deep as the stack)."""
    def fix(v: str) -> str:
        return _SURROGATE.sub("\ufffd", v)

    root = [doc]
    todo: list = [root]
    while todo:
        c = todo.pop()
        if isinstance(c, dict):
            items = [(fix(k), v) for k, v in c.items()]
            c.clear()
            c.update(items)
        for k in list(c) if isinstance(c, dict) else range(len(c)):
            v = c[k]
            if isinstance(v, str):
                c[k] = fix(v)
            elif isinstance(v, (dict, list)):
                todo.append(v)
    return root[0]


def clip(text: str, n: int = SHOWN) -> str:
    """A value a server sent, as a message shows it: at most `n` characters and a count of the rest."""
    return text if len(text) <= n else f"{text[:n]}… ({len(text) - n:,} more characters)"


class TooDeep(ValueError):
    """JSON nested deeper than the parser goes."""


class ItemError(ModelError):
    """A request's answer that no retry would mend (JSON nested beyond reading, an impossible token
    count): that item is an error, the run goes on (`ServedClient.map`)."""


class _Exhausted(ModelError):
    """A server failed a request past its retries."""


@dataclass(frozen=True)
class ServedOptions(ReasoningOptions):
    base_url: str | None = option(None, "the server's URL (with or without /v1); several servers of one model: "
                                        "requests go to the one with the fewest in flight", ("--base-url",), multiple=True)
    api_model: str | None = option(None, "the model's name on the server")
    api_key_env: str | None = option(None, "the environment variable holding the API key", ("--api-key-env",))
    concurrency: int | None = option(None, "requests in flight at once, fixed (default: adaptive, from the server's "
                                           "throughput, up to max_concurrency)", ("--concurrency", "-C"))
    max_concurrency: int | None = option(None, f"the adaptive concurrency's cap (default {CAP_LOCAL} per server on this "
                                               f"machine or a private network, {CAP_REMOTE} per server elsewhere)",
                                         ("--max-concurrency",))
    timeout: float | None = option(None, f"seconds one request may take, from connecting to the answer's last byte "
                                         f"(default {DEFAULT_TIMEOUT:g}, at most {MAX_TIMEOUT:g})", ("--timeout",))
    max_retries: int | None = option(None, f"retries of one request on 429/5xx/timeouts/dropped connections "
                                           f"(default {DEFAULT_MAX_RETRIES})", ("--max-retries",))

    def check(self, where: str) -> None:
        super().check(where)
        if not self.base_url:
            raise UsageError(f"{where} needs base_url (the server, e.g. --base-url http://127.0.0.1:8000/v1)")
        if not self.api_model:
            raise UsageError(f"{where} needs api_model (the model's name on the server)")
        for url in self.urls():
            problem = url_problem(url)
            if problem:
                raise UsageError(f"{where}: base_url must be one http:// or https:// URL ({problem}), not {url!r}",
                                 hint="several servers: one --base-url each")
        for name in ("concurrency", "max_concurrency"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= CAP_MAX:
                raise UsageError(f"{where}: {name} {value} is out of range (1 to {CAP_MAX})")
        if self.timeout is not None and not 0.1 <= self.timeout <= MAX_TIMEOUT:
            raise UsageError(f"{where}: timeout {self.timeout:g} is out of range (0.1 to {MAX_TIMEOUT:g} seconds)")
        if self.max_retries is not None and not 0 <= self.max_retries <= 100:
            raise UsageError(f"{where}: max_retries {self.max_retries} is out of range (0 to 100)")

    def urls(self) -> list[str]:
        return list(self.base_url) if isinstance(self.base_url, (list, tuple)) else [self.base_url] if self.base_url else []

    def key(self) -> str:
        return os.environ.get(self.api_key_env, "") if self.api_key_env else ""

    def check_key(self, name: str) -> None:
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise ModelError(f"model '{name}' needs an API key in the environment variable {self.api_key_env}")


def url_problem(url: str) -> str | None:
    """Why `url` is not one usable http(s) URL (None: it is): the whole of it is checked, not its start."""
    from urllib.parse import urlsplit

    if not isinstance(url, str) or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url.strip()):
        return "a space or a control character in it"
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        return str(exc)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return "no http:// or https:// and host"
    if port == 0:
        return "port 0"
    return None


def normalise_base_url(url: str) -> str:
    """`http://host:8000`, `http://host:8000/` and `http://host:8000/v1` name the same API."""
    base = url.strip().rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """A URL without its `user:password@` (sent as HTTP basic authentication instead, so that it
    is never stored, shown or logged with the URL), and the pair."""
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=host)), (unquote(user), unquote(password))


class Redactor:
    """Removes credentials from anything a server sends back before it is shown or stored: the
    secrets this client sends (`secrets`), wherever they appear, from every answer (`answer`); and
    from a server's error text (`__call__`) also anything that looks like a credential."""

    PATTERNS = (re.compile(r"(?i)(bearer\s+)[^\s\"',}]+"), re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"),
                re.compile(r"(?i)((?:api[_-]?key|authorization|token|secret)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"))

    def __init__(self, key: str, auth: Sequence[tuple[str, str]] = ()):
        import base64

        sent = [key]
        for user, password in auth:  # a URL's user:password@, sent as HTTP basic authentication
            pair = f"{user}:{password}"
            sent += [pair, base64.b64encode(pair.encode()).decode(), password or user]
        self.secrets = sorted({s for s in sent if s}, key=len, reverse=True)  # the longest first: no part of one is left

    def _exact(self, text: str, shortest: int = 1) -> str:
        for secret in self.secrets:
            if len(secret) >= shortest:
                text = text.replace(secret, "[redacted]")
        return text

    def __call__(self, text: str) -> str:
        text = self._exact(text)
        for p in self.PATTERNS:
            text = p.sub(lambda m: (m.group(1) if m.groups() else "") + "[redacted]", text)
        return text

    def answer(self, doc: Any) -> Any:
        """A server's JSON answer with every secret this client sends replaced in each of its strings
        (a server that echoes a header): the answer, its reasoning, a model list's entry, a fingerprint,
        before anything reads it. Only those secrets, and only those of MIN_SECRET characters or more
        (a shorter one is a placeholder for a server that takes no key, EMPTY or ollama, and
        replacing it would change the model's answers): the rest of the text is left as it was."""
        return errors.map_strings(lambda text: self._exact(text, MIN_SECRET), doc) if self.secrets else doc


def same_model(answered: str, asked: str) -> bool:
    """An answer's `model` names the model asked for: the same name, or a dated or tagged version
    of it (OpenAI answers gpt-4o-2024-08-06 for gpt-4o, Ollama llama3:latest for llama3)."""
    a, b = answered.strip(), asked.strip()
    return a == b or a.startswith((b + "-", b + ":", b + "@")) or b.startswith(a + ":")


class ServedClient:
    """Requests to one server for one backend. `headers`: sent with every request; `answer`
    turns a 200 body into a completion ({"choices": [...], "usage": ...}) or None (not one)."""

    def __init__(self, options: ServedOptions, headers: dict, answer: Callable[[object], dict | None],
                 warn: Callable[[str], None] | None = None):
        import httpx

        split = [split_credentials(normalise_base_url(u)) for u in options.urls()]
        self.auth = {base: pair for base, pair in split if pair}  # user:password@ of a URL, sent as basic auth
        self.bases = list(dict.fromkeys(base for base, _ in split))
        self.base = self.bases[0]  # named in messages about the model as a whole
        self.outstanding = [0] * len(self.bases)  # requests in flight per server
        self.answered = [0] * len(self.bases)
        self.down: dict[int, str] = {}  # server → why it was taken out
        self.api_model = options.api_model
        self.api_key_env = options.api_key_env
        self.limits = (options.concurrency, options.max_concurrency)
        self.policy = Policy.of(*self.limits, self.bases)  # check_server may widen it: a batching engine's
        self.limiter = Limiter(self.policy)
        pool = Policy.of(*self.limits, self.bases, ["engine"] * len(self.bases)).cap  # the most it may widen to
        self.timeout = options.timeout or DEFAULT_TIMEOUT
        self.max_retries = DEFAULT_MAX_RETRIES if options.max_retries is None else options.max_retries
        self.redact = Redactor(options.key(), list(self.auth.values()))
        self.answer = answer
        self.client = httpx.Client(headers=headers, follow_redirects=False,
                                   timeout=httpx.Timeout(self.timeout, connect=min(10.0, self.timeout)),
                                   limits=httpx.Limits(max_connections=pool, max_keepalive_connections=pool))
        install(self.client)  # every request within its deadline, not only each read (http_deadline.py)
        self._httpx = httpx
        self.lock = threading.Lock()
        self._rng = random.Random()  # jitter only: never affects results
        self._warned = 0.0
        self.warn = warn or errors.warn  # the one way econeval prints a warning
        self.n = {"requests": 0, "retries": 0}
        self.fingerprints: set[str] = set()
        self.fallbacks: set[str] = set()  # what the backends fell back to (run.json records them)
        self._local = threading.local()  # a thread's `stop`: that of the map() call its requests belong to

    def _stop(self) -> threading.Event:
        """The stop of the map() call this thread sends for (one never set outside a call)."""
        return getattr(self._local, "stop", None) or threading.Event()

    def count(self, key: str, by: int = 1) -> None:
        with self.lock:
            self.n[key] = self.n.get(key, 0) + by

    def check_server(self) -> dict | None:
        """Ask each server's /v1/models: fail fast when one is unreachable or does not serve the
        model, or when two name different models. Returns the model's entry (what identifies it
        beyond its name), or None when no server has a model list."""
        self.engines: dict[str, str | None] = {}  # each server's batching engine, as its model list shows it
        entries = [self._check_one(base) for base in self.bases]
        engines = [self.engines.get(base) for base in self.bases]
        if any(engines):  # vLLM, SGLang or TGI batch many requests wherever they are: a local engine's concurrency
            self.policy = Policy.of(*self.limits, self.bases, engines)
            self.limiter = Limiter(self.policy)
        named = [(b, e) for b, e in zip(self.bases, entries) if e]
        roots = {(e.get("root") or e.get("id"), e.get("max_model_len")) for _, e in named}
        if len(roots) > 1:
            desc = "; ".join(f"{b}: {e.get('root') or e.get('id')} (max_model_len {e.get('max_model_len')})" for b, e in named)
            raise ModelError(f"the servers serve different models under '{self.api_model}' ({desc})",
                             hint="give --base-url only for servers of one model")
        return named[0][1] if named else None

    def _check_one(self, base: str) -> dict | None:
        """Ask /v1/models: fail fast when the server is unreachable or does not serve the model.
        Returns the model's entry (what identifies it beyond its name), or None when the server
        has no model list."""
        url = base + "/v1/models"
        seconds = min(15.0, self.timeout)
        try:
            resp = self._send(url, None, self.auth.get(base), "GET", seconds)
        except self._httpx.TimeoutException:
            raise ModelError(f"{url} did not answer within {seconds:g} s",
                             hint="check the base URL and the server; --timeout gives it longer") from None
        except self._httpx.HTTPError as exc:
            raise ModelError(f"cannot reach {base}: {type(exc).__name__}{': ' + self.redact(clip(str(exc), 200)) if str(exc) else ''}",
                             hint="check the base URL and that the server is running") from None
        if 300 <= resp.status_code < 400:
            raise self._redirect_error(url, resp)
        if resp.status_code in (401, 403):
            raise ModelError(f"{url} answered HTTP {resp.status_code}: {self._detail(resp)}",
                             hint=f"check the API key{' in ' + self.api_key_env if self.api_key_env else ''}")
        if resp.status_code != 200:
            return None  # no model list here (some gateways): the first request will tell
        try:
            models = [m for m in self.redact.answer(resp.json()).get("data", []) if isinstance(m, dict)]
        except (ValueError, AttributeError, TypeError):  # not JSON, or not a model list
            return None
        for m in models:
            if m.get("id") == self.api_model:  # its fields as a record holds them: names of a sane length, counts
                self.engines[base] = served_engine(m)
                return {k: clip(v, 256) if isinstance(v, str) else v for k in ("id", "owned_by", "root", "parent", "max_model_len")
                        if isinstance(v := m.get(k), str) or _count(v) is not None}
        if models:
            names = ", ".join(self.redact(clip(str(m.get("id")))) for m in models[:10])
            raise ModelError(f"{base} does not serve model '{self.api_model}' (it serves: {names})")
        return None

    def _detail(self, resp) -> str:
        return self.redact(resp.text[:300]).strip().replace("\n", " ")[:200] or "(empty body)"

    def _redirect_error(self, url: str, resp) -> ModelError:
        where = self.redact(clip(resp.headers.get("location", "?"), 200))
        return ModelError(f"{url} redirected (HTTP {resp.status_code}) to {where}: econeval does not follow redirects, "
                          "which would carry the API key to another address", hint="set base_url to the final address")

    def _note(self, msg: str) -> None:
        now = time.monotonic()
        with self.lock:
            if now - self._warned < 10:
                return
            self._warned = now
        self.warn(msg)

    def backoff(self, attempt: int, why: str) -> None:
        """Wait before a request is sent again after a refusal that taught the run something (a
        field left out, another endpoint): full jitter, growing with each attempt, capped; ended
        at once when the call ends."""
        wait = self._rng.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** attempt))
        self.count("retries")
        self._note(f"{self.base}: {why}; asking again in {wait:.1f} s")
        if self._stop().wait(wait):
            raise ModelError(f"{self.base}: stopped while retrying")

    def get_json(self, path: str, body: dict | None = None) -> Any:
        """One request outside the completion APIs (a template read: llama.cpp's /apply-template,
        vLLM's /tokenize), not retried: its JSON, or None when the server has no such endpoint or
        does not answer it."""
        base = self.bases[0]
        try:
            resp = self._send(base + path, body, self.auth.get(base), timeout=min(15.0, self.timeout))
            self.count("template_reads")
            return self.redact.answer(resp.json()) if resp.status_code == 200 else None
        except (self._httpx.HTTPError, ModelError, ValueError):
            return None

    def _send(self, url: str, body: dict | None, auth: tuple[str, str] | None = None, method: str = "POST",
              timeout: float | None = None) -> Answer:
        """One attempt: the whole answer within `timeout` seconds (default: --timeout) from
        connecting to its last byte (a server that drips bytes, in its headers or its body, is cut
        off at the deadline: http_deadline.py) and at most MAX_BODY bytes decompressed."""
        import zlib

        seconds = timeout or self.timeout
        with deadline(seconds), self.client.stream(method, url, json=body, headers={"accept-encoding": "gzip, deflate"},
                                                   timeout=seconds if timeout else self._httpx.USE_CLIENT_DEFAULT,
                                                   auth=auth or self._httpx.USE_CLIENT_DEFAULT) as resp:
            encoding = resp.headers.get("content-encoding", "").lower().strip()
            if encoding not in ("", "identity", "gzip", "deflate"):
                raise ModelError(f"{url} answered in an encoding econeval does not read ({clip(encoding)!r})")
            inflate = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS) \
                if encoding in ("gzip", "deflate") else None
            out, size = [], 0
            for raw in resp.iter_raw():
                pieces = [raw]
                if inflate is not None:
                    pieces = []
                    data = raw
                    while data:  # bounded steps: a small body that inflates to gigabytes stops at the cap
                        pieces.append(inflate.decompress(data, 1 << 20))
                        data = inflate.unconsumed_tail
                        if size + sum(map(len, pieces)) > MAX_BODY:
                            break
                for piece in pieces:
                    size += len(piece)
                    if size > MAX_BODY:
                        raise ModelError(f"{url} sent an answer of more than {MAX_BODY >> 20} MiB: not one econeval reads",
                                         hint="check the server (--base-url)")
                    out.append(piece)
            return Answer(resp.status_code, resp.headers, b"".join(out))

    def _pick(self) -> int:
        with self.lock:
            alive = [i for i in range(len(self.bases)) if i not in self.down]
            i = min(alive, key=lambda k: (self.outstanding[k], k))  # fewest in flight, then the first named
            self.outstanding[i] += 1
            return i

    def post(self, path: str, body: dict) -> Any:
        """One request: to the server with the fewest requests in flight; retried there; a server
        that fails past its retries is taken out and the request goes to another one."""
        while True:
            i = self._pick()
            try:
                res = self._post_to(self.bases[i], path, body)
                with self.lock:
                    self.answered[i] += 1
                return res
            except _Exhausted as exc:
                with self.lock:
                    others = [k for k in range(len(self.bases)) if k not in self.down and k != i]
                    if not others:
                        raise _Exhausted(str(exc), hint=exc.hint) from None
                    if i not in self.down:
                        self.down[i] = str(exc)
                        self.warn(f"{self.bases[i]} taken out ({exc}); its requests go to the other servers")
            finally:
                with self.lock:
                    self.outstanding[i] -= 1

    def _post_to(self, base: str, path: str, body: dict) -> dict | object:
        """One request to one server with retries. Returns the answer (a dict with `choices`), or CONTEXT.

        Not tenacity's Retrying: of this loop it would take only the attempt count and the jittered
        wait, while the wait a server's Retry-After sets, the sleep the run's stop event ends at once,
        the concurrency limiter told of each overload and waited on, and what counts as worth another
        try (a 200 that is no completion, another model's answer) would all be callbacks of ours; and it
        would be one more package to carry to an air-gapped machine."""
        url = base + path
        stop = self._stop()
        last = ""
        for attempt in range(self.max_retries + 1):
            wait = self._rng.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** attempt))  # full jitter
            overload = False
            try:
                resp = self._send(url, body, self.auth.get(base))
            except self._httpx.TimeoutException:
                last = f"no answer within {self.timeout:g} s"
                self.limiter.overloaded()
                overload = True
            except self._httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__})"
            else:
                self.count("requests")
                code = resp.status_code
                if 300 <= code < 400:
                    raise self._redirect_error(url, resp)
                if code == 200:
                    try:
                        doc = self.redact.answer(resp.json())
                    except TooDeep:  # what the server meant to send (a cut answer is not valid JSON at all)
                        raise ItemError(f"{url} answered JSON nested too deep to read") from None
                    except ValueError:
                        doc = None
                    doc = self.answer(doc)
                    named = doc.get("model") if doc is not None else None
                    if doc is None:
                        last = "HTTP 200 with an answer that is not a completion (no choices)"
                    elif self.api_model and isinstance(named, str) and named and not same_model(named, self.api_model):
                        last = f"an answer from another model ('{clip(named)}', not '{self.api_model}')"  # malformed: never kept
                    else:
                        self._fingerprint(base, doc.get("system_fingerprint"))
                        return doc
                elif code == 400 and context_overflow(resp):
                    return CONTEXT
                elif code in RETRY_STATUS:
                    last = f"HTTP {code}"
                    if code in OVERLOAD_STATUS:
                        self.limiter.overloaded()
                        overload = True
                    after = retry_after(resp.headers.get("retry-after"))
                    if after is not None:
                        wait = min(after, RETRY_AFTER_CAP)
                else:
                    raise HTTPError(code, f"{url} answered HTTP {code}: {self._detail(resp)}", self.redact.answer(error_of(resp)))
            if attempt == self.max_retries:
                break
            self.count("retries")
            self._note(f"{url}: {last}; retrying in {wait:.1f} s (attempt {attempt + 2} of {self.max_retries + 1})")
            if stop.wait(wait) or signalled() is not None:  # the call ended (an error elsewhere, an interrupt): give up quietly
                raise ModelError(f"{base}: stopped while retrying")
            if overload and not self.limiter.wait_again(stop):  # under the limit the refusal cut
                raise ModelError(f"{base}: stopped while retrying")
        raise _Exhausted(f"{base} failed {self.max_retries + 1} times in a row; last: {last}",
                         hint="finished items are kept: rerun the same command to resume (--max-retries, --timeout)")

    def _fingerprint(self, base: str, fingerprint: Any) -> None:
        """Record the answer's system_fingerprint; a new one after the first is said (the serving
        configuration changed during the run: answers may differ from the earlier ones)."""
        if not fingerprint:
            return
        fp = clip(str(fingerprint))
        with self.lock:
            if fp in self.fingerprints:
                return
            earlier = sorted(self.fingerprints)
            self.fingerprints.add(fp)
        if earlier:
            self.warn(f"{base}: system_fingerprint {fp} after {', '.join(earlier)}: the server's configuration changed "
                      "during the run (run.json records every fingerprint)")

    def map(self, one: Callable, requests: Sequence, on_done=None, overlap: Overlap | None = None,
            before: Callable[[], None] | None = None) -> list:
        """All requests, as many in flight at a time as the limiter allows; results in request
        order. Each worker takes the next request, then waits for a place; workers are added as the
        limit grows. The workers are daemon threads: on an error or an interrupt the call returns
        at once (no new request starts, retry waits end) instead of waiting for answers still in flight.

        Two calls may run at once (two chunks in flight, `Backend.overlaps`), sharing the limiter:
        each has its own stop, which ends its workers' retry waits and nothing of the other's.
        `overlap`: its `stop` ends this call from another thread (it raises ModelError; no request
        is sent after it), its `sent` is called once every request is in flight. `before`: run
        first on the calling thread (the backend's detection), its retry waits ended by that stop
        too. A signal's stop flag (signals.py) also ends the workers: nothing is sent after it."""
        cancel = overlap.stop if overlap is not None else None
        if before is not None:
            self._local.stop = cancel
            try:
                before()
            finally:
                self._local.stop = None
        if not requests:
            return []
        ended = threading.Event()  # this call's stop: set when it returns
        sent = overlap.sent if overlap is not None else None
        todo = iter(enumerate(requests))
        take = threading.Lock()
        results: queue.Queue = queue.Queue()
        limiter = self.limiter
        left = [len(requests)]  # requests no worker has taken yet
        unsent = [len(requests)]  # requests not in flight yet

        def stopped() -> bool:
            return ended.is_set() or (cancel is not None and cancel.is_set()) or signalled() is not None

        def worker():
            self._local.stop = ended  # this thread's retry waits end with this call
            while not stopped():
                with take:
                    nxt = next(todo, None)
                    if nxt is not None:
                        left[0] -= 1
                if nxt is None:
                    return
                i, req = nxt
                if limiter.acquire(ended) is None:
                    return
                try:
                    if stopped():  # stopped while it waited for a place: it is not sent
                        return
                    if sent is not None:
                        with take:
                            unsent[0] -= 1
                            last = unsent[0] == 0
                        if last:
                            sent()
                    results.put((i, one(req), None))
                except ItemError as exc:  # this request's answer is unusable: its item is an error
                    results.put((i, _errored(req, str(exc)), None))
                except BaseException as exc:  # handed to the caller's thread
                    results.put((i, None, exc))
                finally:
                    limiter.release()

        workers = 0

        def staff() -> None:  # a worker for each place the limit gives, up to the requests not taken
            nonlocal workers
            with take:
                want = min(limiter.limit, workers + left[0]) - workers
            for _ in range(max(0, min(want, left[0]))):
                threading.Thread(target=worker, daemon=True, name="econeval-http").start()
                workers += 1

        def next_result() -> tuple:
            while True:  # stoppable from another thread: looked at every POLL seconds
                try:
                    return results.get(timeout=POLL if cancel is not None else None)
                except queue.Empty:
                    if cancel is not None and cancel.is_set():
                        raise ModelError(f"{self.base}: stopped") from None

        staff()
        out: list = [None] * len(requests)
        try:
            for _ in range(len(requests)):
                i, res, exc = next_result()
                if exc is not None:
                    raise exc
                out[i] = res
                if on_done:
                    on_done(i)
                staff()
        finally:
            ended.set()
            limiter.wake()
        return out

    def completion(self, resp, r, server_stops: list[str], reading: "Reading | None" = None):
        """A generation answer as a Completion: the reasoning told from the answer (a reasoning
        field beside the content, inline `<think>` blocks, or reasoning the server only counts),
        and the stop strings the server was not sent applied here, to the answer (those the task
        means "after the answer starts", and all of them while the model reasons)."""
        from ..types import Completion
        from .llamacpp_batch import stop_at

        if resp is CONTEXT:
            return Completion(text="", finish="context")
        choice = resp["choices"][0]
        given_usage = resp.get("usage")
        usage: dict = given_usage if isinstance(given_usage, dict) else {}
        tokens = [token_count(usage, k) for k in ("prompt_tokens", "completion_tokens")]  # an impossible one: an item error
        thought = reasoning_of(choice, usage, reading)
        text = thought.answer
        finish = "stop" if choice.get("finish_reason") == "stop" else "length"
        if not thought.ended:
            finish = "length"
        cap = max(1, r.max_tokens) * CHARS_PER_TOKEN
        if len(text) > cap:  # more than the request could have produced: kept only up to that
            text, finish = text[:cap], "length"
            self.count("oversized_answers")
        cut = stop_at(text, list(r.stop), after_text=r.stop_after_text)
        if cut is not None and len(cut) < len(text):
            text, finish = cut, "stop"
            if len(server_stops) < len(r.stop):
                self.count("client_side_stops")
                with self.lock:
                    self.fallbacks.add("stop strings that begin with whitespace, and every stop string of a reasoning "
                                       "model, applied client-side (after the answer starts)")
        if thought.reasoning is None:
            return Completion(text=text, n_prompt_tokens=tokens[0], n_tokens=tokens[1], finish=finish)
        n_reasoning = thought.tokens
        if thought.estimated:
            with self.lock:
                self.fallbacks.add("reasoning tokens estimated from usage.completion_tokens (the server counts no reasoning "
                                   "tokens apart): the reasoning's share of the characters, or the tokens beyond the answer's")
        answer_tokens = tokens[1] - n_reasoning if n_reasoning is not None else (0 if not thought.ended else tokens[1])
        return Completion(text=text, n_prompt_tokens=tokens[0], n_tokens=max(0, answer_tokens), finish=finish,
                          reasoning=thought.reasoning, n_reasoning_tokens=n_reasoning, reasoning_ended=thought.ended)

    def info(self, kind: str, spec, served: dict | None, chat_applied: bool, details: dict, settings: dict | None = None):
        """What run.json records of a served model; its identity is the server, the model's name
        there and the server's entry for it (never the URLs of several servers or the concurrency)."""
        from ..types import BackendInfo

        ident = {"api_model": self.api_model, "served": served}  # the model, not the servers: resumes with more or fewer
        with self.lock:
            servers = [{"base_url": b, "answered": self.answered[i], **({"taken_out": self.down[i]} if i in self.down else {})}
                       for i, b in enumerate(self.bases)]
        return BackendInfo(
            kind=kind,
            model={"name": spec.name, "api_model": self.api_model, "base_url": self.base, "base_urls": list(self.bases),
                   "source": spec.source, "sha256": None, "served": served, "identity": ident},
            n_ctx=None, device="remote", schedule="server-side (not controlled by econeval)",
            chat_template_applied=chat_applied, parallel=self.policy.cap, composition_matters=False, settings=settings or {},
            parallel_note=self.policy.describe(),
            details={"chat_mode": spec.chat, "servers": servers, "concurrency": self.limiter.record(), "timeout_s": self.timeout,
                     "max_retries": self.max_retries, "system_fingerprints": sorted(self.fingerprints), **details})

    def close(self) -> None:
        self.client.close()


def split_stops(r) -> list[str]:
    """The stop strings a server can be sent: all of them, except (when they apply only once
    text exists) those that begin with whitespace, which a server would apply from the start."""
    return [s for s in r.stop if s and not s[0].isspace()] if r.stop_after_text else list(r.stop)


@dataclass(frozen=True)
class Reading:
    """How a backend reads a reply: `opened`, the markers the prompt opened (the chat template ends
    in `<think>`: the reply starts inside the reasoning, so one without the end marker never closed
    it); `extra`, markers the user named (`-M think_end=…`); `thinks`, the request was sent as to a
    reasoning model (then a reply cut at its limit that shows no closed reasoning never closed it:
    the reasoning budget is on top of the answer's)."""

    opened: Markers | None = None
    extra: Markers | None = None
    thinks: bool = False


@dataclass(frozen=True)
class Thought:
    """A served answer's reasoning (None: it did not reason; "" hidden: the server only counted it),
    its reasoning tokens where the server said or they were estimated (None: not known), the answer
    after it, whether the reasoning ended within the budget, and how it was read (`family`: the
    markers; `opened`: only the end marker was seen)."""

    answer: str
    reasoning: str | None
    tokens: int | None
    ended: bool
    estimated: bool = False
    family: str | None = None
    opened: bool = False


REASONING_FIELDS = ("reasoning_content", "reasoning")  # llama.cpp's server and older vLLM; vLLM since 0.10, Ollama


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_COUNT else None


def token_count(usage: Any, key: str) -> int:
    """A count of a reply's usage (prompt_tokens, completion_tokens): 0 where the server gives
    none (or a negative one); ItemError for one past MAX_COUNT (beyond 64 bits it could not even
    be stored)."""
    v = usage.get(key) if isinstance(usage, dict) else None
    if isinstance(v, int) and not isinstance(v, bool) and v > MAX_COUNT:
        raise ItemError(f"usage.{key} {clip(str(v), 24)} in the server's answer: not a count")
    return _count(v) or 0


def _errored(request: Any, why: str) -> Any:
    """The result of a request whose answer is unusable: its item is an error."""
    from ..types import Completion, OptionLogprobs, OptionScores

    return OptionScores(error=why) if isinstance(request, OptionLogprobs) else Completion(text="", finish="error", error=why)


def reasoning_of(choice: dict, usage: dict, reading: Reading | None = None) -> Thought:
    """The reasoning of a completion or chat choice: the message's reasoning field (the content
    is then the answer), inline blocks in the text (split, by every known family's markers and the
    user's), reasoning the server only counts (OpenAI's reasoning models keep it hidden), or tokens
    far beyond what the text could hold (a server that drops the reasoning, as Ollama's
    /v1/completions does). A reasoning that never closed leaves no answer, whatever the content."""
    from ..reasoning import estimate_tokens, split

    reading = reading or Reading()
    given = choice.get("message")
    message: dict = given if isinstance(given, dict) else {}
    field = next((v for k in REASONING_FIELDS for v in (message.get(k), choice.get(k)) if isinstance(v, str) and v), None)
    details = usage.get("completion_tokens_details")
    counted = _count(details.get("reasoning_tokens")) if isinstance(details, dict) else None
    if _count(usage.get("reasoning_tokens")) is not None:  # an adapter's own count
        counted = usage["reasoning_tokens"]
    total = _count(usage.get("completion_tokens"))
    text = choice_text(choice)
    part = split(text, reading.opened if field is None else None, reading.extra)
    finished = choice.get("finish_reason") == "stop"

    def tokens(reasoning: str, answer: str) -> tuple[int | None, bool]:
        if counted is not None:
            return counted, False
        est = estimate_tokens(total, reasoning, answer)
        return est, est is not None

    if field is not None:
        reasoning = field if part.reasoning is None else field + "\n" + part.reasoning
        ended = part.ended and (bool(part.answer.strip()) or finished)
        n, est = tokens(reasoning, part.answer)
        return Thought(part.answer if ended else "", reasoning, n, ended, est, part.family)
    if part.reasoning is not None:
        n, est = tokens(part.reasoning, part.answer)
        return Thought(part.answer if part.ended else "", part.reasoning, n, part.ended, est, part.family, part.opened)
    if counted:  # hidden reasoning: counted, not shown
        ended = bool(part.answer.strip()) or finished
        return Thought(part.answer if ended else "", "", counted, ended)
    if reading.thinks and choice.get("finish_reason") == "length":
        # cut at the limit (the reasoning budget on top of the answer's) with no closed reasoning in
        # sight: a reasoning that never closed, returned as content by a parser that needs both markers
        return Thought("", text, total, False, total is not None)
    if total is not None and total > 2 * len(text) + 16:  # far more tokens than the text holds: hidden reasoning
        ended = bool(text.strip()) or finished
        n, _ = tokens("", text)
        return Thought(text if ended else "", "", n, ended, True)
    return Thought(part.answer, None, None, True)


def choice_text(choice: dict) -> str:
    """The text of a completion or chat choice (the answer checks have made it a string)."""
    if "text" in choice:
        return choice.get("text") or ""
    return ((choice.get("message") or {}).get("content")) or ""


class Detection:
    """A served backend's detection before its first scored request, done once whatever the
    threads: `run(detect)` calls `detect` the first time (under a lock); a refusal that is final (an
    HTTP error, a request failed past its retries, an unusable answer, or one marked `definitive`)
    is kept and raised again, never sent again (a probe goes out at most 1 + max_retries times);
    another failure (a stop) lets the next caller try again. `tried`: whether it was attempted."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ready = self.tried = False
        self.refusal: ModelError | None = None

    def run(self, detect: Callable[[], None]) -> None:
        if self.ready:
            return
        with self.lock:
            if self.ready:
                return
            if self.refusal is not None:  # the probe was refused for good: never asked the same again
                raise self.refusal
            self.tried = True
            try:
                detect()
            except ModelError as exc:
                if isinstance(exc, (HTTPError, _Exhausted, ItemError)) or getattr(exc, "definitive", False):
                    self.refusal = exc
                raise
            self.ready = True

    def before_record(self, detect: Callable[[], None]) -> None:
        """Detection for the backend's record (`info()`), tried once there: a probe that failed for
        good is not sent again, its failure raised by the first request, where the run says so. A
        usage error is raised."""
        if self.tried:
            return
        try:
            self.run(detect)
        except UsageError:
            raise
        except ModelError:
            pass


class HTTPError(ModelError):
    def __init__(self, code: int, message: str, error: dict | None = None):
        super().__init__(message)
        self.code = code
        self.error = error or {}  # the answer's {"error": {...}} object, when it has one (code, param, message)


def error_of(resp) -> dict:
    try:
        err = resp.json().get("error")
    except (ValueError, AttributeError):
        return {}
    return err if isinstance(err, dict) else {}


def context_overflow(resp) -> bool:
    """Only the server's explicit word for it (OpenAI, vLLM, llama-cpp-python: code
    context_length_exceeded; llama.cpp's server: type exceed_context_size_error)."""
    try:
        err = resp.json().get("error")
    except (ValueError, AttributeError):
        return False
    if not isinstance(err, dict):
        return False
    return err.get("code") == "context_length_exceeded" or err.get("type") == "exceed_context_size_error"


def retry_after(value: str | None) -> float | None:
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


