"""The served-model adapter against a real HTTP server on 127.0.0.1 that injects faults: 429 with
Retry-After, 500, a hang past the timeout, malformed JSON, a dropped connection, a redirect, an
echoed key, context errors, an unknown repetition-penalty name. Answers are deterministic: a
prompt whose last line mentions "increase" gets "Yes", others "No"."""

import hashlib
import json
import socket
import threading
import time

import pytest

from conftest import one_line, read_lines
from fake_http import JSONHandler, serve

from econeval.backends.openai_http import PROBE

KEY = "sk-econeval-test-0123456789"
MODELS = [{"id": "econ-1", "object": "model", "owned_by": "me"}, {"id": "vllm-1", "object": "model", "owned_by": "vllm"},
          {"id": "acme-1", "object": "model", "owned_by": "acme"}, {"id": "flaky", "object": "model", "owned_by": "me"},
          {"id": "broken", "object": "model", "owned_by": "me"}, {"id": "nochoices", "object": "model", "owned_by": "me"},
          {"id": "ctx", "object": "model", "owned_by": "me"}, {"id": "ctxguess", "object": "model", "owned_by": "me"},
          {"id": "echo401", "object": "model", "owned_by": "me"}, {"id": "redirect", "object": "model", "owned_by": "me"},
          {"id": "slow", "object": "model", "owned_by": "me"}, {"id": "max5", "object": "model", "owned_by": "me"},
          {"id": "failing", "object": "model", "owned_by": "me"}]
FAULTS = ("429", "500", "hang", "badjson", "drop", None)


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.attempts: dict[str, list[float]] = {}
        self.in_flight = self.max_in_flight = 0
        self.bodies: list = []
        self.prompt_of: dict[str, str] = {}
        self.auth: list = []
        self.redirect_to = ""


