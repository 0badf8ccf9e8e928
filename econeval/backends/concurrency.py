"""How many requests a served backend keeps in flight: a fixed number (`--concurrency N`), or by
default a limit that adapts to the server.

The adaptive limit starts at START_LOCAL for servers on this machine or a private network (where
a queue costs nothing but waiting) and for a batching engine wherever it is (its /v1/models says
vLLM, SGLang or TGI: `served_engine`), at START_REMOTE elsewhere, and follows the server's
throughput at the limit, estimated by Little's law: the limit over the mean latency of a round's
cohort, the next MIN_ROUND requests or the limit's worth if more (half that while it doubles),
each sent into the last free place (so the server had the limit's worth in flight while it
waited). Requests sent in a burst, at the start of a batch or as the limit grows, are no part of
a cohort, nor are the runner's pauses between batches, nor requests sent before the round began:
the estimate is the server's, not the chunking's.

- start: the limit doubles while each doubling raises the throughput by START_GAIN or more (a
  server that batches: vLLM, `llama-server --parallel N`); the first doubling that does not is
  undone and the limit settles.
- then it probes: up by a quarter, kept when the throughput rises by GAIN or more (by START_GAIN:
  doubling again); down by a fifth, kept when the throughput falls by less than GAIN (more in
  flight only lengthens each request's wait: a server that evaluates one request at a time, or
  one past its knee); otherwise it returns to where it was. So it settles where more requests in
  flight stop paying, and follows a server whose speed changes.
- a 429, 503, 529 or other overload answer, or a timeout, cuts it at once to BACKOFF of the
  limit in force, never above the settled one (an overload while doubling undoes the doubling),
  once per round trip (requests that started before a cut do not cut again); from then on it
  grows by probes only, not by doubling.

It never goes above the cap (--max-concurrency; default CAP_LOCAL per server for a server on
this machine or a private network or a batching engine, CAP_REMOTE per server for any other, such
as a hosted API with rate limits), nor below FLOOR by probing (1 after overloads). Which requests go out, and
the order of the results, never depend on the limit: only how many wait at once.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence
from urllib.parse import urlsplit

START_LOCAL, START_REMOTE = 32, 8  # the adaptive limit's first value (8: the fixed default of earlier versions)
CAP_LOCAL, CAP_REMOTE, CAP_MAX = 256, 32, 1024  # per server; the whole at most CAP_MAX
FLOOR = 2  # the least limit probing reaches (a server that queues is never worse off with 2)
MIN_ROUND, MIN_START = 32, 16  # requests in a round's cohort, at least (probing / doubling)
START_GAIN, GAIN = 0.25, 0.05  # throughput gain that keeps a doubling / a probe (a probe down: the loss it may cost)
UP, DOWN, BACKOFF = 1.25, 0.8, 0.7  # a probe's steps; the cut on an overload
HISTORY = 100  # limit changes kept for run.json
LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa", ".svc", ".cluster.local")
ENGINES = {"vllm": "vLLM", "sglang": "SGLang"}  # /v1/models' owned_by → the batching engine it names


def served_engine(entry: dict | None) -> str | None:
    """The batching engine a server's /v1/models entry for the model shows: vLLM or SGLang (their
    `owned_by`), TGI (which names the model as its own owner, created at 0); None for any other
    server (a hosted API, llama.cpp's or Ollama's server), or without an entry."""
    if not entry:
        return None
    owner = str(entry.get("owned_by") or "")
    if owner.lower() in ENGINES:
        return ENGINES[owner.lower()]
    return "TGI" if owner and owner == entry.get("id") and entry.get("created") == 0 else None


def local_host(url: str) -> bool:
    """Whether a base URL names this machine or a private network: a loopback, private or
    link-local address, `localhost`, a name without a dot (`gpu-node`) or under a private suffix
    (`.local`, `.internal`, `.svc`, ...). Decided from the URL alone (no lookup), so that one
    command always gets one cap."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost" or "." not in host or host.endswith(LOCAL_SUFFIXES)
    return ip.is_loopback or ip.is_private or ip.is_link_local


