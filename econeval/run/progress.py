"""The whole run's progress: every task with saved/total items, items/s and tokens/s, and an
estimate for the run from each remaining item's size at the rates measured so far.

An item's size is its first-stage prompts' length (characters, turned into tokens at the ratio
the backend's counters measured) plus its token budget for generation; each task's seconds per
size unit are measured on its own chunks (a task not started yet uses the run's average). The
counts are items *saved* in samples.jsonl: the chunk in progress shows as a fraction beside them.

The ETA follows the chunk in progress as it runs: the tokens the backend has evaluated and
generated in it so far (its counters, read at each redraw), at the seconds per token its task's
chunks took, are taken off the chunk's expected time (never more than all of it); a backend that
counts no tokens gives the share of the chunk's requests finished instead. `chunk_seconds` is the
same estimate of a chunk not started yet, for a `--budget` (the runner's rule).

Shown with rich on a terminal (redrawn in place), a line per task every 10% otherwise (logs stay
readable); a callback (the Python API's `progress=`) gets the same figures as a dict.

With two chunks in flight (a served model: run/runner.py) the current task is that of the oldest
unfinished chunk, whose seconds run from the last save to its own; the newer chunk's requests
advance its own task's fraction (`advance(..., name)`), from the thread that runs it: every
event and figure is taken under one lock.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from ..sampling import duration


def clock(seconds: float | None) -> str:
    """An ETA for the table: m:ss, h:mm:ss, and above a day days and hours (3 d 18 h)."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s >= 86400:
        return duration(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


@dataclass
class TaskLine:
    name: str
    total: int  # items of this run (shard) in the task
    saved: int  # items in samples.jsonl
    chars: list[int]  # per remaining item: characters of its first-stage prompts
    budget: list[int]  # per remaining item: generation token budget (max_tokens summed)
    in_chunk: float = 0.0  # fraction of items of the chunk in progress
    seconds: float = 0.0  # spent on this task in this process
    tokens: int = 0  # evaluated + generated tokens in this process
    units_done: float = 0.0  # size units of the items saved in this process
    items_done: int = 0  # items saved in this process
    note: str = ""  # beside the figures (a --budget run: the current interval's width)
    _decile: int = -1

    def units(self, chars_per_token: float, lo: int = 0, hi: int | None = None) -> float:
        return sum(c / chars_per_token + b for c, b in zip(self.chars[lo:hi], self.budget[lo:hi]))


TOKENS = ("tokens_evaluated", "tokens_generated")  # the backend's counters of the work done (llama.cpp's)


@dataclass
class RunProgress:
    lines: list[TaskLine]
    counters: Callable[[], dict] | None = None
    show: bool = True
    callback: Callable[[dict], None] | None = None
    stream: Any = None
    clock: Callable[[], float] = time.monotonic
    start: float | None = None
    prior: dict[str, float] = field(default_factory=dict)  # task → seconds per size unit the projection gives
    _chars_sent: int = 0
    _tokens_eval: int = 0
    _current: TaskLine | None = None
    _chunk: int = 0  # items of the chunk in progress (0: none)
    _t0: float = 0.0
    _c0: dict = field(default_factory=dict)
    _live: Any = None
    _last: float = 0.0

    def __post_init__(self):
        self._lock = threading.RLock()  # events come from the chunks' threads, figures from the display's
        self.started = self.clock() if self.start is None else self.start
        self.stream = self.stream or sys.stderr
        self.tty = self.show and hasattr(self.stream, "isatty") and self.stream.isatty()
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(console=Console(file=self.stream), refresh_per_second=4, transient=False,
                              get_renderable=self._table)
            self._live.start()

    # ---- the run's events ----------------------------------------------------------------
    def begin(self, name: str) -> None:
        with self._lock:
            self._current = next(line for line in self.lines if line.name == name)
            self._mark()
            self._update(force=True)

    def _mark(self) -> None:
        self._t0, self._c0 = self.clock(), self._count()

    def starting(self, n: int) -> None:
        """A chunk of the current task's next n items starts (with two in flight: is the oldest)."""
        with self._lock:
            self._chunk = n

    def _count(self) -> dict:
        return dict(self.counters()) if self.counters else {}

    def advance(self, fraction_items: float, name: str | None = None) -> None:
        """A fraction of an item of the current task's chunk, or of the chunk of task `name`, is done."""
        with self._lock:
            line = self._current if name is None else next(x for x in self.lines if x.name == name)
            if line:
                line.in_chunk += fraction_items
                self._update()

    def saved(self, n: int, chars: int, ticked: float | None = None) -> None:
        """n items of the current task were written (their prompts held `chars` characters); `ticked`:
        what their chunk advanced (another chunk of the task may be in flight), None: all of it."""
        with self._lock:
            self._saved(n, chars, ticked)

    def _saved(self, n: int, chars: int, ticked: float | None) -> None:
        line = self._current
        if line is None:
            return
        now, c = self.clock(), self._count()
        line.seconds += now - self._t0
        evaluated = c.get("tokens_evaluated", 0) - self._c0.get("tokens_evaluated", 0)
        line.tokens += evaluated + c.get("tokens_generated", 0) - self._c0.get("tokens_generated", 0)
        self._chars_sent += chars
        self._tokens_eval += evaluated
        lo = line.items_done  # the line's remaining items are in run order
        line.units_done += line.units(self.chars_per_token(), lo, lo + n)
        line.saved += n
        line.items_done += n
        line.in_chunk, self._chunk = 0.0 if ticked is None else max(0.0, round(line.in_chunk - ticked, 9)), 0
        self._t0, self._c0 = now, c
        self._update(force=True)

    def dropped(self) -> None:
        """The chunk in progress was cut off (a --budget's deadline): nothing of it is saved."""
        with self._lock:
            if self._current:
                self._current.in_chunk, self._chunk = 0.0, 0
                self._update(force=True)

    def note(self, name: str, text: str | None) -> None:
        with self._lock:
            next(line for line in self.lines if line.name == name).note = text or ""

    def end(self) -> None:
        with self._lock:
            self._current = None
            self._update(force=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def say(self, message: str) -> None:
        """A line beside the display (from any thread: the Ctrl-C acknowledgement)."""
        try:
            if self._live is not None:
                self._live.console.print(message, markup=False, highlight=False)
            else:
                self.stream.write(message + "\n")
                self.stream.flush()
        except (OSError, ValueError):  # the terminal is gone (a closed window): the run still stops cleanly
            pass

    # ---- the figures ---------------------------------------------------------------------
    def chars_per_token(self) -> float:
        return self._chars_sent / self._tokens_eval if self._tokens_eval > 0 and self._chars_sent > 0 else 4.0

    def _rates(self, line: TaskLine) -> tuple[float | None, float | None]:
        """A task's seconds per size unit and per token: measured on its own chunks, else the run's
        averages over the tasks measured (None: none is)."""
        measured = [line] if line.items_done and line.units_done > 0 else \
            [x for x in self.lines if x.items_done and x.units_done > 0]
        seconds, tokens = sum(x.seconds for x in measured), sum(x.tokens for x in measured)
        return (seconds / sum(x.units_done for x in measured) if measured else None,
                seconds / tokens if tokens else None)

    def _chunk_done(self, line: TaskLine, per_unit: float, per_token: float | None) -> float:
        """Seconds of the chunk in progress done by now, at most the chunk's expected time: its tokens
        so far at the task's seconds per token, or, where the backend counts none, the share of its
        requests finished."""
        lo, n = line.items_done, self._chunk
        expected = line.units(self.chars_per_token(), lo, lo + n) * per_unit
        c = self._count()
        if per_token is not None and all(k in c for k in TOKENS):
            done = sum(max(0, c[k] - self._c0.get(k, 0)) for k in TOKENS) * per_token
        else:
            done = expected * line.in_chunk / n
        return min(done, expected)

    def chunk_seconds(self, name: str, n: int) -> float | None:
        """The seconds the task's next n items are expected to take: at the seconds per size unit its
        own chunks took in this process, else at the projection's (`prior`); None: nothing to go by."""
        line = next(x for x in self.lines if x.name == name)
        per_unit = line.seconds / line.units_done if line.items_done and line.units_done > 0 else self.prior.get(name)
        lo = line.items_done
        return None if per_unit is None else line.units(self.chars_per_token(), lo, lo + n) * per_unit

    def snapshot(self) -> dict:
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> dict:
        cpt = self.chars_per_token()
        measured = any(line.items_done and line.units_done > 0 for line in self.lines)
        tasks, eta_total = [], 0.0 if measured else None
        for line in self.lines:
            per_unit, per_token = self._rates(line)
            start = line.items_done if line.saved < line.total else len(line.chars)
            left = line.units(cpt, start) if line.saved < line.total else 0.0
            eta = left * per_unit if per_unit is not None else (0.0 if not left else None)
            if eta is not None and per_unit is not None and line is self._current and self._chunk:
                eta -= self._chunk_done(line, per_unit, per_token)
            if eta_total is not None:
                eta_total = eta_total + eta if eta is not None else None
            tasks.append({"task": line.name, "saved": line.saved, "total": line.total, "in_chunk": round(line.in_chunk, 2),
                          "items_per_s": line.items_done / line.seconds if line.seconds else None,
                          "tokens_per_s": line.tokens / line.seconds if line.seconds and self.counters else None,
                          "eta_s": eta, "running": line is self._current, **({"note": line.note} if line.note else {})})
        return {"tasks": tasks, "saved": sum(x.saved for x in self.lines), "total": sum(x.total for x in self.lines),
                "elapsed_s": self.clock() - self.started, "eta_s": eta_total}

    def _update(self, force: bool = False) -> None:  # under the lock
        now = self.clock()
        if not force and now - self._last < 0.2:
            return
        self._last = now
        snap = self.snapshot() if (self.callback or (self.show and not self.tty)) else {}
        if self.callback:
            self.callback(snap)
        line = self._current
        if self.show and not self.tty and line is not None:  # a log: a line each 10% of a task
            decile = int(line.saved * 10 // line.total) if line.total else 10
            if decile != line._decile:
                line._decile = decile
                self.say(self._text(snap, line.name))

    def _text(self, snap: dict, name: str) -> str:
        t = next(x for x in snap["tasks"] if x["task"] == name)
        rate = f"{t['items_per_s']:.2f} items/s" if t["items_per_s"] else "- items/s"
        tok = f"  {t['tokens_per_s']:.0f} tokens/s" if t["tokens_per_s"] else ""
        note = f"  {t['note']}" if t.get("note") else ""
        return (f"{name}: {t['saved']}/{t['total']} saved  {rate}{tok}  ETA {clock(t['eta_s'])}{note}"
                f"  | run: {snap['saved']}/{snap['total']}  elapsed {clock(snap['elapsed_s'])}  ETA {clock(snap['eta_s'])}")

    def _table(self):
        from rich.table import Table

        snap = self.snapshot()
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
            ("task", "left"), ("saved", "right"), ("", "left"), ("items/s", "right"), ("tokens/s", "right"), ("ETA", "right"),
            ("", "left"))
        for col, just in columns:
            table.add_column(col, justify=just)
        for t in snap["tasks"]:
            frac = t["saved"] / t["total"] if t["total"] else 1.0
            bar = "█" * int(frac * 20) + "·" * (20 - int(frac * 20))
            chunk = f" +{t['in_chunk']:.0f}" if t["in_chunk"] >= 1 else ""
            table.add_row(("▶ " if t["running"] else "  ") + t["task"], f"{t['saved']}/{t['total']}{chunk}", bar,
                          f"{t['items_per_s']:.2f}" if t["items_per_s"] else "-",
                          f"{t['tokens_per_s']:.0f}" if t["tokens_per_s"] else "-", clock(t["eta_s"]), t.get("note", ""))
        table.add_row("  run", f"{snap['saved']}/{snap['total']}", f"elapsed {clock(snap['elapsed_s'])}", "", "",
                      clock(snap["eta_s"]), "", style="bold")
        return table
