"""Reasoning models: the answer is read after the reasoning, never from inside it, against the
fake servers of tests/fake_reasoning.py (each wire format), the fake backend, and tiny GGUFs with
the real chat templates of the reasoning families."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import read_lines
from fake_http import serve
from fake_reasoning import ANSWERS, REASONING_WORDS, AnthropicThinking, ReasoningServer, parsed_answer
from tiny_gguf import write_tiny_llama

from econeval import reasoning as rz

TEMPLATES = Path(__file__).parent / "templates"


@pytest.fixture
def reasoning_server():
    srv, url = serve(ReasoningServer)
    ReasoningServer.seen = []
    yield url
    srv.shutdown()


TASKS = ("econnli-zero", "econlogicqa-1shot", "steer-me")


def _answers(out: Path, task: str) -> list[dict]:
    return [r for r in read_lines(out / "samples.jsonl") if r["task"] == task]


@pytest.mark.parametrize("fmt,chat", [("inline", "off"), ("inline", "on"), ("reasoning_content", "on"), ("reasoning", "on")])
def test_served_answers_are_read_after_the_reasoning(cli, tmp_path, reasoning_server, fmt, chat):
    ReasoningServer.fmt = fmt
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "openai:thinker", "--base-url", reasoning_server, "--chat", chat,
                     *[a for t in TASKS for a in ("--task", t)], "--limit", "6", "--out", out, "-q")
    assert rc == 0, err
    want = ANSWERS
    for task in TASKS:
        recs = _answers(out, task)
        assert recs and all(rz.THINKING in r for r in recs), task
        assert {parsed_answer(r) for r in recs} == {want[task]}, (task, [r.get("parsed") for r in recs])
        for r in recs:  # the reasoning is saved, never the response
            assert all("</think>" not in str(r.get(name)) for name in r["calls"])
    results = json.loads((out / "results.json").read_text())["tasks"]
    assert results["econnli-zero"]["reasoning"]["n_items_reasoned"] == 6
    assert results["econnli-zero"]["reasoning"]["n_budget_hit"] == 0
    meta = json.loads((out / "run.json").read_text())
    assert meta["backend"]["reasoning"]["reasons"] is True and meta["backend"]["reasoning"]["mode"] == "auto"
    # once the model showed reasoning, requests carry the budget and no server-side stop strings
    late = [b for _, b in ReasoningServer.seen[-10:]]
    assert all(b["max_tokens"] > rz.DEFAULT_TOKENS and "stop" not in b for b in late)


def test_a_reasoning_that_never_ends_leaves_items_unanswered(cli, tmp_path, reasoning_server):
    ReasoningServer.fmt = "endless"
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "openai:thinker", "--base-url", reasoning_server, "--task", "econnli-zero",
                     "--task", "econlogicqa-1shot", "--limit", "4", "--reasoning-tokens", "40", "--out", out, "-q")
    assert rc == 0, err
    for rec in read_lines(out / "samples.jsonl"):
        assert rec["response"] == "" and rec["parsed"] is None  # never read from inside the reasoning
        assert rec["calls"]["response"]["reasoning_ended"] is False
    res = json.loads((out / "results.json").read_text())["tasks"]
    assert res["econnli-zero"]["n_unparsed"] == 4 and res["econnli-zero"]["reasoning"]["n_budget_hit"] == 4


def test_openai_reasoning_contract(cli, tmp_path, reasoning_server):
    """A server keeping OpenAI's reasoning-model contract, under a name that is not one of OpenAI's:
    the refusals teach the run, and max_tokens is not sent after the first one."""
    ReasoningServer.fmt = "openai"
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "openai:thinker", "--base-url", reasoning_server, "--chat", "on", "-C", "1",
                     *[a for t in TASKS for a in ("--task", t)], "--limit", "4", "--out", out, "-q")
    assert rc == 0, err
    bodies = [b for _, b in ReasoningServer.seen]
    first = next(i for i, b in enumerate(bodies) if "max_tokens" in b)
    assert not any("max_tokens" in b for b in bodies[first + 1:])
    assert not any("temperature" in b for b in bodies[first + 3:]) and not any(b.get("logprobs") for b in bodies[first + 4:])
    for task, want in (("econnli-zero", "Yes"), ("econlogicqa-1shot", "A, B, C, D"), ("steer-me", "A")):
        assert {parsed_answer(r) for r in _answers(out, task)} == {want}
    rec = _answers(out, "econnli-zero")[0]
    assert rec["thinking"]["response"] == "" and rec["calls"]["response"]["n_reasoning_tokens"] == REASONING_WORDS
    contract = json.loads((out / "run.json").read_text())["backend"]["reasoning"]["contract"]
    assert any("max_tokens" in c for c in contract) and any("temperature" in c for c in contract)


def test_openai_reasoning_models_by_name(cli, tmp_path, reasoning_server):
    ReasoningServer.fmt = "openai"
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "openai:o4-mini", "--base-url", reasoning_server,
                     *[a for t in TASKS for a in ("--task", t)], "--limit", "3", "--out", out, "-q")
    assert rc == 0, err
    bodies = [b for _, b in ReasoningServer.seen]
    assert bodies and all("max_tokens" not in b and "temperature" not in b and not b.get("logprobs") for b in bodies)
    assert all(b["max_completion_tokens"] > rz.DEFAULT_TOKENS for b in bodies)
    rc, _, err = cli("run", "--model", "openai:o4-mini", "--base-url", reasoning_server, "--task", "econnli-zero",
                     "--reasoning", "off", "--out", tmp_path / "off", "-q")
    assert rc == 2 and "cannot switch it off" in err and len(err.strip().splitlines()) <= 2
    # STEER-ME's protocol for a model that always reasons: no 0-CoT adaptation
    rc, _, err = cli("run", "--model", "openai:o4-mini", "--base-url", reasoning_server, "--task", "steer-me",
                     "--adaptation", "cot-hidden", "--limit", "2", "--out", tmp_path / "cot", "-q")
    assert rc == 2 and "not run for a model that reasons" in err


def test_reasoning_off_sends_the_switch_on_every_request(cli, tmp_path, reasoning_server):
    ReasoningServer.fmt = "reasoning"
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "openai:thinker", "--base-url", reasoning_server, "--chat", "on",
                     "--reasoning", "off", "--task", "econnli-zero", "--limit", "3", "--out", out, "-q")
    assert rc == 0, err
    assert ReasoningServer.seen and all(b.get("chat_template_kwargs") == {"enable_thinking": False, "thinking": False}
                                        for _, b in ReasoningServer.seen)
    meta = json.loads((out / "run.json").read_text())
    assert meta["backend"]["reasoning"]["mode"] == "off" and meta["identity"]["model"]["settings"]["reasoning"]["mode"] == "off"


def test_anthropic_thinking_blocks_are_the_reasoning(cli, tmp_path):
    srv, url = serve(AnthropicThinking)
    try:
        out = tmp_path / "run"
        rc, _, err = cli("run", "--model", "anthropic:claude-x", "--base-url", url, "--reasoning", "on", "--reasoning-tokens",
                         "2000", "--task", "econnli-zero", "--task", "steer-me", "--limit", "3", "--out", out, "-q")
        assert rc == 0, err
        assert all(b["thinking"] == {"type": "enabled", "budget_tokens": 2000} for b in AnthropicThinking.seen)
        assert {parsed_answer(r) for r in _answers(out, "econnli-zero")} == {"Yes"}
        assert {parsed_answer(r) for r in _answers(out, "steer-me")} == {"A"}
        assert all(r["thinking"] for r in read_lines(out / "samples.jsonl"))
        rc, _, err = cli("run", "--model", "anthropic:claude-x", "--base-url", url, "--reasoning", "on", "--reasoning-tokens",
                         "100", "--task", "econnli-zero", "--out", tmp_path / "small", "-q")
        assert rc == 2 and "at least 1,024" in err
    finally:
        srv.shutdown()


# ---- the fake backend, compare and gate ----------------------------------------------------------
def test_fake_reasoning_model_and_its_refusals(cli, tmp_path):
    answers = "answers=<think>the premise says Yes</think>No"
    out = tmp_path / "a"
    rc, _, err = cli("run", "--model", "fake:r", "-M", answers, "--task", "econnli-zero", "--limit", "5", "--out", out, "-q")
    assert rc == 0, err
    recs = read_lines(out / "samples.jsonl")
    assert {r["response"] for r in recs} == {"No"} and {r["parsed"] for r in recs} == {0}
    assert {r["thinking"]["response"] for r in recs} == {"the premise says Yes"}
    rc, _, err = cli("run", "--model", "fake:r", "-M", answers, "--reasoning", "off", "--task", "econnli-zero",
                     "--out", tmp_path / "b", "-q")
    assert rc == 2 and "always reasons" in err and "Traceback" not in err
    rc, _, err = cli("run", "--model", "fake:plain", "--reasoning", "on", "--task", "econnli-zero", "--out", tmp_path / "c", "-q")
    assert rc == 2 and "does not reason" in err
    rc, _, err = cli("run", "--model", "fake:r", "-M", answers, "--reasoning-tokens", "2", "--task", "econnli-zero",
                     "--limit", "5", "--out", tmp_path / "d", "-q")
    assert rc == 0, err
    assert {r["response"] for r in read_lines(tmp_path / "d" / "samples.jsonl")} == {""}


def test_compare_and_gate_refuse_runs_that_differ_in_reasoning(cli, tmp_path):
    base, off = tmp_path / "base", tmp_path / "off"
    for out, extra in ((base, ()), (off, ("--reasoning", "off"))):
        rc, _, err = cli("run", "--model", "fake:plain", *extra, "--task", "econnli-zero", "--limit", "8", "--out", out, "-q")
        assert rc == 0, err
    rc, _, err = cli("compare", base, off)
    assert rc == 2 and "differ in reasoning" in err and "reasoning off" in err
    rc, _, err = cli("gate", base, "--replay", off)
    assert rc == 2 and "differ in reasoning" in err
    rc, _, err = cli("gate", base, "--model", "fake:plain", "--reasoning", "off", "--out", tmp_path / "g")
    assert rc == 2 and "differ in reasoning" in err and not (tmp_path / "g" / "samples.jsonl").exists()
    rc, out_, err = cli("compare", base, base)
    assert rc != 2 and "differ in reasoning" not in err + out_  # the same settings pair


def test_split_reads_each_family():
    assert rz.split("<think>No, not at all</think>\n\nYes") == rz.Split("Yes", "No, not at all", True)
    assert rz.split("No no no\n</think>\n\nYes") == rz.Split("Yes", "No no no", True)  # the prompt opened it
    assert rz.split("<think>No and on and on") == rz.Split("", "No and on and on", False)
    assert rz.split("<|channel|>analysis<|message|>B surely<|end|><|start|>assistant<|channel|>final<|message|>A<|return|>") \
        == rz.Split("A", "B surely", True)
    assert rz.split("[THINK]B[/THINK]A") == rz.Split("A", "B", True)
    assert rz.split(" Yes, it does.") == rz.Split(" Yes, it does.")  # no reasoning: the text as it is


# ---- real chat templates, rendered as llama-cpp-python renders them ------------------------------
def _reading(name: str) -> rz.TemplateReading:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    text = (TEMPLATES / name).read_text()
    fmt = Jinja2ChatFormatter(text, eos_token="</s>", bos_token="<s>")
    return rz.read_template(text, lambda v: fmt(messages=[{"role": "user", "content": "?"}], **v).prompt)


@pytest.mark.parametrize("name,family,default,can_off,can_on", [
    ("Qwen-Qwen3-0.6B.jinja", "think", True, True, True),  # thinks by default, enable_thinking switches it
    ("Qwen3.5-4B.jinja", "think", True, True, True),  # <think> in the prompt
    ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "think", True, False, True),  # always thinks
    ("deepseek-ai-DeepSeek-V3.1.jinja", "think", False, True, True),  # thinks only with thinking=True
    ("google-gemma-4-31B-it.jinja", "gemma", False, True, True),  # only when asked
    ("openai-gpt-oss-120b.jinja", "harmony", True, False, True),  # analysis channel, always
])
def test_templates_read_per_family(name, family, default, can_off, can_on):
    r = _reading(name)
    assert r.markers is not None and r.markers.family == family
    assert (r.default, r.can_off, r.can_on) == (default, can_off, can_on)


def test_a_template_without_reasoning_reads_as_none():
    from tiny_gguf import CHAT_TEMPLATE

    assert rz.read_template(CHAT_TEMPLATE, lambda v: "x").markers is None


# ---- the llama.cpp engine on tiny models with the real templates ---------------------------------
THINK_TOKENS = (("<think>", 4), ("</think>", 4), ("<|im_start|>", 3), ("<|im_end|>", 3), ("<｜Assistant｜>", 3), ("<｜User｜>", 3))


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    return write_tiny_llama(tmp_path_factory.mktemp("q") / "qwen3.gguf", (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(),
                            extra_tokens=THINK_TOKENS)


@pytest.fixture(scope="module")
def r1(tmp_path_factory):
    return write_tiny_llama(tmp_path_factory.mktemp("r") / "r1.gguf",
                            (TEMPLATES / "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja").read_text(), extra_tokens=THINK_TOKENS)


def _backend(path, **options):
    from econeval.backends.llamacpp import LlamaCppBackend
    from econeval.config import ModelSpec

    return LlamaCppBackend(ModelSpec(name=path.stem, kind="llamacpp", options={"path": str(path), **options}, n_ctx=512, chat="on"))


def test_llamacpp_renders_each_mode(qwen3):
    from econeval.types import Generate

    rendered = {}
    for mode in ("auto", "off", "on"):
        b = _backend(qwen3, reasoning=mode, reasoning_tokens=6)
        try:
            res = b.evaluate([Generate(prompt="Is it so?", max_tokens=3, chat=True)])[0]
            rendered[mode] = res.rendered
            assert (res.reasoning is not None) == (mode != "off")
            assert b.info().details["reasoning"]["reasons"] == (mode != "off")
        finally:
            b.close()
    assert rendered["off"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert rendered["auto"].endswith("<|im_start|>assistant\n<think>") and rendered["on"] == rendered["auto"]


def test_llamacpp_budget_forcing(qwen3):
    """A reasoning that does not end within the budget is closed there (its end marker appended)
    and the answer generated with the task's own budget; option scores are read after it."""
    from econeval.types import Generate, OptionLogprobs

    b = _backend(qwen3, reasoning_tokens=5)
    tails: list = []
    run = b._run
    b._run = lambda reqs, t, done: (tails.append(list(t)), run(reqs, t, done))[1]  # type: ignore[method-assign]
    try:
        gen, opt = b.evaluate([Generate(prompt="Is it so?", max_tokens=4, chat=True),
                               OptionLogprobs(prompt="Pick A or B", options=("A", "B"), chat=True)])
    finally:
        b.close()
    for res in (gen, opt):
        assert res.reasoning is not None and res.n_reasoning_tokens <= 5
        assert res.reasoning_ended is (res.n_reasoning_tokens < 5)
    assert gen.n_tokens <= 4 and set(opt.scores) == {"A", "B"} and all(math.isfinite(v) for v in opt.scores.values())
    stage2 = tails[1]
    assert all(t.endswith("</think>\n\n") for t in stage2)  # closed for the answer


def test_llamacpp_always_reasoning_template_refuses_off(qwen3, r1, cli, tmp_path):
    rc, _, err = cli("run", "--model", r1, "--reasoning", "off", "--task", "econnli-zero", "--limit", "2",
                     "--out", tmp_path / "x", "-q")
    assert rc == 2 and "always reasons" in err and "Traceback" not in err
    out = tmp_path / "q"
    rc, _, err = cli("run", "--model", qwen3, "--chat", "on", "--reasoning-tokens", "4", "--task", "econnli-zero",
                     "--limit", "2", "--out", out, "-q")
    assert rc == 0, err
    for rec in read_lines(out / "samples.jsonl"):
        assert rec["rendered"]["response"].endswith("<think>") and "response" in rec["thinking"]
        assert rec["calls"]["response"]["n_reasoning_tokens"] <= 4
