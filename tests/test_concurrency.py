"""How many requests a served model keeps in flight (econeval/backends/concurrency.py).

The controller is driven first without threads or waiting: a simulated clock and simulated
servers (one that batches, one that serves one request at a time, one that refuses past a limit),
so its decisions are exact and repeatable. Then runs of the real CLI against the stand-in server
of tools/served_standin.py on 127.0.0.1, asserting on what the server saw (requests in flight),
never on wall time: the default grows on a server that batches and never past its cap, does not
grow on one that serves one request at a time, backs off on 429s; an explicit --concurrency is
exactly that many; the answers are the same whatever the concurrency; and run.json records it
all outside the run's identity."""

import heapq
import json
import random
import sys
import threading
from pathlib import Path

import pytest

from conftest import read_lines
from econeval.backends import concurrency
from econeval.backends.concurrency import CAP_LOCAL, CAP_REMOTE, START_LOCAL, START_REMOTE, Limiter, Policy, local_host, served_engine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from served_standin import Shape, serve  # noqa: E402


# ---- the controller, simulated ---------------------------------------------------------------
class Clock:
    t = 0.0

    def __call__(self):
        return self.t


def batching(base=1.0, knee=32, k=None):
    """Latency base·w + k·max(0, n − knee), n in flight at arrival; w lognormal (items differ)."""
    k = base / knee if k is None else k
    return lambda now, n, rng: now + base * rng.lognormvariate(0, 0.3) + k * max(0, n - knee)


def serial(s=0.3):
    """One request at a time, FIFO."""
    free = [0.0]

    def f(now, n, rng):
        free[0] = max(now + 0.002, free[0]) + s * rng.lognormvariate(0, 0.3)
        return free[0] + 0.002
    return f


def simulate(policy, server, n, chunk=512, refuse_over=None, seed=0):
    """Send n requests in chunks through a Limiter on a simulated clock; `refuse_over`: the
    server answers 429 past that many in flight (the request is sent again after 0.05 s).
    Returns the limiter and the most requests in flight the server saw."""
    rng, clock = random.Random(seed), Clock()
    lim, stop = Limiter(policy, clock), threading.Event()
    events: list = []
    seen = 0
    for start in range(0, n, chunk):
        todo = min(chunk, n - start)
        pending = todo
        while pending:
            while todo and lim.in_flight < lim.limit:
                todo -= 1
                ticket = lim.acquire(stop)
                seen = max(seen, lim.in_flight)
                heapq.heappush(events, (server(clock.t, lim.in_flight, rng), rng.random(), ticket))
            t, _, ticket = heapq.heappop(events)
            clock.t = t
            if refuse_over is not None and lim.in_flight > refuse_over and rng.random() < 0.5:
                lim.overloaded(ticket)
                heapq.heappush(events, (t + 0.05 + 1.0 * rng.random(), rng.random(), ticket))  # retried: same request
                continue
            lim.release(ticket)
            pending -= 1
        clock.t += 0.01  # the runner writes the chunk
    return lim, seen


def test_the_limit_grows_on_a_server_that_batches_and_settles_near_its_knee():
    for knee in (32, 96):
        lim, seen = simulate(Policy(True, 8, 256, ""), batching(knee=knee), 6000)
        rec = lim.record()
        assert knee * 0.6 <= rec["settled"] <= knee * 2.5, (knee, rec)
        assert seen <= 256 and rec["max_in_flight"] == seen


def test_past_the_knee_throughput_falls_and_the_limit_stays_at_it():
    lim, _ = simulate(Policy(True, 32, 256, ""), batching(knee=32, k=2 / 32), 6000)
    assert 20 <= lim.record()["settled"] <= 50, lim.record()


def test_a_server_that_serves_one_request_at_a_time_brings_the_limit_down():
    lim, seen = simulate(Policy(True, 32, 256, ""), serial(), 3000)
    rec = lim.record()
    assert rec["settled"] <= 6 and rec["range"][1] == 32 and seen <= 64, rec  # one doubling tried, none kept


def test_the_limit_never_passes_its_cap():
    lim, seen = simulate(Policy(True, 8, 40, ""), batching(knee=1000), 4000)
    assert seen == 40 and lim.record()["settled"] == 40 and lim.limit <= 40


