"""Reasoning models served in the wire formats they really arrive in (tests/fake_formats.py: each
reasons first with the opposite cue, then answers): every reading comes from the answer, never
from inside the reasoning, whatever the order of the tasks; `--reasoning off` is honoured or
refused; a refusal is never sent again unchanged, and every retry backs off."""

from __future__ import annotations

import json

import pytest

from conftest import read_lines
from fake_formats import FORMATS, Fmt, FormatServer, requests_sent, tally
from fake_http import serve

TASKS = ("econnli-zero", "econlogicqa-1shot", "steer-me")
# formats whose run is refused (what the one line says), or where a reading before detection is the documented limit
REFUSED = {"vLLM R1 distill --reasoning off (no switch)": "reasons with --reasoning off",
           "SGLang no parser, Magistral (markers dropped)": "cannot be told from its reasoning"}
PARTLY = {"vLLM Qwen3 --reasoning off, reasons on EconNLI only"}
PLAIN = {"Anthropic adaptive, auto"}  # adaptive thinking only when asked: nothing to read apart


@pytest.fixture(scope="module")
def url():
    srv, base = serve(FormatServer)
    yield base
    srv.shutdown()


def _run(cli, url, out, fmt: Fmt, extra, tasks=TASKS, *more):
    FormatServer.fmt, FormatServer.seen, FormatServer.fail = fmt, [], None
    model = ("anthropic:" if fmt.server == "anthropic" else "openai:") + fmt.model
    return cli("run", "--model", model, "--base-url", url + "/v1", *[a for t in tasks for a in ("--task", t)],
               "--sample", "4", "--out", out, "-q", "--bootstrap", "0", "-C", "2", *extra, *more)


@pytest.mark.parametrize("label,fmt,extra", FORMATS, ids=[f[0] for f in FORMATS])
def test_every_format_is_read_from_the_answer(cli, tmp_path, url, label, fmt, extra):
    out = tmp_path / "run"
    rc, _, err = _run(cli, url, out, fmt, extra)
    if label in REFUSED:  # refused in one line, before any item
        assert rc == 2 and REFUSED[label] in err and len(err.strip().splitlines()) <= 2, err
        assert not (out / "samples.jsonl").exists() and requests_sent(FormatServer.seen) == 1  # the probe alone
        return
    assert rc == 0, err
    t = tally(read_lines(out / "samples.jsonl"))
    assert t["items"] == 12 and t["other"] == 0 and t["lp_reasoning"] == 0, t
    if label in PARTLY:  # reasons only on some questions, its opener stripped by the parser: one reply before it showed
        assert t["reasoning"] <= 2 and "reasons with --reasoning off" in err
        meta = json.loads((out / "run.json").read_text())["backend"]["reasoning"]
        assert meta["honoured"] is False and "a reply reasoned" in meta["not_honoured"]
        return
    assert t["reasoning"] == 0 and t["unanswered"] == 0, t
    meta = json.loads((out / "run.json").read_text())["backend"]["reasoning"]
    if label in PLAIN:
        assert meta["reasons"] is False and not any("thinking" in r for r in read_lines(out / "samples.jsonl"))
    elif "--reasoning" in extra and extra[extra.index("--reasoning") + 1] == "off":
        assert meta["reasons"] is False and meta["honoured"] is True
        assert t["lp_answer"] == (0 if fmt.server == "openai" else 4)  # OpenAI refuses log-probabilities: text answers
    else:
        assert meta["reasons"] is True and t["lp_answer"] == 0  # a reasoning model's options are answered in text
        recs = read_lines(out / "samples.jsonl")
        assert all("thinking" in r for r in recs)
        counted = [c["n_reasoning_tokens"] for r in recs for c in r["calls"].values() if "n_reasoning_tokens" in c]
        assert counted and all(isinstance(n, int) and n > 0 for n in counted)  # counted or estimated, never missing
    # whatever the server refused, it was refused a bounded number of times (each field once per request in flight)
    assert sum(1 for _, _, status in FormatServer.seen if status == 400) <= 12


