"""The roles a run fills (the evaluated model, the judge, the embedder), resolved and built the
same way for each: a name (`--model`, `--judge`, `--embedder`) becomes a spec, the spec's kind
names its backend, the backend parses and validates its own options, and builds itself.

A name is `PREFIX:NAME` (a prefix a backend registered, e.g. `openai:`), a models.toml name, or a
path that a backend takes (`from_path`). Options from the command line (`-M key=value` and the
flags backends declare) go to every role whose backend declares them; one that no role's backend
declares is refused, naming the backends.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import config, registry
from ..backends.base import Backend, BackendOptions, Settings
from ..errors import UsageError
from ..types import EMBEDDER, JUDGE, MODEL, SHORTCUTS, role_flag


def _serves(role: str) -> str:
    """The kind of model a role takes (MODEL: a text model; EMBEDDER: a sentence embedder)."""
    return registry.role(role).serves


def _section(role: str) -> str:
    """The models.toml section that names a role's models."""
    return "embedders" if _serves(role) == EMBEDDER else "models"


def _where(spec: config.ModelSpec, role: str = MODEL) -> str:
    what = f"{'embedder' if _serves(role) == EMBEDDER else 'model'} '{spec.name}'"
    return f"{spec.source}: {what}" if spec.source.endswith(".toml") else what


def kind_of(spec: config.ModelSpec, role: str = MODEL) -> str:
    """The spec's backend kind: as named, or implied by its option keys."""
    if spec.kind:
        registry.backend_class(spec.kind)
        return spec.kind
    need = _serves(role)
    kinds = [k for k in registry.implied_kind(spec.options) if need in registry.backend_class(k).serves]
    serving = [k for k, cls in registry.backends().items() if need in cls.serves]
    if not kinds and len(serving) == 1:
        kinds = serving  # the one backend for this role (its options check says what is missing)
    if len(kinds) != 1:
        keys = sorted({key for k, cls in registry.backends().items() if need in cls.serves for key in cls.implied_by})
        raise UsageError(f"{_where(spec, role)} needs one of {', '.join(repr(k) for k in keys)}" if not kinds else
                         f"{_where(spec, role)}: its keys fit several backends ({', '.join(kinds)})", hint="or name its kind")
    return kinds[0]


def parse(spec: config.ModelSpec, role: str = MODEL) -> tuple[type[Backend], BackendOptions]:
    """The backend class of a spec and its options, parsed and checked by that backend."""
    kind = kind_of(spec, role)
    cls = registry.backend_class(kind)
    if _serves(role) not in cls.serves:
        raise UsageError(f"{_where(spec, role)} is a {kind} backend, which cannot serve as the {role}")
    return cls, cls.Options.parse(spec.options, kind, _where(spec, role))


def load_models(paths: list[Path] | None = None) -> config.Registry:
    """The registry with every entry's kind and options checked by its backend."""
    reg = config.load_registry(paths)
    for section, role in (("models", MODEL), ("embedders", EMBEDDER)):
        entries = getattr(reg, section)
        for name, spec in entries.items():
            entries[name] = replace(spec, kind=kind_of(spec, role))
            parse(entries[name], role)
    return reg


def resolve(arg: str | None, role: str = MODEL, reg: config.Registry | None = None) -> config.ModelSpec:
    """The spec a `--model` / `--judge` / `--embedder` argument names; None: the registry default."""
    if arg and ":" in arg and arg.split(":", 1)[0] in registry.prefixes():
        prefix, name = arg.split(":", 1)
        cls = registry.prefixes()[prefix]
        if not name:
            raise UsageError(f"--model {prefix}:NAME needs the model's name after '{prefix}:'")
        return config.ModelSpec(name=name, kind=cls.kind, source=f"--model {prefix}:NAME", options=cls.from_prefix(name))
    reg = reg or load_models()
    section = getattr(reg, _section(role))
    if arg is None:
        default = reg.default_embedder if _section(role) == "embedders" else reg.default_model
        if not default or default not in section:
            what = f"--{role}" if role == MODEL else registry.role(role).flag
            raise UsageError(f"no {what} given and models.toml names no default"
                             f"{' embedder' if _section(role) == 'embedders' else ''}")
        return section[default]
    if arg in section:
        return section[arg]
    p = Path(arg).expanduser()
    for kind, cls in registry.backends().items():
        if _serves(role) in cls.serves:
            opts = cls.from_path(arg)
            if opts is not None:
                return config.ModelSpec(name=p.stem if p.is_file() else p.name, kind=kind, source=f"{role_flag(role)} path",
                                        options=opts)
    if os.sep in arg or p.suffix or p.exists():
        raise UsageError(f"{_noun(role)} file not found: {arg}" if not p.exists() else f"no backend takes {arg}",
                         hint="pass a path to a model file or a name from `econeval models list`")  # exit 2, as an unknown name
    hint = registry.did_you_mean(arg, section)
    raise UsageError(f"unknown {_noun(role)} '{arg}'",
                     hint=(hint + "; " if hint else "") + "`econeval models list` shows the registry")


