"""Run folders never lose or mix results: the lock, the identity check, strict reading of what is
in the folder, honest empty metrics, clean interrupts (issue: run folder integrity)."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, read_lines
from tiny_gguf import write_tiny_llama


@pytest.fixture
def env(tiny_registry):
    return tiny_registry


lines = read_lines


def start(args, env):
    return subprocess.Popen([sys.executable, "-m", "econeval", *map(str, args)], cwd=REPO, env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_samples(path, n, proc, timeout=120):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(proc.communicate())
        time.sleep(0.05)
    raise AssertionError("no progress")


RUN = ("run", "--task", "econnli-zero", "--threads", "1", "--quiet")


def test_a_second_process_is_refused_while_the_first_holds_the_folder(cli, tmp_path, env):
    out = tmp_path / "run"
    first = start([*RUN, "--limit", "200", "--out", out], env)
    try:
        wait_for_samples(out / "samples.jsonl", 16, first)
        rc, _, err = cli(*RUN, "--limit", "5", "--out", out, env=env)
        assert rc == 2 and "is in use by pid" in err and str(first.pid) in err
    finally:
        rc1 = first.wait(timeout=300)
    assert rc1 == 0
    samples = lines(out / "samples.jsonl")
    assert len(samples) == 200 and len({s["id"] for s in samples}) == 200
    assert json.loads((out / "results.json").read_text())["tasks"]["econnli-zero"]["n"] == 200


def test_a_stale_lock_from_a_dead_process_is_taken_over(cli, tmp_path, env):
    out = tmp_path / "run"
    proc = start([*RUN, "--limit", "200", "--out", out], env)
    wait_for_samples(out / "samples.jsonl", 16, proc)
    proc.kill()
    proc.wait()
    assert "pid" in (out / ".lock").read_text()
    rc, _, err = cli(*RUN, "--limit", "200", "--out", out, env=env)
    assert rc == 0, err
    assert len(lines(out / "samples.jsonl")) == 200


def test_what_is_in_the_folder_is_never_adopted_or_rewritten(cli, tmp_path, env):
    # samples but no run.json
    a = tmp_path / "a"
    a.mkdir()
    (a / "samples.jsonl").write_text(json.dumps({"id": "econnli/test/0", "task": "econnli-zero", "parsed": 1}) + "\n")
    rc, _, err = cli(*RUN, "--limit", "2", "--out", a, env=env)
    assert rc == 2 and "samples.jsonl but no run.json" in err
    # a line in the middle that does not parse, and one without its task
    b = tmp_path / "b"
    assert cli(*RUN, "--limit", "3", "--out", b, env=env)[0] == 0
    good = (b / "samples.jsonl").read_bytes().splitlines(keepends=True)
    for bad in (b"garbage\n", b'{"id": "econnli/test/9"}\n'):
        content = good[0] + bad + b"".join(good[1:])
        (b / "samples.jsonl").write_bytes(content)
        rc, _, err = cli(*RUN, "--limit", "3", "--out", b, env=env)
        assert rc == 2 and "samples.jsonl:2 is not a sample line" in err
        assert (b / "samples.jsonl").read_bytes() == content
    # a corrupt run.json
    (b / "samples.jsonl").write_bytes(b"".join(good))
    (b / "run.json").write_text("{not json")
    rc, _, err = cli(*RUN, "--limit", "3", "--out", b, env=env)
    assert rc == 2 and "run.json cannot be read" in err and "Traceback" not in err


def test_a_smaller_limit_goes_beside_the_larger_table(cli, tmp_path, env):
    out = tmp_path / "run"
    assert cli(*RUN, "--limit", "6", "--out", out, env=env)[0] == 0
    big = (out / "results.json").read_text()
    rc, _, err = cli(*RUN, "--limit", "2", "--out", out, env=env)
    assert rc == 0, err
    assert (out / "results.json").read_text() == big
    assert json.loads((out / "results-limit-2.json").read_text())["tasks"]["econnli-zero"]["n"] == 2
    assert len(lines(out / "samples.jsonl")) == 6
    rc, _, err = cli(*RUN, "--limit", "8", "--out", out, env=env)  # a larger one extends the folder
    assert rc == 0 and json.loads((out / "results.json").read_text())["tasks"]["econnli-zero"]["n"] == 8


def test_a_model_replaced_by_another_of_the_same_size_and_mtime_is_noticed(cli, tmp_path):
    model = write_tiny_llama(tmp_path / "m.gguf", seed=1)
    other = write_tiny_llama(tmp_path / "other.gguf", seed=2)
    assert model.stat().st_size == other.stat().st_size
    out = tmp_path / "run"
    assert cli("run", "--model", model, *RUN[1:], "--limit", "2", "--out", out)[0] == 0
    st = model.stat()
    model.write_bytes(other.read_bytes())
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
    rc, _, err = cli("run", "--model", model, *RUN[1:], "--limit", "2", "--out", out)
    assert rc == 2 and "model.sha256" in err


def test_non_finite_scores_are_errors_not_numbers(cli, tmp_path):
    broken = write_tiny_llama(tmp_path / "nan.gguf", nan=True)
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", broken, "--task", "econnli-zero", "--limit", "4", "--quiet", "--out", out)
    assert rc == 1 and "4 item(s) with errors" in err and "non-finite" in err
    res = json.loads((out / "results.json").read_text())["tasks"]["econnli-zero"]
    assert res["n_errors"] == 4 and res["n_scored"] == 0
    assert res["paper"]["Average"]["f1"] is None and "logprob" not in res["extras"]
    assert all(s["error"] for s in lines(out / "samples.jsonl"))


def test_everything_skipped_gives_no_numbers_and_a_failing_exit(cli, tmp_path, env):
    out = tmp_path / "run"
    rc, _, err = cli("run", "--task", "econnli-icl", "--n-ctx", "256", "--limit", "5", "--quiet", "--out", out, env=env)
    assert rc == 1 and "all 5 items skipped" in err
    res = json.loads((out / "results.json").read_text())["tasks"]["econnli-icl"]
    assert res["n_skipped"] == 5 and res["paper"]["Average"]["f1"] is None and res["paper"]["accuracy"] is None


@pytest.mark.parametrize("lp,needle", [
    ({"Yes": 0.5, "No": -1.0}, "finite and at most 0"),
    ({"Yes": -0.1, "No": -0.2}, "add up to more than 1"),
    ({"Yes": True, "No": -1.0}, "map options to numbers"),
    ({"Yes": -0.1, "Maybe": -3.0}, "option(s) Maybe that econnli-zero does not ask for"),
    ({"Yes": 1000, "No": -1.0}, "finite and at most 0"),
])
def test_score_refuses_impossible_log_probabilities(cli, tmp_path, lp, needle):
    p = tmp_path / "p.jsonl"
    p.write_text(json.dumps({"id": "econnli/test/0", "response": "Yes", "option_logprobs": lp}) + "\n")
    rc, _, err = cli("score", "--task", "econnli-zero", "--predictions", p)
    assert rc == 2 and needle in err and "Traceback" not in err


def test_score_refuses_a_huge_response_quickly(cli, tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text(json.dumps({"id": "cfbenchmark/risk/0", "response": "风险" * 2_000_000}) + "\n")
    rc, _, err = cli("score", "--task", "cfbenchmark-zero", "--predictions", p)
    assert rc == 2 and "longer than" in err


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_marks_the_run_and_resumes_exactly(cli, tmp_path, env, sig, code):
    out = tmp_path / "run"
    proc = start([*RUN, "--limit", "120", "--out", out], env)
    wait_for_samples(out / "samples.jsonl", 32, proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert "interrupted" in err and "resume with the same command: " in err and "-m econeval run" in err and "Traceback" not in err
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "interrupted"
    done = lines(out / "samples.jsonl")
    assert 32 <= len(done) < 120 and len(done) % 16 == 0  # whole chunks only
    timed = meta["timing"]["econnli-zero"]  # what ran is timed, the chunk in flight included
    assert timed["items_run"] == len(done) and timed["seconds"] > 0 and timed["tokens_evaluated"] > 0
    rc, _, err2 = cli(*RUN, "--limit", "120", "--out", out, env=env)
    assert rc == 0, err2
    ref = tmp_path / "ref"
    assert cli(*RUN, "--limit", "120", "--out", ref, env=env)[0] == 0
    strip = lambda d: {k: v for k, v in d.items() if k not in ("calls",)}  # noqa: E731
    assert [strip(s) for s in lines(out / "samples.jsonl")] == [strip(s) for s in lines(ref / "samples.jsonl")]
    assert (out / "results.json").read_text() == (ref / "results.json").read_text().replace(str(ref), str(out))


def test_bad_arguments_fail_cleanly_before_the_model_loads(cli, tmp_path, env):
    def fails(code, needle, *args):
        rc, out, err = cli(*args, env=env)
        assert rc == code and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err

    fails(2, "threads 100000 is out of range", "run", "--task", "econnli-zero", "--threads", "100000", "--out", tmp_path / "t")
    fails(2, "--limit", "run", "--task", "econnli-zero", "--limit", "99999999999999999999", "--out", tmp_path / "l")
    assert not (tmp_path / "l").exists()
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    if os.geteuid() != 0:  # root writes anywhere
        fails(2, "cannot use", "run", "--task", "econnli-zero", "--out", ro / "x")
    (tmp_path / "file").write_text("x")
    fails(2, "cannot use", "run", "--task", "econnli-zero", "--limit", "1", "--out", tmp_path / "file" / "sub")
    fails(2, "give --suite or --task, not both", "run", "--suite", "econnli", "--task", "econlogicqa-1shot")


def test_the_same_task_twice_runs_once(cli, tmp_path, env):
    rc, out, err = cli("run", "--task", "econnli-zero", "--task", "econnli-zero", "--limit", "2", "--quiet",
                       "--out", tmp_path / "r", env=env)
    assert rc == 0, err
    assert out.count("econnli-zero") == 1 and len(lines(tmp_path / "r" / "samples.jsonl")) == 2


@pytest.mark.parametrize("entry,needle", [
    ('[models.m]\npath = "x.gguf"\nn_ctx = "big"\n', "n_ctx must be an integer"),
    ("[models.m]\npath = 42\n", "path must be a string"),
    ('[models.m]\npath = "x.gguf"\nn_gpu_layers = "all"\n', "n_gpu_layers must be an integer"),
    ('[models.m]\npath = "x.gguf"\nn_ctx = -5\n', "n_ctx must be 256 to 1,048,576 tokens, not -5"),
    # llama.cpp aborts (SIGABRT) at 1; 2**32 + 128 wraps to 128 and 2**40 to 0 in its 32-bit field
    ('[models.m]\npath = "x.gguf"\nn_ctx = 1\n', "n_ctx must be 256 to 1,048,576 tokens, not 1"),
    ('[models.m]\npath = "x.gguf"\nn_ctx = 4294967424\n', "not 4,294,967,424"),
    ('[models.m]\npath = "x.gguf"\nn_ctx = 1099511627776\n', "not 1,099,511,627,776"),
    ('[models.m]\npackage = "this"\n', "package 'this' is not one econeval can assemble"),
    ('[embedders.e]\npooling = "cls"\n', "embedder 'e' needs a path"),
])
def test_registry_mistakes_name_the_file_and_key(cli, tmp_path, entry, needle):
    reg = tmp_path / "models.toml"
    reg.write_text(entry)
    rc, _, err = cli("models", "list", env={"ECONEVAL_MODELS": str(reg)})
    assert rc == 2 and needle in err and str(reg) in err and "Traceback" not in err


def test_registry_file_problems(cli, tmp_path):
    bad = tmp_path / "latin1.toml"
    bad.write_bytes('[models.m]\ndescription = "caf\xe9"\npath = "x.gguf"\n'.encode("latin-1"))
    rc, _, err = cli("models", "list", env={"ECONEVAL_MODELS": str(bad)})
    assert rc == 2 and "cannot read model registry" in err and str(bad) in err
    rc, _, err = cli("models", "list", env={"ECONEVAL_MODELS": str(tmp_path / "missing.toml")})
    assert rc == 2 and "ECONEVAL_MODELS names" in err


def test_stress_several_processes_killed_at_random(tmp_path, env):
    """Rounds of 3 processes racing for one folder, each killed at a random moment; the folder
    ends with every item exactly once and the same table as an undisturbed run."""
    rng = random.Random(7)
    out, ref = tmp_path / "run", tmp_path / "ref"
    args = [*RUN, "--limit", "96"]
    for _ in range(4):
        procs = [start([*args, "--out", out], env) for _ in range(3)]
        time.sleep(rng.uniform(0.5, 2.5))
        for p in procs:
            p.send_signal(rng.choice([signal.SIGKILL, signal.SIGTERM, signal.SIGINT]))
        for p in procs:
            p.wait(timeout=120)
            # -2 / -15: the signal came before Python had started econeval
            assert p.returncode in (0, 2, 130, 143, -9, -2, -15), p.communicate()
    final = subprocess.run([sys.executable, "-m", "econeval", *args, "--out", out], cwd=REPO, env={**os.environ, **env},
                           capture_output=True, text=True)
    assert final.returncode == 0, final.stderr
    samples = lines(out / "samples.jsonl")
    assert len(samples) == 96 and len({s["id"] for s in samples}) == 96
    subprocess.run([sys.executable, "-m", "econeval", *args, "--out", ref], cwd=REPO, env={**os.environ, **env}, check=True)
    got = json.loads((out / "results.json").read_text())["tasks"]
    assert got == json.loads((ref / "results.json").read_text())["tasks"]
