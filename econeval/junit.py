"""JUnit XML for CI systems, written one way for `compare` and `gate`: one test case per task and
metric, a regression a failure carrying its numbers, an undecided metric (or a task's dropped
items) a skipped case saying why."""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr


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
