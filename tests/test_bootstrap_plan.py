"""`tools/bootstrap.sh --plan`: what the install would build on this machine and why, with stand-in
`nvidia-smi` and `nvcc` scripts on PATH (the GPU's name and compute capability, the CUDA release),
built and installed nothing."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CPU_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
SYSTEM_PATH = "/usr/bin:/bin"


def stand_in(folder: Path, name: str, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("#!/bin/sh\n" + body)
    (folder / name).chmod(0o755)


def smi(folder: Path, *gpus: tuple[str, str]) -> None:
    """An nvidia-smi that names these GPUs (name, compute capability), as a working driver does."""
    rows = "".join(f"{name}, {cap}\\n" for name, cap in gpus)
    names = "".join(f"{name}\\n" for name, _ in gpus)
    stand_in(folder, "nvidia-smi", f'case "$*" in *compute_cap*) printf "{rows}";; *) printf "{names}";; esac\n')


def nvcc(folder: Path, release: str = "13.0") -> None:
    stand_in(folder, "nvcc", f'echo "nvcc: NVIDIA (R) Cuda compiler driver"\necho "Cuda compilation tools, release {release}, V{release}.88"\n')


def plan(tmp_path: Path, bin_dir: Path | None = None, **env: str) -> tuple[int, dict[str, str], str]:
    """Exit code, the plan's lines by their key (GPU, nvcc, build, CMAKE_ARGS, onnxruntime, wheel cache), stderr."""
    base = {k: v for k, v in os.environ.items() if k not in ("CMAKE_ARGS", "CUDACXX", "CUDA_HOME")}
    # no toolkit but the stand-ins: CUDA_HOME names an empty folder, so /usr/local/cuda* is not searched
    base.update(PATH=f"{bin_dir or tmp_path / 'nothing'}:{SYSTEM_PATH}", PYTHON=sys.executable,
                XDG_CACHE_HOME=str(tmp_path / "cache"), CUDA_HOME=str(tmp_path / "no-cuda"), **env)
    proc = subprocess.run([str(REPO / "tools" / "bootstrap.sh"), "--plan"], capture_output=True, text=True, env=base, timeout=60)
    lines = proc.stdout.splitlines()
    assert proc.returncode != 0 or lines[0] == "bootstrap plan:", proc.stdout
    facts = dict(line.strip().split(": ", 1) for line in lines[1:])
    return proc.returncode, facts, proc.stderr


@pytest.fixture(autouse=True)
def no_real_gpu_tools():
    if any(os.access(os.path.join(d, "nvidia-smi"), os.X_OK) for d in SYSTEM_PATH.split(":")):
        pytest.skip("nvidia-smi is in /usr/bin or /bin: the stand-ins cannot stand in")


def test_without_a_gpu_the_portable_cpu_build_and_plain_onnxruntime(tmp_path):
    rc, p, err = plan(tmp_path)
    assert rc == 0 and err == ""
    assert p["GPU"] == "none (no nvidia-smi)"
    assert p["nvcc"].startswith("none found")
    assert p["build"].startswith("cpu: ") and "no NVIDIA GPU" in p["build"]
    assert p["CMAKE_ARGS"] == CPU_ARGS
    assert p["onnxruntime"] == "onnxruntime"
    wheels = Path(p["wheel cache"].split(" (")[0])
    assert wheels.parent == tmp_path / "cache" / "econeval" / "wheels" and wheels.name.startswith("llama-cpp-python-0.3.36-cpu-")
    assert "not compiled yet" in p["wheel cache"]
    assert not (tmp_path / "cache").exists()  # nothing built, no folder made


def test_a_driver_that_fails_is_no_gpu(tmp_path):
    stand_in(tmp_path / "bin", "nvidia-smi", "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\nexit 9\n")
    nvcc(tmp_path / "bin")
    rc, p, _ = plan(tmp_path, tmp_path / "bin")
    assert rc == 0 and p["GPU"].startswith("none (nvidia-smi failed: NVIDIA-SMI has failed")
    assert p["CMAKE_ARGS"] == CPU_ARGS and p["onnxruntime"] == "onnxruntime"


