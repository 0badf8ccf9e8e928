"""Several servers of one model behind repeated --base-url: requests spread over them (fewest in
flight), a server that dies mid-run is taken out and the run finishes on the others with the same
answers as a one-server run, servers of different models are refused before any item runs, and the
run's identity is the model (a run resumes with more or fewer servers)."""

import hashlib
import json
import socket
import threading

from conftest import read_lines
from fake_http import JSONHandler, serve


class Server(JSONHandler):
    """Deterministic answers from the prompt; `root` names the model; `die_after` requests, then
    every connection is dropped (a killed server)."""

    root = "econ-7b"
    die_after = None
    count = 0
    lock = threading.Lock()

    def do_GET(self):
        self._send(200, {"object": "list", "data": [{"id": "m", "owned_by": "me", "root": type(self).root}]})

    def do_POST(self):
        body = self.read_json()
        cls = type(self)
        with cls.lock:
            cls.count += 1
            dead = cls.die_after is not None and cls.count > cls.die_after
        if dead:
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        yes = hashlib.sha256(body["prompt"].encode()).digest()[0] % 2 == 0
        choice = {"text": " Yes" if yes else " No", "finish_reason": "stop"}
        if "logprobs" in body:
            choice["logprobs"] = {"top_logprobs": [{" Yes": -0.2 if yes else -1.9, " No": -1.9 if yes else -0.2}]}
        self._send(200, {"choices": [choice], "usage": {"prompt_tokens": 5, "completion_tokens": 1}})


def _servers(*specs):
    out = []
    for root, die in specs:
        cls = type("S", (Server,), {"root": root, "die_after": die, "count": 0, "lock": threading.Lock()})
        out.append((cls,) + serve(cls))
    return out


ARGS = ("run", "--model", "openai:m", "--task", "econnli-zero", "--limit", "48", "--quiet", "--max-retries", "1",
        "--concurrency", "4", "--bootstrap", "0")


def test_two_servers_share_the_work_and_one_dying_changes_no_answer(cli, tmp_path):
    (a_cls, a, url_a), (b_cls, b, url_b) = _servers(("econ-7b", None), ("econ-7b", None))
    (c_cls, c, url_c), = _servers(("econ-7b", None))
    try:
        rc, _, err = cli(*ARGS, "--base-url", url_c, "--out", tmp_path / "one")
        assert rc == 0, err
        rc, _, err = cli(*ARGS, "--base-url", url_a, "--base-url", url_b, "--out", tmp_path / "two")
        assert rc == 0, err
        meta = json.loads((tmp_path / "two" / "run.json").read_text())
        answered = [s["answered"] for s in meta["backend"]["servers"]]
        assert all(n > 0 for n in answered) and sum(answered) == a_cls.count + b_cls.count, answered
        assert meta["identity"]["model"]["model"] == json.loads((tmp_path / "one" / "run.json").read_text())["identity"]["model"]["model"]
        # one server dies after 10 requests: the run finishes on the other, with the same answers
        a_cls.count, a_cls.die_after, b_cls.count = 0, 10, 0
        rc, _, err = cli(*ARGS, "--base-url", url_a, "--base-url", url_b, "--out", tmp_path / "failover")
        assert rc == 0, err
        assert "taken out" in err
        meta = json.loads((tmp_path / "failover" / "run.json").read_text())
        servers = meta["backend"]["servers"]
        assert "taken_out" in servers[0] and "taken_out" not in servers[1] and servers[1]["answered"] > 0
        key = lambda s: s["id"]  # noqa: E731
        one = [(s["id"], s["response"], s["option_logprobs"]) for s in sorted(read_lines(tmp_path / "one" / "samples.jsonl"), key=key)]
        got = [(s["id"], s["response"], s["option_logprobs"]) for s in sorted(read_lines(tmp_path / "failover" / "samples.jsonl"), key=key)]
        assert got == one
        # the run's identity is the model: the two-server folder resumes with one server
        rc, _, err = cli(*ARGS, "--base-url", url_c, "--out", tmp_path / "two")
        assert rc == 0, err
    finally:
        for srv in (a, b, c):
            srv.shutdown()


def test_servers_of_different_models_are_refused_before_any_item(cli, tmp_path):
    (x_cls, x, url_x), (y_cls, y, url_y) = _servers(("econ-7b", None), ("other-13b", None))
    try:
        rc, _, err = cli(*ARGS, "--base-url", url_x, "--base-url", url_y, "--out", tmp_path / "r")
        assert rc == 1 and "serve different models" in err and len(err.strip().splitlines()) == 1, err
        assert x_cls.count == y_cls.count == 0 and not (tmp_path / "r" / "samples.jsonl").exists()
    finally:
        x.shutdown()
        y.shutdown()


def test_a_registry_entry_may_list_servers(cli, tmp_path):
    (a_cls, a, url_a), (b_cls, b, url_b) = _servers(("econ-7b", None), ("econ-7b", None))
    try:
        reg = tmp_path / "models.toml"
        reg.write_text(f'[models.pool]\nbase_url = ["{url_a}", "{url_b}"]\napi_model = "m"\nchat = "off"\n')
        rc, _, err = cli("run", "--model", "pool", "--task", "econnli-zero", "--limit", "16", "--quiet", "--bootstrap", "0",
                         "--out", tmp_path / "r", env={"ECONEVAL_MODELS": str(reg)})
        assert rc == 0, err
        assert a_cls.count > 0 and b_cls.count > 0
    finally:
        a.shutdown()
        b.shutdown()


class Switching(Server):
    """Answers name the model asked for, then (after `switch_after` requests) another model; its
    system_fingerprint changes at the same point."""

    switch_after = 10

    def _send(self, code, doc, headers=None):
        cls = type(self)
        switched = cls.count > cls.switch_after
        if "choices" in doc:
            doc = {**doc, "model": "other-model" if switched and cls.root == "switching" else "m",
                   "system_fingerprint": "fp_b" if switched else "fp_a"}
        super()._send(code, doc, headers)


def test_answers_from_another_model_are_never_kept_and_a_fingerprint_change_is_said(cli, tmp_path):
    servers = []
    for root in ("econ-7b", "switching"):
        cls = type("W", (Switching,), {"root": root, "count": 0, "lock": threading.Lock()})
        servers.append((cls,) + serve(cls))
    # both report the same root to /v1/models: one model behind two servers, until one changes
    for cls, *_ in servers:
        cls.do_GET = lambda self: self._send(200, {"object": "list", "data": [{"id": "m", "owned_by": "me", "root": "econ-7b"}]})
    try:
        out = tmp_path / "run"
        rc, _, err = cli(*ARGS, *sum((["--base-url", url] for _, _, url in servers), []), "--out", out)
        assert rc == 0, err
        assert "another model ('other-model', not 'm')" in err and "taken out" in err
        assert "system_fingerprint fp_b after fp_a" in err
        samples = read_lines(out / "samples.jsonl")
        assert len(samples) == 48 and all(not s.get("error") for s in samples)
        served = json.loads((out / "run.json").read_text())["backend"]
        assert served["system_fingerprints"] == ["fp_a", "fp_b"]
    finally:
        for _, srv, _ in servers:
            srv.shutdown()
