"""The words a user reads where a count or a state is printed: a count's noun in the right
number, and no phrase that says something untrue for the case at hand (issue #59: `1 tasks
written`, `0 of 128 items are saved` and `chunk 0 (in progress) is dropped` before anything ran,
`on none (... n_ctx None)` for a model with no device and no context, `(no results yet)` for a
finished task whose numbers could not be computed)."""

import json
import signal
from types import SimpleNamespace

from econeval import data


def test_an_export_of_one_task_says_one_task(cli, tmp_path):
    run = tmp_path / "run"
    assert cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "3", "--quiet", "--out", run)[0] == 0
    rc, _, err = cli("export", run, "--format", "lm-eval", "--out", tmp_path / "r.json")
    assert rc == 0 and "econeval: 1 task written to" in err, err
    rc, _, err = cli("export", run, "--format", "table", "--out", tmp_path / "t.csv")
    assert rc == 0 and "econeval: 3 rows written to" in err, err


def test_the_load_line_names_no_device_or_context_a_model_does_not_have(cli, tmp_path):
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "2", "--out", tmp_path / "run")
    line = next(x for x in err.splitlines() if x.startswith("econeval: model m loaded"))
    assert rc == 0 and "on none" not in line and "n_ctx None" not in line and "(parallel 1)" in line, line


def test_runs_lists_a_finished_task_without_numbers_as_finished(cli, tmp_path):
    """Every answer unreadable: the task finished, its P, R and F1 could not be computed."""
    rows = data.load("econnli", "test.jsonl")[:5]
    pred = tmp_path / "p.jsonl"
    pred.write_text("".join(json.dumps({"id": r["id"], "response": "qwerty"}) + "\n" for r in rows))
    assert cli("score", "--task", "econnli-zero", "--predictions", pred, "--out", tmp_path / "garbage")[0] == 0
    rc, out, err = cli("runs", tmp_path / "garbage")
    assert rc == 0, err
    assert "(no results yet)" not in out and "P -  R -  F1 -" in out, out
    assert " 1 task " in out and "task(s)" not in out and "5 items saved" in out, out


def test_a_stop_before_the_first_chunk_says_nothing_ran_yet(cli, tmp_path, monkeypatch):
    """A signal while the run projects its time (before any chunk): it said "chunk 0 (in
    progress) is dropped" and "0 of 24 items are saved"."""
    from econeval.errors import Interrupted
    from econeval.run.runner import _Run

    said: list[str] = []
    stub = SimpleNamespace(chunk_no=0, running=[], total=24,
                           prog=SimpleNamespace(say=said.append, snapshot=lambda: {"saved": 0}))
    _Run._ack(stub, signal.SIGINT, False)  # the watcher thread's acknowledgement, as it prints it
    assert said == ["econeval: SIGINT: stopping: no chunk is in progress; none of its 24 items is saved yet"], said

    def stopped(self, show):
        raise Interrupted(signal.SIGINT)

    monkeypatch.setattr(_Run, "_project", stopped)
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "24", "--out", tmp_path / "run")
    assert rc == 130 and "run.json is marked interrupted; none of its 24 items is saved yet" in err, err
    assert "0 of 24" not in err
