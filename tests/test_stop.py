"""A stop (SIGINT / SIGTERM / SIGHUP) ends a run within a second even inside a long model step:
llama.cpp asks econeval's abort callback between the graph's nodes, so a decode of thousands of
prompt tokens ends there instead of at its end; the chunk in flight is dropped, nothing is
half-written, and the same command resumes."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import REPO
from tiny_gguf import write_tiny_llama

STEP_TOKENS = 2048  # the engine's tokens per llama_decode call (llamacpp.N_BATCH)


@pytest.fixture(scope="module")
def heavy_model(tmp_path_factory):
    """A model whose one step over 2,048 prompt tokens takes seconds on one thread (weights tiled
    from one random block: 136M parameters in F16, 270 MB)."""
    return write_tiny_llama(tmp_path_factory.mktemp("heavy") / "heavy.gguf", dtype=np.float16,
                            shapes={"n_layer": 8, "n_embd": 1024, "n_head": 16, "n_head_kv": 16, "n_ff": 4096, "ctx": 4096})


def test_a_stop_inside_a_long_prompt_step_ends_the_run_within_a_second(tmp_path, heavy_model):
    signum = signal.SIGINT  # SIGTERM and SIGHUP take the same path (signals.py; test_everyday, test_run_folder)
    out = tmp_path / "run"
    args = ["run", "--model", heavy_model, "--task", "econlogicqa-5shot", "--limit", "1", "--threads", "1", "--parallel", "1",
            "--n-ctx", "4096", "--out", out]
    proc = subprocess.Popen([sys.executable, "-m", "econeval", *map(str, args)], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "ECONEVAL_HOME": str(tmp_path / "home")}, cwd=REPO)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "econlogicqa-5shot: 0/1 saved" in line:  # its first chunk has begun: the prompt's first step is running
            break
    time.sleep(1.0)
    sent = time.monotonic()
    proc.send_signal(signum)
    _, rest = proc.communicate(timeout=120)
    took = time.monotonic() - sent
    text = "".join(lines) + rest
    assert proc.returncode == 128 + signum, text
    meta = json.loads((out / "run.json").read_text())
    cost = meta["projection"]["cost_model"]  # one step's seconds, by the speed measured before the run
    step = cost["per_call_s"] + STEP_TOKENS * (cost["per_token_s"] + STEP_TOKENS * cost["per_token_cell_s"])
    assert step >= 5.0, f"one step takes {step:.1f} s here: the test needs a step of 5 s or more"
    assert took < 1.0, f"the run ended {took:.2f} s after the signal, inside a step of {step:.1f} s\n{text}"
    assert meta["status"] == "interrupted" and not (out / "samples.jsonl").read_text().strip()
