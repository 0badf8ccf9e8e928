"""Per-sequence KV streams (`-M kv_layout=streams`, llamacpp_streams.py) on the tiny GGUFs the tests
write: the unified layout's answers byte for byte at temperature 0, a shared prefix evaluated once
per chunk and copied whole into the streams, the jobs a stream cannot hold run beside them in a
unified context, the sequences of a call kept contiguous; and what run.json records."""

import json
import random

import pytest

from econeval.backends import llamacpp_sizing
from econeval.backends.llamacpp import LlamaCppBackend
from econeval.backends.llamacpp_batch import JobSpec
from econeval.config import ModelSpec


def backend(model, layout, n_ctx=1024, **options):
    opts = {"path": str(model), "kv_layout": layout, "threads": 1, **options}  # one thread: a loaded machine's spin waits cost most
    return LlamaCppBackend(ModelSpec(name="tiny", options=opts, n_ctx=n_ctx, chat="off"))


def mixed_jobs(be, seed: int, n: int = 14, long_words: int = 30) -> list[JobSpec]:
    """Jobs under three shared prefixes and none, some scoring one- and multi-token options."""
    rng = random.Random(seed)
    tok = be.tokenize
    pre = {k: tok(f"Instruction {k}: answer about the premise and the hypothesis. " * (1 + k)) for k in range(3)}
    jobs = []
    for i in range(n):
        k = rng.choice([0, 0, 1, 2, None])
        opts = {"A": [(tok(" A")[1],)], "X": [tuple(tok(" xq order")[1:])]} if rng.random() < 0.3 else {}
        if k is None:
            jobs.append(JobSpec(tokens=tok("plain " * rng.randint(1, long_words)), options=opts,
                                max_tokens=rng.randint(0 if opts else 1, 12)))
        else:
            own = tok(f" question {i} yes or no " * rng.randint(1, 4))[1:]
            jobs.append(JobSpec(tokens=pre[k] + own, n_prefix=len(pre[k]) - 1, max_tokens=rng.randint(1, 12), options=opts))
    return jobs


def same(a, b) -> None:
    assert [(x.text, x.finish, x.n_generated) for x in a] == [(y.text, y.finish, y.n_generated) for y in b]
    for x, y in zip(a, b):
        assert x.scores.keys() == y.scores.keys()
        for k in x.scores:
            assert x.scores[k] == pytest.approx(y.scores[k], abs=1e-4)


@pytest.mark.parametrize("parallel", [1, 3, 8])
def test_streams_answer_as_the_unified_cache_does(tiny_model, parallel):
    """The same chunk through both layouts: every greedy answer byte for byte, every score to
    rounding, the same prompt tokens evaluated (each prefix once: copied, not evaluated again), and
    the same results again on repetition."""
    unified, streams = backend(tiny_model, "unified", parallel=parallel), backend(tiny_model, "streams", parallel=parallel)
    jobs = mixed_jobs(unified, parallel)
    a, b = unified.run_jobs(jobs), streams.run_jobs(jobs)
    same(a, b)
    assert streams.counters()["tokens_evaluated"] == unified.counters()["tokens_evaluated"]
    assert streams.counters()["kv_copies"] > 0 and "kv_copies" not in unified.counters()
    assert streams.run_jobs(jobs) == b


def test_a_prefix_is_evaluated_once_per_chunk_and_copied_into_each_stream(tiny_model):
    """Eight jobs under one prefix, four streams: the prefix's tokens go through llama_decode once
    (into the first job's stream), the three jobs admitted with it and the keeper get copies, the
    four admitted later copy the keeper's. Evaluated once per sequence, the prefix would cost
    eight times its tokens."""
    be = backend(tiny_model, "streams", parallel=4)
    tok = be.tokenize
    prefix = tok("Instruction: answer about the premise and the hypothesis, yes or no. " * 4)
    jobs = [JobSpec(tokens=prefix + tok(f" question {k} answer")[1:], n_prefix=len(prefix) - 1, max_tokens=5) for k in range(8)]
    eng = be.scheduler
    out = eng.run(jobs)
    own = sum(len(j.tokens) - j.n_prefix for j in jobs)
    steps = sum(r.n_generated - 1 for r in out)  # the last generated token of each is never evaluated
    assert eng.n_evaluated == (len(prefix) - 1) + own + steps
    assert eng.n_copies >= 3 + 1 + 4  # the first stream's into three others and the keeper; the keeper's into four
    assert eng.n_evaluated < 8 * (len(prefix) - 1)


def test_a_job_longer_than_a_stream_runs_beside_the_streams(tiny_model, monkeypatch):
    """Streams of 256 cells: the jobs longer than that run in the unified context beside them, the
    same answers as the unified layout gives, each chunk's jobs split between the two engines."""
    monkeypatch.setitem(llamacpp_sizing.STREAM_CELLS, "cpu", 256)
    unified, streams = backend(tiny_model, "unified", parallel=3), backend(tiny_model, "streams", parallel=3)
    assert streams.sizes.stream_cells == 256
    jobs = mixed_jobs(unified, 7, n=12, long_words=150)
    where = streams.streamed(jobs)
    assert any(where) and not all(where)
    same(unified.run_jobs(jobs), streams.run_jobs(jobs))
    assert set(streams._engines) == {"streams", "unified"} and set(unified._engines) == {"unified"}


