"""Two chunks in flight on a served model (run/runner.py `_overlapped`): the next chunk's requests
go out while this one's last ones are answered, across chunk and task boundaries, so that a
batching server is never left to drain; the samples, their order, an interrupt and its resume
stay what they are with the chunks in turn.

The server here records how many requests it holds over time (counted down before it answers,
so that a count is never one the client has already been told is over) and answers each request
after a latency from its prompt (0.5–1.5 × BASE), the answer from the prompt alone
(tools/served_standin.py)."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO, read_lines
from fake_http import JSONHandler, serve

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from served_standin import answer, weight  # noqa: E402

BASE = 0.3  # seconds of a request of weight 1
C = 8  # --concurrency: chunks of max(16, 2 x 8) = 16 items, 32 requests (EconNLI asks two an item)
TASKS = ("--task", "econnli-zero", "--task", "econnli-icl")
LIMIT = "32"  # two chunks a task, four in all


class Recorder:
    """What a server saw: (time, requests in flight) at each arrival and each change."""

    def __init__(self, fail_at: int | None = None):
        self.lock = threading.Lock()
        self.n = self.posts = 0
        self.arrivals: list[tuple[float, int]] = []
        self.changes: list[tuple[float, int]] = []
        self.fail_at = fail_at  # this POST (counted from 1) is answered 500

    def idle(self) -> int:
        """The times the server was left with nothing to do between the first scored request and the last one sent."""
        if len(self.arrivals) < 2:
            return 0
        first, last = self.arrivals[1][0], self.arrivals[-1][0]  # the first is the reasoning probe
        return sum(1 for t, n in self.changes if first < t < last and n == 0)

    def after(self, t: float) -> int:
        with self.lock:
            return sum(1 for at, _ in self.arrivals if at > t)


def _handler(rec: Recorder):
    class Handler(JSONHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            self._send(200, {"object": "list", "data": [{"id": "standin", "object": "model", "owned_by": "standin"}]})

        def do_POST(self):
            body = self.read_json()
            with rec.lock:
                rec.posts += 1
                rec.n += 1
                rec.arrivals.append((time.monotonic(), rec.n))
                rec.changes.append((time.monotonic(), rec.n))
                fail = rec.posts == rec.fail_at
            try:
                time.sleep(BASE * weight(json.dumps(body.get("messages") or body.get("prompt"))))
                doc = answer(body, "standin")
            finally:
                with rec.lock:
                    rec.n -= 1
                    rec.changes.append((time.monotonic(), rec.n))
            if fail:
                return self._send(500, {"error": {"message": "the engine died"}})
            self._send(200, doc)

    return Handler


@pytest.fixture
def server():
    made = []

    def make(**kw):
        rec = Recorder(**kw)
        srv, url = serve(_handler(rec))
        made.append(srv)
        return rec, url
    yield make
    for srv in made:
        srv.shutdown()


def _args(url, out, *extra):
    return ("run", "--model", "openai:standin", "--base-url", url, *TASKS, "--limit", LIMIT, "--concurrency", str(C),
            "--quiet", "--bootstrap", "0", "--out", str(out), *extra)


def _sequential(monkeypatch):
    from econeval.backends.openai_http import OpenAIHTTPBackend

    monkeypatch.setattr(OpenAIHTTPBackend, "overlaps", False, raising=False)  # the chunks in turn, as before


def test_a_served_engine_is_not_left_to_drain_between_chunks_or_tasks(cli, tmp_path, server, monkeypatch):
    rec, url = server()
    rc, _, err = cli(*_args(url, tmp_path / "overlap"))
    assert rc == 0, err
    meta = json.loads((tmp_path / "overlap" / "run.json").read_text())
    assert meta["schedule"]["chunk_items"] == 16 and meta["backend"]["concurrency"]["max_in_flight"] == C
    overlapped = rec.idle()

    _sequential(monkeypatch)
    seq, url2 = server()
    rc, _, err = cli(*_args(url2, tmp_path / "turns"))
    assert rc == 0, err
    # in turn, the server is idle at each of the three boundaries (a chunk's first request finds it empty)
    assert seq.idle() >= 3, seq.idle()
    # overlapped, never; one stall of the client (a garbage collection on a loaded machine) is let pass
    assert overlapped <= 1, (overlapped, [n for _, n in rec.arrivals])
    assert max(n for _, n in rec.arrivals) == C  # the limit holds across two chunks
    # the same sample lines in the same order; the same tables
    assert (tmp_path / "overlap" / "samples.jsonl").read_text() == (tmp_path / "turns" / "samples.jsonl").read_text()
    assert (json.loads((tmp_path / "overlap" / "results.json").read_text())["tasks"]
            == json.loads((tmp_path / "turns" / "results.json").read_text())["tasks"])
    # each task's seconds: the moments its oldest chunk was the oldest unfinished one (they sum to the chunks' time)
    timing = meta["timing"]
    assert all(timing[t]["items_run"] == 32 and timing[t]["seconds"] > 0 for t in ("econnli-zero", "econnli-icl"))
    assert sum(timing[t]["requests"] for t in timing) == 2 * 64  # every request counted once, for one task or the other


def test_an_interrupt_stops_both_chunks_and_the_folder_resumes_to_the_same_samples(cli, tmp_path, server, monkeypatch):
    rec, url = server()
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "econeval", *_args(url, out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=dict(os.environ))
    deadline = time.monotonic() + 60
    while len(rec.arrivals) < 1 + 32 + 16 and time.monotonic() < deadline:  # the second chunk half sent
        time.sleep(0.02)
    t_sig = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
    time.sleep(1.5 * BASE * 1.5)  # longer than any answer: a worker left sending would have sent again by now
    # nothing sent after the interrupt (a request on its way as the signal came may still arrive)
    assert rec.after(t_sig + 0.25) == 0, rec.after(t_sig)
    saved = read_lines(out / "samples.jsonl")
    assert len(saved) % 16 == 0 and len(saved) < 64  # whole chunks only

    rc, _, err = cli(*_args(url, out))  # the resume
    assert rc == 0, err
    _sequential(monkeypatch)
    rc, _, err = cli(*_args(url, tmp_path / "turns"))
    assert rc == 0, err
    assert (out / "samples.jsonl").read_text() == (tmp_path / "turns" / "samples.jsonl").read_text()


def test_the_python_api_leaves_no_thread_sending_after_an_error(tmp_path, server):
    from econeval.api import evaluate
    from econeval.errors import ModelError
    from econeval.run.selection import Limit
    from econeval.run.spec import RunSpec

    earlier = set(threading.enumerate())  # another test's workers may still wait on their own server
    rec, url = server(fail_at=1 + 32 + 8)  # in the second chunk, while the first is still answered
    spec = RunSpec(model="openai:standin", model_options={"base_url": url, "concurrency": C, "max_retries": 0}, progress=False)
    with pytest.raises(ModelError, match="failed 1 times"):
        evaluate(spec, ["econnli-zero", "econnli-icl"], out=tmp_path / "run", bootstrap=0,
                 selection=Limit(int(LIMIT)))
    t_err = time.monotonic()
    time.sleep(1.5 * BASE * 1.5)
    assert rec.after(t_err) == 0  # no chunk went on sending behind the caller's back
    assert not [t.name for t in set(threading.enumerate()) - earlier if t.name in ("econeval-chunk", "econeval-http")]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "failed"


def test_the_acknowledgement_names_both_chunks_in_flight():
    from types import SimpleNamespace

    from econeval.run.runner import _Run

    said: list[str] = []
    stub = SimpleNamespace(running=[3, 4], total=64, prog=SimpleNamespace(say=said.append, snapshot=lambda: {"saved": 32}))
    _Run._ack(stub, signal.SIGINT, False)
    _Run._ack(stub, signal.SIGINT, True)  # the older one is being written: it is kept
    assert said[0].startswith("econeval: SIGINT: stopping: the model stops within its current step; chunks 3 and 4 "
                              "(in progress) are dropped and run again on resume; "), said
    assert said[1].startswith("econeval: SIGINT: stopping: finishing the write of chunk 3; chunk 4 (in progress) is "
                              "dropped and runs again on resume; "), said


def test_a_task_with_an_in_process_role_runs_its_chunks_in_turn_on_the_runs_thread(cli, tmp_path, server, monkeypatch):
    """A judge or embedder in-process (llama.cpp, ONNX: one thread, the run's signals) is never
    called from a chunk's thread nor by two chunks at once: such a task's chunks run in turn on the
    run's thread, while the tasks around it still overlap; the samples are those of a run in turn."""
    from econeval.backends.fake import FakeBackend

    assert not FakeBackend.overlaps
    threads: list[str] = []
    real = FakeBackend.evaluate

    def evaluate(self, requests, on_done=None):
        threads.append(threading.current_thread().name)
        return real(self, requests, on_done)

    monkeypatch.setattr(FakeBackend, "evaluate", evaluate)
    tasks = ("--task", "econnli-zero", "--task", "econnli-gen", "--task", "econnli-icl", "--judge", "fake:j")
    rec, url = server()
    args = lambda out: ("run", "--model", "openai:standin", "--base-url", url, *tasks, "--limit", LIMIT,  # noqa: E731
                        "--concurrency", str(C), "--quiet", "--bootstrap", "0", "--out", str(out))
    rc, _, err = cli(*args(tmp_path / "overlap"))
    assert rc == 0, err
    assert threads and set(threads) == {"MainThread"}, threads
    _sequential(monkeypatch)
    seq, url = server()
    rc, _, err = cli(*args(tmp_path / "turns"))
    assert rc == 0, err
    assert (tmp_path / "overlap" / "samples.jsonl").read_text() == (tmp_path / "turns" / "samples.jsonl").read_text()
    # in turn the server drains at each of the five boundaries; overlapped, only at the three the judged task has
    assert seq.idle() >= 5 and rec.idle() <= seq.idle() - 2, (rec.idle(), seq.idle())
