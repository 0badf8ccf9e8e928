"""The bundled, versioned data package.

`datasets_bundled/<benchmark>/manifest.json` is committed: version, upstream source, licence,
the sha256 of every upstream file the build reads and of every file it writes, row counts,
known defects. `build` turns the upstream files (never committed) into normalised JSONL beside
the manifest; every load re-checks the file against the manifest.
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
from .errors import DataError
from .results import write_atomic, write_json


def bundled_dir() -> Path:
    """The committed manifests (econeval.datasets_bundled; in a checkout also the built files)."""
    here = Path(__file__).resolve().parent / "datasets_bundled"  # installed (wheel, executable)
    return here if here.is_dir() else REPO_ROOT / "datasets_bundled"  # a checkout


def installed_dir() -> Path:
    """Where `econeval data install` puts a data package: $ECONEVAL_HOME/data, else the user data dir."""
    home = os.environ.get("ECONEVAL_HOME")
    return (Path(home) if home else platformdirs.user_data_path("econeval")) / "data"


def data_dir() -> Path:
    """The manifests: ECONEVAL_DATA_DIR (files beside them) or the package's own."""
    env = os.environ.get("ECONEVAL_DATA_DIR")
    return Path(env) if env else bundled_dir()


def files_dir(benchmark: str) -> Path:
    """Where a benchmark's built files are read: ECONEVAL_DATA_DIR; else beside the package's
    manifests when they were built there (a checkout); else an installed data package."""
    if os.environ.get("ECONEVAL_DATA_DIR"):
        return data_dir() / benchmark
    names = list(manifest(benchmark)["files"])
    for base in (bundled_dir(), installed_dir()):
        if all((base / benchmark / n).is_file() for n in names):
            return base / benchmark
    return bundled_dir() / benchmark


def build_dir(benchmark: str) -> Path:
    """Where `data build` writes: ECONEVAL_DATA_DIR, a checkout's datasets_bundled, else the
    installed data folder (an installed package's own folder is not for data)."""
    if os.environ.get("ECONEVAL_DATA_DIR"):
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


def status(benchmark: str) -> dict[str, str]:
    """Per built file: 'ok', 'missing' or 'mismatch'."""
    m = manifest(benchmark)
    out = {}
    where = files_dir(benchmark)
    for name, info in m["files"].items():
        p = where / name
        out[name] = "missing" if not p.is_file() else ("ok" if sha256_file(p) == info["sha256"] else "mismatch")
    return out


def build(benchmark: str, source: Path, builder, update_manifest: bool = False) -> dict[str, int]:
    """Build one benchmark's JSONL files from `source/<source_dir>` with its `builder` (the
    benchmark module's `build`, from the registry); returns rows per file.

    Upstream files must match the manifest's hashes; the output must match too, unless
    `update_manifest` (a maintainer step, tools/refresh_manifests.py) records new hashes.
    """
    m = manifest(benchmark)
    src = source / m["source_dir"]
    for rel, digest in m.get("upstream", {}).items():
        p = src / rel
        if not p.is_file():
            raise DataError(f"{benchmark}: upstream file missing: {p}", hint="pass --source DIR holding the upstream benchmark folders")
        if sha256_file(p) != digest:
            raise DataError(f"{benchmark}: upstream file {p} does not match the manifest's sha256",
                            hint="the build only accepts the upstream release recorded in the manifest")
    files = builder(src)
    out_dir = build_dir(benchmark)
    counts = {}
    new_files = {}
    for name, rows in files.items():
        data = jsonl_bytes(rows)
        digest = hashlib.sha256(data).hexdigest()
        expected = m["files"].get(name, {}).get("sha256")
        if not update_manifest and digest != expected:
            raise DataError(f"{benchmark}: built {name} does not match the manifest (sha256 {digest[:12]}…, expected {str(expected)[:12]}…)",
                            hint="the converter or the source changed; bump the dataset version and refresh the manifest")
        write_atomic(out_dir / name, data)
        counts[name] = len(rows)
        new_files[name] = {"sha256": digest, "rows": len(rows)}
    if update_manifest:
        write_json(data_dir() / benchmark / "manifest.json", {**m, "files": new_files})
    return counts


@lru_cache(maxsize=None)
def _verified(benchmark: str, path: Path, mtime_ns: int) -> None:
    m = manifest(benchmark)
    info = m["files"].get(path.name)
    if info is None:
        raise DataError(f"{benchmark}: no file '{path.name}' in the manifest")
    if sha256_file(path) != info["sha256"]:
        raise DataError(f"{benchmark}/{path.name} does not match its manifest sha256",
                        hint=f"rebuild it: econeval data build {benchmark}")


def load(benchmark: str, name: str) -> list[dict]:
    """Rows of a built file, after checking it against the manifest."""
    p = files_dir(benchmark) / name
    if not p.is_file():
        raise DataError(f"dataset {benchmark}/{name} is not built",
                        hint=f"run: econeval data build {benchmark} (reads the upstream files from ../shared/datasets or "
                             f"--source DIR), or install a data package: econeval data install econeval-data-….tar")
    _verified(benchmark, p, p.stat().st_mtime_ns)
    return [orjson.loads(line) for line in p.read_bytes().splitlines() if line]


def fingerprint(benchmark: str) -> dict:
    """What run.json records about a dataset."""
    m = manifest(benchmark)
    return {"version": m["version"], "files": {k: v["sha256"] for k, v in m["files"].items()}}


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


def install(archive: Path) -> dict:
    """Install a data package: every member's sha256 checked against the archive's index and
    every data file against this econeval's manifests; then moved into place benchmark by
    benchmark. Returns the index."""
    try:
        tar = tarfile.open(archive, mode="r")
    except (OSError, tarfile.TarError) as exc:
        raise DataError(f"{archive} is not a data package: {exc}") from None
    with tar:
        try:
            index = orjson.loads(tar.extractfile(INDEX).read())
        except (KeyError, AttributeError, orjson.JSONDecodeError):
            raise DataError(f"{archive} is not a data package (no {INDEX})") from None
        blobs: dict[str, bytes] = {}
        for member in tar.getmembers():
            if member.name == INDEX:
                continue
            if not member.isfile() or member.name.startswith("/") or ".." in Path(member.name).parts:
                raise DataError(f"{archive}: unexpected member {member.name!r}")
            blob = tar.extractfile(member).read()
            if index["members"].get(member.name) != hashlib.sha256(blob).hexdigest():
                raise DataError(f"{archive}: {member.name} does not match the package's index (corrupted archive)")
            blobs[member.name] = blob
    if set(blobs) != set(index["members"]):
        raise DataError(f"{archive}: members missing: {', '.join(sorted(set(index['members']) - set(blobs)))}")
    for b in index["benchmarks"]:
        ours = manifest(b)
        for name, info in ours["files"].items():
            if hashlib.sha256(blobs.get(f"{b}/{name}", b"")).hexdigest() != info["sha256"]:
                raise DataError(f"{archive}: {b}/{name} is not the version this econeval expects ({b} {ours['version']})",
                                hint="use the data package built for this econeval version")
    target = installed_dir()
    target.mkdir(parents=True, exist_ok=True)
    for b in index["benchmarks"]:
        tmp = Path(tempfile.mkdtemp(dir=target, prefix=f".{b}."))
        for name, blob in blobs.items():
            if name.startswith(b + "/"):
                (tmp / Path(name).name).write_bytes(blob)
        old = target / b
        if old.exists():
            shutil.rmtree(old)
        os.replace(tmp, old)
    write_json(target / INDEX, index)
    return index