def test_the_sequences_of_a_call_stay_contiguous(tiny_model):
    """llama.cpp steps through consecutive sequence ids only: once nothing is queued, a job in a
    high stream moves into a lower free one as jobs finish, so every call's sequences are 0..k-1."""
    be = backend(tiny_model, "streams", parallel=6)
    eng = be.scheduler
    seen: list[list[int]] = []
    decode = eng._decode

    def record(entries):
        seen.append(sorted({s for _, _, seqs, _ in entries for s in seqs}))
        decode(entries)

    eng._decode = record  # type: ignore[method-assign]
    jobs = [JobSpec(tokens=be.tokenize(f"Question: the order {k} is"), max_tokens=2 + (5 * k) % 17) for k in range(6)]
    eng.run(jobs)
    assert all(s == list(range(len(s))) for s in seen), seen
    assert eng.n_copies > 0  # jobs moved down as others finished


def test_a_run_records_the_layout_and_gives_the_unified_samples(cli, tmp_path):
    """econnli-cot (its CoT demonstrations a shared prefix) and econlogicqa-5shot (`-T shots=fixed`:
    one shared demonstration block) on --limit through both layouts: the same samples byte for
    byte; run.json says which layout, the streams' size and the copies; a folder of one layout is
    not resumed with the other."""
    from tiny_gguf import write_tiny_llama

    model = write_tiny_llama(tmp_path / "long.gguf", shapes={"ctx": 32768})
    runs = {}
    for layout in ("unified", "streams"):
        out = tmp_path / layout
        rc, _, err = cli("run", "--model", model, "--task", "econnli-cot", "--task", "econlogicqa-5shot", "-T", "shots=fixed",
                         "--limit", "6", "--threads", "1", "-M", f"kv_layout={layout}", "--out", out)
        assert rc == 0, err
        runs[layout] = out
    lines = {k: [json.loads(x) for x in (v / "samples.jsonl").read_text().splitlines()] for k, v in runs.items()}
    assert len(lines["unified"]) == 12 and all(not x.get("error") for x in lines["unified"])
    assert [(x["task"], x.get("response"), x.get("parsed")) for x in lines["unified"]] == \
        [(x["task"], x.get("response"), x.get("parsed")) for x in lines["streams"]]
    meta = {k: json.loads((v / "run.json").read_text()) for k, v in runs.items()}
    assert meta["streams"]["backend"]["kv_layout"] == "streams" and meta["streams"]["backend"]["stream_cells"] == 4096
    assert meta["unified"]["backend"]["kv_layout"] == "unified" and "kv_layout" not in meta["unified"]["identity"]["model"]["settings"]
    assert meta["streams"]["identity"]["model"]["settings"]["kv_layout"] == "streams"
    for name in ("econnli-cot", "econlogicqa-5shot"):  # each chunk's prefix evaluated once: the same tokens in both layouts
        t = meta["streams"]["timing"][name]
        assert t["kv_copies"] >= 5 and t["tokens_evaluated"] == meta["unified"]["timing"][name]["tokens_evaluated"], name
    rc, _, err = cli("run", "--model", model, "--task", "econnli-cot", "--limit", "6", "-M", "kv_layout=streams", "--out", runs["unified"])
    assert rc == 2 and "kv_layout" in err


def test_cfbenchmark_few_shot_requests_answer_alike_in_both_layouts(tiny_model, monkeypatch):
    """CFBenchmark few-shot's own requests (two items of each of two sub-tasks: each pair shares its
    sub-task's demonstrations), generation capped at 8 tokens, in streams of 8,192 cells (the tiny
    vocabulary spells Chinese in bytes: 2,803 to 4,363 tokens): the same answers in both layouts,
    each shared block of demonstrations evaluated once (the same tokens as the unified cache)."""
    import dataclasses

    from econeval import context as run_context, registry

    monkeypatch.setitem(llamacpp_sizing.STREAM_CELLS, "cpu", 8192)

    task = registry.get_task("cfbenchmark-few")
    prep = run_context.RunContext(seed=1, seed_given=False, task_options={}).prepare(task)
    chosen = [it for sub in ("company", "sector") for it in [x for x in prep.items if x["task"] == sub][:2]]
    reqs = [r for it in chosen for r in task.requests(it, prep, {}).values()]
    unified = backend(tiny_model, "unified", n_ctx=32768, parallel=4)
    streams = backend(tiny_model, "streams", n_ctx=32768, parallel=4)
    jobs = [dataclasses.replace(j, max_tokens=min(j.max_tokens, 8)) for j in unified._plan(reqs, [""] * len(reqs)).jobs]
    assert sum(j.n_prefix > 0 for j in jobs) == 4 and all(streams.streamed(jobs))
    same(unified.run_jobs(jobs), streams.run_jobs(jobs))
    evaluated = streams.counters()["tokens_evaluated"]
    assert evaluated == unified.counters()["tokens_evaluated"] < sum(len(j.tokens) for j in jobs)