ORDERED = [f for f in FORMATS if f[0] in ("vLLM qwen3 parser, Qwen3 (reasoning)", "vLLM mistral parser, Magistral",
                                          "vLLM gpt-oss (harmony parsed)", "vLLM no parser, R1 distill (template opens)",
                                          "Ollama completions, hidden thinking")]


@pytest.mark.parametrize("label,fmt,extra", ORDERED, ids=[f[0] for f in ORDERED])
def test_steer_me_first_and_a_resumed_run(cli, tmp_path, url, label, fmt, extra):
    """A model whose first token opens its reasoning: STEER-ME's option scores are never read at
    it, whether STEER-ME comes first or a resumed run starts with its items."""
    out = tmp_path / "first"
    rc, _, err = _run(cli, url, out, fmt, extra, ("steer-me", "econnli-zero"))
    assert rc == 0, err
    t = tally(read_lines(out / "samples.jsonl"))
    assert t["reasoning"] == t["lp_reasoning"] == t["unanswered"] == 0 and t["answer"] == 8, t
    out = tmp_path / "resumed"  # cut off when STEER-ME starts, then the same command again: STEER-ME's items come first
    FormatServer.fmt, FormatServer.seen, FormatServer.fail = fmt, [], (lambda p: p.startswith("Q: "))
    args = ("run", "--model", "openai:" + fmt.model, "--base-url", url + "/v1", "--task", "econnli-zero", "--task", "steer-me",
            "--sample", "4", "--out", out, "-q", "--bootstrap", "0", "-C", "2", "--max-retries", "0", *extra)
    rc, _, err = cli(*args)
    assert rc == 1 and len(read_lines(out / "samples.jsonl")) == 4, err
    FormatServer.fail = None
    rc, _, err = cli(*args)
    assert rc == 0, err
    t = tally(read_lines(out / "samples.jsonl"))
    assert t["items"] == 8 and t["reasoning"] == t["lp_reasoning"] == t["unanswered"] == 0, t


def test_a_refusal_is_never_sent_again_unchanged_and_every_retry_backs_off(tmp_path, url):
    """The retry storm of issue #47: a reasoning model not known by name, on chat, refusing
    max_tokens, temperature and logprobs inside STEER-ME's option requests."""
    import dataclasses

    from econeval.backends.openai_http import OpenAIHTTPBackend
    from econeval.run.roles import resolve, with_options
    from econeval.types import OptionLogprobs

    FormatServer.fmt, FormatServer.seen, FormatServer.fail = Fmt("thinker", "openai", family="hidden"), [], None
    spec = with_options(resolve("openai:thinker"), {"base_url": url, "concurrency": 1})
    backend = OpenAIHTTPBackend(dataclasses.replace(spec, chat="on"))
    waits: list[str] = []
    real = backend.client.backoff
    backend.client.backoff = lambda attempt, why: (waits.append(why), real(attempt, why))[1]  # type: ignore[method-assign]
    try:
        res = backend.evaluate([OptionLogprobs(prompt=f"Q: {k}?\nA. x\nB. y\nA:", options=("A", "B"), chat=True)
                                for k in range(3)])
    finally:
        backend.close()
    assert [r.text for r in res] == ["A", "A", "A"]
    refused = [(i, body) for i, (_, body, status) in enumerate(FormatServer.seen) if status == 400]
    assert 1 <= len(refused) <= 3 and len(waits) == len(refused)  # one backoff for each refusal
    for i, body in refused:  # the next request is never the refused one again
        assert FormatServer.seen[i + 1][1] != body
    assert len(FormatServer.seen) <= 1 + len(refused) + 3


