"""The numbers a STEER-ME question's options and answers are, read from their text (`$1,250.00`
is 1250.0): one reader for the scorer, the mistakes and the report's pairs."""

from __future__ import annotations

import math


def to_float(s: str) -> float | None:
    try:
        return float(s.replace("$", "").replace(",", ""))
    except ValueError:
        return None


def option_values(item: dict) -> dict[int, float]:
    """The options that are numbers, by index ("No other option is correct." is none)."""
    return {i: v for i, o in enumerate(item["options"]) if (v := to_float(str(o))) is not None}


def free_text_gold(item: dict) -> float | None:
    """A question's answer as a number (its solution's value, else its correct option read as one);
    None where it is not one (a package question answered by a word)."""
    value = item["solution"].get("value") if isinstance(item.get("solution"), dict) else None
    if value is None and item.get("correct_index") is not None:
        value = to_float(str(item["options"][item["correct_index"]]))
    try:
        number = float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None
    return number if number is not None and math.isfinite(number) else None
