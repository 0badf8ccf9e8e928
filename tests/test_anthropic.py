"""The Anthropic Messages API adapter against a real HTTP server on 127.0.0.1 that answers like it
(x-api-key, content blocks, 529 overloaded once per prompt, no log-probabilities)."""

import json
import re

import pytest

from conftest import read_lines
from fake_http import JSONHandler, serve

KEY = "sk-ant-test-0123456789abcdef"


class Messages(JSONHandler):
    seen: list = []
    overloaded: set = set()

    def do_GET(self):
        if self.path == "/v1/models" and self.headers.get("x-api-key") == KEY:
            return self._send(200, {"data": [{"id": "claude-test", "type": "model", "display_name": "Claude Test"}]})
        self._send(401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})

    def do_POST(self):
        body = self.read_json()
        Messages.seen.append((self.path, body, dict(self.headers)))
        if self.headers.get("x-api-key") != KEY or self.headers.get("anthropic-version") != "2023-06-01":
            return self._send(401, {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}})
        prompt = body["messages"][0]["content"]
        if prompt not in Messages.overloaded:
            Messages.overloaded.add(prompt)
            return self._send(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
                              {"retry-after": "0"})
        if "SINGLE LETTER" in prompt and "A. " in prompt:  # STEER-ME direct: answer with the first option's letter
            text = "(A) because the first option follows."
        else:
            text = " Yes, it does." if "increase" in prompt[-300:] else " No."
        self._send(200, {"type": "message", "role": "assistant", "content": [{"type": "text", "text": text}],
                         "stop_reason": "end_turn", "usage": {"input_tokens": 12, "output_tokens": 5}})


@pytest.fixture(scope="module")
def server():
    srv, url = serve(Messages)
    yield url
    srv.shutdown()


def test_messages_api_run(cli, tmp_path, server):
    out = tmp_path / "run"
    env = {"ANTHROPIC_API_KEY": KEY}
    rc, stdout, err = cli("run", "--model", "anthropic:claude-test", "--base-url", server, "--task", "econnli-zero",
                          "--task", "steer-me", "--limit", "2", "--concurrency", "4", "--quiet", "--out", out, env=env)
    assert rc == 0, err
    res = json.loads((out / "results.json").read_text())["tasks"]
    assert res["econnli-zero"]["n_unparsed"] == 0 and res["econnli-zero"]["n_errors"] == 0
    steer = res["steer-me"]["paper"]["overall"]
    assert steer["no_answer_rate"] == 0.0 and steer["renormalized"] is None  # letters read from text, no calibration
    samples = [s for s in read_lines(out / "samples.jsonl") if s["task"] == "steer-me"]
    assert all(s["parsed"] == 0 for s in samples)  # "(A) because ..." → A
    bodies = [b for p, b, _ in Messages.seen if p == "/v1/messages"]
    assert bodies and all("seed" not in b and "logprobs" not in b and b["temperature"] == 0 for b in bodies)
    assert all(" " not in (b.get("stop_sequences") or []) for b in bodies)
    letters = [b for b in bodies if "A. " in b["messages"][0]["content"]]
    assert letters and all(b["max_tokens"] == 8 for b in letters)  # room for "(A) ...", not one token  # EconNLI's " " applied client-side
    meta = json.loads((out / "run.json").read_text())
    assert meta["backend"]["backend"] == "Anthropic Messages API" and meta["backend"]["model"]["served"]["id"] == "claude-test"
    assert meta["timing"]["econnli-zero"]["retries"] >= 2  # every prompt was "overloaded" once
    text = stdout + err + "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert KEY not in text and not re.search(r"sk-ant-\w{6,}", text)


def test_messages_api_errors(cli, tmp_path, server):
    rc, _, err = cli("run", "--model", "anthropic:claude-test", "--base-url", server, "--task", "econnli-zero",
                     "--limit", "1", "--out", tmp_path / "a", env={"ANTHROPIC_API_KEY": "wrong"})
    assert rc == 1 and "HTTP 401" in err and "Traceback" not in err



def test_no_repetition_penalty_in_the_messages_api(server, monkeypatch):
    from econeval.backends.anthropic_http import AnthropicBackend
    from econeval.run.roles import resolve, with_options
    from econeval.errors import ModelError
    from econeval.types import Generate

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    be = AnthropicBackend(with_options(resolve("anthropic:claude-test"), {"base_url": server}))
    assert be.generate([Generate(prompt="prices increase", max_tokens=4)])[0].text.startswith(" Yes")
    with pytest.raises(ModelError, match="repetition penalty 1.05"):
        be.generate([Generate(prompt="prices increase", max_tokens=4, repeat_penalty=1.05)])
