"""The run folder: an exclusive lock, the identity check, and the files in it.

- `.lock` is held (flock) for the whole run and names its holder (pid, start time, host); the
  kernel releases it when the process dies, so a stale lock from a dead process is taken over.
- Nothing is written or removed before the folder's identity is checked. A folder is refused,
  with what differs, when run.json names another run (model, tasks, settings, data, seed) or
  another run format, when run.json cannot be read, when samples.jsonl exists without run.json,
  and when a line of samples.jsonl other than a torn last line does not parse.
- results.json holds the table of the largest `--limit` run into the folder; a smaller one
  writes `results-limit-N.json` beside it, never over it.
"""

from __future__ import annotations

import fcntl
import os
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import orjson

from .errors import UsageError
from .results import open_regular, read_json, write_json

LOCK = ".lock"
MEMBERS = (LOCK, "run.json", "samples.jsonl", "results.json", "results-partial.json")


def _is_member(name: str) -> bool:
    """A file econeval writes in a run folder (an atomic write's leftover temporary file too)."""
    return name in MEMBERS or (name.startswith(("results-limit-", "results-sample-")) and name.endswith(".json")) \
        or (name.startswith(".") and name.endswith(".tmp"))


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
        if not _is_member(name):
            raise UsageError(f"{path} is not a run folder (it holds {name!r}, which econeval did not write)",
                             hint="choose a new or empty --out folder")
        if stat.S_ISLNK(st.st_mode):
            raise UsageError(f"{path / name} is a symbolic link: econeval does not follow links in a run folder",
                             hint="remove the link or choose another --out")
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{path / name} is not a regular file", hint="remove it or choose another --out")


