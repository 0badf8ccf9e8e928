"""The KV layouts against each other, in one process on one model: the unified cache and
per-sequence streams (`-M kv_layout=unified|streams`), each task's first-stage requests run a chunk
at a time through both backends in alternation (the machine's load moves both alike), the chunk
as the runner sends it. Prints, per task and overall, the streams' time over the unified one's and
their tokens/s (prompt and generated tokens evaluated) over the unified one's (the fairer ratio
where the layouts' answers, and so their lengths, differ), whether every generated answer is the
same, and the decode calls and stream copies.

    .venv/bin/python tools/bench_layout.py [--model M] [--tasks econnli-cot,econlogicqa-5shot,cfbenchmark-few]
                                           [--items 16] [--rounds 2] [--threads N] [--n-gpu-layers N] [--json FILE]

`--items` per task (spread over its items; CFBenchmark's per sub-task), `--rounds`: each chunk is
run this many times per layout, the fastest counted. The CPU's default layout is the faster one
here (llamacpp_sizing.DEFAULT_LAYOUT). Prints ratios; nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from econeval import context as run_context, registry  # noqa: E402
from econeval.backends.base import Settings  # noqa: E402
from econeval.run import roles  # noqa: E402
from econeval.store.runmeta import chunk_size  # noqa: E402
from econeval.types import MODEL, Completion  # noqa: E402

LAYOUTS = ("unified", "streams")


def chunks(task_name: str, items: int, size: int) -> list[list]:
    """The task's first-stage model requests, a chunk's worth of items at a time: `items` items
    spread over the task (CFBenchmark: per sub-task)."""
    task = registry.get_task(task_name)
    ctx = run_context.RunContext(seed=1234, seed_given=False, task_options={})
    prep = ctx.prepare(task)
    pool = prep.items
    if task_name.startswith("cfbenchmark"):
        by: dict[str, list] = {}
        for it in pool:
            by.setdefault(it["task"], []).append(it)
        chosen = [it for group in by.values() for it in group[:items]]
    else:
        step = max(1, len(pool) // items)
        chosen = pool[::step][:items]
    reqs = [[r for r in task.requests(it, prep, {}).values() if r.role == MODEL] for it in chosen]
    return [[r for item in reqs[k:k + size] for r in item] for k in range(0, len(reqs), size)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="a .gguf path or models.toml name (default: the registry's default)")
    ap.add_argument("--tasks", default="econnli-cot,econlogicqa-5shot,cfbenchmark-few")
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--n-gpu-layers", type=int, default=None)
    ap.add_argument("--parallel", type=int, default=None)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    opts = {k: v for k, v in (("threads", args.threads), ("n_gpu_layers", args.n_gpu_layers), ("parallel", args.parallel))
            if v is not None}
    spec = roles.resolve(args.model)
    backends = {lay: roles.build(roles.with_options(spec, {**opts, "kv_layout": lay}), Settings(seed=0)) for lay in LAYOUTS}
    info = backends["streams"].info()
    print(f"model {spec.name}, device {info.device}, parallel {info.parallel}, threads {info.details['n_threads']}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; stream cells {info.settings.get('stream_cells')}")
    report: dict = {"model": spec.name, "device": info.device, "parallel": info.parallel, "threads": info.details["n_threads"],
                    "load_average": round(os.getloadavg()[0], 1), "tasks": {}}
    total = {lay: 0.0 for lay in LAYOUTS}
    tokens = {lay: 0 for lay in LAYOUTS}
    for name in args.tasks.split(","):
        task_chunks = chunks(name, args.items, chunk_size(info.parallel))
        secs = {lay: 0.0 for lay in LAYOUTS}
        counts: dict[str, dict[str, int]] = {lay: {} for lay in LAYOUTS}
        answers: dict[str, list] = {lay: [] for lay in LAYOUTS}
        for reqs in task_chunks:
            best = {lay: float("inf") for lay in LAYOUTS}
            for r in range(args.rounds):
                for lay in LAYOUTS:
                    be = backends[lay]
                    c0 = be.counters()
                    t0 = time.perf_counter()
                    out = be.evaluate(reqs)
                    best[lay] = min(best[lay], time.perf_counter() - t0)
                    if r == 0:  # a chunk's answers and counts are the same every round
                        answers[lay] += out
                        for k, v in be.counters().items():
                            counts[lay][k] = counts[lay].get(k, 0) + v - c0.get(k, 0)
            for lay in LAYOUTS:
                secs[lay] += best[lay]
        gens = [(a, b) for a, b in zip(answers["unified"], answers["streams"]) if isinstance(a, Completion)]
        same = sum(a.text == b.text and a.finish == b.finish for a, b in gens)
        done = {lay: counts[lay].get("tokens_evaluated", 0) + counts[lay].get("tokens_generated", 0) for lay in LAYOUTS}
        rate = {lay: done[lay] / secs[lay] for lay in LAYOUTS}
        row = {"requests": sum(map(len, task_chunks)), "seconds": {k: round(v, 2) for k, v in secs.items()},
               "streams_over_unified": round(secs["streams"] / secs["unified"], 3),
               "tokens_per_s": {k: round(v, 1) for k, v in rate.items()},
               "rate_streams_over_unified": round(rate["streams"] / rate["unified"], 3), "same_answers": f"{same}/{len(gens)}",
               "counters": counts}
        report["tasks"][name] = row
        for lay in LAYOUTS:
            total[lay] += secs[lay]
            tokens[lay] += done[lay]
        print(f"{name:20s} {row['requests']:4d} requests: unified {secs['unified']:7.1f} s, streams {secs['streams']:7.1f} s: "
              f"streams / unified {row['streams_over_unified']:.2f}x (tokens/s {row['rate_streams_over_unified']:.2f}x); "
              f"same answers {row['same_answers']}; decode calls "
              f"{counts['unified'].get('decode_calls')} / {counts['streams'].get('decode_calls')}, stream copies "
              f"{counts['streams'].get('kv_copies')}", flush=True)
    report["streams_over_unified"] = round(total["streams"] / total["unified"], 3)
    report["rate_streams_over_unified"] = round((tokens["streams"] / total["streams"]) / (tokens["unified"] / total["unified"]), 3)
    print(f"all: unified {total['unified']:.1f} s, streams {total['streams']:.1f} s: streams / unified "
          f"{report['streams_over_unified']:.2f}x (below 1: streams faster); tokens/s streams / unified "
          f"{report['rate_streams_over_unified']:.2f}x (above 1: streams faster)")
    for be in backends.values():
        be.close()
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
