"""A progress line on stderr: done/total, items/s, ETA. Redraws in place on a terminal,
prints a line every 10% otherwise (logs stay readable)."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, label: str, total: int, stream=None, enabled: bool = True):
        self.label, self.total, self.done = label, total, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.tty = self.stream.isatty()
        self.start = time.monotonic()
        self._last_decile = -1

    @property
    def rate(self) -> float:
        elapsed = time.monotonic() - self.start
        return self.done / elapsed if elapsed > 0 else 0.0

    def update(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        rate = self.rate
        eta = (self.total - self.done) / rate if rate else 0.0
        line = f"{self.label}: {self.done}/{self.total}  {rate:.2f} items/s  ETA {int(eta // 60)}:{int(eta % 60):02d}"
        if self.tty:
            self.stream.write("\r\033[K" + line)
            if self.done >= self.total:
                self.stream.write("\n")
            self.stream.flush()
        else:
            decile = self.done * 10 // self.total
            if decile != self._last_decile:
                self._last_decile = decile
                print(line, file=self.stream, flush=True)
