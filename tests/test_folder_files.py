"""Run folders and the files econeval writes or reads beside them: links and special files refused,
a full disk, merges that race or fail part way, outputs named by the user, a killed writer's
leftovers, locks that are FIFOs, damaged run files listed or refused in one line."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import fake_run, one_line, read_lines, scored_folder


@pytest.mark.parametrize("kind", ["fifo", "symlink", "chardev", "folder"])
def test_user_named_outputs_refuse_what_is_not_a_regular_file(cli, tmp_path, kind):
    run = fake_run(cli, tmp_path / "run", n=4)
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
    from econeval.errors import UsageError
    from econeval.run import shards

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
    from econeval.errors import UsageError
    from econeval.run import shards

    monkeypatch.chdir(here)
    with pytest.raises(UsageError, match="current folder"):
        shards.merge([tmp_path / "r" / "shard-1-of-1"], Path("."))
    assert not list(here.iterdir())


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


@pytest.mark.parametrize("member", [".lock", "samples.jsonl", "run.json"])
def test_a_symlinked_run_file_is_refused_and_its_target_untouched(cli, tmp_path, tiny_registry, member):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / member).symlink_to(victim)
    one_line(*cli("run", "--task", "econnli-zero", "--limit", "1", "--quiet", "--out", run, env=tiny_registry), 2,
             "symbolic link")
    assert victim.read_text() == "precious\n"


def test_fifos_are_refused_not_waited_on(cli, tmp_path, tiny_registry):
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "run.json")
    t0 = time.monotonic()
    one_line(*cli("run", "--task", "econnli-zero", "--limit", "1", "--out", run, env=tiny_registry, timeout=60), 2,
             "not a regular file")
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    one_line(*cli("models", "list", env={"ECONEVAL_MODELS": str(fifo)}, timeout=60), 2, "not a")
    assert time.monotonic() - t0 < 50


def test_a_folder_that_is_not_a_run_folder_is_refused(cli, tmp_path, tiny_registry):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    one_line(*cli("run", "--task", "econnli-zero", "--limit", "1", "--out", mine, env=tiny_registry), 2, "is not a run folder")
    assert sorted(os.listdir(mine)) == ["notes.txt"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_keeps_whole_chunks_and_the_resumed_run_equals_a_fresh_one(cli, tmp_path, tiny_registry):
    import shutil

    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(small)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        run = small / "run"
        args = ("run", "--task", "econnli-zero", "--limit", "200", "--quiet", "--bootstrap", "0")
        rc, out, err = cli(*args, "--out", run, env=tiny_registry)
        assert rc == 1 and "No space left on device" in err and "Traceback" not in err, err
        lines = (run / "samples.jsonl").read_bytes()
        assert lines == b"" or lines.endswith(b"\n")
        n = len(read_lines(run / "samples.jsonl"))
        assert n % 16 == 0 and n < 200  # whole chunks only
        meta = json.loads((run / "run.json").read_text())
        assert meta["status"] in ("failed", "running")  # "failed" with the reason, when the disk let run.json be written
        moved = tmp_path / "moved"
        shutil.copytree(run, moved)
    finally:
        subprocess.run(["umount", str(small)])
    assert cli(*args, "--out", moved, env=tiny_registry)[0] == 0
    fresh = tmp_path / "fresh"
    assert cli(*args, "--out", fresh, env=tiny_registry)[0] == 0
    key = lambda s: s["id"]  # noqa: E731
    assert sorted(read_lines(moved / "samples.jsonl"), key=key) == sorted(read_lines(fresh / "samples.jsonl"), key=key)


def test_an_unwritable_junit_path_is_one_line(cli, tmp_path):
    a = scored_folder(cli, tmp_path, "a")
    (tmp_path / "a-file").write_text("x")
    one_line(*cli("compare", a, a, "--bootstrap", "100", "--junit", tmp_path / "a-file" / "gate.xml"), 2, "a-file")


def test_a_merge_that_fails_part_way_leaves_nothing_and_the_same_merge_then_succeeds(cli, tmp_path, monkeypatch):
    base = tmp_path / "sharded"
    for k in (1, 2, 3):
        rc, _, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "40", "--shard", f"{k}/3", "--quiet",
                         "--out", base)
        assert rc == 0, err
    shards = [base / f"shard-{k}-of-3" for k in (1, 2, 3)]
    out = tmp_path / "merged"
    from econeval.store.folder import RunFolder

    def full_disk(self, name, doc):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(RunFolder, "write_results", full_disk)
        rc, _, err = cli("merge", *shards, "--out", out)
    assert rc == 1 and "No space left" in err, err
    assert not out.exists() and not list(tmp_path.glob(".merged*"))  # no half-written folder to block the retry
    (tmp_path / ".merged.merging").mkdir()  # what a merge killed with -9 leaves
    (tmp_path / ".merged.merging" / "samples.jsonl").write_text("{}\n")
    rc, _, err = cli("merge", *shards, "--out", out)
    assert rc == 0, err
    assert {p.name for p in out.iterdir()} >= {"run.json", "samples.jsonl", "results.json"}
    assert len(read_lines(out / "samples.jsonl")) == 40 and not (tmp_path / ".merged.merging").exists()


def test_damaged_run_files_are_listed_or_refused_in_one_line_not_crashed_on(cli, tmp_path):
    runs = tmp_path / "runs"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "4", "--quiet", "--out", runs / "good")
    assert rc == 0, err
    good = json.loads((runs / "good" / "run.json").read_text())
    for name, change in (("num", {"started": 5}), ("list", {"started": [1]}), ("model", {"backend": {"model": "x"}}),
                         ("tasks", {"tasks": "econnli-zero"})):
        (runs / name).mkdir()
        (runs / name / "run.json").write_text(json.dumps({**good, **change}))
    os.symlink(".", runs / "good" / "shard-1-of-2")  # a loop: the run is listed once
    rc, out, err = cli("runs", runs, "--json")
    assert rc == 0, err
    listed = json.loads(out)
    assert sorted(Path(r["folder"]).name for r in listed) == ["good", "list", "model", "num", "tasks"]
    # merge: a shard run.json with the wrong types is one line, exit 2, nothing written
    base = tmp_path / "sharded"
    for k in (1, 2):
        assert cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "32", "--shard", f"{k}/2", "--quiet",
                   "--out", base)[0] == 0
    shard1 = base / "shard-1-of-2" / "run.json"
    meta = json.loads(shard1.read_text())
    for change, needle in (({"shard": {**meta["shard"], "count": "2"}}, "shard.count"), ({"shard": {**meta["shard"], "count": 0}}, "shard.count"),
                           ({"shard": {**meta["shard"], "count": None}}, "shard.count"), ({"schedule": None}, "no schedule"),
                           ({"schedule": {**meta["schedule"], "chunk_items": 0}}, "chunk_items"), ({"bootstrap": "x"}, "bootstrap")):
        shard1.write_text(json.dumps({**meta, **change}))
        one_line(*cli("merge", base / "shard-1-of-2", base / "shard-2-of-2", "--out", tmp_path / "m"), 2, needle)
        assert not (tmp_path / "m").exists()


def test_junit_replaces_an_earlier_report_and_leaves_any_other_file(cli, tmp_path):
    """Issue #33 item 10: `--junit` (and `[gate] junit`) overwrote any existing file."""
    for name in ("a", "b"):
        assert cli("run", "--model", f"fake:{name}", "--task", "econlogicqa-1shot", "--limit", "4", "--quiet",
                   "--out", tmp_path / name)[0] == 0
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    for command in (("compare", tmp_path / "a", tmp_path / "b"), ("gate", tmp_path / "a", "--model", "fake:b", "--quiet")):
        one_line(*cli(*command, "--junit", notes), 2, "is not a JUnit report")
        assert notes.read_text() == "my notes\n"
    report = tmp_path / "report.xml"
    rc, _, _ = cli("compare", tmp_path / "a", tmp_path / "b", "--junit", report)
    first = report.read_text()
    assert first.startswith("<?xml") and "<testsuite" in first
    cli("compare", tmp_path / "a", tmp_path / "b", "--junit", report)
    assert report.read_text() == first  # an earlier report is replaced
