"""JUnit XML for CI systems, written one way for `compare` and `gate`: one test case per task and
metric, a regression a failure carrying its numbers, an undecided metric (or a task's dropped
items) a skipped case saying why."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from ..errors import UsageError


@dataclass(frozen=True)
class Case:
    classname: str  # the task
    name: str  # the metric
    failure: str | None = None  # a regression: its numbers
    skipped: str | None = None  # inconclusive, or not compared: why


def suite(name: str, cases: list[Case]) -> str:
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f"<testsuite name={quoteattr(name)} tests=\"{len(cases)}\" failures=\"{sum(c.failure is not None for c in cases)}\" "
           f"skipped=\"{sum(c.skipped is not None for c in cases)}\">"]
    for c in cases:
        out.append(f"  <testcase classname={quoteattr(c.classname)} name={quoteattr(c.name)}>")
        if c.skipped is not None:
            out.append(f"    <skipped message={quoteattr(c.skipped)}/>")
        if c.failure is not None:
            out.append(f"    <failure message={quoteattr(c.failure)}>{escape(c.failure)}</failure>")
        out.append("  </testcase>")
    return "\n".join(out + ["</testsuite>"]) + "\n"


def check_target(path: Path) -> None:
    """Refuse (before any work) a --junit path that holds something other than a JUnit report: a
    report from an earlier run is replaced, any other file is left as it is."""
    from ..results import check_output, read_regular

    check_output(path, "--junit")
    if not path.exists():
        return
    try:
        head = read_regular(path, limit=64 << 20)[:4096].decode("utf-8", "replace")
    except OSError:
        head = ""
    if not (head.lstrip().startswith("<?xml") and '<testsuite name="econeval ' in head):  # econeval's own, not another tool's
        raise UsageError(f"--junit {path} exists and is not a JUnit report of econeval's: it is left as it is",
                         hint="name a new file, or remove that one")


def write(path: Path, xml: str) -> None:
    """The report, written atomically over an earlier report (check_target)."""
    from ..results import write_atomic

    check_target(path)
    write_atomic(path, xml.encode())
