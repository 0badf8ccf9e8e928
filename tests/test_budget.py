"""A `--budget` follows the work as it is done: a chunk projected to end after the deadline does not
start, and the chunk in flight at the deadline is cut off at the model's next step, dropped whole
(nothing half-written) and run again when the folder is resumed. The progress ETA moves within a
chunk. The clock is the tests' own: the fake model's answers take its time (fake_clock.py), so
nothing here depends on the machine's speed."""

import json
import time

import pytest

import econeval
from econeval.errors import BudgetSpent
from econeval.run.progress import RunProgress, TaskLine
from econeval.run.selection import Limit, Ordered
from econeval.run.spec import RunSpec
from econeval.sampling import WidthNote
from econeval.signals import until
from econeval.types import Generate

from conftest import read_lines
from fake_clock import CLOCK


@pytest.fixture(autouse=True)
def clock():
    CLOCK.reset()
    return CLOCK


def run(out, selection, progress=False):
    """econnli-zero on the slow fake model: one generation (one second of CLOCK) per item."""
    return econeval.evaluate(RunSpec(model="fake:slow", model_options={"respond": "fake_clock:slow"}, progress=progress),
                             ["econnli-zero"], selection=selection, out=out, bootstrap=0)


def budget(deadline):
    return Ordered("nested", deadline=deadline, watcher=WidthNote(), clock=CLOCK.now)


def test_a_chunk_that_would_end_after_the_deadline_does_not_start(tmp_path, clock):
    """Chunks of 16 items take 16 s: with 40 s, the third chunk (due to end at 48 s) used to start
    at 32 s and run 8 s past the budget; now the run ends at 32 s with two chunks."""
    doc = run(tmp_path / "run", budget(40.0))
    assert clock.t == 32.0  # two chunks, and no third
    assert len(read_lines(tmp_path / "run" / "samples.jsonl")) == 32
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["status"] == "complete" and meta["stopped_early"]["why"] == "budget spent"
    assert doc["tasks"]["econnli-zero"]["estimate"]["from"] == 32


def test_the_chunk_in_flight_at_the_deadline_is_cut_off_dropped_and_run_again_on_resume(tmp_path, clock):
    """The model slows down to 3 s an item in the second chunk: it was expected to end at 32 s
    (the first chunk's rate), and would have ended at 64 s; it is cut at the deadline (40 s), its 8
    answers so far are dropped, and resuming runs it whole: the folder then holds what a run that
    was never cut holds."""
    clock.slow_after, clock.slow_step = 16, 3.0
    folder = tmp_path / "cut"
    doc = run(folder, budget(40.0))
    assert clock.t == 40.0  # stopped at the deadline, after the 8th answer of the second chunk
    saved = read_lines(folder / "samples.jsonl")  # each line whole
    assert len(saved) == 16 and (folder / "samples.jsonl").read_text().endswith("\n")
    meta = json.loads((folder / "run.json").read_text())
    assert meta["status"] == "complete" and meta["stopped_early"]["why"] == "budget spent"
    assert doc["tasks"]["econnli-zero"]["estimate"]["from"] == 16 and meta["timing"]["econnli-zero"]["items_run"] == 16

    CLOCK.reset()  # resumed with a new budget of 24 s, at the model's first speed: the dropped chunk runs whole
    run(folder, budget(24.0))
    assert clock.t == 16.0
    CLOCK.reset()
    run(tmp_path / "never-cut", budget(40.0))
    again, never = read_lines(folder / "samples.jsonl"), read_lines(tmp_path / "never-cut" / "samples.jsonl")
    assert len(again) == 32 and again == never


def test_a_stop_at_the_deadline_is_not_an_interrupt_and_without_a_deadline_nothing_stops(clock):
    from econeval.backends.fake import FakeBackend
    from econeval.config import ModelSpec

    fake = FakeBackend(ModelSpec(name="slow", options={"respond": "fake_clock:slow"}))
    reqs = [Generate(prompt=f"q{i}", max_tokens=4) for i in range(5)]
    with until(2.5, CLOCK.now), pytest.raises(BudgetSpent):
        fake.evaluate(reqs)
    assert clock.t == 3.0  # the third answer passed the deadline: no fourth
    with until(None, CLOCK.now):
        assert len(fake.evaluate(reqs)) == 5