def test_a_refusal_that_teaches_nothing_stops_the_run(cli, tmp_path, url):
    """A server that refuses, naming no field it was sent, is not asked the same again."""
    FormatServer.fmt, FormatServer.seen = Fmt("thinker", "openai", family="hidden", effort_none=False, efforts=("high",)), []
    rc, _, err = cli("run", "--model", "openai:thinker", "--base-url", url, "--chat", "on", "-M", "reasoning_effort=low",
                     "--task", "econnli-zero", "--limit", "2", "--out", tmp_path / "x", "-q")
    assert rc == 1 and "refuses reasoning_effort 'low'" in err and "Traceback" not in err
    bodies = [json.dumps(b, sort_keys=True) for _, b, status in FormatServer.seen if status == 400]
    assert len(bodies) == len(set(bodies)) and len(FormatServer.seen) <= 5


def test_openai_effort_none_and_the_responses_api(cli, tmp_path, url):
    FormatServer.fmt, FormatServer.seen = Fmt("gpt-5.1", "openai", family="hidden", effort_none=True), []
    out = tmp_path / "off"
    rc, _, err = cli("run", "--model", "openai:gpt-5.1", "--base-url", url, "--reasoning", "off", "--task", "econnli-zero",
                     "--sample", "3", "--out", out, "-q")
    assert rc == 0, err
    assert all(b.get("reasoning_effort") == "none" for p, b, s in FormatServer.seen if s == 200)
    assert json.loads((out / "run.json").read_text())["backend"]["reasoning"]["reasons"] is False
    # o-series and GPT-5 cannot stop: refused with a hint that works for them
    rc, _, err = cli("run", "--model", "openai:gpt-5-mini", "--base-url", url, "--reasoning", "off", "--task", "econnli-zero",
                     "--out", tmp_path / "x", "-q")
    assert rc == 2 and "cannot switch it off" in err and "minimal" in err
    FormatServer.fmt, FormatServer.seen = Fmt("gpt-5-pro", "openai", family="hidden", responses_only=True, efforts=("high",)), []
    out = tmp_path / "pro"
    rc, _, err = cli("run", "--model", "openai:gpt-5-pro", "--base-url", url, "--task", "econnli-zero", "--task", "steer-me",
                     "--sample", "3", "--out", out, "-q")
    assert rc == 0, err
    assert {p for p, _, _ in FormatServer.seen} == {"/v1/responses"}
    recs = read_lines(out / "samples.jsonl")
    assert tally(recs)["answer"] == 6 and recs[0]["calls"]["response"]["n_reasoning_tokens"] == 30
    meta = json.loads((out / "run.json").read_text())["backend"]
    assert meta["endpoint"] == "/v1/responses" and meta["reasoning"]["hidden"] is True


def test_anthropic_learns_adaptive_thinking_and_refuses_off_where_it_cannot_stop(cli, tmp_path, url):
    FormatServer.fmt, FormatServer.seen = Fmt("claude-opus-4-7", "anthropic", family="hidden", claude="adaptive"), []
    out = tmp_path / "on"
    rc, _, err = cli("run", "--model", "anthropic:claude-opus-4-7", "--base-url", url, "--reasoning", "on",
                     "-M", "reasoning_effort=low", "--task", "econnli-zero", "--sample", "3", "--out", out, "-q")
    assert rc == 0, err
    ok = [b for _, b, s in FormatServer.seen if s == 200]
    assert ok and all(b["thinking"] == {"type": "adaptive"} and "temperature" not in b and b["output_config"] == {"effort": "low"}
                      for b in ok)
    contract = json.loads((out / "run.json").read_text())["backend"]["reasoning"]["contract"]
    assert any("adaptive" in c for c in contract)
    FormatServer.seen = []  # in auto, temperature 0 is sent until the model refuses it
    rc, _, err = cli("run", "--model", "anthropic:claude-opus-4-7", "--base-url", url, "--task", "econnli-zero",
                     "--sample", "3", "--out", tmp_path / "auto", "-q")
    assert rc == 0, err
    contract = json.loads((tmp_path / "auto" / "run.json").read_text())["backend"]["reasoning"]["contract"]
    assert any("temperature" in c for c in contract) and [s for _, _, s in FormatServer.seen].count(400) == 1
    FormatServer.fmt, FormatServer.seen = Fmt("claude-fable-5", "anthropic", family="hidden", claude="always"), []
    rc, _, err = cli("run", "--model", "anthropic:claude-fable-5", "--base-url", url, "--reasoning", "off",
                     "--task", "econnli-zero", "--out", tmp_path / "off", "-q")
    assert rc == 2 and "cannot stop thinking" in err and len(err.strip().splitlines()) <= 2


