#!/usr/bin/env bash
# Builds the default embedder (m3e-small → ONNX) into econeval's cache, once. The export needs
# torch and transformers; they live in a throwaway environment, not in econeval's.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-$(.venv/bin/python -c 'from econeval.config import cache_home; print(cache_home() / "embedders" / "m3e-small")')}
if [ -f "$out/model.onnx" ] && [ -f "$out/tokenizer.json" ]; then
  echo "embedder: $out already built" >&2
  exit 0
fi
env_dir=$(mktemp -d)
# the throwaway environment (torch: ~2 GB of small files) is deleted in the background: its
# deletion took two minutes on a 2-core machine, and nothing waits on it
trap '(rm -rf "$env_dir" >/dev/null 2>&1 &)' EXIT
start=$(date +%s)
python3 -m venv "$env_dir"
"$env_dir/bin/python" -m pip install -q --disable-pip-version-check torch "transformers>=4.45,<5" onnx onnxscript onnxruntime tokenizers numpy 2>&1 | grep -v '^WARNING: Location' || true
"$env_dir/bin/python" tools/build_m3e_small.py "$out"
echo "embedder: built in $(( $(date +%s) - start )) s (environment included)" >&2
