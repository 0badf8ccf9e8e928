"""The real llama.cpp backend on a tiny random-weight GGUF written by the tests."""

import math

import llama_cpp
import numpy as np
import pytest

from econeval.backends.llamacpp import LlamaCppBackend
from econeval.backends.llamacpp_batch import stop_at as _stop_at
from econeval.config import ModelSpec
from econeval.types import Generate, OptionLogprobs


@pytest.fixture(scope="module")
def backend(tiny_model):
    return LlamaCppBackend(ModelSpec(name="tiny", options={"path": str(tiny_model)}, n_ctx=512, chat="off"))


def reference_logprobs(model_path, text):
    """An independent route: a fresh llama.cpp context, the whole prompt in one call."""
    llm = llama_cpp.Llama(model_path=str(model_path), n_ctx=512, verbose=False, n_gpu_layers=0)
    toks = llm.tokenize(text.encode(), add_bos=True)
    llm.eval(toks)
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),)).astype(np.float64)
    logp = logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
    return llm, logp


def test_option_logprobs_match_a_fresh_full_vocabulary_softmax(backend, tiny_model):
    prompt = "premise: the order, hypothesis: the event, answer:"
    got = backend.option_logprobs([OptionLogprobs(prompt=prompt, options=("Yes", "No"))])[0].scores
    llm, logp = reference_logprobs(tiny_model, prompt)
    for opt in ("Yes", "No"):
        ids = [llm.tokenize(v.encode(), add_bos=False)[0] for v in (opt, " " + opt)]
        assert all(len(llm.tokenize(v.encode(), add_bos=False)) == 1 for v in (opt, " " + opt))
        assert got[opt] == pytest.approx(max(logp[i] for i in ids), abs=1e-4)
    assert got["Yes"] != got["No"]


def _last_logprobs(llm):
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),)).astype(np.float64)
    return logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()


def test_multi_token_option_is_scored_as_a_sequence(backend, tiny_model):
    prompt = "Question: the answer is"
    got = backend.option_logprobs([OptionLogprobs(prompt=prompt, options=("xq",))])[0].scores["xq"]
    llm = llama_cpp.Llama(model_path=str(tiny_model), n_ctx=512, verbose=False, n_gpu_layers=0)
    base = llm.tokenize(prompt.encode(), add_bos=True)
    best = -math.inf
    for variant in ("xq", " xq"):
        cont = llm.tokenize((prompt + variant).encode(), add_bos=True)[len(base):]
        assert len(cont) >= 2
        llm.reset()
        llm.eval(base)
        total = 0.0
        for t in cont:
            total += _last_logprobs(llm)[t]
            llm.eval([t])
        best = max(best, total)
    assert got == pytest.approx(best, abs=1e-3)


def test_prefix_reuse_is_order_independent_one_at_a_time_and_matches_a_fresh_prefix(tiny_model):
    single = LlamaCppBackend(ModelSpec(name="tiny", options={"path": str(tiny_model), "parallel": 1}, n_ctx=512, chat="off"))
    prefix = "Question: A B C D answer Yes\n\n"
    reqs = [OptionLogprobs(prompt=prefix + f"Question: {w} answer:", prefix=prefix, options=("Yes", "No"))
            for w in ("the order", "the event", "premise")]
    forward = single.option_logprobs(reqs)
    backward = single.option_logprobs(reqs[::-1])[::-1]
    assert forward == backward  # one sequence at a time: bit-identical whatever the order
    no_prefix = single.option_logprobs([OptionLogprobs(prompt=r.prompt, options=r.options) for r in reqs])
    for a, b in zip(forward, no_prefix):
        for k in a.scores:
            assert a.scores[k] == pytest.approx(b.scores[k], abs=1e-4)


