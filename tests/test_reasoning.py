"""Reasoning models: the answer is read after the reasoning, never from inside it: the split of a
reply per family, the fake backend, compare and gate, and tiny GGUFs with the real chat templates
of the reasoning families (served formats: tests/test_reasoning_formats.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import read_lines
from tiny_gguf import write_tiny_llama

from econeval import reasoning as rz

TEMPLATES = Path(__file__).parent / "templates"


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


def test_a_tasks_own_reasoning_budget(cli, tmp_path):
    """--task-reasoning-tokens TASK=N: that task's requests reason up to N, the others up to
    --reasoning-tokens; run.json records both; a task it names that does not exist is one line."""
    import json

    answers = "answers=<think>the premise says Yes as it plainly does</think>No"
    out = tmp_path / "per-task"
    rc, _, err = cli("run", "--model", "fake:r", "-M", answers, "--task-reasoning-tokens", "econnli-zero=2",
                     "--task", "econnli-zero", "--task", "econnli-icl", "--limit", "3", "--out", out, "-q")
    assert rc == 0, err
    recs = read_lines(out / "samples.jsonl")
    by_task = {t: {r["response"] for r in recs if r["task"] == t} for t in ("econnli-zero", "econnli-icl")}
    assert by_task == {"econnli-zero": {""}, "econnli-icl": {"No"}}  # cut at 2 tokens / read after the default 4,096
    reasoning = json.loads((out / "run.json").read_text())["backend"]["reasoning"]
    assert reasoning["tokens"] == 4096 and reasoning["per_task"] == {"econnli-zero": 2}, reasoning
    rc, _, err = cli("run", "--model", "fake:r", "-M", answers, "--task-reasoning-tokens", "econnli-zer=2",
                     "--task", "econnli-zero", "--out", tmp_path / "bad", "-q")
    assert rc == 2 and "names no task 'econnli-zer'" in err and "econnli-zero" in err and "Traceback" not in err
    rc, _, err = cli("run", "--model", "fake:r", "-M", answers, "--task-reasoning-tokens", "econnli-zero=0",
                     "--task", "econnli-zero", "--out", tmp_path / "bad2", "-q")
    assert rc == 2 and "expected TASK=N" in err and "Traceback" not in err
    # "²" is a digit to str.isdigit, not to int(): once an internal error, from the flag and from --config
    conf = tmp_path / "run.toml"
    conf.write_text('[run]\ntasks = ["econnli-zero"]\nlimit = 3\n[run.model_options]\ntask_reasoning_tokens = "econnli-zero=\u00b2"\n')
    for args in (("--task-reasoning-tokens", "econnli-zero=\u00b2", "--task", "econnli-zero"), ("--config", conf)):
        rc, _, err = cli("run", "--model", "fake:r", "-M", answers, *args, "--out", tmp_path / "bad3", "-q")
        assert rc == 2 and "expected TASK=N" in err and "internal error" not in err, err
    assert not (tmp_path / "bad3").exists()


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
    assert rz.split("<think>No, not at all</think>\n\nYes") == rz.Split("Yes", "No, not at all", True, "think")
    assert rz.split("No no no\n</think>\n\nYes") == rz.Split("Yes", "No no no", True, "think", opened=True)  # the prompt opened it
    assert rz.split("<think>No and on and on") == rz.Split("", "No and on and on", False, "think")
    assert rz.split("<|channel|>analysis<|message|>B surely<|end|><|start|>assistant<|channel|>final<|message|>A<|return|>") \
        == rz.Split("A", "B surely", True, "harmony")
    assert rz.split("[THINK]B[/THINK]A") == rz.Split("A", "B", True, "mistral")
    assert rz.split(" Yes, it does.") == rz.Split(" Yes, it does.")  # no reasoning: the text as it is


def test_split_reads_the_families_added_in_the_second_pass():
    assert rz.split("<seed:think>No, no<seed:cot_budget_reflect>20 left</seed:cot_budget_reflect></seed:think>Yes") \
        == rz.Split("Yes", "No, no<seed:cot_budget_reflect>20 left</seed:cot_budget_reflect>", True, "seed")
    assert rz.split("◁think▷B surely◁/think▷A") == rz.Split("A", "B surely", True, "kimi")
    assert rz.split("Here is my thought process:\nB surely\nHere is my response:\nA") == rz.Split("A", "B surely", True, "granite")
    assert rz.split("Here is my thought process:\nB and B") == rz.Split("", "B and B", False, "granite")  # never closed
    # Granite's phrases only where a reply opens with them: quoted elsewhere they are text
    assert rz.split("A. Here is my response: A").reasoning is None
    # harmony as vLLM's /v1/completions sends it, its special tokens dropped
    assert rz.split("analysisB, surely.assistantfinalA") == rz.Split("A", "B, surely.", True, "harmony")
    assert rz.split("analysis of demand shows a rise").reasoning is None
    # Granite 3.3's answer wrapper; a template-opened reply (only the end marker) says so
    assert rz.split("<think>B</think><response>A</response>").answer == "A"
    assert rz.split("B, B\n</think>\n\nA") == rz.Split("A", "B, B", True, "think", opened=True)
    # the user's markers (-M think_end=...), and a reply the prompt opened that never closes
    mine = rz.custom("</reasoning>", "<reasoning>")
    assert rz.split("<reasoning>B</reasoning>\nA", extra=mine) == rz.Split("A", "B", True, "custom")
    assert rz.split("B and on", opened=rz.THINK) == rz.Split("", "B and on", False, "think")


def test_marker_tokens():
    for tok in ("<think>", " <think>", "<|channel|>", "<|start|>", "[THINK]", "<seed:think>", "◁think▷", "<|channel>", "<th"):
        assert rz.marker_token(tok), tok
    for tok in (" A", "B", "Yes", "<", " No", "(A)", "[", ""):
        assert not rz.marker_token(tok), tok
    assert rz.marker_token("<reasoning>", rz.custom("</reasoning>", "<reasoning>")) and not rz.marker_token("<reasoning>")


def test_models_known_by_name():
    assert rz.by_name("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B") == (rz.THINK, True)
    assert rz.by_name("Qwen/QwQ-32B") == (rz.THINK, True) and rz.by_name("Qwen/Qwen3-8B") == (rz.THINK, False)
    assert rz.by_name("Qwen/Qwen3-4B-Instruct-2507") is None and rz.by_name("llama-3.1-8b") is None
    assert rz.by_name("openai/gpt-oss-20b") == (rz.HARMONY, False) and rz.by_name("mistralai/Magistral-Small-2509")[0] is rz.MISTRAL
    assert rz.by_name("ByteDance-Seed/Seed-OSS-36B-Instruct")[0] is rz.SEED


def test_estimated_reasoning_tokens():
    assert rz.estimate_tokens(40, "x" * 90, "y" * 10) == 36  # the reasoning's share of the characters
    assert rz.estimate_tokens(40, "", "Yes") == 39 and rz.estimate_tokens(40, "", "") == 40  # hidden: all but the answer's
    assert rz.estimate_tokens(None, "x", "y") is None


# ---- real chat templates, rendered as llama-cpp-python renders them ------------------------------
def _reading(name: str) -> rz.TemplateReading:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    text = (TEMPLATES / name).read_text()
    fmt = Jinja2ChatFormatter(text, eos_token="</s>", bos_token="<s>")
    ask = {"role": "user", "content": "?"}
    return rz.read_template(text, lambda v: fmt(messages=[ask], **v).prompt, None,
                            lambda word: fmt(messages=[{"role": "system", "content": word}, ask]).prompt)


@pytest.mark.parametrize("name,family,default,can_off,can_on", [
    ("Qwen-Qwen3-0.6B.jinja", "think", True, True, True),  # thinks by default, enable_thinking switches it
    ("Qwen3.5-4B.jinja", "think", True, True, True),  # <think> in the prompt
    ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "think", True, False, True),  # always thinks
    ("deepseek-ai-DeepSeek-V3.1.jinja", "think", False, True, True),  # thinks only with thinking=True
    ("google-gemma-4-31B-it.jinja", "gemma", False, True, True),  # only when asked
    ("openai-gpt-oss-120b.jinja", "harmony", True, False, True),  # analysis channel, always
    ("ByteDance-Seed-OSS.jinja", "seed", True, True, True),  # thinking_budget 0 closes it
    ("Kimi-K2-Thinking.jinja", "think", True, False, True),  # always
    ("mistralai-Ministral-3-14B-Reasoning-2512.jinja", "mistral", True, False, True),  # its system prompt asks for [THINK]
    ("ibm-granite-granite-3.3-2B-Instruct.jinja", "think", False, True, True),  # only with thinking=True
    ("NVIDIA-Nemotron-Nano-v2.jinja", "think", True, True, True),  # its switch is /no_think in a system turn, not a variable
    ("Qwen-QwQ-32B.jinja", "think", False, True, True),  # llama.cpp's copy closes it unless enable_thinking is given
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


def test_llamacpp_a_tasks_own_reasoning_budget(qwen3, cli, tmp_path):
    """In-process, the task's own budget bounds its reasoning stage; the other task keeps the model's."""
    out = tmp_path / "q"
    rc, _, err = cli("run", "--model", qwen3, "--chat", "on", "--reasoning-tokens", "12", "--task-reasoning-tokens",
                     "econnli-zero=3", "--task", "econnli-zero", "--task", "econnli-icl", "--limit", "2", "--out", out, "-q")
    assert rc == 0, err
    spent = {t: [r["calls"]["response"]["n_reasoning_tokens"] for r in read_lines(out / "samples.jsonl") if r["task"] == t]
             for t in ("econnli-zero", "econnli-icl")}
    assert spent["econnli-zero"] and max(spent["econnli-zero"]) <= 3, spent
    assert max(spent["econnli-icl"]) > 3, spent  # the random tiny model does not close its reasoning early


SEED_TOKENS = (("<seed:think>", 4), ("</seed:think>", 4), ("<seed:bos>", 3), ("<seed:eos>", 3),
               ("<seed:cot_budget_reflect>", 4), ("</seed:cot_budget_reflect>", 4))


def test_llamacpp_seed_oss_reasons_in_its_own_markers(tmp_path):
    """Seed-OSS: read from its template (not mistaken for a model without reasoning); the opener
    appended for the reasoning stage; `off` renders thinking_budget 0, its closed block."""
    from econeval.types import Generate

    path = write_tiny_llama(tmp_path / "seed.gguf", (TEMPLATES / "ByteDance-Seed-OSS.jinja").read_text(), extra_tokens=SEED_TOKENS)
    b = _backend(path, reasoning_tokens=5)
    try:
        res = b.evaluate([Generate(prompt="Is it so?", max_tokens=3, chat=True)])[0]
        record = b.info().details["reasoning"]
    finally:
        b.close()
    assert record["reasons"] is True and record["family"] == "seed" and "<seed:think>" in record["detected"]
    assert res.rendered.endswith("assistant\n<seed:think>") and res.reasoning is not None and res.n_reasoning_tokens <= 5
    b = _backend(path, reasoning="off")
    try:
        res = b.evaluate([Generate(prompt="Is it so?", max_tokens=3, chat=True)])[0]
    finally:
        b.close()
    assert res.reasoning is None and res.rendered.endswith("</seed:think>")


def test_llamacpp_markers_the_user_names(tmp_path):
    """-M think_end: a model whose template shows no markers econeval knows reasons until the end
    marker the user named; its answer is read after it."""
    from tiny_gguf import CHAT_TEMPLATE

    from econeval.types import Generate, OptionLogprobs

    path = write_tiny_llama(tmp_path / "plain.gguf", CHAT_TEMPLATE, extra_tokens=(("<reasoning>", 4), ("</reasoning>", 4)))
    b = _backend(path, reasoning_tokens=4, think_end="</reasoning>", think_start="<reasoning>")
    try:
        gen, opt = b.evaluate([Generate(prompt="Is it so?", max_tokens=3, chat=True),
                               OptionLogprobs(prompt="Pick A or B", options=("A", "B"), chat=True)])
        record = b.info()
    finally:
        b.close()
    assert gen.rendered.endswith("<|assistant|><reasoning>") and gen.reasoning is not None and gen.n_reasoning_tokens <= 4
    assert set(opt.scores) == {"A", "B"} and opt.reasoning is not None  # read after the closed reasoning
    assert record.details["reasoning"]["family"] == "custom"
    assert record.settings["reasoning"]["think_end"] == "</reasoning>"  # part of the run's identity


NEMOTRON_TOKENS = (("<think>", 4), ("</think>", 4), ("<SPECIAL_10>", 3), ("<SPECIAL_11>", 3), ("<SPECIAL_12>", 3))


def test_llamacpp_nemotron_switches_off_by_a_system_turn(tmp_path, cli):
    """Nemotron Nano v2's template has no switch variable: /no_think in a system turn closes its
    reasoning block (and is taken out of the text). `--reasoning off` sends it, the prompt otherwise
    the task's own; `auto` reasons."""
    from econeval.types import Generate

    path = write_tiny_llama(tmp_path / "nemotron.gguf", (TEMPLATES / "NVIDIA-Nemotron-Nano-v2.jinja").read_text(),
                            extra_tokens=NEMOTRON_TOKENS)
    rendered = {}
    for mode in ("auto", "off"):
        b = _backend(path, reasoning=mode, reasoning_tokens=4)
        try:
            res = b.evaluate([Generate(prompt="Is it so?", max_tokens=3, chat=True)])[0]
            record = b.info().details["reasoning"]
        finally:
            b.close()
        rendered[mode] = res.rendered
        assert (res.reasoning is not None) == (mode == "auto") and record["reasons"] == (mode == "auto")
    assert rendered["off"].endswith("<SPECIAL_11>Assistant\n<think></think>") and "/no_think" not in rendered["off"]
    assert rendered["off"].replace("<think></think>", "") == rendered["auto"].replace("<think>\n", "")  # the task's prompt
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", path, "--chat", "on", "--reasoning", "off", "--task", "econnli-zero", "--limit", "2",
                     "--out", out, "-q")
    assert rc == 0, err
    meta = json.loads((out / "run.json").read_text())["backend"]["reasoning"]
    assert meta["reasons"] is False and "/no_think" in meta["switch"]
    assert all("thinking" not in r for r in read_lines(out / "samples.jsonl"))
