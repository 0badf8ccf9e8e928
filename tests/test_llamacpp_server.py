"""A served model through llama-cpp-python's own OpenAI-compatible server (a real server on
127.0.0.1, the `server` extra), against the same GGUF file run in-process."""

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import read_lines

pytestmark = pytest.mark.slow  # the shipped product: wheel, binary or a real server

pytest.importorskip("llama_cpp.server", reason="llama-cpp-python's server extra is part of the test install")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tiny_model, tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(tiny_model), "--model_alias", "tiny",
                                 "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2"],
                                stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/v1/models", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail("llama_cpp.server exited: " + log.read_text()[-2000:])
                time.sleep(0.1)
        else:
            pytest.fail("llama_cpp.server did not start: " + log.read_text()[-2000:])
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("task", ["econnli-zero", "steer-me"])
def test_served_answers_agree_with_the_in_process_run(cli, tmp_path, tiny_registry, llama_server, task):
    served, local = tmp_path / "served", tmp_path / "local"
    rc, _, err = cli("run", "--model", "openai:tiny", "--base-url", llama_server + "/v1", "--task", task, "--limit", "8",
                     "--concurrency", "4", "--quiet", "--out", served, env=tiny_registry)
    assert rc == 0, err
    rc, _, err = cli("run", "--model", "tiny", "--task", task, "--limit", "8", "--quiet", "--out", local, env=tiny_registry)
    assert rc == 0, err
    a = {s["id"]: s for s in read_lines(served / "samples.jsonl")}
    b = {s["id"]: s for s in read_lines(local / "samples.jsonl")}
    assert a.keys() == b.keys() and len(a) >= 8
    assert not any("skipped" in s or "error" in s for s in a.values())  # no item dropped
    agree = sum(a[k]["parsed"] == b[k]["parsed"] for k in a)
    assert agree >= 0.95 * len(a), (agree, len(a))
    meta = json.loads((served / "run.json").read_text())
    assert meta["backend"]["model"]["identity"]["served"]["id"] == "tiny"
    assert meta["backend"]["repeat_penalty_param"] == "repeat_penalty"