def test_batched_calls_are_a_pure_function_of_the_request_list(backend, tiny_model):
    prefix = "Question: A B C D answer Yes\n\n"
    words = ("the order", "the event", "premise", "is", "and", "hypothesis", "the", "answer", "order event")
    reqs = []
    for w in words:
        p = prefix + f"Question: {w} answer:"
        reqs += [OptionLogprobs(prompt=p, prefix=prefix, options=("Yes", "No", "xq")), Generate(prompt=p, prefix=prefix, max_tokens=3 + len(w) % 5)]
    first = backend.evaluate(reqs)
    backend.generate([Generate(prompt="something else entirely", max_tokens=7)])
    assert backend.evaluate(reqs) == first  # bit-identical on repetition, whatever ran between
    single = LlamaCppBackend(ModelSpec(name="tiny", options={"path": str(tiny_model), "parallel": 1}, n_ctx=512, chat="off"))
    alone = single.evaluate(reqs)
    for a, b in zip(first, alone):  # batching moves log-probabilities only at rounding level
        if hasattr(a, "scores"):
            for k in a.scores:
                assert a.scores[k] == pytest.approx(b.scores[k], abs=2e-3)
    same = sum(a.text == b.text for a, b in zip(first[1::2], alone[1::2]))
    assert same >= len(words) - 1


def test_finished_sequences_free_their_slots(tiny_model):
    be = LlamaCppBackend(ModelSpec(name="tiny", options={"path": str(tiny_model), "parallel": 2}, n_ctx=512, chat="off"))
    reqs = [Generate(prompt=f"Question: the order {i} is", max_tokens=2 + 3 * i) for i in range(6)]
    calls0, gen0 = be.counters()["decode_calls"], be.counters()["tokens_generated"]
    out = be.generate(reqs)
    assert [c.n_tokens for c in out] == [2 + 3 * i for i in range(6)] and all(c.finish == "length" for c in out)
    calls = be.counters()["decode_calls"] - calls0
    generated = be.counters()["tokens_generated"] - gen0
    # two sequences at a time, refilled as they finish: fewer calls than one sequence at a time
    # (prompt + tokens - 1 per request), more than if all six ran at once
    assert max(2 + 3 * i for i in range(6)) < calls < sum(2 + 3 * i for i in range(6))
    assert generated == sum(c.n_tokens for c in out)
    assert out == LlamaCppBackend(ModelSpec(name="tiny", options={"path": str(tiny_model), "parallel": 2}, n_ctx=512, chat="off")).generate(reqs)


def test_multi_token_options_in_a_batch(backend, tiny_model):
    single = LlamaCppBackend(ModelSpec(name="tiny", options={"path": str(tiny_model), "parallel": 1}, n_ctx=512, chat="off"))
    reqs = [OptionLogprobs(prompt=f"Question: {w} the answer is", options=("xq", "Yes", "premise")) for w in ("A", "B", "C", "D")]
    for a, b in zip(backend.option_logprobs(reqs), single.option_logprobs(reqs)):
        assert a.scores.keys() == b.scores.keys()
        for k in a.scores:
            assert a.scores[k] == pytest.approx(b.scores[k], abs=2e-3)


def test_generation_is_greedy_deterministic_and_bounded(backend):
    req = Generate(prompt="Question: the order is", max_tokens=12)
    a, b = backend.generate([req, req])
    assert a == b
    assert 0 < a.n_tokens <= 12 and a.n_prompt_tokens > 3
    assert a.finish in ("length", "stop")


def test_stop_strings_cut_after_leading_whitespace():
    assert _stop_at("\n Yes\nmore", ("\n",)) == "\n Yes"
    assert _stop_at("B, D, A, C\n\nQuestion: x", ("\n\n", "Question:")) == "B, D, A, C"
    assert _stop_at("no stop here", ("###",)) is None


def test_repeat_penalty_changes_greedy_choice_only_through_seen_tokens(backend):
    plain = backend.generate([Generate(prompt="the the the the", max_tokens=8)])[0]
    penal = backend.generate([Generate(prompt="the the the the", max_tokens=8, repeat_penalty=50.0)])[0]
    assert plain.text != penal.text