def _noun(role: str) -> str:
    """How a message names a role's model: model, judge, embedder, `NAME model`."""
    return role if role in (MODEL, *SHORTCUTS) else f"{role} model"


def role_args(roles: dict[str, str] | None = None, judge: str | None = None, embedder: str | None = None) -> dict[str, str]:
    """The roles a model is named for: `roles` (`--role NAME=MODEL`), with `judge` and `embedder`
    (`--judge`, `--embedder`) as shortcuts of theirs; each a role some task uses."""
    out = dict(roles or {})
    for name, arg in ((JUDGE, judge), (EMBEDDER, embedder)):
        if arg is not None:
            if out.get(name, arg) != arg:
                raise UsageError(f"--{name} and --role {name}= name different models")
            out[name] = arg
    for name in out:
        if name == MODEL:
            raise UsageError("the evaluated model is named by --model, not --role model=")
        registry.role(name)  # refused, with the known roles, if no task uses it
    return out


def with_options(spec: config.ModelSpec, options: dict[str, Any], chat: str | None = None) -> config.ModelSpec:
    """The spec with command-line options over its own (and the chat mode, if given)."""
    if chat is not None and chat not in config.CHAT_MODES:
        raise UsageError(f"chat must be one of {', '.join(config.CHAT_MODES)}, not {chat!r}")
    return replace(spec, options={**spec.options, **options}, chat=chat or spec.chat)


def split_options(given: dict[str, Any], specs: dict[str, config.ModelSpec]) -> dict[str, dict[str, Any]]:
    """Command-line options per role: each to every role whose backend declares it."""
    out: dict[str, dict[str, Any]] = {role: {} for role in specs}
    declared = {role: registry.backend_class(kind_of(s, role)).Options.fields() for role, s in specs.items()}
    for key, value in given.items():
        takers = [role for role in specs if key in declared[role]]
        if not takers:
            kinds = sorted({kind_of(s, r) for r, s in specs.items()})
            near = registry.did_you_mean(key, {k for d in declared.values() for k in d})
            raise UsageError(f"backend {', '.join(kinds)} has no option '{key}'",
                             hint=(near + "; " if near else "") + "its options: " + "; ".join(f"{kind_of(s, r)}: {', '.join(declared[r]) or 'none'}"
                                                              for r, s in specs.items()))
        for role in takers:
            out[role][key] = value
    return out


@dataclass(frozen=True)
class Planned:
    """A role's spec parsed and validated once (`plan`): what it will be before anything is
    loaded (`preview`), and the backend made from the same parse (`build`)."""

    spec: config.ModelSpec
    cls: type[Backend]
    options: BackendOptions
    settings: Settings

    def preview(self) -> dict:
        """What the backend's identity will hold, as far as it is known before it is made."""
        return self.cls.preview(self.spec, self.options, self.settings)

    def build(self) -> Backend:
        """The backend, made (loaded, connected) from the options already parsed and checked."""
        return self.cls(self.spec, self.options, self.settings)


def plan(spec: config.ModelSpec, settings: Settings, role: str = MODEL) -> Planned:
    """Parse a spec's options and validate them with its backend's own rules, once, before
    anything is loaded."""
    cls, opts = parse(spec, role)
    cls.validate(spec, opts, settings)
    return Planned(spec, cls, opts, settings)


def build(spec: config.ModelSpec, settings: Settings, role: str = MODEL) -> Backend:
    """The backend a spec names, made (loaded, connected)."""
    return plan(spec, settings, role).build()


def check_line(spec: config.ModelSpec, settings: Settings, role: str = MODEL) -> str:
    """`econeval models check`: the backend's own check, one line."""
    cls, opts = parse(spec, role)
    return cls.check(spec, opts, settings)


def flags() -> dict[str, tuple[str, tuple[str, ...], type, str, bool]]:
    """Command-line aliases the backends declare: option key → (key, flags, type, help, multiple)."""
    import typing

    out: dict[str, tuple[str, tuple[str, ...], type, str, bool]] = {}
    for cls in registry.backends().values():
        hints = typing.get_type_hints(cls.Options)
        for name, f in cls.Options.fields().items():
            if f.metadata.get("flags") and name not in out:
                args = [a for a in typing.get_args(hints[name]) if a is not type(None)]
                out[name] = (name, tuple(f.metadata["flags"]), args[0] if args else hints[name], f.metadata.get("help", ""),
                             bool(f.metadata.get("multiple")))
    return out