class Handler(JSONHandler):
    state: State = None

    def do_GET(self):
        if self.path == "/v1/models":
            return self._send(200, {"object": "list", "data": MODELS})
        self._send(404, {"error": {"message": "not found"}})

    def do_POST(self):
        st = self.state
        body = self.read_json()
        with st.lock:
            st.in_flight += 1
            st.max_in_flight = max(st.max_in_flight, st.in_flight)
            st.bodies.append((self.path, body))
            st.auth.append(self.headers.get("Authorization"))
        try:
            self._answer(body)
        finally:
            with st.lock:
                st.in_flight -= 1

    def _answer(self, body):
        st, model = self.state, body["model"]
        prompt = body["prompt"] if "prompt" in body else body["messages"][-1]["content"]
        key = hashlib.sha256(f"{model}|{prompt}|{body.get('max_tokens')}|{body.get('logprobs')}".encode()).hexdigest()
        with st.lock:
            st.prompt_of[key] = prompt
            seen = st.attempts.setdefault(key, [])
            attempt = len(seen)
            seen.append(time.monotonic())
        fault = FAULTS[int(key, 16) % len(FAULTS)] if model == "flaky" and attempt == 0 else None
        if model == "broken" or (model == "failing" and prompt != PROBE):  # failing: all but its reasoning probe
            fault = "500"
        if fault == "429":
            return self._send(429, {"error": {"message": "slow down"}}, {"Retry-After": "0.4"})
        if fault == "500":
            return self._send(500, {"error": {"message": "internal"}})
        if fault == "hang":
            time.sleep(1.5)
            return self._send(200, {"choices": []})
        if fault == "badjson":
            return self._send_raw(200, b'{"choices": [{"text": " Ye')
        if fault == "drop":
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if model == "slow" and prompt != PROBE:  # answers after 30 s (its reasoning probe at once)
            time.sleep(30)
            return self._send(500, {"error": {"message": "too late"}})
        if model == "max5" and (body.get("logprobs") or 0) > 5:  # OpenAI's legacy completions limit
            return self._send(400, {"error": {"message": "logprobs must be at most 5", "type": "invalid_request_error"}})
        if model == "nochoices":
            return self._send(200, {"object": "error", "message": "model is loading"})
        if model == "ctx":
            return self._send(400, {"error": {"message": "prompt too long", "type": "invalid_request_error",
                                              "code": "context_length_exceeded"}})
        if model == "ctxguess":
            return self._send(400, {"error": {"message": "invalid value for 'context' field"}})
        if model == "echo401":
            return self._send(401, {"error": {"message": f"Incorrect API key provided: {self.headers.get('Authorization')}"}})
        if model == "redirect":
            self.send_response(302)
            self.send_header("Location", st.redirect_to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        time.sleep(0.05)  # so that concurrent requests overlap
        yes = "increase" in prompt[-300:]
        word = "Yes" if yes else "No"
        if body.get("logprobs"):
            top = {" Yes": -0.2 if yes else -2.0, " No": -2.0 if yes else -0.2, " A": -5.0}
            if "messages" in body:
                choice = {"message": {"role": "assistant", "content": " " + word}, "finish_reason": "length",
                          "logprobs": {"content": [{"token": " " + word, "top_logprobs": [{"token": t, "logprob": v} for t, v in top.items()]}]}}
            else:
                choice = {"text": " " + word, "logprobs": {"top_logprobs": [top]}, "finish_reason": "length"}
        else:
            text = f" {word}. Because demand moves."
            finish = "length"
            for s in body.get("stop") or []:  # like real servers: a stop string applies from the first character
                if s in text:
                    text, finish = text[: text.index(s)], "stop"
            choice = {"message": {"role": "assistant", "content": text}} if "messages" in body else {"text": text}
            choice["finish_reason"] = finish
        self._send(200, {"choices": [choice], "usage": {"prompt_tokens": 10, "completion_tokens": 4}, "system_fingerprint": "fp-1"})


def _serve(state):
    return serve(type("H", (Handler,), {"state": state}))


@pytest.fixture
def server():
    state = State()
    srv, url = _serve(state)
    yield state, url
    srv.shutdown()


def _files_text(folder):
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def test_faults_are_retried_and_the_run_completes(cli, tmp_path, server):
    state, url = server
    out = tmp_path / "run"
    rc, stdout, err = cli("run", "--model", "openai:flaky", "--base-url", url + "/v1", "--api-key-env", "MY_KEY",
                          "--task", "econnli-zero", "--limit", "12", "--concurrency", "4", "--timeout", "0.5",
                          "--max-retries", "4", "--quiet", "--out", out, env={"MY_KEY": KEY})
    assert rc == 0, err
    res = json.loads((out / "results.json").read_text())["tasks"]["econnli-zero"]
    assert res["n"] == 12 and res["n_unparsed"] == 0 and res["n_errors"] == 0
    samples = read_lines(out / "samples.jsonl")
    for s in samples:  # the deterministic answer, whatever faults came first
        yes = "increase" in s["prompts"]["response"][-300:]
        assert s["parsed"] == int(yes) and s["logprob_pred"] == int(yes)
    scored = {k: v for k, v in state.attempts.items() if state.prompt_of[k] != PROBE}  # not the reasoning probe
    faulty = [k for k in scored if FAULTS[int(k, 16) % len(FAULTS)]]
    assert faulty and all(len(state.attempts[k]) == 2 for k in faulty)  # one retry each, no more
    assert all(len(v) == 1 for k, v in scored.items() if k not in faulty)
    for k in faulty:
        if FAULTS[int(k, 16) % len(FAULTS)] == "429":  # Retry-After honoured
            assert state.attempts[k][1] - state.attempts[k][0] >= 0.39
    meta = json.loads((out / "run.json").read_text())
    assert meta["timing"]["econnli-zero"]["retries"] == len(faulty)
    assert meta["backend"]["concurrency"]["policy"] == "fixed" and meta["backend"]["concurrency"]["limit"] == 4
    assert meta["backend"]["model"]["served"]["owned_by"] == "me"
    assert state.max_in_flight >= 2
    # EconNLI's " " stop is applied client-side: a server would cut " Yes" at its first character
    assert all(" " not in (b.get("stop") or []) for _, b in state.bodies)
    assert "client-side" in " ".join(meta["backend"]["fallbacks"])
    assert all(b.get("repeat_penalty") == 1.0 for _, b in state.bodies)  # llama-cpp-python's server defaults to 1.1
    assert all(a == f"Bearer {KEY}" for a in state.auth)
    assert KEY not in _files_text(out) + stdout + err


def test_a_broken_server_fails_within_the_budget_with_one_line(cli, tmp_path, server):
    state, url = server
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "openai:broken", "--base-url", url, "--task", "econnli-zero", "--limit", "1",
                     "--max-retries", "2", "--quiet", "--out", out)
    assert rc == 1 and "Traceback" not in err
    assert f"{url} failed 3 times in a row; last: HTTP 500" in err and "rerun the same command to resume" in err
    assert sum(len(v) for v in state.attempts.values()) <= 2 * 3  # two requests for the item, 3 attempts each
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "failed" and "failed 3 times in a row" in meta["error"]  # says why; still resumable
    rc, _, err = cli("run", "--model", "openai:nochoices", "--base-url", url, "--task", "econnli-zero", "--limit", "1",
                     "--max-retries", "1", "--quiet", "--out", tmp_path / "b")
    assert rc == 1 and "no choices" in err and "Traceback" not in err


