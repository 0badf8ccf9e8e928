"""Benchmark: embedding throughput of an embedder (texts/s) with 1 and 2 ONNX Runtime threads,
measured in one run on the same texts (CFBenchmark references, as scored).

usage: .venv/bin/python tools/bench_embedder.py [--embedder NAME] [--n 64]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dataclasses import replace  # noqa: E402

from econeval import data
from econeval.run import roles
from econeval.types import EMBEDDER  # noqa: E402
from econeval.backends.onnx_embed import OnnxEmbedder  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--embedder", default=None)
    ap.add_argument("--n", type=int, default=64)
    args = ap.parse_args()
    spec = roles.resolve(args.embedder, EMBEDDER)
    texts = [r["response"] for t in ("summary", "risk", "suggestion") for r in data.load("cfbenchmark", f"{t}.jsonl") if r["response"]]
    texts = texts[: args.n]
    rates = {}
    for threads in (1, 2):
        emb = OnnxEmbedder(replace(spec, options={**spec.options, "threads": threads}))
        emb.embed(texts[:4])  # warm-up
        t0 = time.perf_counter()
        emb.embed(texts)
        rates[threads] = len(texts) / (time.perf_counter() - t0)
        mean_chars = sum(map(len, texts)) / len(texts)
        print(f"{spec.name}: {threads} thread(s): {rates[threads]:.1f} texts/s ({len(texts)} texts, mean {mean_chars:.0f} chars)")
    print(f"ratio 2 threads / 1 thread: {rates[2] / rates[1]:.2f}")


if __name__ == "__main__":
    main()
