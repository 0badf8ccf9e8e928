"""The run folder: run.json, samples.jsonl, results.json. Writes are atomic; samples append.

NaN policy: a metric that cannot be computed is None, written as JSON null (orjson also
writes float NaN as null, so nothing non-standard reaches a file).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

import orjson

from .errors import UsageError

_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY  # key order kept: tables keep the papers' column order


def dumps(obj: Any, pretty: bool = True) -> bytes:
    return orjson.dumps(obj, option=_OPTS if pretty else orjson.OPT_SERIALIZE_NUMPY)


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, fsync, then rename over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, dumps(obj) + b"\n")


def read_json(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def read_jsonl(path: Path, what: str = "file") -> list[dict]:
    """Strict reader for user-supplied JSON Lines: a bad line is a usage error naming it."""
    rows = []
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise UsageError(f"{path}:{n}: not valid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise UsageError(f"{path}:{n}: each line must be a JSON object")
        rows.append(obj)
    return rows


class SampleLog:
    """samples.jsonl: one line per (task, item). Reopening keeps every complete line, drops a
    torn last line left by a crash, and reports which items are done (for resuming)."""

    def __init__(self, path: Path):
        self.path = path
        self.done: dict[tuple[str, str], dict] = {}
        if path.exists():
            good = []
            for line in path.read_bytes().splitlines():
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # a line torn by a crash: its item is simply run again
                self.done[(rec["task"], rec["id"])] = rec
                good.append(line)
            write_atomic(path, b"".join(l + b"\n" for l in good))
        self._fh = open(path, "ab")

    def append(self, records: Iterable[dict]) -> None:
        for rec in records:
            self._fh.write(orjson.dumps(rec, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
            self.done[(rec["task"], rec["id"])] = rec
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def records(self, task: str) -> list[dict]:
        return [r for (t, _), r in self.done.items() if t == task]

    def close(self) -> None:
        self._fh.close()
