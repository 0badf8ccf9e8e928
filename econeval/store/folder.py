"""The run folder: an exclusive lock, the identity check, and the files in it.

- `.lock` is held (flock) for the whole run and names its holder (pid, start time, host); the
  kernel releases it when the process dies, so a stale lock from a dead process is taken over.
- Nothing is written or removed before the folder's identity is checked. A folder is refused,
  with what differs, when run.json names another run (model, tasks, settings, data, seed) or
  another run format, when run.json cannot be read, when samples.jsonl exists without run.json,
  and when a line of samples.jsonl other than a torn last line does not parse.
- The files' names are runfiles.py's, the reading and writing of run.json record.py's; which
  results file a run writes is its selection's (selection.py).
"""

from __future__ import annotations

import fcntl
import os
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import orjson

from ..errors import UsageError
from .record import RunRecord, identity_differences
from .runfiles import LOCK, RESULTS, RUN_JSON, SAMPLES, is_member, read_results_file
from ..results import open_regular, write_json


def check_members(path: Path) -> None:
    """Refuse a folder whose run files are symbolic links or not regular files (nothing in it is
    opened before this), and a non-empty folder that holds other files (not a run folder)."""
    import stat

    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"cannot use {path} as a run folder: {exc.strerror}", hint="choose another --out") from None
    for name in names:
        st = os.lstat(path / name)
        if not is_member(name):
            raise UsageError(f"{path} is not a run folder (it holds {name!r}, which econeval did not write)",
                             hint="choose a new or empty --out folder")
        if stat.S_ISLNK(st.st_mode):
            raise UsageError(f"{path / name} is a symbolic link: econeval does not follow links in a run folder",
                             hint="remove the link or choose another --out")
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{path / name} is not a regular file", hint="remove it or choose another --out")


