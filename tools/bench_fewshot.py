"""Benchmark: per-item time of EconLogicQA 5-shot relative to 1-shot, measured in one run on one
loaded model. Target: at most 1.5x although the 5-shot prompt is several times longer, because
the shared few-shot prefix is evaluated once and kept in llama.cpp's KV cache.

usage: .venv/bin/python tools/bench_fewshot.py [--model M] [--limit N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from econeval import benchmarks, config, runner  # noqa: E402
from econeval.backends.llamacpp import LlamaCppBackend  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--limit", type=int, default=30)
    args = ap.parse_args()
    backend = LlamaCppBackend(config.resolve_model(args.model))
    ctx = runner.RunContext(seed=1234, limit=args.limit)
    per_item = {}
    for name in ("econlogicqa-1shot", "econlogicqa-5shot"):
        task = benchmarks.get_task(name)
        with tempfile.TemporaryDirectory() as out:
            t0, tok0 = time.perf_counter(), backend.n_evaluated
            doc = runner.run([task], backend, Path(out), ctx, show_progress=False)
            elapsed = time.perf_counter() - t0
        prep = task.prepare(ctx)
        item = prep.items[0]
        prompt_tokens = len(backend._tokens(task.requests(item, prep, {})["response"].prompt, "", False)[1])
        per_item[name] = elapsed / args.limit
        print(f"{name}: {per_item[name]:.3f} s/item over {args.limit} items, prompt ~{prompt_tokens} tokens, "
              f"{(backend.n_evaluated - tok0) / args.limit:.0f} tokens evaluated per item, "
              f"accuracy {doc['tasks'][name]['paper']['accuracy']:.3f}")
    print(f"ratio 5-shot / 1-shot per item: {per_item['econlogicqa-5shot'] / per_item['econlogicqa-1shot']:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
