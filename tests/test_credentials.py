"""Credentials: a password in a URL is sent as basic auth and never stored or shown, in any output; a base URL is checked whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import one_line
from fake_http import JSONHandler, serve

PASSWORDS = ("hunter2", "s3cr@t-pw", "t-pw", "pa ss")


class Plain(JSONHandler):
    """An OpenAI-compatible server that answers 'Yes' to every prompt (it takes basic auth)."""

    def do_GET(self):
        self._send(200, {"data": [{"id": "m1", "owned_by": "vllm"}]})

    def do_POST(self):
        self.read_json()
        self._send(200, {"choices": [{"text": " Yes", "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 1}})


@pytest.fixture
def plain_server():
    srv, url = serve(Plain)
    yield url
    srv.shutdown()


def _leaks(text: str) -> list[str]:
    return [p for p in PASSWORDS if p in text]


def _tree_text(root: Path) -> str:
    return "\n".join(p.read_text("utf-8", "replace") for p in root.rglob("*") if p.is_file())


def test_no_password_in_any_output(cli, tmp_path, plain_server, monkeypatch):
    """A password planted in every input path (the command line's --base-url, a models.toml
    entry, a --config file's model options; at the first '@' and after an e-mail user name) is in
    no output: run.json, samples, results, reports, pages, JUnit, listings, messages, hints."""
    from econeval.api import resume_hint

    host = plain_server.split("://", 1)[1]
    urls = [f"http://alice:s3cr@t-pw@{host}/v1", f"http://bob@corp.example:hunter2@{host}/v1"]
    reg = tmp_path / "models.toml"
    reg.write_text(f'[models.served]\nbase_url = "{urls[1]}"\napi_model = "m1"\n')
    monkeypatch.setenv("ECONEVAL_MODELS", str(reg))
    conf = tmp_path / "run.toml"
    conf.write_text(f'[run]\ntasks = ["econnli-zero"]\nlimit = 3\n[run.model_options]\nbase_url = "{urls[0]}"\napi_model = "m1"\n')
    outputs = []
    runs = []
    for n, args in enumerate((("--model", "openai:m1", "--base-url", urls[0]), ("--model", "served"),
                              ("--model", "openai:m1", "--config", conf))):
        out = tmp_path / f"run{n}"
        rc, so, se = cli("run", *args, "--task", "econnli-zero", "--limit", "3", "--out", out, "-q", "--bootstrap", "0")
        assert rc == 0, se
        outputs += [so, se, _tree_text(out)]
        runs.append(out)
    for fmt in ("md", "json", "html"):
        rc, so, se = cli("report", *runs, "--format", fmt, "--out", tmp_path / f"report.{fmt}")
        assert rc == 0, se
        outputs += [so, se, (tmp_path / f"report.{fmt}").read_text()]
    rc, so, se = cli("view", runs[0], "--out", tmp_path / "page.html")
    outputs += [so, se, (tmp_path / "page.html").read_text()]
    rc, so, se = cli("compare", runs[0], runs[2], "--junit", tmp_path / "c.xml")
    outputs += [so, se, (tmp_path / "c.xml").read_text()]
    for extra in ((), ("--json",)):
        rc, so, se = cli("models", "list", *extra)
        assert rc == 0, se
        outputs += [so, se]
    rc, so, se = cli("runs", tmp_path, "--json")
    outputs += [so, se]
    rc, so, se = cli("run", "--model", "openai:m1", "--base-url", "http://carol:hunter2@127.0.0.1:9/v1", "--task", "econnli-zero",
                     "--out", tmp_path / "down", "-q")
    assert rc == 1
    outputs += [so, se]
    rc, so, se = cli("run", "--model", "openai:m1", "--base-url", "http://dave:pa ss@127.0.0.1:9/v1", "--task", "econnli-zero",
                     "--out", tmp_path / "space", "-q")
    assert rc == 2 and len(se.strip().splitlines()) <= 2
    outputs += [so, se]
    outputs.append(resume_hint(["econeval", "run", "--base-url", urls[1], "--new"], tmp_path / "x"))
    leaks = [(i, _leaks(o)) for i, o in enumerate(outputs) if _leaks(o)]
    assert not leaks, leaks


def test_hide_credentials_splits_at_the_last_at():
    from econeval.errors import hide_credentials

    assert hide_credentials("http://alice:s3cr@t-pw@host:8000/v1") == "http://[redacted]@host:8000/v1"
    assert hide_credentials("x http://bob@corp.example:hunter2@host/v1 y") == "x http://[redacted]@host/v1 y"
    assert hide_credentials("http://host/v1?mail=a@b") == "http://host/v1?mail=a@b"


class _BasicAuthServer(JSONHandler):
    """Answers every completion 'Yes' when the request carries basic auth alice:s3cret."""

    seen: list = []

    def do_GET(self):
        self._send(404, {})

    def do_POST(self):
        self.read_json()
        _BasicAuthServer.seen.append(self.headers.get("Authorization"))
        if self.headers.get("Authorization") != "Basic YWxpY2U6czNjcmV0":  # alice:s3cret
            return self._send(401, {"error": "no"})
        self._send(200, {"choices": [{"text": " Yes", "finish_reason": "stop"}]})


def test_a_password_in_a_url_is_sent_as_basic_auth_and_never_stored_or_shown(cli, tmp_path):
    """Issue #33 item 10: user:password@ in a URL was stored four times in run.json and printed in errors."""
    srv, url = serve(_BasicAuthServer)
    try:
        secret = url.replace("http://", "http://alice:s3cret@")
        out = tmp_path / "run"
        rc, _, err = cli("run", "--model", "openai:m", "--base-url", secret, "--task", "econnli-zero", "--limit", "2",
                         "--quiet", "--out", out)
        assert rc == 0, err
        assert set(_BasicAuthServer.seen) == {"Basic YWxpY2U6czNjcmV0"}
        assert not any("s3cret" in p.read_text() for p in out.iterdir() if p.is_file()) and "s3cret" not in err
        meta = json.loads((out / "run.json").read_text())
        assert "http://[redacted]@" in " ".join(meta["command"])
    finally:
        srv.shutdown()
    line = one_line(*cli("run", "--model", "openai:m", "--base-url", "http://bob:hunter2@127.0.0.1:9/v1", "--task",
                         "econnli-zero", "--limit", "1", "--out", tmp_path / "r2"), 1, "cannot reach")
    assert "hunter2" not in line


@pytest.mark.parametrize("url,needle", [("http://127.0.0.1:8000/v1\r\nX-Evil: 1", "control character"),
                                        ("http://127.0.0.1:8000/v1 http://evil.invalid", "a space"),
                                        ("http://127.0.0.1:99999/v1", "out of range"), ("ftp://127.0.0.1/v1", "http://"),
                                        ("http://:8000/v1", "host")])
def test_a_base_url_is_checked_whole_not_by_its_start(cli, tmp_path, url, needle):
    """Issue #33 items 8 and 10: CR/LF gave an internal InvalidURL; a second URL after a space was accepted."""
    one_line(*cli("run", "--model", "openai:m", "--base-url", url, "--task", "econnli-zero", "--limit", "1",
                  "--out", tmp_path / "r"), 2, "base_url must be one http:// or https:// URL", needle)
    assert not (tmp_path / "r").exists()


ECHO_KEY = "sk-echo-4f1c9a7e2b"
ECHO_PASSWORD = "pw-echo-8d3b"  # the base URL's alice:pw-echo-8d3b@, sent as basic auth
ECHO_HEADER_KEY = "sk-ant-echo-71c2e0b9d4"  # Anthropic's x-api-key


class _Echo(JSONHandler):
    """A server that echoes the credentials it was sent in everything it answers: its model list,
    the completion's text (after an answer the task parses), a reasoning field, and Anthropic's
    text and thinking blocks."""

    def _sent(self) -> str:
        return f"authorization={self.headers.get('Authorization')} x-api-key={self.headers.get('x-api-key')}"

    def do_GET(self):
        self._send(200, {"data": [{"id": "m1", "owned_by": "vllm", "root": f"m1 {self._sent()}"},
                                  {"id": "claude-echo", "type": "model", "display_name": self._sent()}]})

    def do_POST(self):
        body = self.read_json()
        echo = self._sent()
        if self.path == "/v1/messages":
            return self._send(200, {"type": "message", "role": "assistant", "stop_reason": "end_turn",
                                    "content": [{"type": "thinking", "thinking": f"I was sent {echo}"},
                                                {"type": "text", "text": f"Yes (A) {echo}"}],
                                    "usage": {"input_tokens": 12, "output_tokens": 5}})
        message = {"role": "assistant", "content": f"Yes (A) {echo}", "reasoning_content": f"I was sent {echo}"}
        choice = {"message": message} if "messages" in body else {"text": f" Yes (A) {echo}"}
        self._send(200, {"model": "m1", "system_fingerprint": f"fp {echo}",
                         "choices": [{**choice, "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 9}})


def _readable(path: Path) -> str:
    """A file's text; a zip archive's (an Inspect `.eval` log) members' text."""
    import zipfile

    if zipfile.is_zipfile(path):
        import inspect_ai.log  # noqa: F401 - registers the zstd compression of an .eval log's members with zipfile
        with zipfile.ZipFile(path) as z:
            return "\n".join(z.read(n).decode("utf-8", "replace") for n in z.namelist())
    return path.read_text("utf-8", "replace")


@pytest.mark.parametrize("sent", ["key", "password", "header"])
def test_a_secret_a_server_echoes_is_in_no_file_export_or_page(cli, tmp_path, sent):
    """Issue #56 item 1: a key the server echoed in its answer was stored in samples.jsonl and
    run.json and published by `view` and the exports. Every secret econeval sends (the API key as
    a bearer token, a base URL's password as basic auth, Anthropic's x-api-key header) is in no
    file of the run folder, no export, no page, no report and no message."""
    import base64

    srv, url = serve(_Echo)
    try:
        host = url.split("://", 1)[1]
        if sent == "key":
            args = ("--model", "openai:m1", "--base-url", url, "--api-key-env", "ECHO_KEY", "--chat", "on")
            env, secrets = {"ECHO_KEY": ECHO_KEY}, [ECHO_KEY]
        elif sent == "password":
            args = ("--model", "openai:m1", "--base-url", f"http://alice:{ECHO_PASSWORD}@{host}/v1", "--chat", "on")
            env, secrets = {}, [ECHO_PASSWORD, base64.b64encode(f"alice:{ECHO_PASSWORD}".encode()).decode()]
        else:
            args = ("--model", "anthropic:claude-echo", "--base-url", url, "--api-key-env", "ECHO_KEY")
            env, secrets = {"ECHO_KEY": ECHO_HEADER_KEY}, [ECHO_HEADER_KEY]
        out = tmp_path / "run"
        rc, so, se = cli("run", *args, "--task", "econnli-zero", "--task", "steer-me", "--limit", "2", "-q", "--bootstrap", "0",
                         "--out", out / sent, env=env)
        assert rc == 0, se
        outputs = [so, se]
    finally:
        srv.shutdown()
    exports = tmp_path / "exports"
    for run in sorted(p for p in out.iterdir() if p.is_dir()):
        samples = (run / "samples.jsonl").read_text()
        assert "Yes" in samples and "[redacted]" in samples  # the answers are kept, the secrets in them replaced
        for fmt, name in (("table", "t.csv"), ("lm-eval", "l.json"), ("every-eval-ever", "e.json"), ("inspect", "inspect")):
            if fmt == "inspect":
                pytest.importorskip("inspect_ai", reason="the inspect extra (installed by tools/bootstrap.sh)")
            rc, so, se = cli("export", run, "--format", fmt, "--out", exports / run.name / name)
            assert rc == 0, se
            outputs += [so, se]
        rc, so, se = cli("view", run, "--out", exports / f"{run.name}.html")
        assert rc == 0, se
        rc2, so2, se2 = cli("report", run, "--format", "html", "--out", exports / f"{run.name}.report.html")
        assert rc2 == 0, se2
        outputs += [so, se, so2, se2]
    files = [p for root in (out, exports) for p in root.rglob("*") if p.is_file()]
    leaks = [(str(p.relative_to(tmp_path)), s) for p in files for s in secrets if s in _readable(p)]
    leaks += [("output", s) for o in outputs for s in secrets if s in o]
    assert not leaks, leaks


def test_a_placeholder_key_is_left_in_the_answers_it_would_change():
    """A key of fewer than 8 characters (EMPTY, none: what a keyless local server is sent) is not
    cut out of a model's answers, which would change them; a real key is, and every key is still
    cut out of a server's error text."""
    from econeval.backends.http_client import Redactor

    doc = {"choices": [{"text": "none of the above; sk-real-0123456789 and none"}]}
    assert Redactor("none").answer(doc) == doc
    assert Redactor("sk-real-0123456789").answer(doc)["choices"][0]["text"] == "none of the above; [redacted] and none"
    assert Redactor("none")("server said: none") == "server said: [redacted]"
