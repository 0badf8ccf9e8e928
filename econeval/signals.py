"""Every signal handler econeval installs, in one place. SIGINT (Ctrl-C), SIGTERM (kill) and SIGHUP
(a closed terminal) stop econeval at every stage:

- `early` while the CLI is still being imported (`python -m econeval`, the `econeval` command): one
  line and the exit code 128 + the signal;
- `install()` once the CLI runs: the signal raises Interrupted, which the CLI prints as one line;
- `Guard` around a run: as install(), but deferred inside a write (finished first), and a watcher
  thread acknowledges the signal at once while the main thread may be inside a model step; it
  also raises the stop flag (`stop_requested`), which an engine checks inside its step (llama.cpp's
  abort callback), so that a long step ends within a graph node, not at its end.

A `--budget`'s deadline stops a chunk the same way (`until`): while the chunk runs, the stop flag
rises once the deadline has passed, and `raise_if_stopped` raises BudgetSpent instead of
Interrupted.
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any, Callable

from .errors import BudgetSpent, Interrupted

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill, a closed terminal window
_stop: list[int] = []  # the signal that asked for a stop (set by a Guard's watcher or a handler mid-step)
_in_step = [False]  # a model step is running in C (its engine checks _stop between graph nodes)
_until: list[tuple[float, Callable[[], float]]] = []  # a --budget's deadline and its clock, while a chunk runs
DEADLINE = 0  # what stop_requested returns once the deadline has passed (no signal is numbered 0)


def stop_requested() -> int | None:
    """What asked the run to stop: a signal's number, or DEADLINE once the deadline of the chunk in
    progress has passed (`until`); None: nothing (a model step ends early otherwise)."""
    if _stop:
        return _stop[0]
    return DEADLINE if _until and _until[0][1]() >= _until[0][0] else None


def signalled() -> int | None:
    """The signal that asked the run to stop (a Guard's watcher raises the flag at once, from any
    thread), None: none; a deadline is not one. Threads that send requests look at it, so that
    nothing is sent after a Ctrl-C while the main thread unwinds."""
    return _stop[0] if _stop else None


class until:
    """Around a chunk of a --budget run: past `deadline` (on `clock`) a model step that checks
    `stop_requested` stops as at a signal, and `raise_if_stopped` raises BudgetSpent. None: no
    deadline (nothing changes)."""

    def __init__(self, deadline: float | None, clock: Callable[[], float] = time.monotonic):
        self.deadline, self.clock = deadline, clock

    def __enter__(self):
        if self.deadline is not None:
            _until[:] = [(self.deadline, self.clock)]
        return self

    def __exit__(self, *exc):
        _until.clear()


def _request_stop(signum: int) -> None:
    if not _stop:
        _stop.append(signum)


class model_step:
    """Around an engine's step in C that checks `stop_requested` as it goes (llama.cpp's abort
    callback): a signal meanwhile asks for the stop instead of raising inside the callback; the
    engine raises Interrupted when the step returns (`raise_if_stopped`)."""

    def __enter__(self):
        _in_step[0] = True
        return self

    def __exit__(self, *exc):
        _in_step[0] = False


def raise_if_stopped() -> None:
    """After a model step: Interrupted, if a signal asked for a stop meanwhile; BudgetSpent, if the
    deadline of the chunk in progress has passed."""
    if _stop:
        signum = _stop[0]
        _stop.clear()
        raise Interrupted(signum)
    if stop_requested() == DEADLINE:
        raise BudgetSpent()


def _interrupt(signum: int) -> None:
    """A signal outside a write: Interrupted now, or (inside a model step) a stop asked for."""
    if _in_step[0]:
        _request_stop(signum)
    else:
        raise Interrupted(signum)


class Guard:
    """SIGINT / SIGTERM / SIGHUP raise Interrupted, except inside a write (deferred until it is
    done). A watcher thread acknowledges the signal at once, while the main thread may still be
    inside the model's decode step (the exception is raised as soon as that step returns)."""

    def __init__(self, ack: Callable[[int, bool], None] | None = None):
        self.critical = False
        self.pending: int | None = None
        self.old: dict[int, Any] = {}
        self.ack = ack
        self._pipe: tuple[int, int] | None = None
        self._old_fd = -1

    def _handler(self, signum, _frame):
        if self.critical:
            self.pending = signum
        else:
            _interrupt(signum)

    def __enter__(self):
        import os
        import threading

        _stop.clear()
        for s in HANDLED:
            try:
                self.old[s] = signal.signal(s, self._handler)
            except ValueError:  # not the main thread: no handlers
                pass
        if self.old and self.ack:
            r, w = os.pipe()
            os.set_blocking(w, False)
            self._pipe = (r, w)
            self._old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
            threading.Thread(target=self._watch, args=(r,), daemon=True, name="econeval-signals").start()
        return self

    def _watch(self, r: int) -> None:
        import os

        while True:
            try:
                got = os.read(r, 16)
            except OSError:
                return
            if not got:
                return
            for signum in got:
                if signum in HANDLED:
                    _request_stop(signum)  # a model step in progress ends at its next check
                    if self.ack:
                        self.ack(signum, self.critical)  # critical: a write is in progress and will finish

    def __exit__(self, *exc):
        import os

        if self._pipe:
            signal.set_wakeup_fd(self._old_fd)
            for fd in self._pipe:
                os.close(fd)
        _stop.clear()
        for s, h in self.old.items():
            signal.signal(s, h)

    def write(self, fn, *args):
        self.critical = True
        try:
            fn(*args)
        finally:
            self.critical = False
        if self.pending is not None:
            raise Interrupted(self.pending)


def early(signum, _frame):
    """Before the CLI is imported: one line, the conventional exit code."""
    try:
        sys.stderr.write("\neconeval: interrupted\n")
    except OSError:
        pass
    sys.exit(128 + signum)


def _raise(signum, _frame):
    _interrupt(signum)


def install(handler: Callable[[int, Any], Any] = _raise) -> None:
    """SIGINT / SIGTERM / SIGHUP raise Interrupted from here on (a run's Guard refines this)."""
    for s in HANDLED:
        signal.signal(s, handler)
