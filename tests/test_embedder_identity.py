"""What an embedder is, in every check: the same answers scored by two embedders are not compared,
and a run is not resumed with an embedder set up otherwise."""

from __future__ import annotations

import pytest


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
