"""The bundled, versioned data package.

`datasets_bundled/<benchmark>/manifest.json` is committed: version, upstream source, licence,
the sha256 of every upstream file the build reads and of every file it writes, row counts,
known defects. `build` turns the upstream files (never committed) into normalised JSONL beside
the manifest; every load re-checks the file against the manifest.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

import orjson

from .config import REPO_ROOT
from .errors import DataError
from .results import write_atomic, write_json


def data_dir() -> Path:
    env = os.environ.get("ECONEVAL_DATA_DIR")
    if env:
        return Path(env)
    try:  # installed: the package maps datasets_bundled/ to econeval.datasets_bundled
        from econeval import datasets_bundled
    except ImportError:  # running from a source tree
        return REPO_ROOT / "datasets_bundled"
    return Path(datasets_bundled.__file__).resolve().parent


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
    for name, info in m["files"].items():
        p = data_dir() / benchmark / name
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
    out_dir = data_dir() / benchmark
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
        write_json(out_dir / "manifest.json", {**m, "files": new_files})
    return counts


@lru_cache(maxsize=None)
def _verified(benchmark: str, name: str, mtime_ns: int) -> None:
    m = manifest(benchmark)
    info = m["files"].get(name)
    if info is None:
        raise DataError(f"{benchmark}: no file '{name}' in the manifest")
    if sha256_file(data_dir() / benchmark / name) != info["sha256"]:
        raise DataError(f"{benchmark}/{name} does not match its manifest sha256",
                        hint=f"rebuild it: econeval data build {benchmark}")


def load(benchmark: str, name: str) -> list[dict]:
    """Rows of a built file, after checking it against the manifest."""
    p = data_dir() / benchmark / name
    if not p.is_file():
        manifest(benchmark)  # unknown benchmark → its own message
        raise DataError(f"dataset {benchmark}/{name} is not built", hint=f"run: econeval data build {benchmark}")
    _verified(benchmark, name, p.stat().st_mtime_ns)
    return [orjson.loads(line) for line in p.read_bytes().splitlines() if line]


def fingerprint(benchmark: str) -> dict:
    """What run.json records about a dataset."""
    m = manifest(benchmark)
    return {"version": m["version"], "files": {k: v["sha256"] for k, v in m["files"].items()}}
