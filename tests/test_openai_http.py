"""The OpenAI-compatible HTTP adapter against a real HTTP server on 127.0.0.1."""

import json
import math

import pytest

from fake_http import JSONHandler, serve


class FakeOpenAI(JSONHandler):
    """Completions answer 'Yes' for prompts that mention 'increases', else 'No'; one-token
    log-prob requests return a top list with ' Yes'/'Yes' duplicates and the letters."""

    requests_seen: list = []

    def do_POST(self):
        body = self.read_json()
        FakeOpenAI.requests_seen.append((self.path, body, self.headers.get("Authorization")))
        if self.path == "/v1/completions" and body.get("model") == "overloaded":
            self.send_response(503)
            self.end_headers()
            return
        if self.path == "/v1/chat/completions":  # chat format: message content, logprobs.content[0].top_logprobs
            yes = "increase" in body["messages"][0]["content"]
            choice = {"message": {"role": "assistant", "content": "Yes" if yes else "No"}, "finish_reason": "stop"}
            if body.get("logprobs"):
                choice["logprobs"] = {"content": [{"token": "Yes", "top_logprobs": [
                    {"token": "Yes", "logprob": math.log(0.7 if yes else 0.1)}, {"token": "No", "logprob": math.log(0.2 if yes else 0.8)}]}]}
            return self._send(200, {"choices": [choice]})
        if self.path != "/v1/completions":
            self.send_response(404)
            self.end_headers()
            return
        yes = "increase" in body["prompt"]
        if body.get("model") == "nanlogprobs" and body.get("logprobs"):
            choice = {"text": " Yes", "logprobs": {"top_logprobs": [{" Yes": float("nan"), " No": -1.0}]}, "finish_reason": "length"}
        elif body.get("model") == "nologprobs":
            choice = {"text": " B" if body.get("max_tokens") == 1 else " B. Because.", "finish_reason": "length"}
        elif body.get("logprobs"):
            top = {" Yes": math.log(0.6 if yes else 0.2), "Yes": math.log(0.1), " No": math.log(0.3 if yes else 0.7),
                   " A": math.log(0.05), "B": math.log(0.02)}
            choice = {"text": " Yes", "logprobs": {"top_logprobs": [top]}, "finish_reason": "length"}
        else:
            choice = {"text": " Yes, it does." if yes else " No.", "finish_reason": "stop"}
        self._send(200, {"choices": [choice], "usage": {"prompt_tokens": 12, "completion_tokens": 3}})


@pytest.fixture(scope="module")
def server():
    srv, url = serve(FakeOpenAI)
    yield url
    srv.shutdown()


@pytest.fixture
def registry(tmp_path, server):
    reg = tmp_path / "models.toml"
    reg.write_text(f'[models.hosted]\nbase_url = "{server}"\napi_model = "econ-1"\napi_key_env = "FAKE_KEY"\nchat = "off"\n'
                   f'[models.down]\nbase_url = "http://127.0.0.1:9"\napi_model = "x"\n'
                   f'[models.busy]\nbase_url = "{server}"\napi_model = "overloaded"\n'
                   f'[models.textonly]\nbase_url = "{server}"\napi_model = "nologprobs"\n'
                   f'[models.nan]\nbase_url = "{server}"\napi_model = "nanlogprobs"\n')
    return {"ECONEVAL_MODELS": str(reg), "FAKE_KEY": "sk-test"}


def test_backend_generation_and_option_scores(server):
    from econeval.backends.openai_http import OpenAIHTTPBackend
    from econeval.config import ModelSpec
    from econeval.types import Generate, OptionLogprobs

    be = OpenAIHTTPBackend(ModelSpec(name="h", options={"base_url": server, "api_model": "econ-1"}, chat="off"))
    g = be.generate([Generate(prompt="demand increases", max_tokens=5, stop=("\n",))])[0]
    assert g.text == " Yes, it does." and g.n_prompt_tokens == 12
    res = be.option_logprobs([OptionLogprobs(prompt="demand increases", options=("Yes", "No", "C"))])[0]
    lp = res.scores
    assert lp["Yes"] == pytest.approx(math.log(0.6))  # max over ' Yes' and 'Yes'
    assert lp["No"] == pytest.approx(math.log(0.3))
    assert "C" not in lp and res.top == pytest.approx(math.log(0.6))
    path, body, _ = FakeOpenAI.requests_seen[-1]
    assert body["temperature"] == 0 and body["max_tokens"] == 1 and body["logprobs"] == 20


