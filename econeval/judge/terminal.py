"""`compare`'s and `gate`'s rows as a terminal reads them, laid out by rich: the table fits the
console's width without breaking a number or a row mid-column (where the full table is wider, the
task becomes a heading over its rows, then the least needed columns are left out, and a line says
which), a verdict in colour on a terminal only (never with NO_COLOR), and no escape codes in a
pipe or a file. Output that is not a terminal is laid out at the table's own width unless COLUMNS
says otherwise, so a log keeps one line per row."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..errors import clean

PIPE_WIDTH = 10_000  # a pipe or a file without COLUMNS: nothing wraps
STYLES = {"regression": "bold red", "improvement": "green", "pass": "green", "ok": "green", "inconclusive": "yellow",
          "undecided": "yellow"}


@dataclass(frozen=True)
class Col:
    """A column: the row attribute it shows, its heading, whether it holds numbers (right-aligned)
    and how long it stays as the width narrows (0: always kept; a larger number is left out
    earlier). No cell is ever broken across lines."""

    key: str
    head: str
    number: bool = True
    drop: int = 0


def console(file: Any = None):
    """A rich console on stdout (or `file`): a terminal's width and colour, a pipe's at no width limit."""
    from rich.console import Console

    stream = file or sys.stdout
    wide = not (hasattr(stream, "isatty") and stream.isatty()) and not os.environ.get("COLUMNS")
    return Console(file=stream, width=PIPE_WIDTH if wide else None, highlight=False, markup=False, emoji=False)


def _need(cols: Sequence[Col], widths: dict[str, int]) -> int:
    return sum(widths[c.key] for c in cols) + 2 * (len(cols) - 1)


def table(cols: Sequence[Col], rows: Sequence[dict[str, str]], width: int, group: str = "task") -> list:
    """The rows (each column's text by key) as renderables that fit `width`: one table with every
    column where it fits; else one table per `group` value under a heading of its own, and the
    columns with the largest `drop` left out until it fits (a last line names them)."""
    from rich.table import Table
    from rich.text import Text

    widths = {c.key: max([len(c.head), *(len(r[c.key]) for r in rows)]) for c in cols}
    shown = list(cols)
    grouped = _need(shown, widths) > width
    if grouped:
        shown = [c for c in shown if c.key != group]
    left_out = []
    for c in sorted((c for c in shown if c.drop), key=lambda c: -c.drop):
        if _need(shown, widths) <= width:
            break
        shown.remove(c)
        left_out.append(c)

    def make(part: Sequence[dict[str, str]], header: bool):
        t = Table(box=None, pad_edge=False, show_edge=False, show_header=header, header_style="bold", padding=(0, 1))
        for c in shown:
            t.add_column(c.head, justify="right" if c.number else "left", no_wrap=True, min_width=widths[c.key])
        for r in part:
            t.add_row(*(Text(clean(r[c.key]), style=STYLES.get(r[c.key], "") if c.key == "verdict" else "") for c in shown))
        return t

    if not grouped:
        out: list = [make(rows, True)]
    else:
        out = []
        for name in dict.fromkeys(r[group] for r in rows):
            out += [Text(clean(name), style="bold"), make([r for r in rows if r[group] == name], not out)]
    if left_out:
        heads = [c.head for c in cols if c in left_out]
        out.append(Text(f"(not shown at this width: {', '.join(heads)}; --format json has every column)", style="dim"))
    return out


def lines(texts: Sequence[str], indent: int = 2) -> list:
    """Notes as text wrapped to the width, each indented."""
    from rich.padding import Padding
    from rich.text import Text

    return [Padding(Text(clean(t)), (0, 0, 0, indent), expand=False) for t in texts]


def verdict(text: str, verdict: str) -> Any:
    """The closing verdict line, in the verdict's colour."""
    from rich.text import Text

    return Text(clean(text), style=STYLES.get(verdict, "bold"))


def show(build: Callable[[int], list], file: Any = None) -> None:
    """Print what `build(width)` makes for the console's width, each part on its own lines (a
    blank line where a part is None)."""
    from rich.text import Text

    out = console(file)
    for part in build(out.width):
        out.print(Text("") if part is None else part)