def test_a_reasoning_past_the_budget_is_unanswered_where_no_server_budget_closes_it(cli, tmp_path, url):
    """Raw prompts on llama.cpp's server (no server-side budget there), and a parser that needs both
    markers returning the unclosed reasoning as content: unanswered, never read."""
    for n, (fmt, chat) in enumerate(((Fmt("qwen3-8b", "llamacpp"), "off"),
                                     (Fmt("qwq-32b", "sglang", family="opened", parser="both"), "on"))):
        out = tmp_path / f"r{n}"
        FormatServer.fmt, FormatServer.seen = fmt, []
        rc, _, err = cli("run", "--model", "openai:" + fmt.model, "--base-url", url, "--chat", chat, "--task", "econnli-zero",
                         "--sample", "3", "--reasoning-tokens", "10", "--out", out, "-q")
        assert rc == 0, err
        for rec in read_lines(out / "samples.jsonl"):
            assert rec["response"] == "" and rec["parsed"] is None and rec["calls"]["response"]["reasoning_ended"] is False
        res = json.loads((out / "results-sample-3.json").read_text())["tasks"]["econnli-zero"]
        assert res["n_unparsed"] == 3 and res["reasoning"]["n_budget_hit"] == 3


def test_openai_contract_learnt_once(cli, tmp_path, url):
    """A server keeping OpenAI's reasoning-model contract under a name that is not one of OpenAI's:
    the refusals teach the run, and a refused field is not sent again."""
    FormatServer.fmt, FormatServer.seen = Fmt("thinker", "openai", family="hidden"), []
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "openai:thinker", "--base-url", url, "--chat", "on", "-C", "1",
                     *[a for t in TASKS for a in ("--task", t)], "--sample", "3", "--out", out, "-q")
    assert rc == 0, err
    # max_tokens and temperature refused once each, by the probe; log-probabilities never asked of a reasoning model
    assert [s for _, _, s in FormatServer.seen].count(400) == 2 and not any(b.get("logprobs") for _, b, _ in FormatServer.seen)
    for field in ("max_tokens", "temperature"):
        last = max(i for i, (_, b, s) in enumerate(FormatServer.seen) if s == 400 and b.get(field) not in (None, 1))
        assert not any(b.get(field) not in (None, 1) for _, b, _ in FormatServer.seen[last + 1:]), field
    rec = read_lines(out / "samples.jsonl")[0]
    assert rec["thinking"]["response"] == "" and rec["calls"]["response"]["n_reasoning_tokens"] == 30  # hidden, counted
    meta = json.loads((out / "run.json").read_text())["backend"]["reasoning"]
    assert meta["hidden"] is True and "probe" in meta["detected"] + meta["probe"] or "refused max_tokens" in meta["detected"]
    assert any("max_tokens" in c for c in meta["contract"]) and any("temperature" in c for c in meta["contract"])


def test_openai_reasoning_models_by_name(cli, tmp_path, url):
    FormatServer.fmt, FormatServer.seen = Fmt("o4-mini", "openai", family="hidden"), []
    rc, _, err = cli("run", "--model", "openai:o4-mini", "--base-url", url, *[a for t in TASKS for a in ("--task", t)],
                     "--sample", "2", "--out", tmp_path / "run", "-q")
    assert rc == 0, err
    bodies = [b for _, b, _ in FormatServer.seen]
    assert bodies and all("max_tokens" not in b and "temperature" not in b and not b.get("logprobs") for b in bodies)
    assert all(b["max_completion_tokens"] > 4096 for b in bodies) and [s for _, _, s in FormatServer.seen].count(400) == 0
    rc, _, err = cli("run", "--model", "openai:o4-mini", "--base-url", url, "--task", "econnli-zero", "--reasoning", "off",
                     "--out", tmp_path / "off", "-q")
    assert rc == 2 and "cannot switch it off" in err and len(err.strip().splitlines()) <= 2
    # STEER-ME's protocol for a model that always reasons: no 0-CoT adaptation
    rc, _, err = cli("run", "--model", "openai:o4-mini", "--base-url", url, "--task", "steer-me", "--adaptation", "cot-hidden",
                     "--limit", "2", "--out", tmp_path / "cot", "-q")
    assert rc == 2 and "not run for a model that reasons" in err


