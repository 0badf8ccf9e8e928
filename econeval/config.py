"""Where econeval keeps things, and the model registry (models.toml) as written: each entry's
shared settings and its backend's own options (which that backend validates: `roles.py`)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from .errors import UsageError
from .results import read_regular

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parent.parent


def data_home() -> Path:
    """Runs and user data. ECONEVAL_HOME overrides the platform default."""
    env = os.environ.get("ECONEVAL_HOME")
    return Path(env) if env else platformdirs.user_data_path("econeval")


def named_folder(kind: str, label: str, what: dict) -> Path:
    """A folder of the data dir's `kind` ("runs", "gates") named by a readable label and a short
    hash of `what` it holds: the same `what` always names the same folder."""
    import hashlib

    import orjson

    key = hashlib.sha256(orjson.dumps(what, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()[:10]
    safe = "".join(ch if ch.isalnum() or ch in "-_.+" else "_" for ch in label)[:80]
    return data_home() / kind / f"{safe}-{key}"


def cache_home() -> Path:
    """Assembled default model, built embedders, hash cache. ECONEVAL_CACHE overrides."""
    env = os.environ.get("ECONEVAL_CACHE")
    return Path(env) if env else platformdirs.user_cache_path("econeval")


def user_registry_path() -> Path:
    """The user's own models.toml (read after the package's; `econeval models add-embedder` writes it)."""
    return platformdirs.user_config_path("econeval") / "models.toml"


def registry_paths() -> list[Path]:
    """models.toml files, later ones override earlier entries of the same name."""
    shipped = Path(__file__).resolve().parent / "_registry" / "models.toml"  # an installed econeval
    paths = [shipped if shipped.is_file() else REPO_ROOT / "models.toml", user_registry_path()]
    paths = [p for p in paths if p.is_file()]
    env = os.environ.get("ECONEVAL_MODELS")
    if env:
        if not Path(env).is_file():
            raise UsageError(f"ECONEVAL_MODELS names {env}, which is not a file")
        paths.append(Path(env))
    return paths


CHAT_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class ModelSpec:
    """A model (or embedder) as the registry or the command line names it: the settings every
    backend shares, and `options`, the backend's own (validated by that backend alone)."""

    name: str
    kind: str | None = None  # the backend (registry kind); None: implied by the options' keys
    n_ctx: int | None = None  # the context length; None: the model's own (its trained context)
    chat: str = "auto"  # apply the model's chat template: auto (each task's default), on, off
    description: str = ""
    developer: str = ""  # who made the model (`google`), as an Every Eval Ever record files it; "": not said
    source: str = ""  # the models.toml it came from, or "--model ..."
    root: str = ""  # the folder relative paths in `options` are relative to (the models.toml's)
    options: dict = field(default_factory=dict, hash=False, compare=True)  # the backend's own settings

    def path_of(self, value: str) -> str:
        """A path option: `{cache}` is econeval's cache folder, `~` the home folder, a relative
        path is relative to the registry file that named it."""
        p = Path(value.replace("{cache}", str(cache_home()))).expanduser()
        return str(p if p.is_absolute() or not self.root else Path(self.root) / p)


@dataclass
class Registry:
    models: dict[str, ModelSpec] = field(default_factory=dict)
    embedders: dict[str, ModelSpec] = field(default_factory=dict)
    default_model: str | None = None
    default_embedder: str | None = None


# keys every entry may have; any other key is one of its backend's options
N_CTX_RANGE = (256, 2**20)  # context lengths econeval accepts (the engine aborts below a few tokens, wraps above 2^32)
_SHARED: dict[str, dict[str, type]] = {"models": {"kind": str, "n_ctx": int, "chat": str, "description": str, "developer": str,
                                                  "options": dict},
           "embedders": {"kind": str, "description": str, "options": dict}}