@dataclass(frozen=True)
class Policy:
    """Fixed (`limit` requests in flight) or adaptive (from `limit` up to `cap`); `why`: where the cap comes from."""

    adaptive: bool
    limit: int
    cap: int
    why: str

    @classmethod
    def of(cls, concurrency: int | None, max_concurrency: int | None, urls: Sequence[str],
           engines: Sequence[str | None] = ()) -> "Policy":
        """`engines`: each server's batching engine (`served_engine`), where known: a local engine's
        concurrency wherever the server is."""
        if concurrency is not None:
            return cls(False, concurrency, concurrency, "--concurrency")
        named = [e for e in engines if e]
        local = [local_host(u) or bool(k < len(engines) and engines[k]) for k, u in enumerate(urls)] or [True]
        start = START_LOCAL if all(local) else START_REMOTE
        if max_concurrency is not None:
            return cls(True, min(start, max_concurrency), max_concurrency, "--max-concurrency")
        cap = min(CAP_MAX, sum(CAP_LOCAL if x else CAP_REMOTE for x in local))
        n = len(local)
        if all(local) and named and not all(local_host(u) for u in urls):
            why = (f"{CAP_LOCAL} per server on this machine, a private network or serving as "
                   f"{', '.join(sorted(set(named)))}" + (f", {n} servers" if n > 1 else ""))
        elif all(local):
            why = f"{CAP_LOCAL} per server on this machine or a private network" + (f", {n} servers" if n > 1 else "")
        elif not any(local):
            why = f"{CAP_REMOTE} per server at a public address (a hosted API's rate limits)" + (f", {n} servers" if n > 1 else "")
        else:
            why = (f"{CAP_LOCAL} per private server or batching engine, {CAP_REMOTE} per other public one" if named else
                   f"{CAP_LOCAL} per private server, {CAP_REMOTE} per public one")
        return cls(True, min(start, cap), cap, why)

    def describe(self) -> str:
        return f"adaptive, from {self.limit} up to {self.cap}" if self.adaptive else f"fixed at {self.limit}"


class _Ticket:
    """A request through the gate: when it started, the round whose cohort it is in (None: none),
    and the cuts before it."""

    __slots__ = ("t", "round", "cuts")

    def __init__(self, t: float, round: int | None, cuts: int):
        self.t, self.round, self.cuts = t, round, cuts