def test_reasoning_off_sends_the_switch_on_every_request(cli, tmp_path, url):
    FormatServer.fmt, FormatServer.seen = Fmt("qwen3-8b", "llamacpp", parser="r1", field="reasoning_content",
                                              off=(("enable_thinking", False),)), []
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "openai:qwen3-8b", "--base-url", url, "--chat", "on", "--reasoning", "off",
                     "--task", "econnli-zero", "--sample", "3", "--out", out, "-q")
    assert rc == 0, err
    sent = [b for p, b, _ in FormatServer.seen if p == "/v1/chat/completions"]
    assert sent and all(b["chat_template_kwargs"]["enable_thinking"] is False and b["reasoning_effort"] == "none" for b in sent)
    assert [p for p, _, _ in FormatServer.seen][0] == "/apply-template"  # the template read first: it closes the reasoning
    meta = json.loads((out / "run.json").read_text())
    assert meta["backend"]["reasoning"]["mode"] == "off" and meta["identity"]["model"]["settings"]["reasoning"]["mode"] == "off"
    assert meta["backend"]["reasoning"]["honoured"] is True


def test_anthropic_thinking_blocks_are_the_reasoning(cli, tmp_path, url):
    FormatServer.fmt, FormatServer.seen = Fmt("claude-sonnet-4-5", "anthropic", family="hidden"), []
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "anthropic:claude-sonnet-4-5", "--base-url", url, "--reasoning", "on",
                     "--reasoning-tokens", "2000", "--task", "econnli-zero", "--task", "steer-me", "--sample", "3",
                     "--out", out, "-q")
    assert rc == 0, err
    # (a request still in flight from a run refused before may arrive late: only this model's are this run's)
    assert all(b["thinking"] == {"type": "enabled", "budget_tokens": 2000} for _, b, _ in FormatServer.seen
               if b.get("model") == "claude-sonnet-4-5")
    recs = read_lines(out / "samples.jsonl")
    assert tally(recs)["answer"] == 6 and all(r["thinking"] for r in recs)
    n = recs[0]["calls"]["response"]["n_reasoning_tokens"]
    assert 0 < n <= 31  # estimated from output_tokens: the API counts no thinking tokens apart
    assert "estimated" in json.loads((out / "run.json").read_text())["backend"]["reasoning"]["token_counts"]
    rc, _, err = cli("run", "--model", "anthropic:claude-sonnet-4-5", "--base-url", url, "--reasoning", "on",
                     "--reasoning-tokens", "100", "--task", "econnli-zero", "--out", tmp_path / "small", "-q")
    assert rc == 2 and "at least 1,024" in err


def test_compare_refuses_an_off_that_did_not_hold_beside_one_that_did(cli, tmp_path, url):
    runs = {}
    for name, fmt in (("held", Fmt("qwen3-8b", parser="end", off=(("enable_thinking", False),))),
                      ("ignored", Fmt("qwen3-8b", parser="end", only="premise"))):
        runs[name] = tmp_path / name
        rc, _, err = _run(cli, url, runs[name], fmt, ("--chat", "on", "--reasoning", "off", "-C", "1"), ("econnli-zero",))
        assert rc == 0, err
    rc, _, err = cli("compare", runs["held"], runs["ignored"])
    assert rc == 2 and "differ in reasoning" in err and "reasoning off (not honoured: the model reasoned)" in err


