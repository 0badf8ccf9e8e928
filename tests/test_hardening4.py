"""The fourth audit's inputs (issue #42): passwords that leak, a gate narrowed through its baseline,
ties called regressions, writes over what is not a regular file, racing merges, readers that
crashed. Each input gets one line and the right exit code or verdict; nothing is written where it
does not belong; no password appears in any output."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from conftest import read_lines
from fake_http import JSONHandler, serve

PASSWORDS = ("hunter2", "s3cr@t-pw", "t-pw", "pa ss")


class Plain(JSONHandler):
    """An OpenAI-compatible server that answers 'Yes' to every prompt (it takes basic auth)."""

    def do_GET(self):
        self._send(200, {"data": [{"id": "m1", "owned_by": "vllm"}]})

    def do_POST(self):
        self.read_json()
        self._send(200, {"choices": [{"text": " Yes", "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 1}})


@pytest.fixture
def plain_server():
    srv, url = serve(Plain)
    yield url
    srv.shutdown()


def _leaks(text: str) -> list[str]:
    return [p for p in PASSWORDS if p in text]


def _tree_text(root: Path) -> str:
    return "\n".join(p.read_text("utf-8", "replace") for p in root.rglob("*") if p.is_file())


def test_no_password_in_any_output(cli, tmp_path, plain_server, monkeypatch):
    """A password planted in every input path (the command line's --base-url, a models.toml
    entry, a --config file's model options; at the first '@' and after an e-mail user name) is in
    no output: run.json, samples, results, reports, pages, JUnit, listings, messages, hints."""
    from econeval.api import resume_hint

    host = plain_server.split("://", 1)[1]
    urls = [f"http://alice:s3cr@t-pw@{host}/v1", f"http://bob@corp.example:hunter2@{host}/v1"]
    reg = tmp_path / "models.toml"
    reg.write_text(f'[models.served]\nbase_url = "{urls[1]}"\napi_model = "m1"\n')
    monkeypatch.setenv("ECONEVAL_MODELS", str(reg))
    conf = tmp_path / "run.toml"
    conf.write_text(f'[run]\ntasks = ["econnli-zero"]\nlimit = 3\n[run.model_options]\nbase_url = "{urls[0]}"\napi_model = "m1"\n')
    outputs = []
    runs = []
    for n, args in enumerate((("--model", "openai:m1", "--base-url", urls[0]), ("--model", "served"),
                              ("--model", "openai:m1", "--config", conf))):
        out = tmp_path / f"run{n}"
        rc, so, se = cli("run", *args, "--task", "econnli-zero", "--limit", "3", "--out", out, "-q", "--bootstrap", "0")
        assert rc == 0, se
        outputs += [so, se, _tree_text(out)]
        runs.append(out)
    for fmt in ("md", "json", "html"):
        rc, so, se = cli("report", *runs, "--format", fmt, "--out", tmp_path / f"report.{fmt}")
        assert rc == 0, se
        outputs += [so, se, (tmp_path / f"report.{fmt}").read_text()]
    rc, so, se = cli("view", runs[0], "--out", tmp_path / "page.html")
    outputs += [so, se, (tmp_path / "page.html").read_text()]
    rc, so, se = cli("compare", runs[0], runs[2], "--junit", tmp_path / "c.xml")
    outputs += [so, se, (tmp_path / "c.xml").read_text()]
    for extra in ((), ("--json",)):
        rc, so, se = cli("models", "list", *extra)
        assert rc == 0, se
        outputs += [so, se]
    rc, so, se = cli("runs", tmp_path, "--json")
    outputs += [so, se]
    rc, so, se = cli("run", "--model", "openai:m1", "--base-url", "http://carol:hunter2@127.0.0.1:9/v1", "--task", "econnli-zero",
                     "--out", tmp_path / "down", "-q")
    assert rc == 1
    outputs += [so, se]
    rc, so, se = cli("run", "--model", "openai:m1", "--base-url", "http://dave:pa ss@127.0.0.1:9/v1", "--task", "econnli-zero",
                     "--out", tmp_path / "space", "-q")
    assert rc == 2 and len(se.strip().splitlines()) <= 2
    outputs += [so, se]
    outputs.append(resume_hint(["econeval", "run", "--base-url", urls[1], "--new"], tmp_path / "x"))
    leaks = [(i, _leaks(o)) for i, o in enumerate(outputs) if _leaks(o)]
    assert not leaks, leaks


def test_hide_credentials_splits_at_the_last_at():
    from econeval.errors import hide_credentials

    assert hide_credentials("http://alice:s3cr@t-pw@host:8000/v1") == "http://[redacted]@host:8000/v1"
    assert hide_credentials("x http://bob@corp.example:hunter2@host/v1 y") == "x http://[redacted]@host/v1 y"
    assert hide_credentials("http://host/v1?mail=a@b") == "http://host/v1?mail=a@b"


# ---- the gate's baseline -----------------------------------------------------------------------
def _run(cli, out, model="fake:a", n=50, extra=()):
    rc, _, err = cli("run", "--model", model, "--task", "econnli-zero", "--limit", str(n), "--out", out, "-q",
                     "--bootstrap", "0", *extra)
    assert rc == 0, err
    return out


def _edit(folder: Path, change) -> None:
    rows = read_lines(folder / "samples.jsonl")
    kept = [r for r in (change(r) for r in rows) if r is not None]
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))


def test_correct_rewritten_as_numbers_is_refused(cli, tmp_path):
    base = _run(cli, tmp_path / "base")
    _edit(base, lambda r: {**r, "correct": int(r["correct"])} if isinstance(r.get("correct"), bool) else r)
    rc, _, err = cli("gate", base, "--replay", base, "--max-drop", "0.02")
    assert rc == 2 and "contradicts itself" in err


def test_a_baseline_narrowed_by_errors_skips_or_deleted_lines_is_refused(cli, tmp_path):
    base = _run(cli, tmp_path / "base", n=40)
    cand = _run(cli, tmp_path / "cand", model="fake:b", n=40)
    import shutil

    for n, change in enumerate((
        lambda r: {**r, "error": "edited"} if r.get("correct") else r,  # marked error, still scored
        lambda r: {k: v for k, v in r.items() if k not in ("correct", "parsed", "gold")} | {"skipped": "x"} if r.get("correct") else r,
        lambda r: None if r.get("correct") else r,  # deleted lines of a complete, unlimited run
    )):
        b = tmp_path / f"b{n}"
        shutil.copytree(base, b)
        _edit(b, change)
        rc, out, err = cli("gate", b, "--replay", cand, "--max-drop", "0.3")
        assert rc == 2, (n, out, err)
        assert "pass" not in out


def test_a_tie_with_the_margin_is_no_regression(cli, tmp_path):
    base = _run(cli, tmp_path / "base")
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


# ---- writes only where they belong --------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fifo", "symlink", "chardev", "folder"])
def test_user_named_outputs_refuse_what_is_not_a_regular_file(cli, tmp_path, kind):
    run = _run(cli, tmp_path / "run", n=4)
    target = tmp_path / "target"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        target.symlink_to(victim)
    elif kind == "chardev":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own
    else:
        target.mkdir()
    mode = os.lstat(target).st_mode
    for args in (("report", run, "--out", target), ("view", run, "--out", target),
                 ("data", "export", "econnli", "--out", target), ("compare", run, run, "--junit", target)):
        rc, _, err = cli(*args)
        assert rc == 2 and "Traceback" not in err, (args, err)
        assert os.lstat(target).st_mode == mode and victim.read_text() == "keep me", args


def test_two_merges_into_one_folder_never_mix(cli, tmp_path):
    from econeval.run import shards
    from econeval.errors import UsageError

    runs = {}
    for name, model in (("a", "fake:a"), ("b", "fake:b")):
        for k in (1, 2):
            rc, _, err = cli("run", "--model", model, "--task", "econnli-zero", "--limit", "32", "--shard", f"{k}/2", "-q",
                             "--bootstrap", "0", "--out", tmp_path / name)
            assert rc == 0, err
        runs[name] = [tmp_path / name / f"shard-{k}-of-2" for k in (1, 2)]
    for attempt in range(6):
        out = tmp_path / f"merged{attempt}"
        results: dict = {}

        def merge(name):
            try:
                shards.merge(runs[name], out)
                results[name] = "ok"
            except UsageError as exc:
                results[name] = str(exc)

        threads = [threading.Thread(target=merge, args=(n,)) for n in ("a", "b")]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert sorted(results.values()).count("ok") == 1, results
        winner = next(n for n, v in results.items() if v == "ok")
        meta = json.loads((out / "run.json").read_text())
        assert meta["backend"]["model"]["name"] == winner
        assert {json.loads(line)["id"] for line in (out / "samples.jsonl").read_text().splitlines()}
        assert not list(tmp_path.glob(f".{out.name}.merging"))


def test_merge_into_the_current_folder_is_refused(cli, tmp_path, monkeypatch):
    rc, _, err = cli("run", "--model", "fake:a", "--task", "econnli-zero", "--limit", "8", "--shard", "1/1", "-q",
                     "--out", tmp_path / "r")
    assert rc == 0, err
    here = tmp_path / "here"
    here.mkdir()
    from econeval.run import shards
    from econeval.errors import UsageError

    monkeypatch.chdir(here)
    with pytest.raises(UsageError, match="current folder"):
        shards.merge([tmp_path / "r" / "shard-1-of-1"], Path("."))
    assert not list(here.iterdir())


# ---- readers that crashed -----------------------------------------------------------------------
def test_runs_and_view_do_not_wait_on_a_fifo_lock(cli_process, tmp_path):
    run = tmp_path / "run"
    from conftest import run_cli_inprocess

    rc, _, err = run_cli_inprocess("run", "--model", "fake:a", "--task", "econnli-zero", "--limit", "4", "-q", "--out", run)
    assert rc == 0, err
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, "status": "running"}))
    (run / ".lock").unlink()
    os.mkfifo(run / ".lock")
    rc, _, err = cli_process("runs", tmp_path, timeout=60)
    assert rc == 0, err
    rc, _, err = cli_process("view", run, "--out", tmp_path / "p.html", timeout=60)
    assert rc == 0, err


@pytest.mark.parametrize("edit", [
    {"identity": []}, {"identity": {"model": "x"}}, {"identity": {"model": {"settings": [1]}}},
    {"data_package": "1.0"}, {"options": ["x"]}, {"options": {"econnli-zero": 5}}, {"backend": 3},
])
def test_report_reads_wrongly_typed_run_json_fields(cli, tmp_path, edit):
    run = _run(cli, tmp_path / "run", n=4)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, **edit}))
    rc, _, err = cli("report", run)
    assert rc in (0, 2) and "Traceback" not in err and "internal error" not in err, err


@pytest.mark.parametrize("edit", [{"identity": True}, {"backend": [1]}, {"roles": "x"}, {"identity": {"roles": [1]}}])
def test_gate_and_compare_refuse_run_json_objects_of_another_type(cli, tmp_path, edit):
    run = _run(cli, tmp_path / "run", n=4)
    other = _run(cli, tmp_path / "other", n=4)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, **edit}))
    for args in (("gate", run, "--replay", other), ("gate", other, "--replay", run), ("compare", other, run)):
        rc, _, err = cli(*args)
        assert rc == 2 and "not a run description" in err and len(err.strip().splitlines()) == 1, (args, err)


def test_gate_refuses_a_task_entry_that_is_not_an_object(cli, tmp_path):
    run = _run(cli, tmp_path / "run", n=4)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, "tasks": {"econnli-zero": ["x"]}}))
    rc, _, err = cli("gate", run, "--replay", run)
    assert rc == 2 and "internal error" not in err and len(err.strip().splitlines()) <= 2


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


def _package(root: Path, **change):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    root.mkdir()
    (root / "elements.csv").write_text("element,setting,module\nlinear_system_eq,Foundations,Systems\n")
    row = dict(element="linear_system_eq", base_id="0", part=0, question_text="Solve x + 1 = 3. What is x?",
               options=["1", "2", "3", "4"], correct_index=1, grading="answer", type="standard", domain="shopping",
               perspective="second person", template_id="t0", consistency_rule=None)
    row.update(change)
    where = root / "data" / "linear_system_eq"
    where.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([row]), where / "test.parquet")
    return root


@pytest.mark.parametrize("change", [
    {"part": "one"}, {"correct_index": "b"}, {"options": None}, {"question_text": None},
    {"options": [str(i) for i in range(100_000)]}, {"options": "ABCD"},
    {"grading": "consistency", "correct_index": None, "consistency_rule": "r1:9x"},
    {"grading": "sometimes"},
])
def test_the_steer_me_package_reader_refuses_malformed_rows(cli, tmp_path, change):
    pkg = _package(tmp_path / "pkg", **change)
    rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "-T", f"questions={pkg}", "-q", "--out", tmp_path / "r")
    assert rc == 2 and "internal error" not in err and "Traceback" not in err, err


def test_the_steer_me_package_reader_refuses_a_fifo_and_a_non_utf8_table(cli, tmp_path):
    pkg = _package(tmp_path / "pkg")
    (pkg / "data" / "linear_system_eq" / "test.parquet").unlink()
    os.mkfifo(pkg / "data" / "linear_system_eq" / "test.parquet")
    rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "-T", f"questions={pkg}", "-q", "--out", tmp_path / "r")
    assert rc == 2 and "not a regular file" in err
    pkg2 = _package(tmp_path / "pkg2")
    (pkg2 / "elements.csv").write_bytes(b"element,setting\n\xff\xfe,x\n")
    rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "-T", f"questions={pkg2}", "-q", "--out", tmp_path / "r2")
    assert rc == 2 and "internal error" not in err


# ---- roles, embedders, verify ---------------------------------------------------------------------
def test_a_role_named_twice_is_refused(cli, tmp_path):
    rc, _, err = cli("run", "--model", "fake:a", "--task", "econnli-gen", "--role", "judge=fake:j1", "--role", "judge=fake:j2",
                     "--limit", "2", "--out", tmp_path / "r", "-q")
    assert rc == 2 and "given twice" in err


def test_the_command_lines_judge_wins_over_the_config_files(cli, tmp_path):
    conf = tmp_path / "c.toml"
    conf.write_text('[run.roles]\njudge = "fake:j1"\n')
    out = tmp_path / "r"
    rc, _, err = cli("run", "--model", "fake:a", "--task", "econnli-gen", "--config", conf, "--judge", "fake:j2", "--limit", "2",
                     "--out", out, "-q")
    assert rc == 0, err
    assert json.loads((out / "run.json").read_text())["roles"]["judge"]["name"] == "j2"


def test_verify_checks_the_stored_prompts(cli, tmp_path):
    base = _run(cli, tmp_path / "base", n=8)
    import shutil

    for n, change in enumerate((
        lambda r: {**r, "prompts": {k: v + " (edited)" for k, v in r["prompts"].items()}},
        lambda r: {**r, "prompt_hash": "0" * 16},
    )):
        b = tmp_path / f"b{n}"
        shutil.copytree(base, b)
        _edit(b, change)
        rc, _, err = cli("compare", b, base)
        assert rc == 2 and "contradicts itself" in err, (n, err)
    icl = _run(cli, tmp_path / "icl", n=8, extra=("--task", "econnli-icl"))
    _edit(icl, lambda r: {**r, "task": "econnli-zero"} if r["task"] == "econnli-icl" else None)
    rc, _, err = cli("compare", icl, base)
    assert rc == 2, err


def test_a_candidate_lacking_a_baseline_task_is_refused_for_that(cli, tmp_path):
    base = _run(cli, tmp_path / "base", n=8, extra=("--task", "econlogicqa-1shot"))
    cand = _run(cli, tmp_path / "cand", model="fake:b", n=8)
    rc, _, err = cli("gate", base, "--replay", cand)
    assert rc == 2 and "has no task econlogicqa-1shot" in err


def test_score_out_records_roles_in_its_identity(cli, tmp_path):
    pred = tmp_path / "p.jsonl"
    pred.write_text(json.dumps({"id": "econnli/test/0", "response": "No"}) + "\n")
    rc, _, err = cli("score", "--task", "econnli-zero", "--predictions", pred, "--out", tmp_path / "s")
    assert rc == 0, err
    assert "roles" in json.loads((tmp_path / "s" / "run.json").read_text())["identity"]


# ---- embedders: what an embedder is, in every check (items 8, 9) --------------------------------
@pytest.fixture
def two_poolings(tmp_path, monkeypatch):
    """Two embedder entries of the same weights, one pooling by CLS, one by the mean."""
    from tiny_bert import write_tiny_bert

    emb = write_tiny_bert(tmp_path / "tiny-bert")
    reg = tmp_path / "models.toml"
    reg.write_text(f'[embedders.e-cls]\npath = "{emb}"\npooling = "cls"\n'
                   f'[embedders.e-mean]\npath = "{emb}"\npooling = "mean"\nmax_length = 16\n')
    monkeypatch.setenv("ECONEVAL_MODELS", str(reg))


def test_the_same_answers_scored_by_two_embedders_are_not_compared(cli, tmp_path, two_poolings):
    run = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:a", "--task", "cfbenchmark-zero", "--limit", "8", "--embedder", "e-cls",
                     "--out", run, "-q", "--bootstrap", "0")
    assert rc == 0, err
    other = tmp_path / "rescored"
    rc, _, err = cli("score", "--task", "cfbenchmark-zero", "--predictions", run / "samples.jsonl", "--embedder", "e-mean",
                     "--out", other, "--bootstrap", "0")
    assert rc == 0, err
    for args in (("compare", run, other), ("gate", run, "--replay", other, "--max-drop", "0.005"),
                 ("gate", other, "--replay", run)):
        rc, out, err = cli(*args)
        assert rc == 2 and "role embedder" in err, (args, out, err)


def test_a_run_is_not_resumed_with_an_embedder_set_up_otherwise(cli, tmp_path, two_poolings):
    run = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:a", "--task", "cfbenchmark-zero", "--limit", "4", "--embedder", "e-cls",
                     "--out", run, "-q", "--bootstrap", "0")
    assert rc == 0, err
    before = (run / "samples.jsonl").read_bytes()
    rc, _, err = cli("run", "--model", "fake:a", "--task", "cfbenchmark-zero", "--limit", "8", "--embedder", "e-mean",
                     "--out", run, "-q", "--bootstrap", "0")
    assert rc == 2 and "pooling" in err, err
    assert (run / "samples.jsonl").read_bytes() == before


# ---- low: the gate says what compare says; view's item cap; a killed writer's leftovers ---------
def test_the_gate_says_what_differs_and_when_the_candidate_is_the_baseline(cli, tmp_path):
    import shutil

    base = _run(cli, tmp_path / "base", n=16)
    shutil.copytree(base, tmp_path / "renamed")
    rc, out, err = cli("gate", base, "--replay", tmp_path / "renamed")
    assert "the baseline's own run" in out, out
    cand = _run(cli, tmp_path / "cand", model="fake:b", n=16)
    rc, out, err = cli("gate", base, "--replay", cand)
    assert "differs: " in out and "fake" not in err, (out, err)


def test_view_shows_at_most_its_item_cap(cli, tmp_path, monkeypatch):
    from econeval.publish import browse

    run = _run(cli, tmp_path / "run", n=12)
    monkeypatch.setattr(browse, "SHOWN_ITEMS", 5)
    assert browse.write_view(run, tmp_path / "p.html") == 5
    page = (tmp_path / "p.html").read_text()
    assert page.count('<details class="item') == 5 and "the first 5 of 12 items shown" in page


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path):
    import subprocess
    import sys

    from econeval.results import write_atomic

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp_path / f".report.md.{int(dead.stdout)}.x1y2.tmp"
    orphan.write_text("half")
    live = tmp_path / f".report.md.{os.getppid()}.x1y2.tmp"  # a live writer's: kept
    live.write_text("busy")
    write_atomic(tmp_path / "report.md", b"whole")
    assert not orphan.exists() and live.exists() and (tmp_path / "report.md").read_text() == "whole"