def test_prompt_longer_than_context_is_reported_not_truncated(tiny_model):
    small = LlamaCppBackend(ModelSpec(name="tiny", options={"path": str(tiny_model)}, n_ctx=256, chat="off"))
    c = small.generate([Generate(prompt="the order " * 200, max_tokens=4)])[0]
    assert c.finish == "context" and c.text == "" and c.n_prompt_tokens > 256
    lp = small.option_logprobs([OptionLogprobs(prompt="the order " * 200, options=("Yes",))])[0]
    assert lp.fits is False and lp.scores == {}


def test_chat_template_applied_when_the_model_has_one(tiny_chat_model):
    be = LlamaCppBackend(ModelSpec(name="tiny-chat", options={"path": str(tiny_chat_model)}, n_ctx=512, chat="auto"))
    assert be.info().chat_template_applied is True
    chat = be.generate([Generate(prompt="the order", max_tokens=2, chat=True)])[0]
    plain = be.generate([Generate(prompt="the order", max_tokens=2, chat=False)])[0]
    assert chat.n_prompt_tokens == plain.n_prompt_tokens + 3  # <|user|> <|end|> <|assistant|>
    assert chat.rendered and chat.rendered.startswith("<|user|>") and plain.rendered is None
    on = LlamaCppBackend(ModelSpec(name="tiny-chat", options={"path": str(tiny_chat_model)}, n_ctx=512, chat="on"))
    assert on.generate([Generate(prompt="the order", max_tokens=2, chat=False)])[0].rendered.startswith("<|user|>")
    off = LlamaCppBackend(ModelSpec(name="tiny-chat", options={"path": str(tiny_chat_model)}, n_ctx=512, chat="off"))
    assert off.generate([Generate(prompt="the order", max_tokens=2, chat=True)])[0].rendered is None
    assert (be.info().identity()["chat_mode"], on.info().identity()["chat_mode"]) == ("auto", "on")


def test_info_records_what_reproduces_a_run(backend, tiny_model):
    d = backend.info().to_json()
    assert d["model"]["sha256"] and d["model"]["bytes"] == tiny_model.stat().st_size
    assert d["device"] in ("cpu", "gpu") and d["n_ctx"] == 512
    import os

    assert d["n_threads"] == len(os.sched_getaffinity(0))  # all CPUs by default, not half
    assert d["model"]["gguf_metadata"]["general.architecture"] == "llama"
    assert "prefix" in d["schedule"]
    from gguf import GGUFReader

    # the parameter count (a report sorts models by it): every tensor's elements, counted here from the file
    assert d["model"]["n_params"] == sum(int(t.n_elements) for t in GGUFReader(tiny_model).tensors) > 0


def test_option_scores_ride_on_the_generation_of_the_same_prompt(backend):
    prompt = "premise: the order, hypothesis: the event, answer:"
    alone_gen = backend.generate([Generate(prompt=prompt, max_tokens=6)])[0]
    alone_lp = backend.option_logprobs([OptionLogprobs(prompt=prompt, options=("Yes", "No"))])[0]
    evaluated = backend.n_evaluated
    lp, gen = backend.evaluate([OptionLogprobs(prompt=prompt, options=("Yes", "No")), Generate(prompt=prompt, max_tokens=6)])
    assert gen == alone_gen and lp == alone_lp  # bit-identical to separate calls
    # the prompt once, then every generated token but the last
    assert backend.n_evaluated - evaluated == gen.n_prompt_tokens + gen.n_tokens - 1


