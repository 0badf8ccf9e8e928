"""What compare and the gate refuse or decide at the edges: a margin that is no number, tampered
folders, a baseline narrowed by errors, skips or deleted lines, ties with the margin, run.json
objects of another type, a candidate lacking a task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import edit_samples, fake_run, one_line, scored_folder


def test_correct_rewritten_as_numbers_is_refused(cli, tmp_path):
    base = fake_run(cli, tmp_path / "base")
    edit_samples(base, lambda r: {**r, "correct": int(r["correct"])} if isinstance(r.get("correct"), bool) else r)
    rc, _, err = cli("gate", base, "--replay", base, "--max-drop", "0.02")
    assert rc == 2 and "contradicts itself" in err


def test_a_baseline_narrowed_by_errors_skips_or_deleted_lines_is_refused(cli, tmp_path):
    base = fake_run(cli, tmp_path / "base", n=40)
    cand = fake_run(cli, tmp_path / "cand", model="fake:b", n=40)
    import shutil

    for n, change in enumerate((
        lambda r: {**r, "error": "edited"} if r.get("correct") else r,  # marked error, still scored
        lambda r: {k: v for k, v in r.items() if k not in ("correct", "parsed", "gold")} | {"skipped": "x"} if r.get("correct") else r,
        lambda r: None if r.get("correct") else r,  # deleted lines of a complete, unlimited run
    )):
        b = tmp_path / f"b{n}"
        shutil.copytree(base, b)
        edit_samples(b, change)
        rc, out, err = cli("gate", b, "--replay", cand, "--max-drop", "0.3")
        assert rc == 2, (n, out, err)
        assert "pass" not in out


def test_a_tie_with_the_margin_is_no_regression(cli, tmp_path):
    base = fake_run(cli, tmp_path / "base")
    rc, out, err = cli("gate", base, "--replay", base, "--max-drop", "0")
    assert rc != 1 and "REGRESSION" not in out, out
    assert "inconclusive" in out


def test_margin_pair_at_equality():
    import numpy as np

    from econeval.judge.sequential import MarginPair

    pair = MarginPair(0.0, 10, 0.05, 0.05)
    pair.feed(np.zeros(10))
    assert pair.verdict() is None
    pair = MarginPair(0.1, 10, 0.05, 0.05)
    pair.feed(np.array([-0.1] * 10))  # exactly at the margin
    assert pair.verdict() is None
    pair = MarginPair(0.1, 10, 0.05, 0.05)
    pair.feed(np.array([-0.2] * 10))
    assert pair.verdict() == "regression"


@pytest.mark.parametrize("edit", [{"identity": True}, {"backend": [1]}, {"roles": "x"}, {"identity": {"roles": [1]}}])
def test_gate_and_compare_refuse_run_json_objects_of_another_type(cli, tmp_path, edit):
    run = fake_run(cli, tmp_path / "run", n=4)
    other = fake_run(cli, tmp_path / "other", n=4)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, **edit}))
    for args in (("gate", run, "--replay", other), ("gate", other, "--replay", run), ("compare", other, run)):
        rc, _, err = cli(*args)
        assert rc == 2 and "not a run description" in err and len(err.strip().splitlines()) == 1, (args, err)


def test_gate_refuses_a_task_entry_that_is_not_an_object(cli, tmp_path):
    run = fake_run(cli, tmp_path / "run", n=4)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, "tasks": {"econnli-zero": ["x"]}}))
    rc, _, err = cli("gate", run, "--replay", run)
    assert rc == 2 and "internal error" not in err and len(err.strip().splitlines()) <= 2


def test_a_candidate_lacking_a_baseline_task_is_refused_for_that(cli, tmp_path):
    base = fake_run(cli, tmp_path / "base", n=8, extra=("--task", "econlogicqa-1shot"))
    cand = fake_run(cli, tmp_path / "cand", model="fake:b", n=8)
    rc, _, err = cli("gate", base, "--replay", cand)
    assert rc == 2 and "has no task econlogicqa-1shot" in err


def test_the_gate_says_what_differs_and_when_the_candidate_is_the_baseline(cli, tmp_path):
    import shutil

    base = fake_run(cli, tmp_path / "base", n=16)
    shutil.copytree(base, tmp_path / "renamed")
    rc, out, err = cli("gate", base, "--replay", tmp_path / "renamed")
    assert "the baseline's own run" in out, out
    cand = fake_run(cli, tmp_path / "cand", model="fake:b", n=16)
    rc, out, err = cli("gate", base, "--replay", cand)
    assert "differs: " in out and "fake" not in err, (out, err)


def test_compare_refuses_a_margin_that_is_no_number_and_tampered_folders(cli, tmp_path):
    a, b = scored_folder(cli, tmp_path, "a"), scored_folder(cli, tmp_path, "b")
    for margin in ("nan", "inf", "-0.1"):
        rc, _, err = cli("compare", a, b, "--max-drop", margin)
        assert rc == 2 and "Traceback" not in err, (margin, err)
    one_line(*cli("compare", a, b, "--metric", "nosuch"), 2, "no task of these runs has the metric 'nosuch'")
    meta = json.loads((b / "run.json").read_text())
    meta["tasks"] = ["econlogicqa-1shot"]
    (b / "run.json").write_text(json.dumps(meta))
    one_line(*cli("compare", a, b), 2)
    meta["tasks"], meta["backend"] = {}, "a string"
    (b / "run.json").write_text(json.dumps(meta))
    rc, _, err = cli("report", a, b)
    assert rc in (0, 2) and "Traceback" not in err and "internal error" not in err


@pytest.mark.parametrize("flag", ["--plot", "--junit"])
@pytest.mark.parametrize("where", ["under a file", "proc", "read-only", "new folders"])
def test_a_gate_output_that_cannot_be_written_is_refused_before_the_gate_runs(cli, tmp_path, flag, where):
    """Issue #56 item 5: --plot or --junit onto a path no file can be made at turned a pass into
    exit 1 after the gate ran, its verdict unprinted. Refused before the gate starts (one line,
    exit 2); a path in folders that do not exist yet, where they can be made, is written."""
    import os

    base = fake_run(cli, tmp_path / "base", n=40)
    cand = fake_run(cli, tmp_path / "cand", n=40)
    if where == "under a file":
        (tmp_path / "a-file").write_text("x")
        target = tmp_path / "a-file" / "gate.out"
    elif where == "proc":
        if not os.path.isdir("/proc/self"):
            pytest.skip("no /proc (Linux's): a folder no file can be made in, even by root")
        target = Path("/proc/econeval-gate.out")
    elif where == "read-only":
        if os.geteuid() == 0:
            pytest.skip("root writes in a read-only folder (the proc case covers root)")
        (tmp_path / "ro").mkdir(mode=0o555)
        target = tmp_path / "ro" / "gate.out"
    else:
        target = tmp_path / "new" / "folders" / "gate.out"
    rc, out, err = cli("gate", base, "--replay", cand, flag, target)
    if where == "new folders":
        assert rc == 0, err
        assert target.is_file() and "pass" in out
        return
    line = one_line(rc, out, err, 2, flag)
    assert "Traceback" not in err and out == "", (line, out)