class RunFolder:
    def __init__(self, path: Path, lock_fd: int, record: RunRecord | None):
        self.path, self._lock_fd, self.record = path, lock_fd, record

    @classmethod
    def open(cls, path: Path) -> "RunFolder":
        """Create (if needed) and lock the folder, and read what is in it; writes nothing else."""
        path = Path(path)
        check_members(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
            fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            raise UsageError(f"cannot use {path} as a run folder: {exc.strerror}", hint="choose another --out") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise UsageError(f"{path} is in use by {holder}",
                             hint="wait for that run to finish, or choose another --out") from None
        stamp = f"pid {os.getpid()} on {socket.gethostname()} since {datetime.now(timezone.utc).isoformat(timespec='seconds')}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, stamp.encode(), 0)
        try:
            record = cls._read_record(path)
            if record is None and (path / SAMPLES).is_file() and (path / SAMPLES).stat().st_size:
                raise UsageError(f"{path} holds samples.jsonl but no run.json: it cannot be told which run the samples belong to",
                                 hint="choose a new --out folder")
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, record)

    @staticmethod
    def _read_record(path: Path) -> RunRecord | None:
        if not (path / RUN_JSON).exists():
            return None
        return RunRecord.read(path, strict=False, hint="the folder is left as it is; choose a new --out folder")

    def check_identity(self, identity: dict, partial: bool = False) -> None:
        """Refuse a folder holding another run, saying what differs in the user's terms. A run
        of some of the folder's tasks, or of more tasks, is the same run: only the tasks both
        have are compared (and the judge and embedder where both use one). `partial`: compare
        only what `identity` holds (before the model is loaded)."""
        if self.record is None:
            return
        old = self.record
        if old.run_format != identity["run_format"] or not old.identity:  # none, or not an object: read as absent
            raise UsageError(f"{self.path} was written by another version of econeval (run format "
                             f"{old.run_format or 1}, this one writes {identity['run_format']}) and cannot be resumed",
                             hint="choose a new --out folder (or run without --out: a new folder is made)")
        diffs = identity_differences(old.identity, identity, partial)
        if diffs:
            raise UsageError(f"{self.path} holds a different run ({'; '.join(diffs[:4])}{'; …' if len(diffs) > 4 else ''})",
                             hint="rerun with the folder's settings to resume it, or pass --new (or another --out) for a new run")

    def has(self, name: str) -> bool:
        return (self.path / name).exists()

    def write_record(self, record: RunRecord) -> None:
        record.write(self.path)
        self.record = record

    def read_results(self, name: str) -> dict:
        """The tasks of the folder's results file `name` ({} when there is none or it cannot be read)."""
        try:
            return read_results_file(self.path / name)
        except UsageError:
            return {}

    def write_results(self, name: str, doc: dict) -> None:
        write_json(self.path / name, doc)

    def samples(self) -> "SampleLog":
        return SampleLog(self.path / SAMPLES)

    def write_complete(self, records: list[dict], doc: dict, record: RunRecord, results_name: str = RESULTS) -> None:
        """A finished run written at once (score --out, merge): samples, the results, run.json."""
        log = self.samples()
        try:
            log.append(records)
        finally:
            log.close()
        self.write_results(results_name, doc)
        self.write_record(record)

    def close(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1


def _scan(path: Path) -> Iterator[tuple[tuple[str, str] | None, dict | None, int]]:
    """The lines of a samples.jsonl read as a stream: ((task, id), record, the byte length of the
    complete part so far), a blank line as (None, None, length). A torn last line left by a crash
    is not part of it; any other line that does not parse, lacks its task or id (strings), or
    repeats an item, is refused."""
    seen: set[tuple[str, str]] = set()
    try:
        fh = os.fdopen(open_regular(path), "rb")
    except OSError as exc:
        raise UsageError(f"{path} cannot be read ({exc.strerror})", hint="choose a new --out folder") from None
    with fh:
        good_end = 0
        for n, line in enumerate(fh, 1):
            last = not line.endswith(b"\n")
            if not line.strip():
                good_end += len(line)
                yield None, None, good_end
                continue
            try:
                rec = orjson.loads(line)
                key = (rec["task"], rec["id"])
                if not (isinstance(key[0], str) and isinstance(key[1], str)):
                    raise TypeError("task and id are strings")
            except (orjson.JSONDecodeError, KeyError, TypeError):
                if last:  # torn by a crash mid-write
                    return
                raise UsageError(f"{path}:{n} is not a sample line written by econeval; the folder is left as it is",
                                 hint="choose a new --out folder") from None
            if key in seen:  # econeval writes each item once: a second line is an edit, and neither may silently win
                raise UsageError(f"{path}:{n}: item {key[1]} of {key[0]} appears a second time; the folder is left as it is",
                                 hint="the samples were edited or concatenated; choose a new --out folder")
            seen.add(key)
            good_end += len(line)
            yield key, rec, good_end


def iter_samples(path: Path) -> Iterator[dict]:
    """The records of a samples.jsonl one at a time (a page of a large run is never all in memory)."""
    for _key, rec, _end in _scan(path):
        if rec is not None:
            yield rec


def read_samples(path: Path) -> tuple[dict[tuple[str, str], dict], int]:
    """The records of a samples.jsonl by (task, id), and the byte length of its complete part."""
    done: dict[tuple[str, str], dict] = {}
    good_end = 0
    for key, rec, good_end in _scan(path):
        if key is not None and rec is not None:
            done[key] = rec
    return done, good_end


def _reopen_cut(fh, path: Path, end: int):
    """After a failed append: drop what the buffer held, cut the file back to `end`, reopen."""
    try:
        os.ftruncate(fh.fileno(), end)
    finally:
        try:
            fh.close()  # may try to flush the rest of the buffer and fail again
        except OSError:
            pass
    os.truncate(path, end)
    return open(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW), "ab")


class SampleLog:
    """samples.jsonl: one line per (task, item), appended. Opening keeps every complete line and
    cuts a torn last line left by a crash (its item simply runs again); any other line that does
    not parse, or lacks its task or id, makes the folder refused — never rewritten."""

    def __init__(self, path: Path):
        self.path = path
        self.done: dict[tuple[str, str], dict] = {}
        if path.exists():
            self.done, good_end = read_samples(path)
            if good_end < path.stat().st_size:
                os.truncate(path, good_end)
            with open(os.open(path, os.O_RDWR | os.O_NOFOLLOW), "rb+") as fh:  # a complete last record without its newline gets one
                fh.seek(max(good_end - 1, 0))
                if good_end and fh.read(1) != b"\n":
                    fh.seek(0, os.SEEK_END)
                    fh.write(b"\n")
        self._fh = open(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644), "ab")

    def append(self, records: list[dict]) -> None:
        """The records land whole or not at all: a failed write (a full disk) is cut back."""
        data = b"".join(orjson.dumps(rec, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n" for rec in records)
        end = os.fstat(self._fh.fileno()).st_size
        try:
            self._fh.write(data)
            self._fh.flush()
            os.fsync(self._fh.fileno())
        except OSError:
            self._fh = _reopen_cut(self._fh, self.path, end)
            raise
        for rec in records:
            self.done[(rec["task"], rec["id"])] = rec

    def close(self) -> None:
        self._fh.close()
