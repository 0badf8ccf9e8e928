"""Throughput of econeval against the engine's own limits, measured in one process on one model.

    .venv/bin/python tools/bench.py [--model M] [--items 100] [--cot-items 32] [--threads N]
                                    [--n-gpu-layers N] [--sections 1,2,3,4] [--json FILE]

1. EconNLI zero-shot, paper mode (generation + log-probabilities): econeval's items/s against
   the engine floor (instruction prefix cached, one forward pass over each item's own tokens,
   Yes/No read from the logits) and the naive loop of the papers' scripts (one
   create_completion per item, then the released parse), with answer agreement.
2. Generation (EconNLI CoT): econeval's generated tokens/s at the default --parallel and at
   --parallel 1, and llama.cpp's own batched greedy decode of the same prompts at the same N
   (static batches of N sequences, each generating as many tokens as econeval's did).
3. EconLogicQA 5-shot vs 1-shot time per item.
4. Answers that differ between --parallel 1 and the default, per task.
5. CFBenchmark few-shot and zero-shot (`--cf-limit` per sub-task): econeval's time against
   llama.cpp's own batched decode of the same (rendered) prompts in a KV cache of econeval's
   n_ctx (as many sequences at once as fit there, at most --parallel), each sequence generating
   as many tokens as econeval's did: prompt + generated tokens per second.

Prints ratios; nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import econeval  # noqa: E402
from econeval import data
from econeval.run import roles
from econeval.backends.llamacpp import model_path  # noqa: E402
from econeval.benchmarks.econnli import COT_DEMOS, COT_QUESTION, INSTRUCTION, ZERO, parse_answer  # noqa: E402


NGL = 0  # layers offloaded, the same for econeval and the engine's own loops (--n-gpu-layers)


def run(spec, tasks, limit, parallel, threads, out):
    opts = {k: v for k, v in (("parallel", parallel), ("threads", threads), ("n_gpu_layers", NGL)) if v is not None}
    doc = econeval.evaluate(econeval.RunSpec(model=spec, model_options=opts), tasks, selection=econeval.Limit(limit), out=out)
    meta = json.loads((Path(out) / "run.json").read_text())
    samples = [json.loads(line) for line in (Path(out) / "samples.jsonl").read_text().splitlines()]
    return doc, meta, samples


def naive_loop(path, items, threads):
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(path), n_ctx=2048, n_threads=threads, n_threads_batch=threads, verbose=False,
                          n_gpu_layers=NGL)
    t0 = time.perf_counter()
    preds = []
    for it in items:
        out = llm.create_completion(ZERO.format(premise=it["premise"], hypothesis=it["hypothesis"]), max_tokens=8, temperature=0)
        preds.append(parse_answer(out["choices"][0]["text"]))
    return len(items) / (time.perf_counter() - t0), preds


def engine_floor(path, items, threads):
    """Prefix cached, one forward pass per item over its own tokens, Yes vs No from the logits."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(path), n_ctx=2048, n_threads=threads, n_threads_batch=threads, verbose=False,
                          n_gpu_layers=NGL)
    yes = {llm.tokenize(v.encode(), add_bos=False)[0] for v in ("Yes", " Yes")}
    no = {llm.tokenize(v.encode(), add_bos=False)[0] for v in ("No", " No")}
    t0 = time.perf_counter()
    prefix = llm.tokenize(INSTRUCTION.encode(), add_bos=True)[:-1]
    llm.eval(prefix)
    preds = []
    for it in items:
        toks = llm.tokenize(ZERO.format(premise=it["premise"], hypothesis=it["hypothesis"]).encode(), add_bos=True)
        llm.n_tokens = len(prefix)
        llm.eval(toks[len(prefix):])
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
        preds.append(int(max(logits[t] for t in yes) > max(logits[t] for t in no)))
    return len(items) / (time.perf_counter() - t0), preds


