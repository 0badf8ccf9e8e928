"""Progress on stderr: done/total items, items/s, tokens/s, elapsed and ETA per task. Redraws
in place on a terminal (at most 5 times a second), prints a line every 10% otherwise (logs stay
readable)."""

from __future__ import annotations

import sys
import time
from typing import Callable


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    def __init__(self, label: str, total: int, stream=None, enabled: bool = True,
                 counters: Callable[[], dict] | None = None):
        self.label, self.total = label, total
        self.done = 0.0  # fractional: requests inside a chunk advance it
        self.done_items = 0  # items written
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.tty = self.stream.isatty()
        self.start = time.monotonic()
        self._last_decile = -1
        self._last_draw = 0.0
        self.counters = counters
        self._tokens0 = self._tokens()

    def _tokens(self) -> int:
        if not self.counters:
            return 0
        c = self.counters()
        return c.get("tokens_evaluated", 0) + c.get("tokens_generated", 0)

    def advance(self, n: float) -> None:
        self.done = min(self.done + n, self.total)
        self._draw()

    def set(self, done_items: int) -> None:
        self.done_items = done_items
        self.done = float(done_items)
        self._draw(force=done_items >= self.total)

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate else 0.0
        toks = (self._tokens() - self._tokens0) / elapsed if elapsed > 0 and self.counters else None
        tok = f"  {toks:.0f} tokens/s" if toks is not None else ""
        return (f"{self.label}: {int(self.done)}/{self.total}  {rate:.2f} items/s{tok}  elapsed {_clock(elapsed)}"
                f"  ETA {_clock(eta)}")

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        if self.tty:
            now = time.monotonic()
            if not force and now - self._last_draw < 0.2:
                return
            self._last_draw = now
            self.stream.write("\r\033[K" + self.line())
            if self.done_items >= self.total:
                self.stream.write("\n")
            self.stream.flush()
        else:
            decile = int(self.done * 10 // self.total)
            if decile != self._last_decile:
                self._last_decile = decile
                print(self.line(), file=self.stream, flush=True)
