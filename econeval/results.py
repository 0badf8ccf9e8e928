"""JSON files: atomic writes, strict reading of user-supplied JSON Lines.

NaN policy: a metric that cannot be computed is None, written as JSON null (orjson also
writes float NaN as null, so nothing non-standard reaches a file).
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import orjson

from .errors import UsageError

_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY  # key order kept: tables keep the papers' column order


def dumps(obj: Any, pretty: bool = True) -> bytes:
    return orjson.dumps(obj, option=_OPTS if pretty else orjson.OPT_SERIALIZE_NUMPY)


@contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """A file to write `path` through: a temporary file beside it, fsynced and renamed over it
    when the block ends without an error, removed otherwise (no half-written file is left)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o644)
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _remove_orphans(path: Path) -> None:
    """Remove the temporary files of writers of `path` that were killed (kill -9 leaves them): each
    is named with its writer's process id, and one whose process is gone is nobody's."""
    import glob
    import re

    for left in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        m = re.fullmatch(re.escape(f".{path.name}.") + r"(\d+)\.[^.]+\.tmp", left.name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            left.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, fsync, then rename over it."""
    with atomic_writer(path) as fh:
        fh.write(data)


def check_output(path: Path, flag: str = "--out") -> None:
    """A file a user names for econeval to write (`--out`, `--junit`, an export): a new path or a
    regular file (replaced atomically) in a place a file can be made (check_place) may be written;
    a device, a FIFO, a folder or a symbolic link is refused in one line, before any work starts
    (run as root, `--out /dev/null` would replace the system's node)."""
    import stat

    from .errors import UsageError

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        check_place(path, flag)
        return
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror}", hint="name a file in a folder you can write") from None
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"{flag} {path} is a symbolic link: econeval writes only a new file or a regular file",
                         hint="name the file itself, or a new one")
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else \
            "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file"
        raise UsageError(f"{flag} {path} is {kind}: econeval writes only a new file or a regular file",
                         hint="name a new file")
    check_place(path, flag)


def check_place(path: Path, flag: str = "--out") -> None:
    """The folder `path` is written in can take a new file (atomic_writer makes one beside it, and
    the folders up to it where they are missing): the nearest existing one at or above path's
    folder is a folder, and a temporary file is made in it and removed. Tried, not inferred from
    permissions: a read-only file system, /proc, or a folder root may not write to refuse it too."""
    import tempfile

    from .errors import UsageError

    where = Path(os.path.abspath(path)).parent
    while not os.path.lexists(where) and where != where.parent:
        where = where.parent
    if not where.is_dir():
        raise UsageError(f"{flag} {path}: {where} is not a folder", hint="name a file in a folder you can write")
    try:
        fd, tmp = tempfile.mkstemp(dir=where, prefix=f".{Path(path).name}.{os.getpid()}.", suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"{flag} {path}: no file can be made in {where} ({exc.strerror})",
                         hint="name a file in a folder you can write") from None
    os.close(fd)
    os.unlink(tmp)


def write_output(path: Path, data: bytes, flag: str = "--out") -> None:
    """`data` written to a path a user named: checked (check_output), then atomically."""
    check_output(path, flag)
    write_atomic(path, data)


def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, dumps(obj) + b"\n")


def read_regular(path: Path, limit: int | None = None, follow: bool = False) -> bytes:
    """A file's bytes (at most `limit` of them: OSError beyond), refusing (OSError) a FIFO, a
    device or a folder, and unless `follow` a symbolic link: opened without blocking, then checked
    to be a regular file."""
    fd = open_regular(path, follow)
    try:
        chunks, size = [], 0
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            size += len(b)
            if limit is not None and size > limit:
                raise OSError(27, f"larger than {limit:,} bytes", str(path))
            chunks.append(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_regular(path: Path, follow: bool = False) -> int:
    """A file descriptor of a regular file, opened without blocking (a FIFO would wait for a
    writer forever); OSError for anything else."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(22, "not a regular file", str(path))
    return fd


def read_json(path: Path) -> Any:
    return orjson.loads(read_regular(path))


def read_jsonl(path: Path, what: str = "file") -> list[dict]:
    """Strict reader for user-supplied JSON Lines: a bad line is a usage error naming it."""
    rows = []
    try:
        lines = read_regular(path).splitlines()
    except OSError as exc:
        why = "a symbolic link" if exc.errno == 40 else exc.strerror
        raise UsageError(f"cannot read {what} {path}: {why}") from None
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