def engine_batched(path, prompts_prefix, prompts, budgets, n_seq, threads, n_ctx=8192):
    """llama.cpp's batched greedy decode (as in its `batched` example): static batches of n_seq
    sequences sharing the evaluated prefix, each generating its budget of tokens."""
    import llama_cpp
    from llama_cpp import _internals

    mp = llama_cpp.llama_model_default_params()
    mp.n_gpu_layers = 0x7FFFFFFF if NGL == -1 else NGL
    model = _internals.LlamaModel(path_model=str(path), params=mp, verbose=False)
    pre = model.tokenize(prompts_prefix.encode(), add_bos=True, special=False)[:-1]
    toks = [model.tokenize(p.encode(), add_bos=True, special=False) for p in prompts]
    # room for a whole group: the shared prefix once, and each sequence's own tokens and budget (64 on a GPU)
    n_ctx = max(n_ctx, len(pre) + n_seq * max(len(t) - len(pre) + b for t, b in zip(toks, budgets)) + 256)
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max, cp.kv_unified, cp.swa_full = n_ctx, 2048, 512, n_seq + 1, True, True
    cp.n_threads = cp.n_threads_batch = threads
    cp.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO if NGL else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = _internals.LlamaContext(model=model, params=cp, verbose=False)
    mem = llama_cpp.llama_get_memory(ctx.ctx)
    batch = llama_cpp.llama_batch_init(2048, 0, n_seq + 1)
    n_vocab = model.n_vocab()

    def decode(entries):
        for i, (t, p, s, o) in enumerate(entries):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, p, 1, o
            batch.seq_id[i][0] = s
        batch.n_tokens = len(entries)
        assert llama_cpp.llama_decode(ctx.ctx, batch) == 0

    generated = 0
    t0 = time.perf_counter()
    for start in range(0, len(prompts), n_seq):
        group = list(range(start, min(start + n_seq, len(prompts))))
        llama_cpp.llama_memory_clear(mem, True)
        for s in range(0, len(pre), 2048):
            decode([(t, s + k, n_seq, False) for k, t in enumerate(pre[s:s + 2048])])
        entries, last = [], []
        for slot, i in enumerate(group):
            llama_cpp.llama_memory_seq_cp(mem, n_seq, slot, -1, -1)
            body = toks[i][len(pre):]
            entries += [(t, len(pre) + k, slot, False) for k, t in enumerate(body[:-1])]
            last.append((body[-1], len(toks[i]) - 1, slot, True))
        for s in range(0, len(entries), 2048):
            decode(entries[s:s + 2048])
        decode(last)  # every sequence's last prompt token in one call: its logits at index `slot`
        outs = {i: slot for slot, i in enumerate(group)}
        pos = {i: len(toks[i]) for i in group}
        left = {i: budgets[i] for i in group}
        while True:
            step = []
            for slot, i in enumerate(group):
                if left[i] <= 0:
                    continue
                logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx.ctx, outs[i]), shape=(n_vocab,))
                tok = int(np.argmax(logits))
                generated += 1
                left[i] -= 1
                if left[i] > 0:
                    step.append((tok, pos[i], slot, True, i))
                    pos[i] += 1
            if not step:
                break
            decode([e[:4] for e in step])
            outs = {e[4]: n for n, e in enumerate(step)}
    elapsed = time.perf_counter() - t0
    llama_cpp.llama_batch_free(batch)
    return generated / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="a .gguf path or models.toml name (default: the registry's default)")
    ap.add_argument("--items", type=int, default=100)
    ap.add_argument("--cot-items", type=int, default=32)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--n-gpu-layers", type=int, default=0, help="offload (-1: all), for econeval and the engine alike")
    ap.add_argument("--cf-limit", type=int, default=2, help="section 5: items per CFBenchmark sub-task")
    ap.add_argument("--sections", default="1,2,3,4", help="which measurements (comma-separated; 5: CFBenchmark)")
    ap.add_argument("--json", type=Path, help="also write the ratios to this file")
    args = ap.parse_args()
    global NGL
    NGL = args.n_gpu_layers
    sections = set(args.sections.split(","))
    ratios: dict = {"n_gpu_layers": NGL}
    spec = roles.resolve(args.model)
    path = model_path(spec)
    items = data.load("econnli", "test.jsonl")[: args.items]
    tmp = Path(tempfile.mkdtemp(prefix="econeval-bench-"))
    print(f"model {spec.name} ({path.name}), {args.threads} threads, {os.cpu_count()} CPUs")

    if "1" in sections:
        # 1. EconNLI zero-shot
        naive_rate, naive = naive_loop(path, items, args.threads)
        floor_rate, floor = engine_floor(path, items, args.threads)
        doc, meta, samples = run(spec, ["econnli-zero"], args.items, None, args.threads, tmp / "zero")
        t = meta["timing"]["econnli-zero"]
        ours = [s["parsed"] for s in samples]
        ours_lp = [s["logprob_pred"] for s in samples]
        print(f"\n1. EconNLI zero-shot, {args.items} items, paper mode (generation + log-probabilities), "
              f"parallel {meta['backend']['parallel']}")
        print(f"   econeval {t['items_per_s']:.2f} items/s | engine floor {floor_rate:.2f} | naive loop {naive_rate:.2f}")
        ratios["classification"] = {"econeval_items_per_s": t["items_per_s"], "engine_floor_items_per_s": round(floor_rate, 2),
                                    "econeval_over_floor": round(t["items_per_s"] / floor_rate, 3), "target": 0.9}
        print(f"   econeval / floor = {t['items_per_s'] / floor_rate:.2f}x (target >= 0.9)   econeval / naive = "
              f"{t['items_per_s'] / naive_rate:.2f}x")
        print(f"   tokens evaluated per item: {t['tokens_evaluated'] / args.items:.1f}; generated per item: "
              f"{t['tokens_generated'] / args.items:.2f}")
        print(f"   agreement: parsed answer vs naive loop {sum(a == b for a, b in zip(ours, naive))}/{len(items)}; "
              f"log-prob answer vs floor {sum(a == b for a, b in zip(ours_lp, floor))}/{len(items)}")

    if "2" in sections:
        # 2. generation throughput (CoT)
        n = args.cot_items
        _, meta_p, s_p = run(spec, ["econnli-cot"], n, None, args.threads, tmp / "cot-default")
        _, meta_1, s_1 = run(spec, ["econnli-cot"], n, 1, args.threads, tmp / "cot-1")
        par = meta_p["backend"]["parallel"]
        rate = {k: m["timing"]["econnli-cot"]["tokens_generated"] / m["timing"]["econnli-cot"]["seconds"]
                for k, m in (("default", meta_p), ("1", meta_1))}
        budgets = [s["calls"]["response"]["n_tokens"] for s in s_p]
        prompts = [COT_DEMOS + COT_QUESTION.format(premise=it["premise"], hypothesis=it["hypothesis"]) for it in items[:n]]
        eng = engine_batched(path, COT_DEMOS, prompts, budgets, par, args.threads)
        print(f"\n2. Generation, EconNLI CoT, {n} items ({sum(budgets)} tokens generated)")
        print(f"   econeval --parallel {par}: {rate['default']:.1f} tokens/s | --parallel 1: {rate['1']:.1f} | "
              f"llama.cpp batched greedy at N={par}: {eng:.1f}")
        ratios["generation"] = {"parallel": par, "econeval_tokens_per_s": round(rate["default"], 1),
                                "parallel_1_tokens_per_s": round(rate["1"], 1), "engine_batched_tokens_per_s": round(eng, 1),
                                "econeval_over_engine": round(rate["default"] / eng, 3), "target": 0.8}
        print(f"   default / parallel-1 = {rate['default'] / rate['1']:.2f}x (target >= 2)   "
              f"default / engine = {rate['default'] / eng:.2f}x (target >= 0.8)")

    if "3" in sections:
        # 3. EconLogicQA 5-shot vs 1-shot
        _, meta_q, _ = run(spec, ["econlogicqa-1shot", "econlogicqa-5shot"], None, None, args.threads, tmp / "qa")
        one, five = (meta_q["timing"][f"econlogicqa-{k}shot"] for k in (1, 5))
        print(f"\n3. EconLogicQA, 130 items: 1-shot {one['seconds'] / one['items_run']:.3f} s/item, 5-shot "
              f"{five['seconds'] / five['items_run']:.3f} s/item: 5-shot / 1-shot = "
              f"{(five['seconds'] / five['items_run']) / (one['seconds'] / one['items_run']):.2f}x (target <= 1.5)")

    if {"1", "2", "3", "4"} <= sections:
        # 4. agreement between --parallel 1 and the default
        _, _, z1 = run(spec, ["econnli-zero"], args.items, 1, args.threads, tmp / "zero-1")
        _, _, q1 = run(spec, ["econlogicqa-1shot", "econlogicqa-5shot"], None, 1, args.threads, tmp / "qa-1")
        qa = [json.loads(line) for line in (tmp / "qa" / "samples.jsonl").read_text().splitlines()]
        print("\n4. Answers that differ between --parallel 1 and the default")
        for name, a, b in (("econnli-zero", samples, z1), ("econnli-cot", s_p, s_1),
                           ("econlogicqa-1shot", [s for s in qa if s["task"].endswith("1shot")], [s for s in q1 if s["task"].endswith("1shot")]),
                           ("econlogicqa-5shot", [s for s in qa if s["task"].endswith("5shot")], [s for s in q1 if s["task"].endswith("5shot")])):
            diff = sum(x["parsed"] != y["parsed"] for x, y in zip(a, b))
            text = sum(x.get("response") != y.get("response") for x, y in zip(a, b))
            print(f"   {name:<18} parsed answers differ on {diff}/{len(a)} items (generated text on {text})")
    if "5" in sections:
        # 5. CFBenchmark prompts (long few-shot prompts, generation to 512 tokens) against the engine
        print(f"\n5. CFBenchmark, --limit {args.cf_limit} per sub-task")
        for task in ("cfbenchmark-zero", "cfbenchmark-few"):
            _, meta_c, s_c = run(spec, [task], args.cf_limit, None, args.threads, tmp / task)
            t = meta_c["timing"][task]
            par = meta_c["backend"]["parallel"]
            done = [x for x in s_c if x.get("calls", {}).get("response")]
            prompts = [(x.get("rendered") or {}).get("response") or x["prompts"]["response"] for x in done]
            budgets = [x["calls"]["response"]["n_tokens"] for x in done]
            work = sum(x["calls"]["response"]["n_prompt_tokens"] for x in done) + sum(budgets)
            # the engine in the same KV cache as econeval's (its n_ctx): as many sequences at once as fit there
            n_ctx = meta_c["backend"]["n_ctx"]
            need = max(x["calls"]["response"]["n_prompt_tokens"] + x["calls"]["response"]["n_tokens"] + 1 for x in done)
            n_seq = max(1, min(par, n_ctx // need))
            eng_gen = engine_batched(path, "", prompts, budgets, n_seq, args.threads, n_ctx=n_ctx)  # generated tokens / s
            eng_s = sum(budgets) / eng_gen if eng_gen else float("nan")
            ours = work / t["seconds"]
            print(f"   {task}: {len(done)} items, {work - sum(budgets)} prompt + {sum(budgets)} generated tokens: econeval "
                  f"{t['seconds']:.1f} s ({ours:.0f} tokens/s) | llama.cpp batched, N={n_seq} in n_ctx {n_ctx}: {eng_s:.1f} s "
                  f"({work / eng_s:.0f} tokens/s) | econeval / engine = {eng_s / t['seconds']:.2f}x")
            ratios[task] = {"parallel": par, "engine_n_seq": n_seq, "n_ctx": n_ctx, "econeval_s": round(t["seconds"], 2), "engine_s": round(eng_s, 2),
                            "econeval_over_engine": round(eng_s / t["seconds"], 3)}
    if args.json:
        args.json.write_text(json.dumps(ratios, indent=1))
    print(f"\nrun folders under {tmp}")


if __name__ == "__main__":
    main()
