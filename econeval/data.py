"""The bundled, versioned data package.

`datasets_bundled/<benchmark>/manifest.json` is committed: version, upstream source, licence,
the sha256 of every upstream file the build reads and of every file it writes, row counts,
known defects. `build` turns the upstream files (never committed) into normalised JSONL beside
the manifest; every load re-checks the file against the manifest.

A manifest may name other releases of the benchmark under `upstreams` (EconLogicQA's full Hugging
Face release beside the partial reconstruction the manifest's own upstream is): each with its
description and provenance, its own source folder, the sha256 of each of its files and of each
file its build writes, and the rows each holds. `build(..., upstream=NAME)` accepts only those
files, by hash, and builds the files it names over the manifest's own (the others stay); the
folder then says which upstream built it (UPSTREAM_MARK), every load checks the files against
that upstream's hashes, and the data fingerprint in run.json names it. A hash a manifest does not
pin (null: the release was out of reach when it was written) refuses the build: manifests pin
hashes, users never supply them; the maintainer step (tools/refresh_manifests.py --upstream NAME)
records them from the release.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from functools import lru_cache
from pathlib import Path

import orjson
import platformdirs

from .config import REPO_ROOT
from .errors import DataError, UsageError
from .results import write_atomic, write_json


def bundled_dir() -> Path:
    """The committed manifests (econeval.datasets_bundled; in a checkout also the built files)."""
    here = Path(__file__).resolve().parent / "datasets_bundled"  # installed (wheel, executable)
    return here if here.is_dir() else REPO_ROOT / "datasets_bundled"  # a checkout


def installed_dir() -> Path:
    """Where `econeval data install` puts a data package: $ECONEVAL_HOME/data, else the user data dir."""
    home = os.environ.get("ECONEVAL_HOME")
    return (Path(home) if home else platformdirs.user_data_path("econeval")) / "data"


def env_data_dir() -> Path | None:
    """ECONEVAL_DATA_DIR, where it is set; set but empty is refused (it would silently mean the
    package's own data)."""
    env = os.environ.get("ECONEVAL_DATA_DIR")
    if env is None:
        return None
    if not env.strip():
        raise UsageError("ECONEVAL_DATA_DIR is set but empty", hint="unset it to use the package's own data, or name the data folder")
    return Path(env)


def data_dir() -> Path:
    """The manifests: ECONEVAL_DATA_DIR (files beside them) or the package's own."""
    env = env_data_dir()
    return env if env is not None else bundled_dir()


def files_dir(benchmark: str) -> Path:
    """Where a benchmark's built files are read: ECONEVAL_DATA_DIR; else beside the package's
    manifests when they were built there (a checkout); else an installed data package."""
    if env_data_dir() is not None:
        return data_dir() / benchmark
    names = list(manifest(benchmark)["files"])
    for base in (bundled_dir(), installed_dir()):
        if all((base / benchmark / n).is_file() for n in names):
            return base / benchmark
    return bundled_dir() / benchmark


def build_dir(benchmark: str) -> Path:
    """Where `data build` writes: ECONEVAL_DATA_DIR, a checkout's datasets_bundled, else the
    installed data folder (an installed package's own folder is not for data)."""
    if env_data_dir() is not None:
        return data_dir() / benchmark
    if bundled_dir() == REPO_ROOT / "datasets_bundled" and (REPO_ROOT / "pyproject.toml").is_file():
        return bundled_dir() / benchmark
    return installed_dir() / benchmark


def default_source() -> Path:
    return REPO_ROOT.parent / "shared" / "datasets"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def jsonl_bytes(rows: list[dict]) -> bytes:
    """Deterministic serialisation: sorted keys, UTF-8, one object per line."""
    return b"".join(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n" for r in rows)


def benchmarks() -> list[str]:
    return sorted(p.parent.name for p in data_dir().glob("*/manifest.json"))


def manifest(benchmark: str) -> dict:
    path = data_dir() / benchmark / "manifest.json"
    if not path.is_file():
        raise DataError(f"unknown benchmark '{benchmark}'", hint=f"known: {', '.join(benchmarks())}")
    return orjson.loads(path.read_bytes())


UPSTREAM_MARK = "upstream.json"  # in a built benchmark folder: the named upstream that built it (none: the manifest's own)


def upstream_entry(benchmark: str, name: str) -> dict:
    """A manifest's entry for one of the benchmark's other releases."""
    known = manifest(benchmark).get("upstreams") or {}
    if name not in known:
        raise UsageError(f"{benchmark} has no upstream '{name}'",
                         hint=f"its manifest names: {', '.join(known) or 'none besides its own'}")
    return known[name]


def built_upstream(benchmark: str) -> str | None:
    """The named upstream the benchmark's files were built from; None: the manifest's own."""
    mark = files_dir(benchmark) / UPSTREAM_MARK
    if not mark.is_file():
        return None
    try:
        name = orjson.loads(mark.read_bytes()).get("upstream")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        name = None
    if not isinstance(name, str) or name not in (manifest(benchmark).get("upstreams") or {}):
        raise DataError(f"{mark} does not name an upstream of {benchmark}'s manifest", hint=f"rebuild: econeval data build {benchmark}")
    return name


def expected_files(benchmark: str, upstream: str | None = None) -> dict[str, dict]:
    """The files a build from this upstream leaves, with their sha256 and rows: the manifest's own,
    those the named upstream builds in their place."""
    m = manifest(benchmark)
    return {**m["files"], **(upstream_entry(benchmark, upstream)["files"] if upstream else {})}


def status(benchmark: str) -> dict[str, str]:
    """Per built file: 'ok', 'missing' or 'mismatch' (against the upstream that built the folder)."""
    out = {}
    where = files_dir(benchmark)
    for name, info in expected_files(benchmark, built_upstream(benchmark)).items():
        p = where / name
        out[name] = "missing" if not p.is_file() else ("ok" if sha256_file(p) == info["sha256"] else "mismatch")
    return out


def build(benchmark: str, source: Path, builder, update_manifest: bool = False, upstream: str | None = None) -> dict[str, int]:
    """Build one benchmark's JSONL files from `source/<source_dir>` with its `builder` (the
    benchmark module's `build`, from the registry; `upstream`: one of the other releases the
    manifest names, its builder); returns rows per file.

    Upstream files must match the manifest's hashes; the output must match too, unless
    `update_manifest` (a maintainer step, tools/refresh_manifests.py) records new hashes (of a
    named upstream: its files' too, where the manifest pins none).
    """
    m = manifest(benchmark)
    entry = m if upstream is None else upstream_entry(benchmark, upstream)
    what = benchmark if upstream is None else f"{benchmark} (upstream {upstream})"
    src = source / entry["source_dir"]
    pinned = dict(entry.get("upstream") or {})
    if not pinned:
        raise DataError(f"{what}: the manifest lists none of the release's files", hint=str(entry.get("missing") or
                        "the release was out of reach when the manifest was written"))
    for rel, digest in pinned.items():
        p = src / rel
        if not p.is_file():
            raise DataError(f"{what}: upstream file missing: {p}", hint="pass --source DIR holding the upstream benchmark folders")
        got = sha256_file(p)
        if digest is None and not update_manifest:
            raise DataError(f"{what}: the manifest pins no sha256 for {rel} (the release was out of reach when it was "
                            "written), so no file is accepted as it",
                            hint=f"a maintainer with the release records its hashes: tools/refresh_manifests.py SOURCE "
                                 f"{benchmark} --upstream {upstream}")
        if digest is not None and got != digest:
            raise DataError(f"{what}: upstream file {p} does not match the manifest's sha256",
                            hint="the build only accepts the upstream release recorded in the manifest")
        pinned[rel] = got
    files = builder(src)
    want = entry["files"]
    if upstream is not None and set(files) != set(want):
        raise DataError(f"{what}: the build wrote {', '.join(sorted(files))}; the manifest names {', '.join(sorted(want))}")
    out_dir = build_dir(benchmark)
    counts = {}
    new_files = {}
    blobs = {}
    for name, rows in files.items():
        data = jsonl_bytes(rows)
        digest = hashlib.sha256(data).hexdigest()
        expected = want.get(name, {}).get("sha256")
        if not update_manifest and (digest != expected or len(rows) != want.get(name, {}).get("rows", len(rows))):
            raise DataError(f"{what}: built {name} does not match the manifest (sha256 {digest[:12]}…, {len(rows)} rows; expected "
                            f"{str(expected)[:12]}…, {want.get(name, {}).get('rows')} rows)",
                            hint="the converter or the source changed; bump the dataset version and refresh the manifest")
        blobs[name] = data
        counts[name] = len(rows)
        new_files[name] = {"sha256": digest, "rows": len(rows)}
    for name, data in blobs.items():  # written once every file is checked: a refused build changes nothing
        write_atomic(out_dir / name, data)
    mark = out_dir / UPSTREAM_MARK
    if upstream is None:
        mark.unlink(missing_ok=True)
    else:
        write_json(mark, {"upstream": upstream, "files": sorted(files)})
    if update_manifest:
        if upstream is None:
            m = {**m, "files": new_files}
        else:
            m = {**m, "upstreams": {**m["upstreams"], upstream: {**entry, "upstream": pinned, "files": new_files}}}
        write_json(data_dir() / benchmark / "manifest.json", m)
    return counts


@lru_cache(maxsize=None)
def _verified(benchmark: str, path: Path, mtime_ns: int, upstream: str | None) -> None:
    info = expected_files(benchmark, upstream).get(path.name)
    if info is None:
        raise DataError(f"{benchmark}: no file '{path.name}' in the manifest")
    if sha256_file(path) != info["sha256"]:
        raise DataError(f"{benchmark}/{path.name} does not match its manifest sha256"
                        + (f" (upstream {upstream})" if upstream else ""), hint=f"rebuild it: econeval data build {benchmark}")


def load(benchmark: str, name: str) -> list[dict]:
    """Rows of a built file, after checking it against the manifest."""
    p = files_dir(benchmark) / name
    if not p.is_file():
        raise DataError(f"dataset {benchmark}/{name} is not built",
                        hint=f"run: econeval data build {benchmark} (reads the upstream files from ../shared/datasets or "
                             f"--source DIR), or install a data package: econeval data install econeval-data-….tar")
    _verified(benchmark, p, p.stat().st_mtime_ns, built_upstream(benchmark))
    return [orjson.loads(line) for line in p.read_bytes().splitlines() if line]


def fingerprint(benchmark: str) -> dict:
    """What run.json records about a dataset (in each task's identity): the version, the files'
    hashes, and the upstream that built them where it is not the manifest's own."""
    m = manifest(benchmark)
    upstream = built_upstream(benchmark)
    return {"version": m["version"], "files": {k: v["sha256"] for k, v in expected_files(benchmark, upstream).items()},
            **({"upstream": upstream} if upstream else {})}


# ---- the data package artifact ---------------------------------------------------------------
INDEX = "econeval-data.json"


def package_version() -> str:
    """One version for the whole data package: the benchmarks' versions and a digest of every
    manifest's file hashes (12 hex digits)."""
    h = hashlib.sha256()
    for b in benchmarks():
        m = manifest(b)
        h.update(orjson.dumps({"b": b, "v": m["version"], "files": m["files"]}, option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()[:12]


def pack(out: Path) -> dict:
    """Write the built data of every benchmark, with its manifest, into one tar archive with an
    index of every member's sha256; returns the index."""
    index: dict = {"format": 1, "package_version": package_version(), "benchmarks": {}, "members": {}}
    members: list[tuple[str, bytes]] = []
    for b in benchmarks():
        if (other := built_upstream(b)) is not None:
            raise DataError(f"{b} is built from upstream {other}: a data package holds the manifests' own releases",
                            hint=f"rebuild it first: econeval data build {b}")
        bad = [f for f, st in status(b).items() if st != "ok"]
        if bad:
            raise DataError(f"{b}: {', '.join(bad)} not built or not matching the manifest", hint=f"run: econeval data build {b}")
        m = manifest(b)
        index["benchmarks"][b] = m["version"]
        members.append((f"{b}/manifest.json", orjson.dumps(m, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)))
        for name in m["files"]:
            members.append((f"{b}/{name}", (files_dir(b) / name).read_bytes()))
    for name, blob in members:
        index["members"][name] = hashlib.sha256(blob).hexdigest()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, blob in [(INDEX, orjson.dumps(index, option=orjson.OPT_INDENT_2)), *members]:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(blob), 0, 0o644  # byte-identical archives for identical data
            tar.addfile(info, io.BytesIO(blob))
    write_atomic(out, buf.getvalue())
    return index


def _check_sidecar(archive: Path) -> None:
    """`ARCHIVE.sha256` beside the archive, when there is one, must name its sha256."""
    sidecar = archive.with_name(archive.name + ".sha256")
    if not sidecar.exists():
        return
    try:
        words = sidecar.read_bytes()[:4096].decode("ascii").split()
    except (OSError, UnicodeDecodeError):
        words = []
    if not words or len(words[0]) != 64 or any(c not in "0123456789abcdef" for c in words[0].lower()):
        raise DataError(f"{sidecar} does not hold a sha256", hint="the checksum file is damaged; download it again")
    if words[0].lower() != sha256_file(archive):
        raise DataError(f"{archive} does not match {sidecar}", hint="the archive is corrupted or not the one published")


def _index(tar: tarfile.TarFile, archive: Path) -> dict:
    try:
        member = tar.getmember(INDEX)
        if not member.isfile() or member.size > 1 << 20:
            raise KeyError
        fh = tar.extractfile(member)
        if fh is None:
            raise KeyError
        index = orjson.loads(fh.read())
    except (KeyError, AttributeError, orjson.JSONDecodeError):
        raise DataError(f"{archive} is not a data package (no readable {INDEX})") from None
    ok = isinstance(index, dict) and isinstance(index.get("members"), dict) and isinstance(index.get("benchmarks"), dict) \
        and isinstance(index.get("package_version"), str) \
        and all(isinstance(k, str) and isinstance(v, str) for k, v in index["members"].items())
    if not ok:
        raise DataError(f"{archive}: {INDEX} is not a data package index (members, benchmarks, package_version)")
    return index


def _expected_members() -> dict[str, str | None]:
    """Every file a data package of this econeval holds: each benchmark's manifest (any content,
    checked as JSON) and its data files (their sha256 from this econeval's manifests)."""
    out: dict[str, str | None] = {}
    for b in benchmarks():
        out[f"{b}/manifest.json"] = None
        for name, info in manifest(b)["files"].items():
            out[f"{b}/{name}"] = info["sha256"]
    return out


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def install(archive: Path) -> dict:
    """Install a data package: exactly the files this econeval's manifests name (anything else in
    the archive is refused), each hashed while it is copied (streams: memory stays small whatever a
    member's size) and checked against the archive's index and this econeval's manifests; staged
    in a temporary folder, then swapped into place benchmark by benchmark (a reader sees the old
    files or the new ones), under a lock (two installs wait for each other). Returns the index."""
    import fcntl

    from .errors import clean

    _check_sidecar(archive)
    try:
        tar = tarfile.open(archive, mode="r")
    except (OSError, tarfile.TarError) as exc:
        raise DataError(f"{archive} is not a data package: {exc}") from None
    expected = _expected_members()
    target = installed_dir()
    target.mkdir(parents=True, exist_ok=True)
    lock = os.open(target / ".install.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    stage = None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another install: wait for it
        for left in target.glob(".staging-*"):  # an install killed (kill -9) left it: no install runs now but this one
            shutil.rmtree(left, ignore_errors=True)
        with tar:
            index = _index(tar, archive)
            if index["package_version"] != package_version():
                raise DataError(f"{archive} is data package {clean(index['package_version'])}; this econeval reads "
                                f"{package_version()}", hint="use the data package built for this econeval version")
            stage = Path(tempfile.mkdtemp(dir=target, prefix=".staging-"))
            seen: set[str] = set()
            for member in tar:
                if member.name == INDEX:
                    continue
                if member.name not in expected or member.name in seen:
                    raise DataError(f"{archive}: member {clean(repr(member.name))} is not a file of this data package"
                                    + (" (twice)" if member.name in seen else ""), hint="the archive was altered")
                if not member.isfile():
                    raise DataError(f"{archive}: member {member.name} is not a regular file")
                seen.add(member.name)
                h = hashlib.sha256()
                dest = stage / member.name
                dest.parent.mkdir(exist_ok=True)
                src = tar.extractfile(member)
                if src is None:
                    raise DataError(f"{archive}: member {member.name} cannot be read")
                with open(dest, "wb") as fh:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        h.update(block)
                        fh.write(block)
                digest = h.hexdigest()
                if index["members"].get(member.name) != digest:
                    raise DataError(f"{archive}: {member.name} does not match the package's index (corrupted archive)")
                want = expected[member.name]
                if want is not None and digest != want:
                    b = member.name.split("/", 1)[0]
                    raise DataError(f"{archive}: {member.name} is not the version this econeval expects "
                                    f"({b} {manifest(b)['version']})", hint="use the data package built for this econeval version")
            missing = sorted(set(expected) - seen)
            if missing:
                raise DataError(f"{archive}: members missing: {', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}")
        for b in benchmarks():
            new, old = stage / b, target / b
            if old.is_dir() and _exchange(new, old):
                shutil.rmtree(new)  # now the old files
            else:
                if old.exists():
                    shutil.rmtree(old)
                os.replace(new, old)
        write_json(target / INDEX, index)
        return index
    finally:
        if stage is not None and stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
        os.close(lock)
