"""LoRA adapters on the llama.cpp backend (`-M lora=PATH[:SCALE],...`, models.toml `lora = [...]`).

An adapter is a GGUF file as llama.cpp's convert_lora_to_gguf.py writes it (general.type
"adapter", adapter.type "lora"). Each is named with an optional scale (1 by default; llama.cpp
multiplies it by the file's alpha / rank), checked before the model loads, loaded onto the model
(llama_adapter_lora_init), and set on every context the backend makes (llama_set_adapters_lora,
all adapters at once, in the order given). run.json records each one's path, size, sha256, scale
and alpha; the model's identity holds their sha256 and scale, so a folder run with other
adapters, other scales or none is refused on resume.

A Table 3 row of the EconNLI paper (the LLAMA2-chat models after LoRA fine-tuning) is the base
model's GGUF with the fine-tuned adapter converted by convert_lora_to_gguf.py.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import ModelError, UsageError


@dataclass(frozen=True)
class AdapterSpec:
    """One adapter as given: its file (as written) and its scale."""

    path: str
    scale: float = 1.0

    @property
    def text(self) -> str:
        return self.path if self.scale == 1.0 else f"{self.path}:{self.scale:g}"


def parse(values: Any, where: str) -> list[AdapterSpec]:
    """The adapters of the `lora` option (a string or several): `PATH` or `PATH:SCALE` each."""
    if values is None:
        return []
    out = []
    for value in (values,) if isinstance(values, str) else values:
        text = str(value).strip()
        path, sep, tail = text.rpartition(":")
        try:
            scale = float(tail) if sep else 1.0
        except ValueError:
            sep = ""  # a colon that is part of the path
        if not sep:
            path, scale = text, 1.0
        if not path:
            raise UsageError(f"{where}: lora {value!r} names no file", hint="lora=PATH or lora=PATH:SCALE, several comma-separated")
        if not math.isfinite(scale):
            raise UsageError(f"{where}: lora {value!r}: the scale must be a finite number")
        out.append(AdapterSpec(path, scale))
    paths = [a.path for a in out]
    if len(set(paths)) != len(paths):
        raise UsageError(f"{where}: lora names the same adapter twice", hint="give each adapter once, with its scale")
    return out


@dataclass(frozen=True)
class Adapter:
    """An adapter resolved to its file: what run.json records of it."""

    spec: AdapterSpec
    file: Path
    sha256: str

    def record(self, alpha: float | None) -> dict[str, Any]:
        return {"path": str(self.file), "bytes": self.file.stat().st_size, "sha256": self.sha256, "scale": self.spec.scale,
                **({"alpha": alpha} if alpha is not None else {})}

    def identity(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "scale": self.spec.scale}


def resolve(specs: list[AdapterSpec], path_of: Callable[[str], str], check: Callable[[Path], None],
            sha256: Callable[[Path], str]) -> list[Adapter]:
    """Each adapter's file (relative to the registry that named it), checked to be a GGUF file
    (`check`), with its sha256: all before the model loads."""
    out = []
    for spec in specs:
        file = Path(path_of(spec.path)).resolve()
        if not file.is_file():
            raise ModelError(f"LoRA adapter not found: {file}")
        check(file)
        out.append(Adapter(spec, file, sha256(file)))
    return out


def identity(adapters: list[Adapter]) -> dict[str, Any]:
    """The part of the model's identity its adapters make (nothing without adapters, so a run
    without them keeps the identity it always had)."""
    return {"lora": [a.identity() for a in adapters]} if adapters else {}


class Loaded:
    """The adapters loaded onto a llama.cpp model, set on each context made for it."""

    def __init__(self, llama_cpp: Any, model: Any, adapters: list[Adapter]):
        self._llama_cpp, self.adapters = llama_cpp, adapters
        self.handles: list[Any] = []
        for a in adapters:
            handle = llama_cpp.llama_adapter_lora_init(model, str(a.file).encode("utf-8"))
            if not handle:
                self.close()
                raise ModelError(f"llama.cpp could not load the LoRA adapter {a.file}",
                                 hint="a LoRA adapter GGUF (convert_lora_to_gguf.py) made for this model's architecture "
                                      "and shapes")
            self.handles.append(handle)
        self.alphas = [self._alpha(h) for h in self.handles]

    def _alpha(self, handle: Any) -> float | None:
        buf = ctypes.create_string_buffer(64)
        if self._llama_cpp.llama_adapter_meta_val_str(handle, b"adapter.lora.alpha", buf, 64) < 0:
            return None
        try:
            return float(buf.value.decode("ascii"))
        except ValueError:
            return None

    def apply(self, ctx: Any) -> None:
        """Set every adapter, with its scale, on a new context."""
        if not self.handles:
            return
        n = len(self.handles)
        arr = (self._llama_cpp.llama_adapter_lora_p_ctypes * n)(*self.handles)
        scales = (ctypes.c_float * n)(*(a.spec.scale for a in self.adapters))
        if self._llama_cpp.llama_set_adapters_lora(ctx, arr, n, scales) != 0:
            raise ModelError("llama.cpp could not set the LoRA adapters on its context: "
                             + ", ".join(str(a.file) for a in self.adapters))

    def records(self) -> list[dict[str, Any]]:
        return [a.record(alpha) for a, alpha in zip(self.adapters, self.alphas)]

    def close(self) -> None:
        """Free the adapters (before the model they belong to, after every context that used them)."""
        for handle in self.handles:
            self._llama_cpp.llama_adapter_lora_free(handle)
        self.handles = []
