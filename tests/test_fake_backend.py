"""The in-package fake backend (`--model fake:NAME`): deterministic answers and log-probabilities
without a model, for tests of everything around one."""

import json
import math

from econeval.backends.fake import FakeBackend
from econeval.run.roles import resolve
from econeval.types import Generate, OptionLogprobs


def test_answers_are_deterministic_per_prompt_and_name_and_log_probabilities_are_valid():
    a, b = FakeBackend(resolve("fake:a")), FakeBackend(resolve("fake:b"))
    reqs = [Generate(prompt=f"question {i}", max_tokens=4) for i in range(40)]
    first, again = a.evaluate(reqs), a.evaluate(reqs)
    assert [c.text for c in first] == [c.text for c in again]
    assert [c.text for c in first] != [c.text for c in b.evaluate(reqs)]
    assert {c.text for c in first} <= {"Yes", "No", "A", "B", "C", "D"} and len({c.text for c in first}) > 2
    scores = a.evaluate([OptionLogprobs(prompt="q", options=("A", "B", "C"))])[0]
    assert set(scores.scores) == {"A", "B", "C"} and sum(math.exp(v) for v in scores.scores.values()) < 1
    assert scores.top == max(scores.scores.values())
    turned = a.evaluate([Generate(prompt="q", max_tokens=4, turns=("t1",)), Generate(prompt="q", max_tokens=4, turns=("t2",))])
    assert len(turned) == 2  # later turns take part in the answer (texts may coincide, the call must not fail)


def test_a_whole_run_on_the_fake_model(cli, tmp_path):
    rc, out, err = cli("run", "--model", "fake:x", "-M", "answers=Yes", "-t", "econnli-zero", "-t", "steer-me", "--limit", "3",
                       "--quiet", "--out", tmp_path / "run")
    assert rc == 0, err
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["status"] == "complete" and meta["backend"]["kind"] == "fake"
    recs = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert all(r["response"] == "Yes" for r in recs if r["task"] == "econnli-zero")
    assert all(r["parsed"] == 1 for r in recs if r["task"] == "econnli-zero")