def test_redirects_are_not_followed(cli, tmp_path, server):
    state, url = server
    other_state = State()
    other, other_url = _serve(other_state)
    try:
        state.redirect_to = other_url
        rc, out, err = cli("run", "--model", "openai:redirect", "--base-url", url, "--api-key-env", "MY_KEY",
                           "--task", "econnli-zero", "--limit", "1", "--quiet", "--out", tmp_path / "r", env={"MY_KEY": KEY})
        assert rc == 1 and "redirected (HTTP 302)" in err and "Traceback" not in err
        assert other_state.bodies == [] and KEY not in out + err
    finally:
        other.shutdown()


def test_an_echoed_key_is_redacted(cli, tmp_path, server):
    _, url = server
    out = tmp_path / "run"
    rc, stdout, err = cli("run", "--model", "openai:echo401", "--base-url", url, "--api-key-env", "MY_KEY",
                          "--task", "econnli-zero", "--limit", "1", "--quiet", "--out", out, env={"MY_KEY": KEY})
    assert rc == 1 and "HTTP 401" in err and "[redacted]" in err
    assert KEY not in stdout + err + _files_text(out)


def test_context_overflow_only_from_the_servers_explicit_error(cli, tmp_path, server):
    _, url = server
    rc, _, err = cli("run", "--model", "openai:ctx", "--base-url", url, "--task", "econnli-zero", "--limit", "2",
                     "--quiet", "--out", tmp_path / "a")
    assert rc == 1 and "all 2 items skipped" in err
    rc, _, err = cli("run", "--model", "openai:ctxguess", "--base-url", url, "--task", "econnli-zero", "--limit", "2",
                     "--quiet", "--out", tmp_path / "b")
    assert rc == 1 and "HTTP 400" in err and "skipped" not in err


def test_repetition_penalty_goes_out_under_the_servers_name(server):
    from econeval.backends.openai_http import OpenAIHTTPBackend
    from econeval.run.roles import resolve, with_options
    from econeval.errors import ModelError
    from econeval.types import Generate

    state, url = server
    req = Generate(prompt="prices increase", max_tokens=4, repeat_penalty=1.1)
    OpenAIHTTPBackend(with_options(resolve("openai:vllm-1"), {"base_url": url})).generate([req])
    assert state.bodies[-1][1]["repetition_penalty"] == 1.1 and "repeat_penalty" not in state.bodies[-1][1]
    OpenAIHTTPBackend(with_options(resolve("openai:econ-1"), {"base_url": url})).generate([req])
    assert state.bodies[-1][1]["repeat_penalty"] == 1.1
    acme = OpenAIHTTPBackend(with_options(resolve("openai:acme-1"), {"base_url": url}))
    assert acme.generate([Generate(prompt="prices increase", max_tokens=4)])[0].text.startswith(" Yes")
    assert "repeat_penalty" not in state.bodies[-1][1] and "repetition_penalty" not in state.bodies[-1][1]
    with pytest.raises(ModelError, match="does not know how .* names it"):
        acme.generate([req])