class Limiter:
    """The gate every request of a served client passes (`acquire` before it is sent, `release`
    when it is answered or failed, on the same thread) and, for an adaptive policy, the controller
    that moves the limit. `clock` is injectable: the controller can be driven without threads."""

    def __init__(self, policy: Policy, clock: Callable[[], float] = time.monotonic):
        self.policy = policy
        self.clock = clock
        self.cond = threading.Condition()
        self.local = threading.local()
        self.limit = self.base = policy.limit  # the limit in force; the settled one (a probe moves the first only)
        self.in_flight = self.max_in_flight = 0
        self.cuts = 0  # cuts for overload so far: a request that started before the last one does not cut again
        self.changes = self.backoffs = 0
        self.lowest = self.highest = self.base
        self.t0 = self.last = clock()
        self.busy = self.area = 0.0  # seconds with a request in flight; the integral of in-flight over them
        self.history: list[list] = []
        # the controller: the phase, the round's cohort, the reference a probe is judged against
        self.phase = "start"  # start | ref | up | down
        self.direction = "up"
        self.prev: tuple[float, int] | None = None  # start: (throughput, limit) of the last doubling kept
        self.ref = 0.0
        self.doubling = True  # until the first overload
        self.round = 0
        self._round()

    # ---- the gate ------------------------------------------------------------------------------
    def acquire(self, stop: threading.Event) -> "_Ticket | None":
        """Wait for a place for this thread's next request (its ticket, kept for `release` and
        `overloaded` on this thread); None when `stop` is set first."""
        with self.cond:
            while self.in_flight >= self.limit and not stop.is_set():
                self.cond.wait(0.2)
            if stop.is_set():
                return None
            now = self.clock()
            self._advance(now)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            # in the cohort: a request that fills the limit, so that the server has the limit's worth in
            # flight while it waits (one sent in a burst, at a batch's start or as the limit grows,
            # would find fewer ahead of it)
            cohort = self.policy.adaptive and self.in_flight == self.limit and self.sent < self.need
            if cohort:
                self.sent += 1
            ticket = self.local.ticket = _Ticket(now, self.round if cohort else None, self.cuts)
            self.local.held = True
            return ticket

    def release(self, ticket: "_Ticket | None" = None) -> None:
        """A request finished (answered, or failed past its retries); by default this thread's."""
        with self.cond:
            now = self.clock()
            self._advance(now)
            self.in_flight -= 1
            self.local.held = False
            ticket = ticket or getattr(self.local, "ticket", None)
            if ticket is not None and ticket.round == self.round:
                self.done += 1
                self.latency += now - ticket.t
                if self.done >= self.need:
                    self._judge(now)
            self.cond.notify(max(1, self.limit - self.in_flight))  # as many waiting threads as there are places

    def wait_again(self, stop: threading.Event) -> bool:
        """A request refused as an overload gives its place back before it is sent again, and waits
        for one under the limit now in force (cut by the refusal): retries do not keep the server
        as full as the burst that overloaded it. Its latency counts for no round. False when `stop`
        is set first."""
        if not getattr(self.local, "held", False):
            return not stop.is_set()  # a request outside the gate (the reasoning probe)
        with self.cond:
            self._advance(self.clock())
            self.in_flight -= 1
            self.cond.notify()
            while self.in_flight >= self.limit and not stop.is_set():
                self.cond.wait(0.2)
            if stop.is_set():
                self.in_flight += 1  # the place is taken again: the request's release gives it back
                return False
            now = self.clock()
            self._advance(now)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.local.ticket = _Ticket(now, None, self.cuts)
            return True

    def overloaded(self, ticket: "_Ticket | None" = None) -> None:
        """The server answered a request (by default this thread's) with an overload (429, 503, 529,
        ...) or let it time out: cut the limit, unless a cut came after the request started. The
        cut is to BACKOFF of the limit in force, never above the settled one (an overload while
        doubling undoes the doubling); no doubling follows, only probes."""
        with self.cond:
            ticket = ticket or getattr(self.local, "ticket", None)
            if not self.policy.adaptive or ticket is None or ticket.cuts != self.cuts:
                return
            now = self.clock()
            self._advance(now)
            self.cuts += 1
            self.backoffs += 1
            self.direction, self.doubling = "up", False
            self._settle(max(1, min(self.base, math.floor(self.limit * BACKOFF))), now)
            self._set(self.base, "ref")

    def wake(self) -> None:
        """Wake the threads waiting for a place (their `stop` was set)."""
        with self.cond:
            self.cond.notify_all()

    # ---- the controller ------------------------------------------------------------------------
    def _advance(self, now: float) -> None:
        dt = max(0.0, now - self.last)
        self.last = now
        if self.in_flight:
            self.busy += dt
            self.area += dt * self.in_flight

    def _round(self) -> None:
        """A new round at the limit in force: its cohort is the next requests sent."""
        self.round += 1
        self.need = max(MIN_START, self.limit // 2) if self.phase == "start" else max(MIN_ROUND, self.limit)
        self.sent = self.done = 0
        self.latency = 0.0

    def _set(self, limit: int, phase: str) -> None:
        """Put `limit` in force for `phase`, in a new round."""
        self.limit, self.phase = limit, phase
        self._round()

    def _settle(self, limit: int, now: float) -> None:
        if limit != self.base:
            self.base = limit
            self.changes += 1
            self.lowest, self.highest = min(self.lowest, limit), max(self.highest, limit)
            if len(self.history) < HISTORY:
                self.history.append([round(now - self.t0, 2), limit])

    def _judge(self, now: float) -> None:
        """A round's cohort is back: the throughput at the limit (Little's law), then the next step."""
        rate = self.limit * self.done / max(self.latency, 1e-9)
        cap = self.policy.cap
        if self.phase == "start":
            if self.prev is None or rate >= self.prev[0] * (1 + START_GAIN):
                self.prev = (rate, self.limit)
                self._settle(self.limit, now)
                if self.limit < cap:
                    return self._set(min(cap, 2 * self.limit), "start")
                self.ref, self.direction = rate, "down"
                return self._probe()
            self.direction = "down"  # the doubling is undone: the limit settles below it
            return self._set(self.prev[1], "ref")
        if self.phase == "ref":
            self.ref = rate
            return self._probe()
        if self.phase == "up":
            if rate >= self.ref * (1 + START_GAIN) and self.limit < cap and self.doubling:  # far below the knee: doubling again
                self._settle(self.limit, now)
                self.prev = (rate, self.limit)
                return self._set(min(cap, 2 * self.limit), "start")
            if rate >= self.ref * (1 + GAIN):
                self._settle(self.limit, now)
                self.ref = rate
                return self._probe()
            self.direction = "down"
            return self._set(self.base, "ref")
        if self.phase == "down" and rate >= self.ref * (1 - GAIN):
            self._settle(self.limit, now)
            self.ref = rate
            return self._probe()
        self.direction = "up"
        return self._set(self.base, "ref")

    def _probe(self) -> None:
        """Try the limit a step from the settled one, in `direction` (the other where that one is closed)."""
        up = min(self.policy.cap, max(self.base + 1, math.ceil(self.base * UP)))
        down = max(FLOOR, min(self.base - 1, math.floor(self.base * DOWN)))
        if self.direction == "down" and down >= self.base:
            self.direction = "up"
        if self.direction == "up" and up <= self.base:
            self.direction = "down" if down < self.base else "none"
        if self.direction == "none":
            return self._set(self.base, "ref")
        self._set(up if self.direction == "up" else down, self.direction)

    # ---- the record ----------------------------------------------------------------------------
    def record(self) -> dict:
        """run.json's `backend.concurrency`: the policy, where the limit settled and what the server saw."""
        with self.cond:
            self._advance(self.clock())
            seen = {"max_in_flight": self.max_in_flight,
                    "mean_in_flight": round(self.area / self.busy, 1) if self.busy else None}
            if not self.policy.adaptive:
                return {"policy": "fixed", "limit": self.policy.limit, **seen}
            return {"policy": "adaptive", "start": self.policy.limit, "cap": self.policy.cap, "cap_from": self.policy.why,
                    "settled": self.base, "range": [self.lowest, self.highest], "changes": self.changes,
                    "backoffs": self.backoffs, **seen, "history": [list(h) for h in self.history]}