def test_a_long_prompt_after_a_shared_prefix_gets_the_prefixs_cells(tiny_model):
    """A prompt that fits the context alone, queued after jobs sharing a prefix: the kept prefix's
    cells are dropped to make room (they were kept, and llama_decode returned 1: 'no KV slot';
    CFBenchmark at --limit 32 on the tiny model failed so)."""
    be = LlamaCppBackend(ModelSpec(name="tiny", options={"path": str(tiny_model)}, n_ctx=512, chat="off"))
    prefix = "Question: A B C D answer Yes\n\n" * 6
    shared = [Generate(prompt=prefix + f"Question: {w} answer:", prefix=prefix, max_tokens=2) for w in ("one", "two")]
    n_prefix = len(be.tokenize(prefix))
    words = "the order of events "
    long = words * 200
    while len(be.tokenize(long)) > 512 - 8:
        long = long[:-len(words)]
    assert len(be.tokenize(long)) + 4 + n_prefix > 512 and n_prefix > 20  # fits alone, not beside the prefix
    out = be.generate(shared + [Generate(prompt=long, max_tokens=4)])
    assert all(o.error is None for o in out) and out[2].n_prompt_tokens == len(be.tokenize(long)) and out[2].n_tokens == 4


# ---- the schedule (batched/v2): prefixes, the pool, the context --------------------------------------
def _jobs_with_prefixes(be, layout):
    """8 jobs of 24 generated tokens; `layout`: which of two prefixes each job has."""
    from econeval.backends.llamacpp_batch import JobSpec

    pre = {"a": be.tokenize("Instruction one: answer about the premise and the hypothesis. " * 3),
           "b": be.tokenize("Another instruction: order the events A B C D. " * 3)}
    return [JobSpec(tokens=pre[p] + be.tokenize(f" question {k} yes or no")[1:], n_prefix=len(pre[p]) - 1, max_tokens=24)
            for k, p in enumerate(layout)]


@pytest.mark.parametrize("layout", ["aaaaaaaa", "aaaabbbb", "abababab"])
def test_prefixes_one_grouped_or_interleaved_cost_one_call_per_generated_token(tiny_model, layout):
    """Eight sequences decode together whatever prefixes they share: the first call carries each
    prefix once (its tokens in every sequence of its group) and the prompts, then one call per
    token. (Under one shared prefix at a time, 25, 50 and 200 calls.)"""
    be = LlamaCppBackend(ModelSpec(name="tiny", options={"path": str(tiny_model), "parallel": 8}, chat="off"))
    jobs = _jobs_with_prefixes(be, layout)
    c0 = be.scheduler.n_decode_calls
    out = be.scheduler.run(jobs)
    assert all(r.finish == "length" and r.n_generated == 24 for r in out)
    assert be.scheduler.n_decode_calls - c0 == 24
    assert be.scheduler.n_evaluated >= sum(len(j.tokens) - j.n_prefix for j in jobs)  # each prefix once, not per job
    assert be.scheduler.run(jobs) == out


def test_a_full_pool_sets_back_the_last_job_and_reruns_it_whole(tiny_model):
    """KV cells are taken as generations grow; when they run out the job admitted last gives its
    cells back and runs again from its start: every job still gets its whole budget, and the call
    stays a pure function of its job list."""
    from econeval.backends.llamacpp_batch import Engine, JobSpec

    be = LlamaCppBackend(ModelSpec(name="tiny", options={"path": str(tiny_model), "parallel": 4}, n_ctx=512, chat="off"))
    be.reserve(1024)
    jobs = [JobSpec(tokens=be.tokenize(f"Question: the order {k} is"), max_tokens=120) for k in range(4)]

    def engine(pool):
        return Engine(be._llama_cpp, be.scheduler.ctx, be._vocab, be.n_vocab, 512, 4, 512, be._piece, kv_budget=pool, n_cells=pool)

    tight, roomy = engine(256), engine(1024)
    a, b = tight.run(jobs), roomy.run(jobs)
    assert tight.n_set_back > 0 and roomy.n_set_back == 0
    assert all(r.n_generated == 120 and r.finish == "length" for r in a)
    assert tight.run(jobs) == a
    assert sum(x.text == y.text for x, y in zip(a, b)) >= 3  # batch composition moves only rounding