def test_chat_on_sends_every_task_to_the_chat_endpoint(cli, tmp_path, server):
    state, url = server
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "openai:econ-1", "--base-url", url, "--chat", "on", "--task", "econnli-zero",
                     "--limit", "3", "--quiet", "--out", out)
    assert rc == 0, err
    # every completion on the chat endpoint; the chat template read where the server renders it
    assert {p for p, _ in state.bodies} - {"/apply-template", "/tokenize"} == {"/v1/chat/completions"}
    assert any(b.get("logprobs") is True and b.get("top_logprobs") == 20 for _, b in state.bodies)
    res = json.loads((out / "results.json").read_text())["tasks"]["econnli-zero"]
    assert res["n_unparsed"] == 0 and json.loads((out / "run.json").read_text())["backend"]["chat_mode"] == "on"


def test_models_check(cli, server):
    _, url = server
    rc, out, err = cli("models", "check", "openai:vllm-1", "--base-url", url + "/v1/")
    assert rc == 0 and "serves 'vllm-1'" in out and "repetition_penalty" in out
    rc, _, err = cli("models", "check", "openai:missing", "--base-url", url)
    assert rc == 1 and "does not serve model 'missing'" in err and "econ-1" in err
    rc, _, err = cli("models", "check", "openai:econ-1")
    assert rc == 2 and "--base-url" in err


def test_ctrl_c_returns_at_once_with_requests_in_flight(tmp_path, server):
    """An interrupt does not wait for answers still in flight (120 s timeouts, retry waits)."""
    import os
    import signal
    import subprocess
    import sys

    from conftest import REPO

    state, url = server
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "econeval", "run", "--model", "openai:slow", "--base-url", url,
                             "--task", "econnli-zero", "--limit", "8", "--quiet", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=dict(os.environ))
    deadline = time.monotonic() + 30
    while len(state.bodies) < 3 and time.monotonic() < deadline:  # scored requests are in flight (after the probe)
        time.sleep(0.05)
    assert len(state.bodies) >= 3
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 5, "the interrupt waited for the server"
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"


def test_a_server_allowing_fewer_log_probabilities_gets_asked_for_five(cli, tmp_path, server):
    state, url = server
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "openai:max5", "--base-url", url, "--task", "econnli-zero", "--limit", "3",
                     "--quiet", "--out", out)
    assert rc == 0, err
    res = json.loads((out / "results.json").read_text())["tasks"]["econnli-zero"]
    assert res["extras"]["logprob"]["n"] == 3  # scored from the top 5 after the refusal of 20
    asked = [b.get("logprobs") for _, b in state.bodies if b.get("logprobs")]
    assert 20 in asked and asked.count(5) >= 3
    assert any("refused 20" in f for f in json.loads((out / "run.json").read_text())["backend"]["fallbacks"])


def test_retry_after_in_seconds_or_as_a_date():
    from email.utils import formatdate

    from econeval.backends.http_client import retry_after as _retry_after

    assert _retry_after("2") == 2.0 and _retry_after("-3") == 0.0
    assert 8 <= _retry_after(formatdate(time.time() + 10, usegmt=True)) <= 10
    assert _retry_after("soon") is None and _retry_after(None) is None


def test_a_served_run_resumes_at_another_concurrency(cli, tmp_path, server):
    """Batching is the server's: the chunk size is not part of a served run's identity."""
    _, url = server
    out = tmp_path / "run"
    args = ("run", "--model", "openai:econ-1", "--base-url", url, "--task", "econnli-zero", "--quiet", "--out", out)
    assert cli(*args, "--limit", "2", "--concurrency", "4")[0] == 0
    rc, _, err = cli(*args, "--limit", "4", "--concurrency", "16")  # chunks of 32 items instead of 16
    assert rc == 0, err
    assert json.loads((out / "results.json").read_text())["tasks"]["econnli-zero"]["n"] == 4


