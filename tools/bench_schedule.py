"""The llama.cpp scheduler measured in one process on one model: how well it fills each
llama_decode call, and which attention budget (`kv_budget`) and --parallel serve this machine.

    .venv/bin/python tools/bench_schedule.py [--model M] [--task cfbenchmark-zero] [--items 16]
                                            [--max-tokens 48] [--budgets 1024,2048,4096,8192]
                                            [--parallel 4,8,16] [--json FILE]

1. Prefixes: 8 jobs of 24 generated tokens under one shared prefix, two prefixes grouped, and two
   prefixes interleaved: llama_decode calls (the engine's floor is 24, one per generated token).
2. A task's real first-stage jobs (`--items` items, generation capped at `--max-tokens`) run
   through the engine at each budget and --parallel: generated tokens per generation step (counted
   on the calls), calls, seconds, and tokens/s as a ratio to the default setting's, each setting
   run twice in alternation (the machine's load moves both alike).

Prints ratios; nothing here is a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from econeval import context as run_context, registry
from econeval.run import roles
from econeval.backends.base import Settings  # noqa: E402
from econeval.backends.llamacpp_batch import Engine, JobSpec  # noqa: E402
from econeval.backends import llamacpp_sizing as sizing  # noqa: E402


class Counting(Engine):
    """The engine, counting the generation steps (calls that carry a generating sequence's token)."""

    gen_steps = gen_seqs = 0

    def _decode(self, entries):
        per: dict[tuple, list[int]] = {}
        for _tok, _pos, seqs, out in entries:
            c = per.setdefault(seqs, [0, 0])
            c[0] += 1
            c[1] += out
        gen = sum(1 for seqs, (n, o) in per.items() if len(seqs) == 1 and n == 1 and o == 1)
        if gen:
            self.gen_steps += 1
            self.gen_seqs += gen
        super()._decode(entries)


def engine_like(be, parallel: int, kv_budget: int, n_cells: int) -> Counting:
    """A counting engine over the backend's context (made for the most sequences asked)."""
    be.reserve(n_cells)
    return Counting(be._llama_cpp, be.scheduler.ctx, be._vocab, be.n_vocab, be.n_ctx, parallel, be.n_batch, be._piece,
                    kv_budget=kv_budget, n_cells=n_cells)


def prefixes(be) -> dict:
    tok = be.tokenize
    pa = tok("Instruction one: answer the question about the premise and the hypothesis. " * 3)
    pb = tok("Another instruction: order the events A B C D as they happen. " * 3)

    def job(prefix, k):
        return JobSpec(tokens=prefix + tok(f" question {k} yes or no")[1:], n_prefix=len(prefix) - 1, max_tokens=24)

    cases = {"one prefix": [job(pa, k) for k in range(8)],
             "two grouped": [job(pa, k) for k in range(4)] + [job(pb, k) for k in range(4)],
             "two interleaved": [job(pa if k % 2 == 0 else pb, k) for k in range(8)]}
    eng = engine_like(be, 8, be.sizes.n_cells, be.sizes.n_cells)
    out = {}
    for name, specs in cases.items():
        c0, g0 = eng.n_decode_calls, eng.n_generated
        eng.run(specs)
        out[name] = {"decode_calls": eng.n_decode_calls - c0, "generated": eng.n_generated - g0}
    eng.close()
    return out


def task_jobs(be, task_name: str, items: int, max_tokens: int) -> list[JobSpec]:
    task = registry.get_task(task_name)
    ctx = run_context.RunContext(seed=1234, seed_given=False, task_options={})
    prep = ctx.prepare(task)
    step = max(1, len(prep.items) // items)
    reqs = [r for it in prep.items[::step][:items] for r in task.requests(it, prep, {}).values()]
    jobs = be._plan(reqs, [""] * len(reqs)).jobs
    return [dataclasses.replace(j, max_tokens=min(j.max_tokens, max_tokens)) for j in jobs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--task", default="cfbenchmark-zero")
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--budgets", default="1024,2048,4096,8192")
    ap.add_argument("--parallel", default="4,8,16")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    pars = [int(p) for p in args.parallel.split(",")]
    # the context is made for the most sequences asked; the default setting is the sizes' own
    be = roles.build(roles.with_options(roles.resolve(args.model), {"parallel": max([*pars, 8])}), Settings(seed=0))
    gpu = be.info().device == "gpu"
    default = (sizing.parallel_for(None, gpu), sizing.KV_BUDGET_GPU if gpu else sizing.KV_BUDGET_CPU)
    pars = [p for p in pars if p <= be.parallel]
    report: dict = {"model": be.spec.name, "device": be.info().device, "defaults": {"parallel": default[0], "kv_budget": default[1]},
                    "prefixes": prefixes(be)}
    print("1. prefixes, 8 jobs x 24 tokens: llama_decode calls (floor 24):",
          ", ".join(f"{k} {v['decode_calls']}" for k, v in report["prefixes"].items()))
    jobs = task_jobs(be, args.task, args.items, args.max_tokens)
    settings = sorted({default, *((p, b) for p in pars for b in budgets)})
    results: dict = {s: [] for s in settings}
    for _round in range(2):
        for par, budget in settings:
            eng = engine_like(be, par, budget, 2 * budget)
            t0 = time.perf_counter()
            eng.run(jobs)
            results[(par, budget)].append({"s": time.perf_counter() - t0, "tokens": eng.n_evaluated + eng.n_generated,
                                           "calls": eng.n_decode_calls, "gen_steps": eng.gen_steps, "gen_seqs": eng.gen_seqs,
                                           "set_back": eng.n_set_back})
            eng.close()
    base = results[default]
    base_rate = sum(r["tokens"] for r in base) / sum(r["s"] for r in base)
    report["task"] = {"name": args.task, "jobs": len(jobs), "max_tokens": args.max_tokens, "settings": []}
    print(f"2. {args.task}: {len(jobs)} jobs, generation capped at {args.max_tokens} tokens; tokens/s against the default "
          f"(--parallel {default[0]}, kv_budget {default[1]}), two runs each")
    for (par, budget), runs in results.items():
        rate = sum(r["tokens"] for r in runs) / sum(r["s"] for r in runs)
        row = {"parallel": par, "kv_budget": budget, "seconds": [round(r["s"], 2) for r in runs], "calls": runs[0]["calls"],
               "seqs_per_gen_step": round(runs[0]["gen_seqs"] / max(runs[0]["gen_steps"], 1), 2),
               "set_back": runs[0]["set_back"], "over_default": round(rate / base_rate, 3)}
        report["task"]["settings"].append(row)
        print(f"   --parallel {par:3d}  kv_budget {budget:6d}: {row['over_default']:.2f}x  ({rate:,.0f} tokens/s; "
              f"{row['seqs_per_gen_step']} sequences per generation step; {row['calls']} calls; set back {row['set_back']})")
    be.close()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