def test_a_model_by_path_gets_its_trained_context(tmp_path):
    from tiny_gguf import write_tiny_llama

    path = write_tiny_llama(tmp_path / "long.gguf", shapes={"ctx": 32768})
    be = LlamaCppBackend(ModelSpec(name="long", options={"path": str(path)}, chat="off"))
    assert be.n_ctx == 32768 and be.info().to_json()["context"]["why"] == "the model's trained context (GGUF metadata)"
    given = LlamaCppBackend(ModelSpec(name="long", options={"path": str(path)}, n_ctx=1024, chat="off"))
    assert given.n_ctx == 1024 and "given" in given.info().to_json()["context"]["why"]
    long_prompt = Generate(prompt="the order " * 1000, max_tokens=64)
    assert len(be.tokenize(long_prompt.prompt)) > 1100
    assert be.over_context([long_prompt]) == [0] and given.over_context([long_prompt])[0] > 1024
    out = be.generate([long_prompt])[0]
    assert out.finish != "context" and out.n_prompt_tokens > 1024  # the cache grew to hold it


def test_sizes_follow_the_device_and_the_memory():
    from econeval.backends.llamacpp_sizing import ModelShape, size

    seven_b = ModelShape(trained=32768, kv_bytes=32 * 8 * 256 * 2, n_head=32)  # Mistral 7B: 128 KiB a cell
    gpu = size(seven_b, given_ctx=None, parallel=None, gpu=True, flash_attn=True, free=130 * 2**30)
    cpu = size(seven_b, given_ctx=None, parallel=None, gpu=False, flash_attn=False, free=16 * 2**30)
    assert (gpu.n_ctx, gpu.parallel, gpu.kv_budget, gpu.n_cells) == (32768, 64, 32768, 65536)
    assert (cpu.n_ctx, cpu.parallel, cpu.kv_budget, cpu.n_cells) == (32768, 8, 2048, 4096)
    small = size(seven_b, given_ctx=None, parallel=None, gpu=True, flash_attn=True, free=2 * 2**30)
    assert small.n_ctx < 32768 and small.n_ctx * seven_b.kv_bytes <= 0.9 * 2 * 2**30
    assert "bounded by the memory" in small.context["why"] and small.kv_budget <= small.n_cells
    assert size(seven_b, given_ctx=4096, parallel=3, gpu=False, flash_attn=False, free=None).n_ctx == 4096


def test_a_prefix_is_kept_between_jobs_that_run_one_at_a_time(tiny_model):
    """When the attention budget lets a group's jobs run only one at a time, the prefix stays in
    the keeper sequence between them: evaluated once, not once per job."""
    from econeval.backends.llamacpp_batch import Engine, JobSpec

    be = LlamaCppBackend(ModelSpec(name="tiny", options={"path": str(tiny_model), "parallel": 4}, n_ctx=2048, chat="off"))
    prefix = be.tokenize("Question: A B C D answer Yes and the order of the events. " * 12)
    jobs = [JobSpec(tokens=prefix + be.tokenize(f" the event {k} answer")[1:], n_prefix=len(prefix) - 1, max_tokens=4)
            for k in range(4)]
    own = sum(len(j.tokens) - j.n_prefix for j in jobs)
    eng = Engine(be._llama_cpp, be.scheduler.ctx, be._vocab, be.n_vocab, 2048, 4, 512, be._piece,
                 kv_budget=len(prefix) + 20, n_cells=4096)
    out = eng.run(jobs)
    assert eng.n_evaluated <= len(prefix) + own + sum(r.n_generated for r in out), (eng.n_evaluated, len(prefix), own)
    assert eng.n_decode_calls >= 4 * 2  # one job at a time: each its own calls
