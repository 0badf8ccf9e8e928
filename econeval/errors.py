"""User-facing errors: the CLI prints them as one line and exits non-zero."""

from __future__ import annotations

import re


class EconevalError(Exception):
    """A problem the user can fix. `hint` says how; `exit_code` follows the CLI contract."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint

    def one_line(self) -> str:
        """The message and its hint on one line: a line break inside a value the user gave (a
        -T value, a path) is shown as \\n, so the error stays one line."""
        msg = f"{self} ({self.hint})" if self.hint else str(self)
        return hide_credentials(msg.replace("\r", "\\r").replace("\n", "\\n"))


class UsageError(EconevalError):
    """Bad arguments: unknown task, model name, malformed predictions file."""

    exit_code = 2


class DataError(EconevalError):
    """A dataset is not built, or its files do not match the manifest."""


class ModelError(EconevalError):
    """A model file is missing, not GGUF, truncated, or failed to load."""


class Interrupted(EconevalError):
    """SIGINT / SIGTERM / SIGHUP during a run: exit 128 + the signal number (130, 143, 129)."""

    def __init__(self, signum: int):
        import signal

        self.signum = signum
        self.exit_code = 128 + signum
        self.marked = False  # run.json was marked interrupted (the CLI says so only then)
        self.saved: tuple[int, int] | None = None  # (items saved, items of the run)
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


class BudgetSpent(EconevalError):
    """A --budget's deadline passed while a chunk ran: the model stopped at its next step (as at a
    signal), and the runner drops the chunk and ends the run as a spent budget (never shown)."""

    def __init__(self) -> None:
        super().__init__("the --budget's deadline passed inside a chunk")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun in the right number: "1 task", "2 tasks", "1,026 items"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def saved_words(saved: int, total: int) -> str:
    """How much of a run a stop leaves saved: "32 of 3,920 items are saved", or, before its first
    item was saved, "none of its 128 items is saved yet"."""
    if not saved:
        return f"none of its {counted(total, 'item')} is saved yet"
    return f"{saved:,} of {counted(total, 'item')} {'is' if saved == 1 else 'are'} saved"


def warn(message: str) -> None:
    """The one way econeval prints a warning (stderr, one line)."""
    import sys

    print(f"econeval: warning: {hide_credentials(message)}", file=sys.stderr, flush=True)


_UNSAFE = re.compile("\x1b\\][^\x07\x1b]*(?:\x07|\x1b\\\\)?|\x1b\\[[0-?]*[ -/]*[@-~]|"
                     "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: str) -> str:
    """Text safe to show in a terminal, a Markdown table or a page: control characters (ANSI and
    OSC escape sequences included) and bidirectional overrides are replaced by '?'. Newlines and
    tabs are kept."""
    return _UNSAFE.sub("?", text)


# a URL's user information runs to the last "@" before its path, as urllib splits it (a password
# may hold "@" or a space): everything from the scheme to that "@" is hidden
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/?#\n]*@")


def hide_credentials(text: str) -> str:
    """A URL's user name and password (`http://user:pw@host`) replaced by `[redacted]`, as keys
    are: the one way econeval hides them, wherever a URL is shown, stored or recorded."""
    return _USERINFO.sub(r"\1[redacted]@", text)


def map_strings(fn, obj):
    """`fn` over every string of a JSON-like document (keys included)."""
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {map_strings(fn, k): map_strings(fn, v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [map_strings(fn, v) for v in obj]
    return obj


def hide_credentials_tree(obj):
    """`hide_credentials` over every string of a JSON-like document (keys included)."""
    return map_strings(hide_credentials, obj)


def clean_tree(obj):
    """`clean` over every string of a JSON-like document (keys included)."""
    return map_strings(clean, obj)