def test_a_model_whose_markers_the_server_will_not_keep_is_refused(cli, tmp_path, url):
    """Magistral's [THINK] … [/THINK] are special tokens: a server that drops them and refuses
    skip_special_tokens leaves a reply whose reasoning and answer are one text, which is never
    scored (refused in one line, before any item); on vLLM the probe asks for them, so a model
    served under an opaque name shows its markers and is read after them."""
    FormatServer.fmt, FormatServer.seen = Fmt("magistral-small-2509", family="magistral", refused=("skip_special_tokens",)), []
    out = tmp_path / "gateway"
    rc, _, err = cli("run", "--model", "openai:magistral-small-2509", "--base-url", url, "--chat", "on", "--task",
                     "econnli-zero", "--sample", "2", "--out", out, "-q")
    assert rc == 2 and "cannot be told from its reasoning" in err and len(err.strip().splitlines()) <= 2, err
    assert not (out / "samples.jsonl").exists()
    FormatServer.fmt, FormatServer.seen = Fmt("served-model", family="magistral"), []
    out = tmp_path / "opaque"
    rc, _, err = cli("run", "--model", "openai:served-model", "--base-url", url, "--chat", "on", "--task", "econnli-zero",
                     "--sample", "2", "--out", out, "-q")
    assert rc == 0, err
    sent = [b for p, b, _ in FormatServer.seen if p == "/v1/chat/completions"]
    assert sent and all(b.get("skip_special_tokens") is False for b in sent)  # the probe asked, and every request after it
    assert json.loads((out / "run.json").read_text())["backend"]["reasoning"]["reasons"] is True


def test_the_responses_api_as_openai_documents_it(cli, tmp_path):
    """o3-pro and gpt-5-pro are served on /v1/responses only: against a stand-in that speaks it as
    OpenAI's reference describes (tools/served_standin.py: hidden reasoning as a `reasoning` item,
    the answer an `output_text` part, the reasoning counted in usage.output_tokens_details, a
    field the API does not take refused, max_output_tokens at least 16, `incomplete` at the
    limit), every answer is read, its reasoning counted; a reasoning budget under the API's least
    max_output_tokens is raised to it, and a reasoning cut there is unanswered, never refused."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    from served_standin import REASONING_TOKENS, Shape, answer, serve

    for model, extra in (("o3-pro", ()), ("gpt-5-pro", ("-M", "reasoning_effort=high"))):
        srv, url, stats = serve(Shape(base=0.0, model=model))
        try:
            out = tmp_path / model
            rc, _, err = cli("run", "--model", "openai:" + model, "--base-url", url, "--task", "econnli-zero", "--sample", "4",
                             "--out", out, "-q", "-C", "1", *extra)
            assert rc == 0, err
            recs = read_lines(out / "samples.jsonl")
            assert [r["response"] for r in recs] == [answer({"prompt": r["prompts"]["response"]}, model)["choices"][0]["text"].strip()
                                                      for r in recs]
            assert all(r["calls"]["response"]["n_reasoning_tokens"] == REASONING_TOKENS and r["thinking"]["response"] == ""
                       for r in recs)
            meta = json.loads((out / "run.json").read_text())["backend"]
            # the probe and two requests an item (its answer, its option read in text), none refused
            assert meta["endpoint"] == "/v1/responses" and meta["reasoning"]["reasons"] is True and stats.requests == 1 + 2 * 4
            short = tmp_path / (model + "-short")  # 8 answer tokens + 4 of reasoning: under the API's 16
            rc, _, err = cli("run", "--model", "openai:" + model, "--base-url", url, "--task", "econnli-zero", "--sample", "2",
                             "--reasoning-tokens", "4", "--out", short, "-q", "-C", "1", *extra)
            assert rc == 0, err
            res = json.loads((short / "results-sample-2.json").read_text())["tasks"]["econnli-zero"]
            assert res["n_unparsed"] == 2 and res["reasoning"]["n_budget_hit"] == 2  # the reasoning ran past 16: unanswered
        finally:
            srv.shutdown()
