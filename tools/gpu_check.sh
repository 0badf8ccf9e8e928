#!/usr/bin/env bash
# The GPU check, one command (README "GPU"): tools/gpu_check.sh OUT_DIR [--dry-run]
#   1. installs the carried wheels (.gpu_bundle/, from tools/gpu_bundle.py) and compiles the carried
#      llama-cpp-python sdist with CUDA for this chip only (CMAKE_CUDA_ARCHITECTURES=90, all cores),
#      timing the build; meanwhile it writes a random-weight 7B-shaped (Mistral 7B's shapes) F16 GGUF;
#   2. quantizes it to Q4_K_M with llama.cpp's own quantizer;
#   3. runs tools/bench.py with offload (econeval against the engine floor and llama.cpp's own batched
#      decode), econeval with offload on every task (--limit 16), llama.cpp's batched decode at 1, 8, 32
#      and 64 sequences, and writes OUT_DIR/gpu_check.json (plus the log).
# --dry-run: tiny shapes, the CPU build of .venv, no install and no compile: every step but CUDA.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: tools/gpu_check.sh OUT_DIR [--dry-run]}
DRY=${2:-}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
start=$(date +%s)
if [ "$DRY" = "--dry-run" ]; then
  PY=${PYTHON:-.venv/bin/python}
  $PY tools/gpu_check.py model "$OUT" --dry-run || exit 1
  $PY tools/bench.py --model "$OUT/model-q4_k_m.gguf" --sections 1,2 --items 4 --cot-items 4 --json "$OUT/bench.json" || exit 1
  $PY tools/gpu_check.py measure "$OUT" --dry-run || exit 1
else
  PY=python3
  BUNDLE=${GPU_BUNDLE:-.gpu_bundle}
  [ -d "$BUNDLE/wheels" ] || { echo "gpu_check: no .gpu_bundle (run tools/gpu_bundle.py where pip works)"; exit 1; }
  SITE=/tmp/econeval-site
  $PY -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$BUNDLE"/wheels/*.whl || exit 1
  export PYTHONPATH="$SITE:$PWD"
  b0=$(date +%s)
  # the 7B-shaped F16 model needs only gguf and numpy: it is written while llama.cpp compiles
  ( $PY -c "
import sys; sys.path.insert(0, 'tests'); import numpy as np; from pathlib import Path
sys.path.insert(0, 'tools'); import gpu_check
from tiny_gguf import write_tiny_llama
write_tiny_llama(Path('$OUT/model-f16.gguf'), shapes=gpu_check.MISTRAL_7B, dtype=np.float16)" > "$OUT/write.log" 2>&1 ) &
  writer=$!
  CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF" \
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    $PY -m pip install -q --no-index --no-deps --no-build-isolation --target "$SITE" "$BUNDLE"/llama_cpp_python-*.tar.gz || exit 1
  b1=$(date +%s)
  echo "{\"build_s\": $((b1 - b0)), \"cmake_args\": \"-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90\", \"nproc\": $(nproc)}" > "$OUT/build.json"
  wait $writer || { cat "$OUT/write.log"; exit 1; }
  $PY tools/gpu_check.py model "$OUT" --skip-write || exit 1
  $PY tools/bench.py --model "$OUT/model-q4_k_m.gguf" --n-gpu-layers -1 --sections 1,2 --items 200 --cot-items 64 \
    --json "$OUT/bench.json" || exit 1
  $PY tools/gpu_check.py measure "$OUT" || exit 1
fi
echo "gpu_check: done in $(( $(date +%s) - start )) s; $OUT/gpu_check.json"