class RunFolder:
    def __init__(self, path: Path, lock_fd: int, meta: dict | None):
        self.path, self._lock_fd, self.meta = path, lock_fd, meta

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
            meta = cls._read_meta(path)
            if meta is None and (path / "samples.jsonl").is_file() and (path / "samples.jsonl").stat().st_size:
                raise UsageError(f"{path} holds samples.jsonl but no run.json: it cannot be told which run the samples belong to",
                                 hint="choose a new --out folder")
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, meta)

    @staticmethod
    def _read_meta(path: Path) -> dict | None:
        p = path / "run.json"
        if not p.exists():
            return None
        try:
            meta = read_json(p)
        except (OSError, orjson.JSONDecodeError) as exc:
            raise UsageError(f"{p} cannot be read ({exc}); the folder is left as it is", hint="choose a new --out folder") from None
        if not isinstance(meta, dict):
            raise UsageError(f"{p} is not a run.json written by econeval", hint="choose a new --out folder")
        return meta

    def check_identity(self, identity: dict, partial: bool = False) -> None:
        """Refuse a folder holding another run, saying what differs in the user's terms. A run
        of some of the folder's tasks, or of more tasks, is the same run: only the tasks both
        have are compared (and the judge and embedder where both use one). `partial`: compare
        only what `identity` holds (before the model is loaded)."""
        if self.meta is None:
            return
        old = self.meta.get("identity")
        if self.meta.get("run_format") != identity["run_format"] or not isinstance(old, dict):
            raise UsageError(f"{self.path} was written by another version of econeval (run format "
                             f"{self.meta.get('run_format', 1)}, this one writes {identity['run_format']}) and cannot be resumed",
                             hint="choose a new --out folder (or run without --out: a new folder is made)")
        diffs = identity_differences(old, identity, partial)
        if diffs:
            raise UsageError(f"{self.path} holds a different run ({'; '.join(diffs[:4])}{'; …' if len(diffs) > 4 else ''})",
                             hint="rerun with the folder's settings to resume it, or pass --new (or another --out) for a new run")

    def results_name(self, limit: int | None) -> str:
        """results.json, unless the folder already holds a run over more items."""
        if not self.meta or not (self.path / "results.json").exists():
            return "results.json"
        old = self.meta.get("limit")
        smaller = limit is not None and (old is None or limit < old)
        return f"results-limit-{limit}.json" if smaller else "results.json"

    def write_meta(self, meta: dict) -> None:
        write_json(self.path / "run.json", meta)
        self.meta = meta

    def read_results(self, name: str) -> dict:
        """The tasks of the folder's results file `name` ({} when there is none or it cannot be read)."""
        try:
            doc = read_json(self.path / name)
        except (OSError, orjson.JSONDecodeError):
            return {}
        return doc.get("tasks", {}) if isinstance(doc, dict) and isinstance(doc.get("tasks"), dict) else {}

    def write_results(self, name: str, doc: dict) -> None:
        write_json(self.path / name, doc)

    def samples(self) -> "SampleLog":
        return SampleLog(self.path / "samples.jsonl")

    def write_complete(self, records: list[dict], doc: dict, meta: dict, results_name: str = "results.json") -> None:
        """A finished run written at once (score --out, merge): samples, the results, run.json."""
        log = self.samples()
        try:
            log.append(records)
        finally:
            log.close()
        self.write_results(results_name, doc)
        self.write_meta(meta)

    def close(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1


_LEGACY_ROLES = ("judge", "embedder")  # run.json's and the identity's role keys before they had `roles`


def roles_of(meta: dict) -> dict[str, dict]:
    """A run.json's roles: name → entry, the roles its tasks used (folders written before roles
    were open kept `judge` and `embedder` as top-level keys, and so does their identity)."""
    got = meta.get("roles")
    if isinstance(got, dict):
        return {k: v for k, v in got.items() if isinstance(v, dict)}
    return {k: meta[k] for k in _LEGACY_ROLES if isinstance(meta.get(k), dict)}


def named_roles(meta: dict) -> frozenset[str]:
    """The roles a model was named for in a run.json (in the earlier layout: a judge entry)."""
    if isinstance(meta.get("roles"), dict):
        return frozenset(k for k, v in roles_of(meta).items() if v.get("named"))
    return frozenset({"judge"}) if meta.get("judge") is not None else frozenset()


def role_identities(identity: dict) -> dict:
    """An identity's roles: name → the identity of the model that filled it."""
    got = identity.get("roles")
    if isinstance(got, dict):
        return got
    return {k: identity[k] for k in _LEGACY_ROLES if identity.get(k) is not None}


FOLDER_SIDES = ("in the folder", "now")  # how a difference names the two identities compared


def identity_differences(old: dict, new: dict, partial: bool = False, sides: tuple[str, str] = FOLDER_SIDES) -> list[str]:
    """What differs between a folder's identity and a run's, as the user would name it."""
    out: list[str] = []
    for k in sorted(set(old) | set(new), key=str):
        if k == "tasks":
            both = [t for t in new.get("tasks", {}) if t in old.get("tasks", {})]
            for t in both:
                out.extend(differences(old["tasks"][t], new["tasks"][t], f"tasks.{t}", partial, sides))
        elif k == "roles" or k in _LEGACY_ROLES:
            continue  # below: a role is compared only where both runs use it
        elif not (partial and k not in new):
            out.extend(differences(old.get(k), new.get(k), k, partial, sides))
    old_roles, new_roles = role_identities(old), role_identities(new)
    for k in sorted(set(old_roles) & set(new_roles)):
        out.extend(differences(old_roles[k], new_roles[k], k, partial, sides))
    return out


def merged_identity(old: dict | None, new: dict) -> dict:
    """The identity of a folder after a run of some or more of its tasks: every task, each role
    that any of them uses."""
    if not old:
        return new
    out = {k: v for k, v in {**old, **new}.items() if k not in _LEGACY_ROLES}
    out["tasks"] = {**old.get("tasks", {}), **new.get("tasks", {})}
    out["roles"] = {**role_identities(old), **role_identities(new)}
    return out


def _label(path: str) -> str:
    """An identity path in the user's terms: `model.settings.parallel` is `parallel`,
    `tasks.T.options.X` is `task option X of T`."""
    parts = path.split(".")
    if parts[:2] == ["model", "settings"] and len(parts) > 2:
        return ".".join(parts[2:])
    if parts[0] == "tasks" and len(parts) > 3 and parts[2] == "options":
        return f"task option {'.'.join(parts[3:])} of {parts[1]}"
    return {"model.model": "the model's weights", "model.n_ctx": "n_ctx", "model.chat_mode": "chat",
            "seed": "seed"}.get(path, path)


def _short(v) -> str:
    s = v if isinstance(v, str) else orjson.dumps(v).decode()
    return s if len(s) <= 72 else s[:69] + "…"


def differences(old: Any, new: Any, where: str = "", partial: bool = False,
                sides: tuple[str, str] = FOLDER_SIDES) -> list[str]:
    """Readable paths where two identity documents differ (`partial`: keys `new` lacks are not
    compared; `sides`: how the two are named)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            path = f"{where}.{k}" if where else str(k)
            if k not in old:
                out.append(f"{_label(path)}: {_short(new[k])} {sides[1]}, not set {sides[0]}")
            elif k not in new:
                if not partial:
                    out.append(f"{_label(path)}: {_short(old[k])} {sides[0]}, not set {sides[1]}")
            else:
                out.extend(differences(old[k], new[k], path, partial, sides))
        return out
    if old != new:
        return [f"{_label(where)}: {_short(old)} {sides[0]}, {_short(new)} {sides[1]}"]
    return []


def folder_results(path: Path) -> dict[str, dict]:
    """Each task's result in a run folder's results files: results.json first (the folder's
    largest run), then results-partial.json (a --budget run or a gate that stopped early),
    results-limit-*.json and results-sample-*.json. A file that cannot be read
    as a results document is refused."""
    results: dict[str, dict] = {}
    names = ["results.json", "results-partial.json", *sorted(p.name for p in path.glob("results-limit-*.json")),
             *sorted(p.name for p in path.glob("results-sample-*.json"))]
    for name in names:
        file = path / name
        if not file.is_file():
            continue
        try:
            doc = read_json(file)
        except (OSError, ValueError) as exc:
            raise UsageError(f"{file} cannot be read: {exc}") from None
        tasks = doc.get("tasks") if isinstance(doc, dict) else None
        if not isinstance(tasks, dict):
            raise UsageError(f"{file} is not a results document (no 'tasks' table)")
        for task, res in tasks.items():
            results.setdefault(task, res)
    return results


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