def test_overloads_cut_the_limit_once_per_round_trip_and_end_the_doubling():
    lim, seen = simulate(Policy(True, 32, 256, ""), batching(knee=1000, base=0.5), 4000, refuse_over=24)
    rec = lim.record()
    assert rec["backoffs"] >= 1 and rec["settled"] <= 24, rec
    # a cut counts only for requests sent after the last one: many 429s at once cut once
    lim = Limiter(Policy(True, 64, 256, ""), Clock())
    stop = threading.Event()
    tickets = [lim.acquire(stop) for _ in range(40)]
    for t in tickets:
        lim.overloaded(t)
    assert lim.limit == 44 and lim.record()["backoffs"] == 1  # 70% of 64
    for t in tickets:
        lim.release(t)
    later = lim.acquire(stop)
    lim.overloaded(later)
    assert lim.limit == 30 and lim.record()["backoffs"] == 2 and not lim.doubling


def test_a_fixed_limit_never_moves():
    lim, seen = simulate(Policy(False, 6, 6, "--concurrency"), batching(knee=64), 1000, refuse_over=3)
    rec = lim.record()
    assert seen == 6 and lim.limit == 6 and rec == {"policy": "fixed", "limit": 6, "max_in_flight": 6,
                                                    "mean_in_flight": rec["mean_in_flight"]}


def test_the_policy_and_its_cap_come_from_the_options_and_the_urls():
    local = Policy.of(None, None, ["http://127.0.0.1:8000/v1"])
    assert local.adaptive and (local.limit, local.cap) == (START_LOCAL, CAP_LOCAL)
    hosted = Policy.of(None, None, ["https://api.openai.com/v1"])
    assert hosted.adaptive and (hosted.limit, hosted.cap) == (START_REMOTE, CAP_REMOTE) and "rate limits" in hosted.why
    assert Policy.of(None, None, ["http://10.0.0.5:8000", "http://gpu-node:8000"]).cap == 2 * CAP_LOCAL
    assert Policy.of(None, 12, ["http://127.0.0.1:8000"]) == Policy(True, 12, 12, "--max-concurrency")
    assert Policy.of(5, 100, ["http://127.0.0.1:8000"]) == Policy(False, 5, 5, "--concurrency")
    for url in ("http://localhost:8000", "http://[::1]:8000", "http://192.168.1.4", "http://vllm.default.svc.cluster.local",
                "http://box.internal:80", "http://gpu-node:8000"):
        assert local_host(url), url
    for url in ("https://api.anthropic.com", "http://8.8.8.8", "https://models.example.com/v1"):
        assert not local_host(url), url


def test_a_batching_engine_gets_a_local_servers_concurrency_wherever_it_is():
    """vLLM, SGLang and TGI batch what they are sent: at a public address they start and cap as a
    server on this machine does; a hosted API (or an unknown server) there keeps the hosted caps."""
    assert [served_engine(e) for e in ({"id": "m", "owned_by": "vllm"}, {"id": "m", "owned_by": "sglang"},
                                       {"id": "org/m", "owned_by": "org/m", "created": 0}, {"id": "m", "owned_by": "m"},
                                       {"id": "gpt-4o", "owned_by": "system"}, {"id": "m", "owned_by": "llamacpp"}, None)] == \
        ["vLLM", "SGLang", "TGI", None, None, None, None]
    public = ["https://models.example.com/v1"]
    engine = Policy.of(None, None, public, ["vLLM"])
    assert (engine.limit, engine.cap) == (START_LOCAL, CAP_LOCAL) and "serving as vLLM" in engine.why
    assert Policy.of(None, None, public, [None]) == Policy.of(None, None, public)
    assert (Policy.of(None, None, public, [None]).limit, Policy.of(None, None, public).cap) == (START_REMOTE, CAP_REMOTE)
    mixed = Policy.of(None, None, public + ["https://api.openai.com/v1"], ["TGI", None])
    assert mixed.cap == CAP_LOCAL + CAP_REMOTE and mixed.limit == START_REMOTE and "batching engine" in mixed.why
    assert Policy.of(4, None, public, ["vLLM"]) == Policy(False, 4, 4, "--concurrency")


@pytest.mark.parametrize("owner", ["vllm", "standin"])
def test_a_served_engine_at_a_public_address_is_sent_a_local_servers_concurrency(cli, tmp_path, standin, monkeypatch, owner):
    """A run against a server whose /v1/models answers as vLLM does, its URL taken for a public
    address: run.json's concurrency starts at 32 and may reach 256 in flight (a server of unknown
    kind there: 8 and 32)."""
    monkeypatch.setattr(concurrency, "local_host", lambda url: False)
    url, stats = standin(Shape("batching", base=0.05, knee=1000, owner=owner))
    rec = _run(cli, url, tmp_path / "run", limit=40)["backend"]["concurrency"]
    want = (START_LOCAL, CAP_LOCAL) if owner == "vllm" else (START_REMOTE, CAP_REMOTE)
    assert (rec["start"], rec["cap"]) == want, rec
    assert ("serving as vLLM" in rec["cap_from"]) == (owner == "vllm"), rec


