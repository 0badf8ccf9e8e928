"""`econeval score` and verify on what they are given: prediction lines with calls, a prediction
after its reasoning, the roles `score --out` records, the stored prompts verify checks."""

from __future__ import annotations

import json

import pytest
from conftest import edit_samples, fake_run


@pytest.mark.parametrize("line", [
    {"id": "econnli/test/0", "response": "No", "calls": {}},
    {"id": "econnli/test/0", "response": 5, "calls": {"response": {"kind": "generate"}}},
    {"id": "econnli/test/0", "calls": {"response": {"kind": "generate"}}},
    {"id": "econnli/test/0", "response": "No", "calls": {"response": "x"}},
    {"id": "econnli/test/0", "response": "No", "calls": {"response": {"kind": "nope"}}},
    {"id": "econnli/test/0", "calls": {"response": {"kind": "similarity"}}},  # found by the fuzzer: KeyError
    {"id": "econnli/test/0", "x": "No", "calls": {"x": {"kind": "generate"}}},  # not the task's request
])
def test_score_checks_prediction_lines_with_calls(cli, tmp_path, line):
    pred = tmp_path / "p.jsonl"
    pred.write_text(json.dumps(line) + "\n")
    rc, _, err = cli("score", "--task", "econnli-zero", "--predictions", pred)
    assert rc == 2 and "internal error" not in err and "Traceback" not in err, err


def test_score_reads_a_prediction_after_its_reasoning(cli, tmp_path):
    pred = tmp_path / "p.jsonl"
    pred.write_text(json.dumps({"id": "econnli/test/0", "response": "<think>surely Yes</think>No"}) + "\n")
    rc, out, err = cli("score", "--task", "econnli-zero", "--predictions", pred)
    assert rc == 0, err
    assert json.loads(out)["tasks"]["econnli-zero"]["reasoning"]["n_items_reasoned"] == 1


def test_verify_checks_the_stored_prompts(cli, tmp_path):
    base = fake_run(cli, tmp_path / "base", n=8)
    import shutil

    for n, change in enumerate((
        lambda r: {**r, "prompts": {k: v + " (edited)" for k, v in r["prompts"].items()}},
        lambda r: {**r, "prompt_hash": "0" * 16},
    )):
        b = tmp_path / f"b{n}"
        shutil.copytree(base, b)
        edit_samples(b, change)
        rc, _, err = cli("compare", b, base)
        assert rc == 2 and "contradicts itself" in err, (n, err)
    icl = fake_run(cli, tmp_path / "icl", n=8, extra=("--task", "econnli-icl"))
    edit_samples(icl, lambda r: {**r, "task": "econnli-zero"} if r["task"] == "econnli-icl" else None)
    rc, _, err = cli("compare", icl, base)
    assert rc == 2, err


def test_score_out_records_roles_in_its_identity(cli, tmp_path):
    pred = tmp_path / "p.jsonl"
    pred.write_text(json.dumps({"id": "econnli/test/0", "response": "No"}) + "\n")
    rc, _, err = cli("score", "--task", "econnli-zero", "--predictions", pred, "--out", tmp_path / "s")
    assert rc == 0, err
    assert "roles" in json.loads((tmp_path / "s" / "run.json").read_text())["identity"]