def test_a_llamacpp_chunk_stops_at_its_next_step_once_the_deadline_has_passed(tiny_model):
    """The abort callback llama.cpp asks between graph nodes (the one a signal raises) answers the
    deadline too: a decode under a deadline already passed stops at once, and the engine runs the
    next call from a clean cache."""
    from econeval.backends.llamacpp import LlamaCppBackend
    from econeval.config import ModelSpec

    backend = LlamaCppBackend(ModelSpec(name="tiny", options={"path": str(tiny_model)}, n_ctx=512, chat="off"))
    try:
        reqs = [Generate(prompt="premise: the order, hypothesis: the event, answer:", max_tokens=8)]
        first = backend.evaluate(reqs)
        calls = backend.counters()["decode_calls"]
        with until(time.monotonic() - 1.0), pytest.raises(BudgetSpent):
            backend.evaluate(reqs)
        assert backend.counters()["decode_calls"] == calls  # the aborted decode is not counted as done
        assert backend.evaluate(reqs) == first
    finally:
        backend.close()


# ---- the ETA within a chunk ------------------------------------------------------------------
def test_the_eta_moves_within_a_chunk_as_its_requests_finish(tmp_path, clock):
    """A backend that counts no tokens (the fake): the share of the chunk's requests finished. It
    showed the same ETA for the whole of a chunk (0:37 for 30 s of a 90 s task)."""
    snaps: list[dict] = []
    limit = Limit(48)
    limit.clock = CLOCK.now
    run(tmp_path / "run", limit, progress=snaps.append)
    second = [s for s in snaps if s["tasks"][0]["saved"] == 16 and s["tasks"][0]["in_chunk"]]
    etas = [s["eta_s"] for s in second]
    assert len(second) >= 8 and etas == sorted(etas, reverse=True) and etas[0] - etas[-1] >= 10, etas
    at_start = next(s for s in snaps if s["tasks"][0]["saved"] == 16)["eta_s"]
    assert at_start == pytest.approx(32.0, abs=4.0)  # two chunks of about 16 s left
    assert all(s["eta_s"] >= at_start - 16.0 - 4.0 for s in second)  # never below what is left after the chunk


def test_the_eta_follows_the_tokens_the_backend_counts_within_a_chunk():
    """llama.cpp's counters (tokens evaluated and generated), read as the display redraws, at the
    seconds per token the task's chunks took; never past the chunk's whole expected time."""
    t, c = [0.0], {"tokens_evaluated": 0, "tokens_generated": 0}
    line = TaskLine("t", total=12, saved=0, chars=[400] * 12, budget=[100] * 12)  # 200 size units an item
    prog = RunProgress([line], counters=lambda: dict(c), show=False, clock=lambda: t[0])
    prog.begin("t")
    prog.starting(4)
    t[0], c["tokens_evaluated"], c["tokens_generated"] = 40.0, 400, 400  # 800 tokens in 40 s: 0.05 s a token
    prog.saved(4, 1600)  # 4 characters a token
    prog.starting(4)
    assert prog.snapshot()["eta_s"] == pytest.approx(80.0)  # 8 items of 10 s
    assert prog.chunk_seconds("t", 4) == pytest.approx(40.0)
    t[0], c["tokens_evaluated"], c["tokens_generated"] = 50.0, 600, 500  # 300 tokens more: 15 s of work
    assert prog.snapshot()["eta_s"] == pytest.approx(65.0)
    c["tokens_evaluated"], c["tokens_generated"] = 5000, 3000  # far more than expected: the chunk counts whole at most
    assert prog.snapshot()["eta_s"] == pytest.approx(40.0)


def test_a_budget_takes_first_the_tasks_the_projection_costs_least_per_item(tmp_path, monkeypatch, clock):
    """The tasks took turns by their items' size (prompt and generation budget), which put
    econnli-gen (16 items: 775 s on the default model) before econnli-zero (15 s) in a 2 min
    budget; with a projection, by its seconds per item. Here econnli-cot's items are the larger
    but projected the cheaper: it goes first."""
    from econeval.backends.fake import FakeBackend

    def project(self, chunks, lengths, seed):
        per_item = {"econnli-zero": 2.0, "econnli-cot": 1.0}
        return {"tasks": {t: {"seconds_low": per_item[t] * sum(map(len, c)), "seconds_high": per_item[t] * sum(map(len, c)),
                              "seconds_likely": None, "prompt_tokens": 0, "generation_budget": 0} for t, c in chunks.items()},
                "cost_model": {}, "measured_in_s": 0.0}

    monkeypatch.setattr(FakeBackend, "project", project)
    econeval.evaluate(RunSpec(model="fake:slow", model_options={"respond": "fake_clock:slow"}, progress=False),
                      ["econnli-zero", "econnli-cot"], selection=budget(1000.0), out=tmp_path / "run", bootstrap=0)
    tasks = [r["task"] for r in read_lines(tmp_path / "run" / "samples.jsonl")]
    assert tasks[0] == "econnli-cot" and "econnli-zero" in tasks