# ---- real runs against the stand-in on 127.0.0.1 ---------------------------------------------
def _run(cli, url, out, *extra, limit=150, model="standin"):
    rc, _, err = cli("run", "--model", f"openai:{model}", "--base-url", url, "--task", "econnli-zero", "--limit", str(limit),
                     "--quiet", "--bootstrap", "0", "--out", out, *extra)
    assert rc == 0, err
    return json.loads((out / "run.json").read_text())


def _answers(folder):
    return [(s["id"], s["response"], s["option_logprobs"], s["parsed"]) for s in read_lines(folder / "samples.jsonl")]


@pytest.fixture
def standin():
    made = []

    def make(shape):
        srv, url, stats = serve(shape)
        made.append(srv)
        return url, stats
    yield make
    for srv in made:
        srv.shutdown()


def test_the_default_grows_on_a_server_that_batches_and_never_passes_its_cap(cli, tmp_path, standin):
    url, stats = standin(Shape("batching", base=0.5, knee=1000))
    meta = _run(cli, url, tmp_path / "run", "--max-concurrency", "96", limit=240)
    rec = meta["backend"]["concurrency"]
    assert rec["policy"] == "adaptive" and rec["start"] == START_LOCAL and rec["cap"] == 96, rec
    assert rec["range"][1] >= 64, rec  # a doubling kept: 64 in flight answered faster than 32 by a quarter
    assert stats.max_in_flight <= 96 and rec["max_in_flight"] <= 96, (stats.max_in_flight, rec)
    assert meta["schedule"]["chunk_items"] == 2 * 96  # chunks follow the cap: the limit can reach it


def test_the_default_does_not_grow_on_a_server_that_serves_one_request_at_a_time(cli, tmp_path, standin):
    url, stats = standin(Shape("serial", base=0.02))
    rec = _run(cli, url, tmp_path / "run", limit=150)["backend"]["concurrency"]
    assert rec["policy"] == "adaptive" and rec["range"][1] < 2 * START_LOCAL, rec  # its one doubling was undone
    assert stats.max_in_flight <= 2 * START_LOCAL, stats.max_in_flight


def test_the_default_backs_off_on_a_server_that_refuses_past_a_limit(cli, tmp_path, standin):
    url, stats = standin(Shape("overload", base=0.3, knee=1000, limit=12))
    meta = _run(cli, url, tmp_path / "run", limit=100)  # the default retries: a refused request waits under the cut
    rec = meta["backend"]["concurrency"]
    assert rec["backoffs"] >= 1 and rec["settled"] <= 12, rec
    # the start's burst of 32 is refused past 12 (and retried); after it the server sees at most its limit, mostly
    later = sorted(stats.arrivals[len(stats.arrivals) // 2:])
    assert later[len(later) // 2] <= 12 and stats.refused < stats.requests // 4, (later, stats.refused, stats.requests)
    assert meta["timing"]["econnli-zero"]["retries"] == stats.refused


def test_an_explicit_concurrency_is_exactly_that_many_and_answers_never_depend_on_it(cli, tmp_path, standin):
    url, stats = standin(Shape("batching", base=0.03, knee=8))
    runs = {}
    for c in ("1", "5", None):
        stats.max_in_flight = 0
        out = tmp_path / f"c{c}"
        meta = _run(cli, url, out, *(["--concurrency", c] if c else []), limit=40)
        rec = meta["backend"]["concurrency"]
        if c:
            assert stats.max_in_flight == int(c) and rec == {"policy": "fixed", "limit": int(c), "max_in_flight": int(c),
                                                             "mean_in_flight": rec["mean_in_flight"]}, rec
            assert meta["schedule"]["chunk_items"] == max(16, 2 * int(c))
        else:
            assert rec["policy"] == "adaptive"
        runs[c] = meta
        assert _answers(out) == _answers(tmp_path / "c1")  # the same answers, in the same order
        assert (json.loads((out / "results.json").read_text())["tasks"]["econnli-zero"]["paper"]
                == json.loads((tmp_path / "c1" / "results.json").read_text())["tasks"]["econnli-zero"]["paper"])
    # concurrency is no part of the run's identity: one folder resumes under another
    assert runs["1"]["identity"] == runs["5"]["identity"] == runs[None]["identity"]
    rc, _, err = cli("run", "--model", "openai:standin", "--base-url", url, "--task", "econnli-zero", "--limit", "50",
                     "--quiet", "--bootstrap", "0", "--out", tmp_path / "c1")  # started at 1, resumed adaptive
    assert rc == 0, err
    assert _answers(tmp_path / "c1")[:40] == _answers(tmp_path / "c5") and len(_answers(tmp_path / "c1")) == 50
