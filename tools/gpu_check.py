"""The GPU check's measuring steps (tools/gpu_check.sh runs them; see README "GPU").

    python tools/gpu_check.py model OUT_DIR [--dry-run]     write the random-weight 7B-shaped llama
                                                             GGUF (F16) and quantize it to Q4_K_M
    python tools/gpu_check.py measure OUT_DIR [--dry-run]   run econeval with offload on every task,
                                                             the engine's own batched decode at 1, 8,
                                                             32 and 64 sequences, and write gpu_check.json

`--dry-run`: tiny shapes on the CPU build already installed, every step but the CUDA one.
The projection of a full `--suite all` applies the measured prompt and generation rates to each
task's token counts (counted beforehand with the default model's tokenizer: token_counts.json,
written by tools/gpu_bundle.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

MISTRAL_7B = {"n_layer": 32, "n_embd": 4096, "n_head": 32, "n_head_kv": 8, "n_ff": 14336, "n_vocab": 32000, "ctx": 32768}
TINY = {"n_layer": 2, "n_embd": 256, "n_head": 4, "n_head_kv": 2, "n_ff": 512, "n_vocab": 1024, "ctx": 4096}


def write_model(out: Path, dry: bool, skip_write: bool = False) -> dict:
    """F16 random weights in the given shapes (a synthetic vocabulary), then llama.cpp's own
    Q4_K_M. `skip_write`: the F16 file was written already (gpu_check.sh writes it during the build)."""
    import llama_cpp
    from tiny_gguf import write_tiny_llama

    shapes = TINY if dry else MISTRAL_7B
    f16, q4 = out / "model-f16.gguf", out / "model-q4_k_m.gguf"
    t0 = time.monotonic()
    if not skip_write:
        write_tiny_llama(f16, shapes=shapes, dtype=np.float16)
    t1 = time.monotonic()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    params.nthread = os.cpu_count() or 1
    rc = llama_cpp.llama_model_quantize(str(f16).encode(), str(q4).encode(), params)
    if rc != 0:
        sys.exit(f"gpu_check: llama_model_quantize returned {rc}")
    t2 = time.monotonic()
    f16.unlink()
    info = {"shapes": shapes, "write_f16_s": round(t1 - t0, 1), "quantize_s": round(t2 - t1, 1),
            "q4_k_m_bytes": q4.stat().st_size}
    (out / "model.json").write_text(json.dumps(info, indent=1))
    return info


class GpuMemory:
    """Peak GPU memory in use (nvidia-smi polled every 0.5 s); None without nvidia-smi."""

    def __init__(self):
        self.peak_mib: int | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while not self.stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5).stdout
                used = max(int(x) for x in out.split())
                self.peak_mib = max(self.peak_mib or 0, used)
            except (OSError, ValueError, subprocess.SubprocessError):
                return
            self.stop.wait(0.5)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()


def device_name() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or "cpu"
    except (OSError, subprocess.SubprocessError):
        return "cpu"


def batched_rates(path: Path, n_gpu_layers: int, counts=(1, 8, 32, 64), prompt_tokens: int = 128, gen: int = 64) -> dict:
    """llama.cpp's own batched greedy decode (as `llama-batched-bench` does it): N sequences, each
    a `prompt_tokens` prompt then `gen` tokens; aggregate tokens/s of the prompt and the generation."""
    import llama_cpp
    from llama_cpp import _internals

    mp = llama_cpp.llama_model_default_params()
    mp.n_gpu_layers = 0x7FFFFFFF if n_gpu_layers == -1 else n_gpu_layers
    model = _internals.LlamaModel(path_model=str(path), params=mp, verbose=False)
    out = {}
    for n in counts:
        cp = llama_cpp.llama_context_default_params()
        cp.n_ctx = n * (prompt_tokens + gen) + 16
        cp.n_batch, cp.n_ubatch, cp.n_seq_max, cp.kv_unified = 2048, 512, n, True
        cp.n_threads = cp.n_threads_batch = os.cpu_count() or 1
        cp.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO if n_gpu_layers else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        ctx = _internals.LlamaContext(model=model, params=cp, verbose=False)
        batch = llama_cpp.llama_batch_init(2048, 0, n)
        n_vocab = model.n_vocab()
        rng = np.random.default_rng(n)

        def decode(entries):
            for i, (t, p, s, o) in enumerate(entries):
                batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, p, 1, o
                batch.seq_id[i][0] = s
            batch.n_tokens = len(entries)
            if llama_cpp.llama_decode(ctx.ctx, batch) != 0:
                raise RuntimeError("llama_decode failed")

        prompts = rng.integers(3, n_vocab, size=(n, prompt_tokens)).tolist()
        body = [(t, k, s, False) for s in range(n) for k, t in enumerate(prompts[s][:-1])]
        t0 = time.perf_counter()
        for i in range(0, len(body), 2048):
            decode(body[i:i + 2048])
        decode([(prompts[s][-1], prompt_tokens - 1, s, True) for s in range(n)])  # sequence s's logits at index s
        llama_cpp.llama_synchronize(ctx.ctx)
        t1 = time.perf_counter()
        for step in range(gen):
            toks = [int(np.argmax(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx.ctx, s), shape=(n_vocab,))))
                    for s in range(n)]
            decode([(t, prompt_tokens + step, s, True) for s, t in enumerate(toks)])
        llama_cpp.llama_synchronize(ctx.ctx)
        t2 = time.perf_counter()
        out[str(n)] = {"prompt_tokens_per_s": round(n * prompt_tokens / (t1 - t0), 1),
                       "generated_tokens_per_s": round(n * gen / (t2 - t1), 1)}
        llama_cpp.llama_batch_free(batch)
        ctx.close()
    return out


def measure(out: Path, dry: bool) -> dict:
    import econeval
    from econeval import registry

    q4 = out / "model-q4_k_m.gguf"
    counts_file = Path(os.environ.get("GPU_BUNDLE") or REPO / ".gpu_bundle") / "token_counts.json"
    counts = json.loads(counts_file.read_text()) if counts_file.is_file() else {}
    limit = 1 if dry else 16
    ngl = 0 if dry else -1
    report: dict = {"date": time.strftime("%Y-%m-%d"), "device": device_name(), "dry_run": dry,
                    "model": json.loads((out / "model.json").read_text()) if (out / "model.json").is_file() else None,
                    "limit": limit, "tasks": {}}
    for name in ("build", "bench"):
        if (out / f"{name}.json").is_file():
            report[name] = json.loads((out / f"{name}.json").read_text())
    tasks = [t for t in registry.tasks() if t != "econnli-gen"] + ["econnli-gen"]
    with GpuMemory() as mem:
        t0 = time.monotonic()
        doc = econeval.evaluate(model=str(q4), tasks=tasks, selection=econeval.Limit(limit), out=out / "run", bootstrap=0,
                                model_options={"n_gpu_layers": ngl}, n_ctx=8192)
        report["econeval_run_s"] = round(time.monotonic() - t0, 1)
        meta = json.loads((out / "run" / "run.json").read_text())
        report["offloaded_layers"] = meta["backend"].get("n_gpu_layers")
        report["parallel"] = meta["backend"].get("parallel")
        report["flash_attention"] = meta["backend"].get("flash_attention")
        for name, t in meta["timing"].items():
            secs = t["seconds"] or None
            report["tasks"][name] = {"items": t["items_run"], "seconds": t["seconds"],
                                     "tokens_evaluated": t.get("tokens_evaluated"), "tokens_generated": t.get("tokens_generated"),
                                     "tokens_per_s": round((t.get("tokens_evaluated", 0) + t.get("tokens_generated", 0)) / secs, 1)
                                     if secs else None, "n_errors": doc["tasks"][name]["n_errors"]}
        report["engine_batched"] = batched_rates(q4, ngl, counts=(1, 8) if dry else (1, 8, 32, 64))
    report["peak_gpu_memory_mib"] = mem.peak_mib
    report["projection"] = project(report, counts)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1))
    return report


def project(report: dict, counts: dict) -> dict:
    """A full --suite all: each task's prompt and generation token counts at the rates measured
    here (the task's own tokens/s over its evaluated + generated tokens, from the limited run)."""
    if not counts:
        return {"note": "no token_counts.json (tools/gpu_bundle.py writes it): no projection"}
    total = 0.0
    per = {}
    for name, c in counts.get("tasks", {}).items():
        rate = (report["tasks"].get(name) or {}).get("tokens_per_s")
        if not rate:
            per[name] = None
            continue
        secs = (c["prompt_tokens"] + c["max_generated_tokens"]) / rate
        per[name] = round(secs, 1)
        total += secs
    return {"seconds_per_task": per, "total_s": round(total, 1), "total_min": round(total / 60, 1),
            "method": "token counts of every item (prompts: the default model's tokenizer; generation: each request's "
                      "max_tokens, an upper bound: a random-weight model never stops early) / the task's measured tokens/s",
            "tokenizer": counts.get("tokenizer")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["model", "measure"])
    ap.add_argument("out", type=Path)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--skip-write", action="store_true", help="model: the F16 file is there already")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result = write_model(args.out, args.dry_run, args.skip_write) if args.step == "model" else measure(args.out, args.dry_run)
    print(json.dumps(result, indent=1)[:4000])


if __name__ == "__main__":
    main()
