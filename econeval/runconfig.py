"""`--config FILE.toml`: a run's and a gate's settings in a file a release pipeline checks in.

    [run]                       # econeval run --config eval.toml
    model = "mistral-7b"        # a models.toml name, a .gguf path (relative to this file) or PREFIX:NAME
    suite = "all"               # or tasks = ["econnli-zero", ...]
    limit = 50                  # and seed, n_ctx, chat, judge, embedder, bootstrap, out, quiet
    [run.task_options]          # -T NAME=VALUE
    adaptation = "cot-hidden"
    [run.model_options]         # -M KEY=VALUE
    parallel = 8
    [run.roles]                 # --role NAME=MODEL (judge, embedder, a task's own)
    judge = "qwen-7b"
    [gate]                      # econeval compare --config eval.toml BASELINE CANDIDATE
    max_drop = 0.02             # and metrics, bootstrap, seed, allow_missing, junit, format

What the command line gives wins over the file (the CLI's `--config` option sets click's
default_map from `defaults()`; the tables of NAME=VALUE options are merged key by key, the
command line's value winning for its keys). The file's path, sha256 and settings are recorded in
run.json, and the options used in its tasks' and backend's entries.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from .errors import UsageError, hide_credentials_tree
from .results import read_regular
from .registry import did_you_mean

# file key → (the command's parameter, whether a relative path may be one beside the file)
KEYS: dict[str, dict[str, tuple[str, bool]]] = {
    "run": {"model": ("model", True), "suite": ("suite", False), "tasks": ("tasks", False), "limit": ("limit", False), "sample": ("sample", False),
            "seed": ("seed", False), "n_ctx": ("n_ctx", False), "chat": ("chat", False), "judge": ("judge", True),
            "embedder": ("embedder", True), "bootstrap": ("n_boot", False), "out": ("out", True), "quiet": ("quiet", False),
            "task_options": ("task_option", False), "model_options": ("model_option", False), "roles": ("role", True)},
    "gate": {"max_drop": ("max_drop", False), "metrics": ("metrics", False), "bootstrap": ("n_boot", False),
             "seed": ("seed", False), "allow_missing": ("allow_missing", False), "junit": ("junit", True),
             "format": ("fmt", False)},
}


TYPES: dict[str, type] = {"limit": int, "seed": int, "n_ctx": int, "bootstrap": int, "quiet": bool, "allow_missing": bool}
MAX_BYTES = 1 << 20  # a run's settings fit in far less; a larger file (or /dev/zero) is refused
PAIRS = ("task_option", "model_option", "role")  # repeatable NAME=VALUE options: merged key by key with the command line's


def _toml(path: Path) -> dict:
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(read_regular(path, limit=MAX_BYTES, follow=True).decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"--config {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"--config {path} is not valid TOML ({exc})") from None
    except RecursionError:
        raise UsageError(f"--config {path} nests its tables or arrays too deeply") from None


def _relative(value: Any, base: Path) -> Any:
    """A relative path in the file names a place beside the file (a model name stays a name)."""
    if not isinstance(value, str) or ":" in value.split("/")[0] or Path(value).is_absolute():
        return value
    beside = base / value
    return str(beside) if ("/" in value or value.endswith(".gguf") or beside.exists()) else value


def defaults(path: Path, section: str) -> tuple[dict[str, Any], dict]:
    """The command's parameter defaults from the file's [section], and what run.json records."""
    path = Path(path)
    doc = _toml(path)
    raw = read_regular(path, limit=MAX_BYTES, follow=True)
    unknown = [k for k in doc if k not in KEYS]
    if unknown:
        raise UsageError(f"--config {path}: unknown section [{unknown[0]}]", hint=f"sections: {', '.join(KEYS)}")
    table = doc.get(section, {})
    if not isinstance(table, dict):
        raise UsageError(f"--config {path}: [{section}] must be a table")
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in KEYS[section]:
            raise UsageError(f"--config {path}: [{section}] has no key '{key}'",
                             hint=did_you_mean(key, KEYS[section]) or f"keys: {', '.join(KEYS[section])}")
        param, is_path = KEYS[section][key]
        want = TYPES.get(key)
        if want is not None and (not isinstance(value, want) or (want is not bool and isinstance(value, bool))):
            raise UsageError(f"--config {path}: [{section}] {key} must be {'true or false' if want is bool else 'a whole number'}, "
                             f"not {value!r}")
        if key in ("task_options", "model_options"):
            if not isinstance(value, dict):
                raise UsageError(f"--config {path}: [{section}.{key}] must be a table of NAME = VALUE")
            value = [f"{k}={_scalar(v)}" for k, v in value.items()]
        elif key == "roles":
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise UsageError(f"--config {path}: [{section}.roles] must be a table of ROLE = \"MODEL\"")
            value = [f"{k}={_relative(v, path.parent.resolve())}" for k, v in value.items()]
        elif key in ("tasks", "metrics"):
            value = [value] if isinstance(value, str) else value
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise UsageError(f"--config {path}: [{section}] {key} must be a list of names")
        elif key in ("out", "junit") and isinstance(value, str):
            value = str(path.parent.resolve() / value)  # a place beside the file (absolute stays absolute)
        elif is_path:
            value = _relative(value, path.parent.resolve())
        out[param] = value
    record = {"path": str(path.resolve()), "sha256": hashlib.sha256(raw).hexdigest(), "section": section,
              "settings": hide_credentials_tree(table)}  # a base_url's password is never recorded
    return out, record


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(map(str, v))
    return str(v)
