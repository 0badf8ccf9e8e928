"""A run says what it will cost before its first item: sampled chunks of every task run dry through
the backend's scheduler at the speed measured on this machine, as a range (answers that stop at
once, answers that use their whole budget; the lengths the folder's items generated where it holds
some), printed and recorded in run.json; a long one names the ways to run less; durations above a
day read as days."""

import json

import pytest

from econeval.run.progress import clock
from econeval.sampling import duration


def test_durations_read_as_people_say_them():
    assert [duration(s) for s in (42, 12 * 60 + 5, 3 * 3600 + 5 * 60, 3 * 86400 + 18 * 3600 + 59)] == \
        ["42 s", "12 min", "3 h 05 min", "3 d 18 h"]
    assert clock(89 * 3600 + 53 * 60 + 13) == "3 d 17 h" and clock(3 * 3600 + 7) == "3:00:07" and clock(75) == "1:15"


def test_the_projection_before_the_first_item_is_within_a_factor_of_two_of_the_run(cli, tmp_path, tiny_model):
    """What is exact is checked on every attempt; the time, measured for the projection a moment
    before the run, is within a factor of two of the run's on one of three attempts: a machine
    whose load changes between the two (a shared CI runner) moves the one, not the other, while a
    projection that is wrong misses on all three (the fit's own floor: the test below)."""
    import os

    ratios = []
    for attempt in range(3):
        out = tmp_path / f"run{attempt}"
        rc, _, err = cli("run", "--model", tiny_model, "--task", "econlogicqa-1shot", "--task", "econnli-zero", "--limit", "24",
                         "--threads", "1", "--out", out)
        assert rc == 0, err
        meta = json.loads((out / "run.json").read_text())
        said = err.index("econeval: projected time ")
        assert said < err.index("econlogicqa-1shot: 0/24 saved")  # before the first item
        assert meta["projection"]["tasks"]["econlogicqa-1shot"]["items"] == 24
        proj = meta["projection"]
        assert proj["low"] <= proj["high"] and proj["likely"] is None and "far beyond an hour" not in err
        assert proj["cost_model"]["per_token_s"] > 0 and proj["tasks"]["econnli-zero"]["prompt_tokens"] > 24 * 20
        measured = sum(t["seconds"] for t in meta["timing"].values())
        ratios.append((proj["seconds"] / measured, proj["cost_model"], os.getloadavg()))
        if measured / 2 <= proj["seconds"] <= measured * 2:
            return
    raise AssertionError(f"projected / measured, cost model and load, per attempt: {ratios}")


def test_a_cost_model_measured_under_load_keeps_a_cost_per_token():
    """The floor of the fit (a CI run on a loaded machine fitted 0 seconds a token, issue #56): calls
    of 1 to 1,024 tokens timed at about the same seconds, as a loaded machine times them, fit a
    cost per token above 0 that accounts for the measurement's whole time, so that a long prompt
    costs more than a short one; on an idle machine the fit finds the costs the calls were made of."""
    from econeval.backends.llamacpp_projection import CostModel

    sizes = (1, 1, 2, 4, 16, 64, 256, 512, 512, 1024)
    loaded = [(t, t + 10, 1, 0.010 - 1e-6 * t + 1e-5 * (k % 3)) for k, t in enumerate(sizes)]
    fit = CostModel.fit(loaded)
    assert fit.per_token > 0 and fit(1024, 1034, 1) > fit(16, 26, 1)
    assert sum(fit(t, c, o) for t, c, o, _ in loaded) == pytest.approx(sum(s for *_, s in loaded))
    true = CostModel(per_call=1e-3, per_token=2e-5, per_token_cell=1e-9, per_output=5e-4)
    idle = [(t, c, o, true(t, c, o)) for t, c, o in ((1, 40, 1), (4, 200, 4), (64, 64, 1), (512, 600, 1), (1024, 1100, 1),
                                                    (8, 2000, 8), (32, 4000, 32), (2, 10, 2))]
    got = CostModel.fit(idle)
    for name in ("per_call", "per_token", "per_token_cell", "per_output"):
        assert getattr(got, name) == pytest.approx(getattr(true, name), rel=1e-6), name


