"""Answers from a served model that are impossible, endless, oversized or of the wrong type: each an
item error or one line, with bounded memory; the model a server names. Every endpoint econeval
reads (/v1/models, the template reads, completions, OpenAI's and Anthropic's) within its deadline."""

from __future__ import annotations

import gzip
import itertools
import json
import time

import pytest
from conftest import one_line, peak_rss_mib, read_lines
from fake_http import JSONHandler, serve

from econeval.backends.openai_http import PROBE

DEEP = b"[" * 100_000 + b"]" * 100_000  # valid JSON, nested deeper than Python's parser goes


class Bad(JSONHandler):
    mode = ""
    probes = 0  # reasoning probes answered (probe409)

    def _drip(self):
        """An answer that never ends: its status line, then header after header, a byte every 0.2 s
        (each read gets a byte long before a read timeout)."""
        try:
            for b in itertools.chain(b"HTTP/1.1 200 OK\r\n", itertools.cycle(b"X-Slow: 1\r\n")):
                self.wfile.write(bytes([b]))
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:  # the client gave up
            return

    def do_GET(self):
        mode = type(self).mode
        if mode == f"drip:{self.path}":
            return self._drip()
        if mode == "models-bomb":  # 64 MiB of model name in 64 KiB
            return self._send_raw(200, gzip.compress(b'{"data": [{"id": "' + b"x" * (64 << 20) + b'"}]}'), {"Content-Encoding": "gzip"})
        if mode == "models-longid":  # within the size cap: a 4 MiB name
            return self._send(200, {"data": [{"id": "x" * (4 << 20)}]})
        if mode == "models-deep":
            return self._send_raw(200, DEEP)
        if mode == "models-bigint":
            return self._send(200, {"data": [{"id": "m", "owned_by": "me", "max_model_len": 2 ** 70}]})
        self._send(200, {"object": "list", "data": [{"id": "m", "owned_by": "me"}]})

    def do_POST(self):
        body = self.read_json()
        mode = type(self).mode
        if mode == f"drip:{self.path}":
            return self._drip()
        if self.path in ("/apply-template", "/tokenize"):
            return self._send(404, {"error": {"message": "not found"}})
        probe = (body.get("prompt") or body.get("messages", [{}])[-1].get("content")) == PROBE
        text = " Yes \ud800 indeed" if mode == "surrogate" else " Yes"
        usage = {"prompt_tokens": 2 ** 70 if mode == "bigint" and not probe else 3, "completion_tokens": 1}
        if self.path == "/v1/messages":  # Anthropic's Messages API
            return self._send(200, {"type": "message", "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                                    "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": 1}})
        if mode == "deep" and not probe:
            return self._send_raw(200, b'{"choices": [{"text": ' + DEEP + b"}]}")
        if mode == "probe409" and probe:
            type(self).probes += 1
            return self._send(409, {"error": {"message": "conflict"}}, {"Retry-After": "0"})
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
        lp = {"above": {" A": 0.5, " B": -1.0}, "sum": {" A": -0.1, " B": -0.2}, "bignum": {" A": 1e308},
              "hugeint": {" A": 10 ** 400, " B": -1.0}, "string": {" A": "low", " B": -1.0},
              "lp": {" Yes": -0.1, " No": -2.4}, "bigneg": {" Yes": -(2 ** 70), " No": -0.1}}.get(mode)
        choice = {"text": text, "finish_reason": "stop"}
        if "logprobs" in body and lp is not None:
            choice["logprobs"] = {"top_logprobs": [lp], "tokens": [" Yes"]}
        if "messages" in body:
            choice = {"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        self._send(200, {"choices": [choice], "usage": usage})


@pytest.fixture
def bad_server():
    srv, url = serve(Bad)
    yield url
    srv.shutdown()


def _served(cli, tmp_path, url, mode, *extra, task="econnli-zero"):
    Bad.mode = mode
    return cli("run", "--model", "openai:m", "--base-url", url, "--task", task, "--limit", "2", "--quiet",
               "--max-retries", "0", "--out", tmp_path / f"run-{mode}", *extra, timeout=120)


@pytest.mark.parametrize("mode,needle", [("above", "above 0"), ("sum", "more than 1"), ("bignum", "above 0"),
                                         ("hugeint", "non-finite"), ("string", "non-finite")])
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


@pytest.mark.parametrize("path,rc,needle", [("/v1/models", 1, "/v1/models did not answer within 1 s"),
                                            ("/apply-template", 0, None), ("/tokenize", 0, None),
                                            ("/v1/chat/completions", 1, "no answer within 1 s")])
def test_a_server_dripping_any_endpoint_is_given_up_on_at_the_timeout(cli_process, tmp_path, bad_server, path, rc, needle):
    """A byte every 0.2 s, status line and headers included, never ends a read timeout: each request
    has a deadline of its own (it used to wait forever). A template read given up on leaves the
    template unread; the run goes on."""
    Bad.mode = f"drip:{path}"
    t0 = time.monotonic()
    result = cli_process("run", "--model", "openai:m", "--base-url", bad_server + "/v1", "--chat", "on", "--timeout", "1",
                         "--max-retries", "0", "--task", "econnli-zero", "--limit", "1", "--quiet", "--out", tmp_path / "r",
                         timeout=120)
    assert time.monotonic() - t0 < 30
    if needle:
        one_line(*result, rc, needle)
    else:
        assert result[0] == rc, result


def test_models_check_gives_up_on_a_dripping_model_list(cli_process, bad_server):
    Bad.mode = "drip:/v1/models"
    t0 = time.monotonic()
    rc, out, err = cli_process("models", "check", "openai:m", "--base-url", bad_server, "--timeout", "1", timeout=120)
    assert time.monotonic() - t0 < 30
    one_line(rc, out, err, 1, "did not answer within 1 s")


@pytest.mark.parametrize("mode", ["models-bomb", "models-longid"])
def test_a_model_list_is_read_within_the_size_cap_and_never_echoed_whole(cli, tmp_path, bad_server, mode):
    """/v1/models is read as an answer is (at most 16 MiB decompressed: a gzip bomb took 833 MB),
    and a name it lists is shown clipped (a 128 MiB name made a 134 MB error line)."""
    Bad.mode = mode
    args = ["run", "--model", "openai:m", "--base-url", bad_server, "--task", "econnli-zero", "--limit", "1", "--quiet",
            "--out", tmp_path / "r"]
    line = one_line(*cli(*args), 1, "more than 16 MiB" if mode == "models-bomb" else "does not serve model 'm'")
    assert len(line) < 500
    if mode == "models-bomb":
        peak, err = peak_rss_mib(args, {})
        assert "more than 16 MiB" in err and peak < 300, (peak, err)


@pytest.mark.parametrize("mode", ["models-deep", "models-bigint"])
def test_a_model_list_nested_too_deep_or_with_an_impossible_count_is_not_read(cli, tmp_path, bad_server, mode):
    """Not a crash (RecursionError; orjson's 'Integer exceeds 64-bit range' writing run.json): a list
    econeval cannot read is none, a count no server means is left out of the model's record."""
    Bad.mode = mode
    rc, _, err = cli("run", "--model", "openai:m", "--base-url", bad_server, "--task", "econnli-zero", "--limit", "1",
                     "--quiet", "--out", tmp_path / "r")
    assert rc == 0, err
    served = json.loads((tmp_path / "r" / "run.json").read_text())["backend"]["model"]["served"]
    assert served is None if mode == "models-deep" else served == {"id": "m", "owned_by": "me"}


@pytest.mark.parametrize("mode,needle", [("bigint", "usage.prompt_tokens 1180591620717411303424"), ("deep", "nested too deep")])
def test_an_impossible_count_or_json_nested_too_deep_is_an_item_error(cli, tmp_path, bad_server, mode, needle):
    """A token count past 64 bits (orjson refused to write it) or an answer nested 100,000 deep
    (RecursionError) crashed the run; each is now that item's error, the run finishing."""
    rc, out, err = _served(cli, tmp_path, bad_server, mode)
    assert rc == 1 and "item(s) with errors" in err and needle in err and "internal error" not in err, err
    res = json.loads((tmp_path / f"run-{mode}" / "results.json").read_text())["tasks"]["econnli-zero"]
    assert res["n_errors"] == res["n"] == 2


@pytest.mark.parametrize("model", ["openai:m", "anthropic:m"])
def test_a_lone_surrogate_is_stored_as_a_replacement_character(cli, tmp_path, bad_server, model):
    """"\\ud800" is valid JSON and no character: it crashed the run (sending it on in the next turn,
    or writing samples.jsonl) and every rerun. It is stored as U+FFFD; a rerun resumes."""
    Bad.mode = "surrogate"
    out = tmp_path / "r"
    args = ("run", "--model", model, "--base-url", bad_server, "--task", "econnli-gen", "--quiet", "--out", out)
    for limit in ("2", "3"):  # the second resumes the first
        rc, _, err = cli(*args, "--limit", limit)
        assert rc == 0, err
    samples = read_lines(out / "samples.jsonl")
    assert len(samples) == 3 and all(s["response"] == " Yes \ufffd indeed" for s in samples)


@pytest.mark.parametrize("model,name", [("openai:m", "option_logprobs"), ("anthropic:m", "option_logprobs")])
def test_served_option_questions_record_the_servers_prompt_tokens(cli, tmp_path, bad_server, model, name):
    Bad.mode = "lp"
    out = tmp_path / "r"
    rc, _, err = cli("run", "--model", model, "--base-url", bad_server, "--task", "econnli-zero", "--limit", "2", "--quiet",
                     "--out", out)
    assert rc == 0, err
    calls = [s["calls"][name] for s in read_lines(out / "samples.jsonl")]
    assert [c["n_prompt_tokens"] for c in calls] == [3, 3], calls


def test_a_log_probability_past_64_bits_is_a_number_stored(cli, tmp_path, bad_server):
    """-2**70 (valid JSON) was written as it came, and orjson refused it: a crash."""
    rc, _, err = _served(cli, tmp_path, bad_server, "bigneg")
    assert rc == 0, err
    scores = [s["option_logprobs"] for s in read_lines(tmp_path / "run-bigneg" / "samples.jsonl")]
    assert scores == [{"Yes": -float(2 ** 70), "No": -0.1}] * 2


def test_the_reasoning_probe_is_sent_at_most_one_plus_max_retries_times(cli, tmp_path, bad_server):
    """It went out twice its budget (the record's detection, then the first request's): 6 times at
    --max-retries 2."""
    Bad.mode, Bad.probes = "probe409", 0
    rc, out, err = cli("run", "--model", "openai:m", "--base-url", bad_server, "--task", "econnli-zero", "--limit", "1",
                       "--max-retries", "2", "--quiet", "--out", tmp_path / "r")
    assert rc == 1 and "failed 3 times in a row; last: HTTP 409" in err and "Traceback" not in err, err
    assert Bad.probes == 3


def test_the_deadline_covers_the_pools_of_the_proxies_the_environment_names(monkeypatch):
    """A proxy's connections (HTTPS_PROXY) are as bounded as direct ones."""
    import httpx

    from econeval.backends.http_deadline import install

    for name in ("ALL_PROXY", "NO_PROXY", "all_proxy", "no_proxy", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    with httpx.Client() as client:
        assert install(client) == 3 and install(client) == 0  # the client's own, the two proxies'; once


def _resolver(monkeypatch, seconds: float) -> list[str]:
    """Names under `.test` resolve to 127.0.0.1 after `seconds` (a resolver that is slow or does
    not answer); every other name as the machine resolves it. Returns the names looked up."""
    import socket

    real, asked = socket.getaddrinfo, []

    def lookup(host, port, *args, **kwargs):
        if isinstance(host, str) and host.endswith(".test"):
            asked.append(host)
            time.sleep(seconds)
            return real("127.0.0.1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    return asked


def test_a_name_lookup_that_does_not_answer_is_within_the_deadline(cli, tmp_path, bad_server, monkeypatch):
    """The deadline bounded every connect, read and write but not the lookup of the server's name,
    which waits on the resolver's own timeouts and retries (here 40 s: the run took that long with
    `--timeout 1`). The lookup now gets the time left too."""
    asked = _resolver(monkeypatch, 40)
    slow = bad_server.replace("127.0.0.1", "slow-dns.test")
    t0 = time.monotonic()
    rc, out, err = _served(cli, tmp_path, slow, "", "--timeout", "1")
    assert time.monotonic() - t0 < 20 and asked
    one_line(rc, out, err, 1, "slow-dns.test", "within 1 s")


def test_a_name_that_resolves_in_time_is_connected_to_by_its_address(cli, tmp_path, bad_server, monkeypatch):
    asked = _resolver(monkeypatch, 0.2)
    rc, out, err = _served(cli, tmp_path, bad_server.replace("127.0.0.1", "fast-dns.test"), "", "--timeout", "5")
    assert rc == 0 and asked, err


def test_tls_still_checks_the_servers_name_when_its_address_is_connected_to(tmp_path, monkeypatch):
    """The deadline connects to the address it looked up; the TLS handshake must still be made
    with, and the certificate checked against, the name in the URL."""
    import shutil
    import ssl
    import subprocess
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import httpx

    from econeval.backends.http_deadline import deadline, install

    if not shutil.which("openssl"):
        pytest.skip("no openssl to make a certificate with")
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                    "-subj", "/CN=tls.test", "-addext", "subjectAltName=DNS:tls.test"], check=True, capture_output=True)

    class Ok(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    srv.socket = server_side.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    _resolver(monkeypatch, 0.0)
    trusted = ssl.create_default_context(cafile=str(cert))
    try:
        for name, ok in (("tls.test", True), ("other.test", False)):
            with httpx.Client(verify=trusted) as client:
                assert install(client) == 1
                with deadline(10):
                    if ok:
                        assert client.get(f"https://{name}:{srv.server_port}/").text == "ok"
                    else:
                        with pytest.raises(httpx.ConnectError, match="certificate|hostname"):
                            client.get(f"https://{name}:{srv.server_port}/")
    finally:
        srv.shutdown()
