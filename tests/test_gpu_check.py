"""The prepared GPU check (tools/gpu_check.sh), proven on the CPU: `--dry-run` runs every step but
the CUDA build (tiny shapes on the installed CPU build) and writes the same gpu_check.json."""

import json
import os
import subprocess

import pytest

from conftest import REAL_CACHE, REPO

pytestmark = pytest.mark.slow  # every task on a model, the engine's own loops, the default model's tokenizer


def test_the_gpu_check_dry_run_writes_every_figure(tmp_path):
    bundle, out = tmp_path / "bundle", tmp_path / "out"
    # the default model's tokenizer and the built embedder live in the real cache
    env = {**os.environ, "GPU_BUNDLE": str(bundle), "PYTHON": str(REPO / ".venv" / "bin" / "python"),
           "ECONEVAL_CACHE": str(REAL_CACHE)}
    py = env["PYTHON"] if os.path.exists(env["PYTHON"]) else "python3"
    subprocess.run([py, "tools/gpu_bundle.py", "--counts-only"], cwd=REPO, env=env, check=True, capture_output=True)
    counts = json.loads((bundle / "token_counts.json").read_text())
    assert counts["tasks"]["econnli-zero"]["items"] == 1026 and counts["tasks"]["econnli-zero"]["prompt_tokens"] > 1026 * 20
    proc = subprocess.run(["bash", "tools/gpu_check.sh", str(out), "--dry-run"], cwd=REPO, env={**env, "PYTHON": py},
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((out / "gpu_check.json").read_text())
    assert doc["dry_run"] is True and doc["offloaded_layers"] == 0
    assert doc["model"]["shapes"]["n_layer"] == 2 and doc["model"]["q4_k_m_bytes"] > 0  # quantized by llama.cpp
    from econeval import registry

    assert set(doc["tasks"]) == set(registry.tasks())
    assert all(t["tokens_per_s"] and t["n_errors"] == 0 for t in doc["tasks"].values()), doc["tasks"]
    assert set(doc["engine_batched"]) == {"1", "8"} and all(v["generated_tokens_per_s"] > 0 for v in doc["engine_batched"].values())
    assert doc["bench"]["classification"]["econeval_over_floor"] > 0 and doc["bench"]["generation"]["econeval_over_engine"] > 0
    proj = doc["projection"]
    assert proj["total_s"] > 0 and all(v is not None for v in proj["seconds_per_task"].values())
    assert (out / "gpu_check.log").read_text().count("gpu_check: done") == 1