def test_a_gpu_and_nvcc_build_cuda_for_that_gpu(tmp_path):
    smi(tmp_path / "bin", ("NVIDIA H200", "9.0"))
    nvcc(tmp_path / "bin", "13.0")
    rc, p, err = plan(tmp_path, tmp_path / "bin")
    assert rc == 0 and err == ""
    assert p["GPU"] == "NVIDIA H200 (compute capability 9.0), from nvidia-smi"
    assert p["nvcc"] == f"{tmp_path / 'bin' / 'nvcc'} (CUDA 13.0)"
    assert p["build"].startswith("cuda-sm90: ") and "sm_90" in p["build"]
    assert p["CMAKE_ARGS"] == f"-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90 {CPU_ARGS}"
    assert p["onnxruntime"].startswith("onnxruntime-gpu")
    assert Path(p["wheel cache"].split(" (")[0]).name.startswith("llama-cpp-python-0.3.36-cuda-sm90-")


def test_each_architecture_of_several_gpus(tmp_path):
    smi(tmp_path / "bin", ("NVIDIA H200", "9.0"), ("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA H200", "9.0"))
    nvcc(tmp_path / "bin")
    _, p, _ = plan(tmp_path, tmp_path / "bin")
    assert p["GPU"].startswith("NVIDIA A100-SXM4-80GB, 2x NVIDIA H200 ")
    assert "-DCMAKE_CUDA_ARCHITECTURES=80;90 " in p["CMAKE_ARGS"] and p["build"].startswith("cuda-sm80-sm90: ")


def test_a_gpu_without_nvcc_is_told_what_to_install_in_one_line(tmp_path):
    smi(tmp_path / "bin", ("NVIDIA H200", "9.0"))
    rc, p, err = plan(tmp_path, tmp_path / "bin")
    assert rc == 0
    assert p["nvcc"].startswith("none found")
    assert p["build"].startswith("cpu: ") and "NVIDIA H200 found, but no nvcc" in p["build"]
    assert p["CMAKE_ARGS"] == CPU_ARGS
    assert p["onnxruntime"].startswith("onnxruntime-gpu")  # ONNX Runtime needs the driver, not nvcc
    assert len(err.splitlines()) == 1 and "no nvcc" in err and "install the CUDA toolkit" in err


def test_the_nvcc_cudacxx_names_is_used(tmp_path):
    smi(tmp_path / "bin", ("NVIDIA H200", "9.0"))
    nvcc(tmp_path / "toolkit", "12.8")
    _, p, _ = plan(tmp_path, tmp_path / "bin", CUDACXX=str(tmp_path / "toolkit" / "nvcc"))
    assert p["nvcc"] == f"{tmp_path / 'toolkit' / 'nvcc'} (CUDA 12.8)" and p["build"].startswith("cuda-sm90: ")


def test_cmake_args_of_your_own_win(tmp_path):
    smi(tmp_path / "bin", ("NVIDIA H200", "9.0"))
    nvcc(tmp_path / "bin")
    mine = "-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_CUDA_FA=OFF"
    rc, p, _ = plan(tmp_path, tmp_path / "bin", CMAKE_ARGS=mine)
    assert rc == 0 and p["CMAKE_ARGS"] == mine
    assert p["build"].startswith("cuda-custom: ") and "your CMAKE_ARGS" in p["build"]
    assert Path(p["wheel cache"].split(" (")[0]).name.startswith("llama-cpp-python-0.3.36-cuda-custom-")
    _, cpu, _ = plan(tmp_path, CMAKE_ARGS="-DGGML_BLAS=ON")
    assert cpu["CMAKE_ARGS"] == "-DGGML_BLAS=ON" and cpu["build"].startswith("cpu-custom: ")


def test_a_wheel_cached_under_the_name_without_the_build_kind_is_found(tmp_path):
    _, p, _ = plan(tmp_path)
    named = Path(p["wheel cache"].split(" (")[0])
    key = named.name.rsplit("-", 1)[1]
    old = named.parent / f"llama-cpp-python-0.3.36-{key}"
    old.mkdir(parents=True)
    (old / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
    _, p, _ = plan(tmp_path)
    assert p["wheel cache"] == f"{named} (compiled earlier as {old}: renamed to this when bootstrap runs)"
    old.rename(named)
    _, p, _ = plan(tmp_path)
    assert p["wheel cache"] == f"{named} (compiled earlier)"


def test_an_unknown_argument_is_a_usage_error(tmp_path):
    proc = subprocess.run([str(REPO / "tools" / "bootstrap.sh"), "--plna"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert proc.returncode == 2 and proc.stderr.strip() == "usage: tools/bootstrap.sh [--plan]"
    assert not (tmp_path / "cache").exists() and not glob.glob(str(tmp_path / "*"))
