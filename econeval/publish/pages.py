"""The HTML pages econeval writes — the report (`report --format html`), a run's answers (`view`),
a gate's progress (`gate --plot`) and auto-STEER's review.html — rendered by one Jinja2
environment from the templates under templates/: one base layout, one stylesheet (inlined, so
every page is one self-contained file that opens offline), a template per page.

Autoescaping is on: every value a page shows is escaped where it is placed, and cleaned of
terminal escapes and bidirectional overrides (errors.clean) on the way; the one value passed
through as markup is a figure's SVG, which matplotlib writes (`Markup` at its one maker)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from ..errors import clean

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _shown(value: Any) -> Any:
    """What `{{ value }}` prints: text cleaned for a page (markup is the page's own)."""
    return value if isinstance(value, Markup) or not isinstance(value, str) else clean(value)


def thousands(value: Any) -> str:
    """An item count as the pages write it: 1,026; anything else as it is."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def shown_path(path: str | os.PathLike, start: str | os.PathLike | None = None) -> str:
    """A path as a page shows it: relative to `start` (the page's folder) where it lies beneath
    it, else its last part (a folder's name); never the machine's absolute path."""
    p = Path(path)
    if start is not None:
        try:
            return p.resolve().relative_to(Path(start).resolve()).as_posix() or "."
        except ValueError:
            pass
    return p.name or str(p)


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined, finalize=_shown,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["thousands"] = thousands
    return env


def render(template: str, **context: Any) -> str:
    """One page as text."""
    return environment().get_template(template).render(**context)


def stream(template: str, **context: Any) -> Iterator[str]:
    """One page in pieces as the template reaches them: a page over a stream of items (the
    view's) is written without being held whole in memory."""
    return environment().get_template(template).generate(**context)


def svg(text: str) -> Markup:
    """A figure's SVG as matplotlib wrote it (its text escaped by matplotlib), placed as markup."""
    return Markup(text[text.index("<svg"):])
