"""The line that says where a model runs, from llama.cpp's device registry: a stand-in registry
for GPUs this machine lacks (the real CPU build: tests/test_run.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from econeval.backends.llamacpp_devices import compiled_backends, gpus, offloaded, runs_on


def registry(backends: list[str], devices: list[tuple[str, str, int, int]]):
    """A stand-in for llama-cpp-python's library with ggml's device registry: backends compiled
    in, and devices (name, description, type, free bytes); its functions (lambdas) take the
    attributes ctypes sets (restype, argtypes)."""

    def memory(dev, free, total):
        free._obj.value, total._obj.value = devices[dev][3], 2 * devices[dev][3]

    lib = SimpleNamespace(
        ggml_backend_reg_count=(lambda: len(backends)), ggml_backend_reg_get=(lambda i: i),
        ggml_backend_reg_name=(lambda i: backends[i].encode()),
        ggml_backend_dev_count=(lambda: len(devices)), ggml_backend_dev_get=(lambda i: i),
        ggml_backend_dev_name=(lambda d: devices[d][0].encode()),
        ggml_backend_dev_description=(lambda d: devices[d][1].encode()),
        ggml_backend_dev_type=(lambda d: devices[d][2]), ggml_backend_dev_memory=(memory))
    return SimpleNamespace(llama_cpp=SimpleNamespace(_lib=lib))


CPU = ("CPU", "AMD EPYC", 0, 0)
H200 = [("CUDA0", "NVIDIA H200", 1, 140 << 30), ("CUDA1", "NVIDIA H200", 1, 139 << 30)]


def test_layers_offloaded_as_llama_cpp_counts_them():
    assert offloaded(-1, 32) == (33, 33)  # every repeating layer and the output layer
    assert offloaded(10, 32) == (10, 33)
    assert offloaded(1000, 32) == (33, 33)


def test_a_gpu_names_itself_and_the_layers_offloaded():
    reg = registry(["CPU", "CUDA"], [CPU, H200[0]])
    assert runs_on(reg, True, -1, 32) == "CUDA0 NVIDIA H200, 33/33 layers offloaded"
    assert runs_on(reg, True, 20, 32) == "CUDA0 NVIDIA H200, 20/33 layers offloaded (the rest on the CPU)"
    assert runs_on(reg, True, 0, 32) == "CPU (n_gpu_layers 0: no layer offloaded)"
    both = registry(["CPU", "CUDA"], [CPU, *H200])
    assert runs_on(both, True, -1, 32) == "CUDA0 NVIDIA H200 + CUDA1 NVIDIA H200, 33/33 layers offloaded"
    assert [g.free for g in gpus(both)] == [140 << 30, 139 << 30]


def test_the_cpu_says_why():
    assert runs_on(registry(["CPU"], [CPU]), False, -1, 32) == "CPU (no GPU offload: a CPU build)"
    assert runs_on(registry(["CPU", "BLAS"], [CPU]), False, -1, 32) == "CPU (no GPU offload: a CPU build)"
    assert runs_on(registry(["CPU", "CUDA"], [CPU]), False, -1, 32) == "CPU (a CUDA build, but it found no GPU)"


def test_the_real_cpu_build_here():
    import llama_cpp

    if llama_cpp.llama_supports_gpu_offload():
        pytest.skip("this llama.cpp build offloads to a GPU")
    assert gpus(llama_cpp) == [] and compiled_backends(llama_cpp) == ["CPU"]
    assert runs_on(llama_cpp, False, -1, 32) == "CPU (no GPU offload: a CPU build)"
