"""Answers from a served model that are impossible, endless, oversized or of the wrong type: each an
item error or one line, with bounded memory; the model a server names."""

from __future__ import annotations

import gzip
import json
import time

import pytest
from conftest import one_line, peak_rss_mib, read_lines
from fake_http import JSONHandler, serve


class Bad(JSONHandler):
    mode = ""

    def do_GET(self):
        self._send(200, {"object": "list", "data": [{"id": "m", "owned_by": "me"}]})

    def do_POST(self):
        body = self.read_json()
        mode = type(self).mode
        text = " Yes"
        if mode == "drip":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            for ch in json.dumps({"choices": [{"text": text}]}):
                self.wfile.write(ch.encode())
                self.wfile.flush()
                time.sleep(0.3)
            return
        if mode == "huge":
            return self._send_raw(200, b'{"choices": [{"text": "' + b"x" * (20 << 20) + b'"}]}')
        if mode == "bomb":
            data = gzip.compress(b'{"choices": [{"text": "' + b"x" * (64 << 20) + b'"}]}')
            return self._send_raw(200, data, {"Content-Encoding": "gzip"})
        if mode == "longtext":
            return self._send(200, {"choices": [{"text": "y" * 200_000, "finish_reason": "length"}]})
        if mode == "wrongtype":
            return self._send(200, {"choices": [{"text": 42}], "usage": []})
        lp = {"above": {" A": 0.5, " B": -1.0}, "sum": {" A": -0.1, " B": -0.2}, "bignum": {" A": 1e308}}.get(mode)
        choice = {"text": text, "finish_reason": "stop"}
        if "logprobs" in body and lp is not None:
            choice["logprobs"] = {"top_logprobs": [lp], "tokens": [" Yes"]}
        self._send(200, {"choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 1}})


@pytest.fixture
def bad_server():
    srv, url = serve(Bad)
    yield url
    srv.shutdown()


def _served(cli, tmp_path, url, mode, *extra, task="econnli-zero"):
    Bad.mode = mode
    return cli("run", "--model", "openai:m", "--base-url", url, "--task", task, "--limit", "2", "--quiet",
               "--max-retries", "0", "--out", tmp_path / f"run-{mode}", *extra, timeout=120)


@pytest.mark.parametrize("mode,needle", [("above", "above 0"), ("sum", "more than 1"), ("bignum", "above 0")])
def test_impossible_log_probabilities_are_item_errors(cli, tmp_path, bad_server, mode, needle):
    rc, out, err = _served(cli, tmp_path, bad_server, mode, task="steer-me")
    assert rc == 1 and "item(s) with errors" in err and needle in err and "internal error" not in err, err
    res = json.loads((tmp_path / f"run-{mode}" / "results.json").read_text())["tasks"]["steer-me"]
    assert res["n_errors"] == res["n"] and res["paper"]["overall"]["accuracy"] is None


def test_a_dripping_server_is_cut_off_at_the_timeout(cli, tmp_path, bad_server):
    t0 = time.monotonic()
    rc, out, err = _served(cli, tmp_path, bad_server, "drip", "--timeout", "1")
    assert time.monotonic() - t0 < 30
    one_line(rc, out, err, 1, "no answer within 1 s")


@pytest.mark.parametrize("mode", ["huge", "bomb"])
def test_oversized_answers_are_refused_with_bounded_memory(cli, tmp_path, bad_server, mode):
    one_line(*_served(cli, tmp_path, bad_server, mode), 1, "more than 16 MiB")
    Bad.mode = mode
    peak, err = peak_rss_mib(["run", "--model", "openai:m", "--base-url", bad_server, "--task", "econnli-zero", "--limit", "1",
                              "--quiet", "--max-retries", "0", "--out", tmp_path / "peak"], {})
    assert "more than 16 MiB" in err and peak < 300, (peak, err)  # the audit saw 447 MB for a 100 MB body


def test_a_stored_answer_is_at_most_what_the_request_could_produce(cli, tmp_path, bad_server):
    rc, _, err = _served(cli, tmp_path, bad_server, "longtext", task="econlogicqa-1shot")
    assert rc == 0, err
    samples = read_lines(tmp_path / "run-longtext" / "samples.jsonl")
    assert all(len(s["response"]) <= 64 * 128 for s in samples)
    assert json.loads((tmp_path / "run-longtext" / "run.json").read_text())["timing"]["econlogicqa-1shot"]["oversized_answers"] == 2


def test_answers_of_the_wrong_type_are_malformed_not_internal_errors(cli, tmp_path, bad_server):
    one_line(*_served(cli, tmp_path, bad_server, "wrongtype"), 1, "not a completion", bad_server)


def test_a_served_answer_names_the_model_asked_for_or_a_dated_or_tagged_version_of_it():
    from econeval.backends.http_client import same_model

    assert same_model("gpt-4o-2024-08-06", "gpt-4o") and same_model("llama3:latest", "llama3") and same_model("m", "m")
    assert same_model("llama3", "llama3:latest")
    assert not same_model("other-model", "m") and not same_model("gpt-4", "gpt-4o") and not same_model("m2", "m")
