"""What llama.cpp runs on here, from its device registry (ggml's backend API, through
llama-cpp-python's library): the backends compiled in, the GPUs found, and the line a run prints
when its model loads ("on CUDA0 NVIDIA H200, 33/33 layers offloaded", "on CPU (no GPU offload: a
CPU build)")."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

GPU_TYPES = (1, 2)  # GGML_BACKEND_DEVICE_TYPE_GPU, GGML_BACKEND_DEVICE_TYPE_IGPU


@dataclass(frozen=True)
class Device:
    name: str  # llama.cpp's: CUDA0, Vulkan1, ...
    description: str  # the device's: NVIDIA H200
    free: int  # bytes free now
    total: int

    def __str__(self) -> str:
        return f"{self.name} {self.description}".strip()


def _lib(llama_cpp: Any) -> Any:
    lib = llama_cpp.llama_cpp._lib
    lib.ggml_backend_reg_count.restype = lib.ggml_backend_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_reg_get.restype = lib.ggml_backend_dev_get.restype = ctypes.c_void_p
    lib.ggml_backend_reg_get.argtypes = lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    for fn in (lib.ggml_backend_reg_name, lib.ggml_backend_dev_name, lib.ggml_backend_dev_description):
        fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    lib.ggml_backend_dev_type.restype = ctypes.c_int
    lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_memory.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    return lib


def _text(raw: bytes | None) -> str:
    return (raw or b"").decode("utf-8", "replace")


def gpus(llama_cpp: Any) -> list[Device]:
    """The GPUs llama.cpp found (none on a CPU build, or where its GPU backend found no device)."""
    try:
        lib = _lib(llama_cpp)
        found = []
        for i in range(lib.ggml_backend_dev_count()):
            dev = lib.ggml_backend_dev_get(i)
            if lib.ggml_backend_dev_type(dev) in GPU_TYPES:
                free, total = ctypes.c_size_t(), ctypes.c_size_t()
                lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
                found.append(Device(_text(lib.ggml_backend_dev_name(dev)), _text(lib.ggml_backend_dev_description(dev)),
                                    free.value, total.value))
        return found
    except (AttributeError, OSError):
        return []


def compiled_backends(llama_cpp: Any) -> list[str]:
    """The backends this llama.cpp build holds (CPU; CUDA, Vulkan, ... where built with them),
    whether or not they found a device."""
    try:
        lib = _lib(llama_cpp)
        return [_text(lib.ggml_backend_reg_name(lib.ggml_backend_reg_get(i))) for i in range(lib.ggml_backend_reg_count())]
    except (AttributeError, OSError):
        return []


def offloaded(n_gpu_layers: int, n_layer: int) -> tuple[int, int]:
    """(layers offloaded, layers there are) as llama.cpp counts them when it loads a model: the
    repeating layers and the output layer (llama_model::load_tensors: min(n_gpu_layers, n_layer + 1)
    of n_layer + 1); -1 asks for all."""
    total = n_layer + 1
    return (total if n_gpu_layers < 0 else min(n_gpu_layers, total)), total


def runs_on(llama_cpp: Any, gpu_offload: bool, n_gpu_layers: int, n_layer: int) -> str:
    """Where a loaded model runs, in words: the GPUs and the layers offloaded to them, or why the CPU."""
    if gpu_offload and n_gpu_layers != 0:
        done, total = offloaded(n_gpu_layers, n_layer)
        on = " + ".join(map(str, gpus(llama_cpp))) or "GPU"
        return f"{on}, {done}/{total} layers offloaded" + (" (the rest on the CPU)" if done < total else "")
    if gpu_offload:
        return "CPU (n_gpu_layers 0: no layer offloaded)"
    others = [b for b in compiled_backends(llama_cpp) if b not in ("CPU", "BLAS", "RPC")]
    if others:
        return f"CPU (a {'/'.join(others)} build, but it found no GPU)"
    return "CPU (no GPU offload: a CPU build)"
