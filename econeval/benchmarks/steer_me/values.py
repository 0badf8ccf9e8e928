"""The numbers a STEER-ME question's options and answers are, read from their text (`$1,250.00`
is 1250.0): one reader for the scorer, the mistakes and the report's pairs."""

from __future__ import annotations


def to_float(s: str) -> float | None:
    try:
        return float(s.replace("$", "").replace(",", ""))
    except ValueError:
        return None


def option_values(item: dict) -> dict[int, float]:
    """The options that are numbers, by index ("No other option is correct." is none)."""
    return {i: v for i, o in enumerate(item["options"]) if (v := to_float(str(o))) is not None}