def test_chat_endpoint(server):
    from econeval.backends.openai_http import OpenAIHTTPBackend
    from econeval.config import ModelSpec
    from econeval.types import Generate, OptionLogprobs

    be = OpenAIHTTPBackend(ModelSpec(name="h", options={"base_url": server, "api_model": "econ-1"}, chat="on"))
    assert be.generate([Generate(prompt="demand increases", max_tokens=5, chat=True)])[0].text == "Yes"
    lp = be.option_logprobs([OptionLogprobs(prompt="demand falls", options=("Yes", "No"), chat=True)])[0].scores
    assert lp["No"] == pytest.approx(math.log(0.8)) and lp["Yes"] == pytest.approx(math.log(0.1))
    path, body, _ = FakeOpenAI.requests_seen[-1]
    assert path == "/v1/chat/completions" and body["logprobs"] is True and body["top_logprobs"] == 20
    # chat = "on" sends every request to the chat endpoint, whatever the task's default
    be.generate([Generate(prompt="demand increases", max_tokens=5)])
    assert FakeOpenAI.requests_seen[-1][0] == "/v1/chat/completions"
    # a conversation goes as its messages: the model's earlier reply as the assistant's
    turns = ("Q: demand increases?\nPlease reason.", "It rises.", "A. up\nB. down\nAnswer:")
    be.option_logprobs([OptionLogprobs(prompt="\n".join(turns), options=("A", "B"), chat=True, turns=turns)])
    assert FakeOpenAI.requests_seen[-1][1]["messages"] == [
        {"role": "user", "content": turns[0]}, {"role": "assistant", "content": turns[1]}, {"role": "user", "content": turns[2]}]


def test_run_econnli_through_the_api(cli, tmp_path, registry):
    out = tmp_path / "run"
    rc, stdout, err = cli("run", "--model", "hosted", "--task", "econnli-zero", "--limit", "6", "--quiet", "--out", out, env=registry)
    assert rc == 0, err
    meta = json.loads((out / "run.json").read_text())
    assert meta["backend"]["backend"] == "OpenAI-compatible HTTP API" and meta["backend"]["model"]["api_model"] == "econ-1"
    res = json.loads((out / "results.json").read_text())["tasks"]["econnli-zero"]
    assert res["n"] == 6 and res["n_unparsed"] == 0
    assert any(auth == "Bearer sk-test" for _, _, auth in FakeOpenAI.requests_seen)


def test_api_errors_are_one_clean_line(cli, tmp_path, registry):
    rc, _, err = cli("run", "--model", "down", "--task", "econnli-zero", "--limit", "1", "--out", tmp_path / "a", env=registry)
    assert rc == 1 and "cannot reach http://127.0.0.1:9" in err and "Traceback" not in err
    rc, _, err = cli("run", "--model", "busy", "--task", "econnli-zero", "--limit", "1", "--max-retries", "1",
                     "--out", tmp_path / "b", env=registry)
    assert rc == 1 and "HTTP 503" in err and "Traceback" not in err
    rc, _, err = cli("run", "--model", "hosted", "--task", "econnli-zero", "--limit", "1", "--out", tmp_path / "c",
                     env={**registry, "FAKE_KEY": ""})
    assert rc == 1 and "FAKE_KEY" in err


def test_steer_me_falls_back_to_text_without_logprobs(cli, tmp_path, registry):
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "textonly", "--task", "steer-me", "--limit", "1", "--quiet", "--out", out, env=registry)
    assert rc == 0, err
    res = json.loads((out / "results.json").read_text())["tasks"]["steer-me"]
    o = res["paper"]["overall"]
    assert o["no_answer_rate"] == 0.0 and o["renormalized"] is None and o["mixed"] is None  # calibration unavailable
    samples = [json.loads(l) for l in (out / "samples.jsonl").read_text().splitlines()]
    assert all(s["parsed"] == 1 for s in samples)  # " B" read from the text


def test_a_text_only_answer_turn_gets_8_tokens_or_the_servers_limit(cli, tmp_path, registry):
    """Issue #32 item 7: the authors' package leaves the answer turn uncapped (-T text_answer_tokens=none)."""
    for value, expected in (("8", 8), ("none", None)):
        FakeOpenAI.requests_seen.clear()
        rc, _, err = cli("run", "--model", "textonly", "--task", "steer-me", "--limit", "1", "-T", f"text_answer_tokens={value}",
                         "--quiet", "--out", tmp_path / value, env=registry)
        assert rc == 0, err
        answers = [b for path, b, _ in FakeOpenAI.requests_seen if path == "/v1/completions" and "SINGLE LETTER" in b["prompt"]
                   and "logprobs" not in b]  # a server that ignores logprobs is asked for text (once it is known)
        assert len(answers) == 64 and {b.get("max_tokens") for b in answers} == {expected}


def test_a_server_returning_nan_gives_item_errors_not_scores(cli, tmp_path, registry):
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "nan", "--task", "econnli-zero", "--limit", "3", "--quiet", "--out", out, env=registry)
    assert rc == 1 and "3 item(s) with errors" in err and "non-finite" in err
    res = json.loads((out / "results.json").read_text())["tasks"]["econnli-zero"]
    assert res["n_errors"] == 3 and res["paper"]["Average"]["f1"] is None


def test_two_served_models_never_share_a_folder(cli, tmp_path, registry):
    out = tmp_path / "run"
    assert cli("run", "--model", "hosted", "--task", "econnli-zero", "--limit", "2", "--quiet", "--out", out, env=registry)[0] == 0
    rc, _, err = cli("run", "--model", "textonly", "--task", "econnli-zero", "--limit", "2", "--quiet", "--out", out, env=registry)
    assert rc == 2 and "model.api_model" in err
