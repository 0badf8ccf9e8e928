#!/usr/bin/env bash
# The GPU check, one command (docs/speed-and-gpu.md "GPU"): tools/gpu_check.sh OUT_DIR [--dry-run]
# On a bare GPU machine without a registry, from the tracked files and the carried .gpu_bundle/
# (tools/gpu_bundle.py makes it): unpacks the CUDA build the bundle carries (--build-cuda) or, without
# one or where it does not load, compiles llama-cpp-python with CUDA (sm_90); writes a random-weight
# Mistral-7B-v0.3-shaped Q4_K_M model with Mistral's vocabulary meanwhile, and measures econeval on
# every task, llama.cpp's own batched decode and tools/bench.py; tools/gpu_check.py says how.
# OUT_DIR/gpu_check.json is written at once and after every step; the whole command ends within
# GPU_CHECK_LIMIT_S seconds (default 540: 9 minutes) whatever happens.
# --dry-run: tiny layers, the CPU build installed here (PYTHON, default .venv/bin/python), every
# step but the CUDA ones.
set -uo pipefail
t0=$(date +%s)
cd "$(dirname "$0")/.."
OUT=${1:?usage: tools/gpu_check.sh OUT_DIR [--dry-run]}
DRY=${2:-}
LIMIT=${GPU_CHECK_LIMIT_S:-540}
mkdir -p "$OUT"
printf '{"status": "starting", "dry_run": %s, "limit_s": %s}\n' "$([ "$DRY" = --dry-run ] && echo true || echo false)" "$LIMIT" \
  > "$OUT/gpu_check.json"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
if [ "$DRY" = "--dry-run" ]; then
  PY=${PYTHON:-.venv/bin/python}
  [ -x "$PY" ] || PY=python3
else
  PY=${PYTHON:-python3}
fi
export GPU_CHECK_WORK=${GPU_CHECK_WORK:-${TMPDIR:-/tmp}/econeval-gpu-check}
echo "gpu_check: $PY, limit ${LIMIT} s, work folder $GPU_CHECK_WORK, started $(date -u +%FT%TZ)"
# the driver keeps its own deadline (LIMIT less a margin); this outer limit is the last resort
GPU_CHECK_T0=$t0 timeout -k 5 $((LIMIT - 8 - ($(date +%s) - t0))) "$PY" tools/gpu_check.py all "$OUT" $DRY --limit-s "$LIMIT"
rc=$?
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  echo "gpu_check: the driver was stopped at the time limit; gpu_check.json holds what it measured"
  for f in "$GPU_CHECK_WORK"/steps/*.pgid; do  # its steps run in sessions of their own: end those still running
    [ -f "$f" ] && kill -KILL -- "-$(cat "$f")" 2>/dev/null
  done
fi
echo "gpu_check: done in $(( $(date +%s) - t0 )) s (exit $rc); $OUT/gpu_check.json"
exit $rc