def _entry(section: str, name: str, entry: dict, where: Path) -> ModelSpec:
    what = section[:-1]
    if not isinstance(entry, dict):
        raise UsageError(f"{where}: {section}.{name} must be a table")
    shared = {k: v for k, v in entry.items() if k in _SHARED[section]}
    for key, value in shared.items():
        want = _SHARED[section][key]
        if not isinstance(value, want) or isinstance(value, bool):
            words = {int: "an integer", str: "a string", dict: "a table"}[want]
            raise UsageError(f"{where}: {what} '{name}': {key} must be {words}, not {value!r}")
    if shared.get("chat", "auto") not in CHAT_MODES:
        raise UsageError(f"{where}: {what} '{name}': chat must be one of {', '.join(CHAT_MODES)}")
    if not N_CTX_RANGE[0] <= shared.get("n_ctx", N_CTX_RANGE[0]) <= N_CTX_RANGE[1]:
        raise UsageError(f"{where}: {what} '{name}': n_ctx must be {N_CTX_RANGE[0]:,} to {N_CTX_RANGE[1]:,} tokens, "
                         f"not {shared['n_ctx']:,}")
    options = {k: v for k, v in entry.items() if k not in _SHARED[section]}
    for key, value in shared.pop("options", {}).items():
        if key in options:
            raise UsageError(f"{where}: {what} '{name}': {key} is given twice (as a key and under options)")
        options[key] = value
    return ModelSpec(name=name, source=str(where), root=str(where.parent), options=options, **shared)


def load_registry(paths: list[Path] | None = None) -> Registry:
    """The models.toml files, read as written (each backend validates its own entries)."""
    reg = Registry()
    for where in registry_paths() if paths is None else paths:
        try:
            doc = tomllib.loads(read_regular(where).decode("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"cannot read model registry {where}: {exc}") from None
        unknown = sorted(set(doc) - {"default", "default_embedder", "models", "embedders"})
        if unknown:
            raise UsageError(f"{where}: file '{where}' has unknown key(s) {', '.join(unknown)}",
                             hint="allowed: default, default_embedder, embedders, models")
        for key in ("default", "default_embedder"):
            if key in doc and not isinstance(doc[key], str):
                raise UsageError(f"{where}: {key} must be a name (a string)")
        for key in ("models", "embedders"):
            if not isinstance(doc.get(key, {}), dict):
                raise UsageError(f"{where}: [{key}] must be a table")
        reg.default_model = doc.get("default", reg.default_model)
        reg.default_embedder = doc.get("default_embedder", reg.default_embedder)
        for section in ("models", "embedders"):
            for name, entry in doc.get(section, {}).items():
                getattr(reg, section)[name] = _entry(section, name, entry, where)
    return reg


def register_user_entry(section: str, name: str, entry: dict[str, str | int], make_default: bool = False) -> Path:
    """Add `[section."name"]` with `entry` (strings and integers) to the user's models.toml, and with
    `make_default` make it the default there (`default_embedder` / `default`). The file is
    rewritten whole (atomically) and read back as the registry reads it before it replaces the old."""
    import json
    import re

    from .results import write_atomic

    path = user_registry_path()
    try:
        text = read_regular(path).decode("utf-8") if os.path.lexists(path) else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the model registry {path}: {exc}") from None
    lines = [f"[{section}.{json.dumps(name)}]"] + [f"{k} = {json.dumps(v)}" for k, v in entry.items()]
    text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + "\n".join(lines) + "\n"
    if make_default:
        key = {"embedders": "default_embedder", "models": "default"}[section]
        first_table = re.search(r"^\s*\[", text, re.M)
        head, rest = (text[:first_table.start()], text[first_table.start():]) if first_table else (text, "")
        line = f"{key} = {json.dumps(name)}"
        head, n = re.subn(rf"^{key}\s*=.*$", line, head, count=1, flags=re.M)
        text = (head if n else line + "\n" + (head or "\n")) + rest
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} would not read back after the change ({exc}); it is left as it was") from None
    if name not in doc.get(section, {}):
        raise UsageError(f"{path} would not hold {section}.{name} after the change; it is left as it was")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode("utf-8"))
    return path