def test_layout_options_are_checked(cli, tiny_model):
    rc, _, err = cli("run", "--model", tiny_model, "--task", "econnli-zero", "--limit", "1", "-M", "kv_layout=paged")
    assert rc == 2 and "kv_layout must be unified or streams" in err and "Traceback" not in err
    rc, _, err = cli("run", "--model", tiny_model, "--task", "econnli-zero", "--limit", "1", "--parallel", "256")
    assert rc == 2 and "parallel 256 is out of range (1 to 255)" in err


def test_the_most_sequences_llama_cpp_holds_make_a_context(tiny_model):
    """--parallel 255 and its keeper are llama.cpp's 256 sequences (256 and a keeper failed to make a
    context: 'Failed to create llama_context'), in either layout."""
    from econeval.types import Generate

    for layout in ("unified", "streams"):
        be = backend(tiny_model, layout, n_ctx=256, parallel=255)
        out = be.generate([Generate(prompt=f"Question: the order {k} is", max_tokens=2) for k in range(3)])
        assert all(o.n_tokens == 2 for o in out) and be.scheduler.n_seq == 255


def test_sizes_of_the_streams_follow_the_device_and_the_memory():
    from econeval.backends.llamacpp_sizing import ModelShape, size

    seven_b = ModelShape(trained=32768, kv_bytes=32 * 8 * 256 * 2, n_head=32)  # Mistral 7B: 128 KiB a cell
    gpu = size(seven_b, given_ctx=None, parallel=None, gpu=True, flash_attn=True, free=130 * 2**30)
    assert (gpu.layout, gpu.stream_cells, gpu.parallel) == ("streams", 8192, 64)
    assert 65 * gpu.stream_cells * seven_b.kv_bytes + gpu.n_cells * seven_b.kv_bytes <= 0.9 * 130 * 2**30
    small = size(seven_b, given_ctx=None, parallel=None, gpu=True, flash_attn=True, free=24 * 2**30)
    assert small.stream_cells < 8192 and "memory" in small.context["memory"]["stream_cells_bounded"]
    assert 65 * small.stream_cells * seven_b.kv_bytes + small.n_cells * seven_b.kv_bytes <= 0.9 * 24 * 2**30
    short = size(seven_b, given_ctx=2048, parallel=None, gpu=True, flash_attn=True, free=130 * 2**30)
    assert short.stream_cells == 2048  # no stream longer than the context
    cpu = size(seven_b, given_ctx=None, parallel=None, gpu=False, flash_attn=False, free=16 * 2**30)
    assert cpu.layout == llamacpp_sizing.DEFAULT_LAYOUT["cpu"]
    assert size(seven_b, given_ctx=None, parallel=None, gpu=False, flash_attn=False, free=16 * 2**30, layout="streams").stream_cells == 4096


def test_the_projection_runs_the_streams_schedule_dry(tiny_model, monkeypatch):
    """The cost model measured on the streams' engine; a dry run of a chunk takes the streams' calls
    and the unified context's for the jobs beside them; counted in (token, KV cell) pairs, the
    streams' attention is a fraction of the unified cache's, where every token attends over every
    cell in use."""
    from econeval.backends.llamacpp_projection import CostModel
    from econeval.backends.llamacpp_streams import StreamCall

    assert StreamCall.pairs([(1, 0, (0,), False), (2, 9, (1,), True)], 1000) == 1 + 10
    be = backend(tiny_model, "streams", parallel=8)
    cost, _ = CostModel.measure(be.scheduler)
    assert cost.per_token > 0
    jobs = mixed_jobs(be, 7, n=16)
    pairs = CostModel(per_call=0.0, per_token=0.0, per_token_cell=1.0, per_output=0.0)
    streams = be.dry_run(pairs, [jobs], lambda spec: spec.max_tokens)
    unified = backend(tiny_model, "unified", parallel=8).dry_run(pairs, [jobs], lambda spec: spec.max_tokens)
    assert streams.prompt_tokens == unified.prompt_tokens and streams.budget == unified.budget == sum(j.max_tokens for j in jobs)
    assert streams.seconds < unified.seconds / 2, (streams.seconds, unified.seconds)
    monkeypatch.setitem(llamacpp_sizing.STREAM_CELLS, "cpu", 256)
    split = backend(tiny_model, "streams", parallel=8)
    long = mixed_jobs(split, 7, n=12, long_words=150)
    assert not all(split.streamed(long))
    both = split.dry_run(pairs, [long], lambda spec: spec.max_tokens)
    assert both.budget == sum(j.max_tokens for j in long) and both.seconds > 0