def test_a_long_projection_names_the_ways_to_run_less():
    from econeval.run.projection import lines_of

    def projection(seconds):
        return {"seconds": seconds, "low": seconds / 3, "high": seconds, "likely": None,
                "tasks": {"t": {"items": 18091, "prompt_tokens": 9_000_000, "generation_budget": 4_000_000}}}

    long = lines_of(projection(3 * 86400 + 18 * 3600), "cpu")
    assert long[0].startswith("econeval: projected time 1 d 6 h to 3 d 18 h for 18,091 items") and "measured now on cpu" in long[0]
    assert "far beyond an hour: --budget 10m" in long[1] and "--sample N" in long[1] and "--shard K/N" in long[1]
    assert len(lines_of(projection(1800), "cpu")) == 1
    # only the high end past the hour: said as a possibility, not as "far beyond"
    maybe = lines_of(projection(2 * 3600), "cpu")
    assert "may take more than an hour: --budget 10m" in maybe[1] and "far beyond" not in maybe[1]


def test_a_continued_run_projects_the_lengths_its_items_generated(cli, tmp_path, tiny_model):
    out = tmp_path / "run"
    for limit in ("8", "40"):
        rc, _, err = cli("run", "--model", tiny_model, "--task", "econnli-cot", "--limit", limit, "--threads", "1", "--out", out)
        assert rc == 0, err
    proj = json.loads((out / "run.json").read_text())["projection"]
    assert proj["low"] <= proj["likely"] <= proj["high"] and proj["seconds"] == proj["likely"]
    assert proj["tasks"]["econnli-cot"]["items"] == 32 and ", likely " in err


def test_a_budget_run_is_projected_against_its_budget(cli, tmp_path, tiny_model):
    from econeval.run.projection import lines_of

    proj = {"seconds": 8000.0, "low": 7000.0, "high": 8000.0, "likely": None,
            "tasks": {"t": {"items": 1026, "prompt_tokens": 100_000, "generation_budget": 200_000}}}
    said = lines_of(proj, "cpu", budget_left=110)
    assert "the --budget leaves 1 min" in said[1] and not any("--budget 10m" in x for x in said)
    assert lines_of(proj, "cpu", budget_left=9000) == said[:1]  # all of it fits: nothing more to say
    rc, _, err = cli("run", "--model", tiny_model, "--task", "econnli-cot", "--budget", "4s", "--threads", "1",
                     "--out", tmp_path / "run")
    assert rc == 0 or (rc == 1 and "the budget left no time for the first chunk of econnli-cot" in err), err  # a slow machine fits none
    assert "the --budget leaves" in err and "--budget 10m runs what fits" not in err


class _Timed:
    """An engine as the cost model times it: each llama_decode call costs 50 µs and 1 µs a token,
    and the outputs each call reads are counted."""

    def __init__(self, n_seq: int):
        from econeval.backends.llamacpp_batch import Call

        self.n_seq, self.n_cells, self.kv_budget, self.n_vocab = n_seq, 65536, 32768, 32000
        self.seq_cells, self.call = self.n_cells, Call
        self.n_evaluated = self.n_generated = self.n_decode_calls = 0
        self.outputs: list[int] = []

    def _decode(self, entries):
        import time

        time.sleep(5e-5 + 1e-6 * len(entries))
        self.outputs.append(sum(1 for e in entries if e[3]))

    def _logits(self, i):
        import numpy as np

        return np.zeros(8, dtype=np.float32)

    def _clear(self):
        pass


def test_the_cost_model_times_as_many_sequences_as_the_run_decodes_together():
    """On an H200 the small calls (4 sequences) fitted no cost per output: the measurement now also
    times steps of the run's --parallel (up to 64) sequences reading every output, where cheap."""
    from econeval.backends.llamacpp_projection import CostModel

    wide, narrow = _Timed(64), _Timed(4)
    for engine in (wide, narrow):
        model, took = CostModel.measure(engine)
        assert model.per_token > 0 and took < 10
    assert max(wide.outputs) == 64 and max(narrow.outputs) == 4
