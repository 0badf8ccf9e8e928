"""LoRA adapters on the llama.cpp backend (`-M lora=PATH[:SCALE],...`): the tiny model and tiny
adapter GGUFs the tests write (tests/tiny_gguf.py, laid out as llama.cpp's convert_lora_to_gguf.py
writes an adapter). A zero-B adapter is the base model; another changes the answers; run.json and
the run's identity hold each adapter's sha256 and scale."""

import hashlib
import json

import pytest

from conftest import one_line, read_lines
from econeval.backends.llamacpp import LlamaCppBackend
from econeval.config import ModelSpec
from econeval.types import Completion, Generate, OptionLogprobs
from tiny_gguf import write_tiny_lora

PROMPT = "premise: the order, hypothesis: the event, answer:"
REQUESTS = [Generate(prompt=PROMPT, max_tokens=8), OptionLogprobs(prompt=PROMPT, options=("Yes", "No")),
            Generate(prompt="Question: the answer is", max_tokens=8)]


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    d = tmp_path_factory.mktemp("lora")
    return {"zero": write_tiny_lora(d / "zero.gguf", scale=0.0), "one": write_tiny_lora(d / "one.gguf", seed=2),
            "two": write_tiny_lora(d / "two.gguf", seed=3, targets=("attn_k", "ffn_down"))}


def _answers(model, lora=None):
    """Each request's text or scores on the tiny model with these adapters."""
    options = {"path": str(model), **({"lora": lora} if lora else {})}
    with LlamaCppBackend(ModelSpec(name="tiny", options=options, n_ctx=512, chat="off")) as backend:
        return [r.text if isinstance(r, Completion) else r.scores for r in backend.evaluate(REQUESTS)]


def test_a_zero_adapter_is_the_base_model_and_another_changes_the_answers(tiny_model, adapters):
    base = _answers(tiny_model)
    assert _answers(tiny_model, str(adapters["zero"])) == base  # B = 0: W + BA = W, to the bit
    one = _answers(tiny_model, str(adapters["one"]))
    assert one != base and one[1] != base[1]  # the option scores move
    assert _answers(tiny_model, f"{adapters['one']}:0") == base  # scale 0: none
    # several adapters, each with its scale, set together: a zero one beside another adds nothing
    assert _answers(tiny_model, f"{adapters['zero']}:0.5,{adapters['one']}") == one
    assert _answers(tiny_model, [f"{adapters['one']}:0.5", str(adapters["two"])]) not in (base, one)


def _run(cli, model, out, *extra):
    return cli("run", "--model", model, "--task", "econnli-zero", "--limit", "4", "--out", out, "-q", "--bootstrap", "0", *extra)


def test_run_json_records_each_adapter_and_a_resume_with_others_is_refused(cli, tmp_path, tiny_model, adapters):
    out = tmp_path / "run"
    rc, _, err = _run(cli, tiny_model, out, "-M", f"lora={adapters['one']}:0.5,{adapters['zero']}")
    assert rc == 0, err
    rec = json.loads((out / "run.json").read_text())
    sha = {k: hashlib.sha256(p.read_bytes()).hexdigest() for k, p in adapters.items()}
    got = rec["backend"]["model"]["lora"]
    assert [(a["sha256"], a["scale"], a["path"]) for a in got] == [(sha["one"], 0.5, str(adapters["one"])),
                                                                   (sha["zero"], 1.0, str(adapters["zero"]))]
    assert all(a["alpha"] == 8.0 and a["bytes"] > 0 for a in got)
    assert rec["identity"]["model"]["model"]["lora"] == [{"sha256": sha["one"], "scale": 0.5}, {"sha256": sha["zero"], "scale": 1.0}]
    for other in (f"lora={adapters['two']}:0.5,{adapters['zero']}", f"lora={adapters['one']},{adapters['zero']}"):
        line = one_line(*_run(cli, tiny_model, out, "-M", other), 2, "holds a different run", "the LoRA adapters")
        assert "model's weights" not in line  # the base model is the same
    one_line(*_run(cli, tiny_model, out), 2, "holds a different run", "the LoRA adapters")  # none now
    rc, _, err = _run(cli, tiny_model, out, "-M", f"lora={adapters['one']}:0.5,{adapters['zero']}")
    assert rc == 0, err  # the same adapters: resumed (complete)


def test_a_run_with_a_zero_adapter_writes_the_base_models_samples(cli, tmp_path, tiny_model, adapters):
    base, zero = tmp_path / "base", tmp_path / "zero"
    assert _run(cli, tiny_model, base)[0] == 0
    assert _run(cli, tiny_model, zero, "-M", f"lora={adapters['zero']}")[0] == 0
    keep = ("id", "prompts", "response", "option_logprobs", "parsed")
    assert [{k: r[k] for k in keep} for r in read_lines(zero / "samples.jsonl")] == \
        [{k: r[k] for k in keep} for r in read_lines(base / "samples.jsonl")]
    assert "lora" not in json.loads((base / "run.json").read_text())["identity"]["model"]["model"]  # runs without keep their identity


def test_adapters_that_cannot_be_used_are_refused_in_one_line(cli, tmp_path, tiny_model, adapters):
    out = tmp_path / "bad"
    one_line(*_run(cli, tiny_model, out, "-M", f"lora={tmp_path / 'missing.gguf'}:0.5"), 1, "LoRA adapter not found",
             "missing.gguf")
    one_line(*_run(cli, tiny_model, out, "-M", f"lora={adapters['one']}:inf"), 2, "finite number")
    one_line(*_run(cli, tiny_model, out, "-M", f"lora={adapters['one']},{adapters['one']}:2"), 2, "the same adapter twice")
    one_line(*_run(cli, tiny_model, out, "-M", f"lora={tiny_model}"), 1, "could not load the LoRA adapter")  # a model, not an adapter
    text = tmp_path / "notes.gguf"
    text.write_text("not a gguf")
    one_line(*_run(cli, tiny_model, out, "-M", f"lora={text}"), 1, "not a GGUF file")
    wrong = write_tiny_lora(tmp_path / "wide.gguf", n_embd=128, n_ff=256)  # made for another model's shapes
    one_line(*_run(cli, tiny_model, out, "-M", f"lora={wrong}"), 1, "could not load the LoRA adapter")


def test_a_base_model_with_its_adapter_and_the_sft_prompt_is_a_table_3_row(cli, tmp_path, tiny_model, adapters):
    out = tmp_path / "tuned"
    rc, _, err = _run(cli, tiny_model, out, "-M", f"lora={adapters['one']}:0.5", "-T", "prompt=sft")
    assert rc == 0, err
    rec = json.loads((out / "run.json").read_text())
    assert rec["tasks"]["econnli-zero"]["settings"]["variant_version"] == "econnli-sft/1"
    assert read_lines(out / "samples.jsonl")[0]["prompts"]["response"].endswith(". \n ### Answer:")
    rc, md, err = cli("report", out)
    assert rc == 0, err
    table3 = md.split("## EconNLI Table 3")[1].split("\n## ")[0]
    sha = hashlib.sha256(adapters["one"].read_bytes()).hexdigest()
    assert "| run | tiny | SFT prompt (D.1) |" in table3 and f"one.gguf (scale 0.5, sha256 {sha[:12]}…)" in table3
