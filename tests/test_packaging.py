"""econeval as it ships: the wheel (from the wheelhouse, offline) in a fresh virtual environment
with no access to the source tree, and the data package installed from its archive."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow  # the shipped product: wheel, binary or a real server


def sh(*args, cwd=None, env=None, check=True):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args}: rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """A wheelhouse built by tools/build_wheelhouse.py, installed with pip --no-index into a
    fresh venv; a data package written by the checkout's econeval."""
    base = tmp_path_factory.mktemp("shipped")
    sh(sys.executable, REPO / "tools" / "build_wheelhouse.py", "--out", base / "wheelhouse")
    sh(sys.executable, "-m", "venv", base / "venv")
    py = base / "venv" / "bin" / "python"
    sh(py, "-m", "pip", "install", "-q", "--no-index", "--find-links", base / "wheelhouse", "econeval")
    sh(sys.executable, "-m", "econeval", "data", "pack", "--out", base / "data.tar", cwd=REPO)
    return {"bin": base / "venv" / "bin" / "econeval", "py": py, "pack": base / "data.tar"}


@pytest.fixture
def clean_env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    return env


def test_the_wheel_works_without_the_source_tree(shipped, clean_env, tmp_path, tiny_model):
    empty = tmp_path / "empty"
    empty.mkdir()
    run = lambda *a, check=True: sh(shipped["bin"], *a, cwd=empty, env=clean_env, check=check)  # noqa: E731
    # nothing of the checkout is imported
    where = sh(shipped["py"], "-c", "import econeval, econeval.benchmarks.steer_me.generator as g; print(econeval.__file__); "
               "print(len(g.templates()))", cwd=empty, env=clean_env).stdout.split()
    assert "site-packages" in where[0] and str(REPO) not in where[0] and int(where[1]) == 64
    out = run("list", "--json").stdout
    suites = set(json.loads(out)["suites"])
    assert suites == {"econnli", "econlogicqa", "cfbenchmark", "steer-me", "steer-me-paper", "all"}
    # the wheel lists what the checkout lists: no suite is left out of the package
    here = sh(sys.executable, "-m", "econeval", "list", "--json", cwd=REPO, env={**os.environ}).stdout
    assert suites == set(json.loads(here)["suites"])
    out = run("models", "list").stdout
    assert "gemma3-270m" in out and "_registry/models.toml" in out  # the registry ships inside the package
    # no data yet: a run says exactly what to do
    proc = run("run", "--model", tiny_model, "--task", "econnli-zero", "--limit", "2", check=False)
    assert proc.returncode == 1 and "econeval data install" in proc.stderr and "Traceback" not in proc.stderr
    run("data", "install", shipped["pack"])
    assert "all data files match" in run("data", "verify").stdout
    assert "data package: " in run("--version").stdout
    out_dir = tmp_path / "run"
    run("run", "--model", tiny_model, "--task", "steer-me", "--task", "econnli-zero", "--limit", "2", "--quiet",
        "--out", out_dir)
    # the same items through the checkout: the same results
    ref = tmp_path / "ref"
    sh(sys.executable, "-m", "econeval", "run", "--model", tiny_model, "--task", "steer-me", "--task", "econnli-zero",
       "--limit", "2", "--quiet", "--out", ref, cwd=REPO, env={**os.environ, "ECONEVAL_HOME": str(tmp_path / "h2")})
    got = json.loads((out_dir / "results.json").read_text())["tasks"]
    assert got == json.loads((ref / "results.json").read_text())["tasks"]
    # the pages' templates and stylesheet ship in the wheel (package data): a report and a view render from it
    run("report", out_dir, "--format", "html", "--out", tmp_path / "r.html")
    run("view", out_dir, "--out", tmp_path / "v.html")
    assert '<table class="results">' in (tmp_path / "r.html").read_text() and '<details class="item' in (tmp_path / "v.html").read_text()


def test_a_corrupted_data_package_is_refused(shipped, clean_env, tmp_path):
    bad = tmp_path / "bad.tar"
    blob = bytearray(Path(shipped["pack"]).read_bytes())
    i = blob.find(b"econnli/test/5")
    blob[i + 20] ^= 1
    bad.write_bytes(bytes(blob))
    proc = sh(shipped["bin"], "data", "install", bad, env=clean_env, check=False)
    assert proc.returncode == 1 and "does not match the package's index" in proc.stderr