@pytest.mark.parametrize("how", ["--timeout inf", "--timeout 1e300", "-M timeout=inf", "config"])
def test_a_timeout_past_a_day_or_not_finite_is_one_usage_line(cli, tmp_path, server, how):
    """It was an OverflowError from the socket once a server answered; every request's deadline
    is a time a clock reaches."""
    _, url = server
    args = ["run", "--model", "openai:econ-1", "--base-url", url, "--task", "econnli-zero", "--limit", "1", "--quiet",
            "--out", tmp_path / "r"]
    if how == "config":
        conf = tmp_path / "eval.toml"
        conf.write_text("[run.model_options]\ntimeout = inf\n")
        args += ["--config", conf]
    else:
        args += how.split()
    one_line(*cli(*args), 2, "timeout", "out of range (0.1 to 86400 seconds)")


def test_no_retry_is_sent_once_a_signal_asked_the_run_to_stop(tmp_path, server):
    """A request that failed waits, then is sent again: after a Ctrl-C the wait ended but the retry
    went out all the same (CI saw "HTTP 500; retrying" after the SIGINT was acknowledged). A
    signal's stop flag now ends the retries: nothing reaches the server after it."""
    import signal

    from econeval import signals
    from econeval.api import evaluate
    from econeval.errors import ModelError
    from econeval.run.selection import Limit
    from econeval.run.spec import RunSpec

    state, url = server
    said: list[float] = []

    def scored() -> int:
        return sum(1 for _, b in list(state.bodies) if b.get("prompt") != PROBE)

    def stop_after_the_first_request():
        deadline = time.monotonic() + 30
        while not scored() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # its 500 is in: the worker waits to try again
        signals._request_stop(signal.SIGINT)  # what the run's signal watcher does at a Ctrl-C
        said.append(len(state.bodies))

    threading.Thread(target=stop_after_the_first_request, daemon=True).start()
    spec = RunSpec(model="openai:failing", model_options={"base_url": url, "max_retries": 5}, progress=False)
    with pytest.raises(ModelError, match="stopped"):
        evaluate(spec, ["econnli-zero"], out=tmp_path / "run", bootstrap=0, selection=Limit(1))
    time.sleep(1.0)
    assert said and len(state.bodies) == said[0], (said, len(state.bodies))


def test_a_signal_the_kernel_gives_another_thread_still_stops_the_run_at_once(tmp_path, server):
    """A process's SIGINT may be delivered to any of its threads; Python runs its handler on the main
    thread only when that thread runs Python again. With two chunks in flight the run's thread
    waited for the chunks' next event without a timeout, so a signal taken by an HTTP worker
    waited for the next answer (30 s here; a CI run timed out on it). It now waits a tick at a time."""
    import signal

    from econeval.api import evaluate
    from econeval.errors import Interrupted
    from econeval.run.selection import Limit
    from econeval.run.spec import RunSpec

    state, url = server
    sent: list[float] = []

    def signal_a_worker():
        deadline = time.monotonic() + 30
        while sum(1 for _, b in list(state.bodies) if b.get("prompt") != PROBE) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        worker = next(t for t in threading.enumerate() if t.name == "econeval-http")
        sent.append(time.monotonic())
        signal.pthread_kill(worker.ident, signal.SIGINT)

    threading.Thread(target=signal_a_worker, daemon=True).start()
    spec = RunSpec(model="openai:slow", model_options={"base_url": url}, progress=False)
    with pytest.raises(Interrupted):
        evaluate(spec, ["econnli-zero"], out=tmp_path / "run", bootstrap=0, selection=Limit(8))
    assert sent and time.monotonic() - sent[0] < 10, "the run waited for the server's answer"
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "interrupted"
