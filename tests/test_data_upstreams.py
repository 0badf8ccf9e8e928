"""Another release of a benchmark as a named upstream of its manifest (`upstreams`): `econeval data
build NAME --upstream UPSTREAM` accepts only the files the manifest pins, by hash; run.json's data
fingerprint names the upstream a run used. The real full releases are out of reach here (their
hashes unknown: the committed entries pin none, so the build refuses), so the mechanism runs on a
fixture release, pinned by the maintainer step (tools/refresh_manifests.py --upstream)."""

import csv
import json
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, one_line

SHARED = REPO.parent / "shared" / "datasets" / "econlogicqa"


@pytest.fixture
def release(tmp_path, monkeypatch):
    """A data folder holding EconLogicQA's committed manifest (built from its own upstream), and a
    fixture 'full release' in the hub layout: the reconstructed test split, and train and
    validation splits of other sizes than the reconstruction's."""
    if not SHARED.is_dir():
        pytest.skip("the upstream EconLogicQA files are not beside the repository")
    data_dir = tmp_path / "data"
    (data_dir / "econlogicqa").mkdir(parents=True)
    shutil.copy(REPO / "datasets_bundled" / "econlogicqa" / "manifest.json", data_dir / "econlogicqa")
    env = {"ECONEVAL_DATA_DIR": str(data_dir)}
    monkeypatch.setenv("ECONEVAL_DATA_DIR", str(data_dir))
    src = tmp_path / "src"
    hub = src / "econlogicqa_hub"
    hub.mkdir(parents=True)
    rec = SHARED / "reconstructed"
    shutil.copy(rec / "econlogicqa_test_reconstructed.csv", hub / "test.csv")
    for split, name, keep in (("train", "econlogicqa_train_reconstructed.csv", 150), ("validation", "econlogicqa_val_reconstructed.csv", 40)):
        with open(rec / name, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))[:keep]
        with open(hub / f"{split}.csv", "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return env, src, data_dir


def _manifest(data_dir):
    return json.loads((data_dir / "econlogicqa" / "manifest.json").read_text())


def test_a_named_upstream_builds_only_from_the_files_its_manifest_pins(cli, tmp_path, release):
    env, src, data_dir = release
    assert cli("data", "build", "econlogicqa", env=env)[0] == 0  # the manifest's own: the partial reconstruction
    # the committed entry pins no hash of the release (out of reach when it was written): nothing is accepted
    one_line(*cli("data", "build", "econlogicqa", "--upstream", "hub", "--source", src, env=env), 1,
             "pins no sha256 for test.csv", "tools/refresh_manifests.py")
    assert not (data_dir / "econlogicqa" / "upstream.json").exists()
    one_line(*cli("data", "build", "econlogicqa", "--upstream", "full", "--source", src, env=env), 2, "no upstream 'full'", "hub")
    one_line(*cli("data", "build", "steer-me", "--upstream", "authors", env=env), 1)  # not in this data folder
    # the maintainer step, with the release in hand, pins its files' and its build's hashes
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "refresh_manifests.py"), str(src), "econlogicqa", "--upstream", "hub"],
                          capture_output=True, text=True, env={**__import__("os").environ, **env}, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    hub = _manifest(data_dir)["upstreams"]["hub"]
    assert all(isinstance(v, str) and len(v) == 64 for v in hub["upstream"].values())
    assert hub["files"]["train.jsonl"]["rows"] == 150 and hub["files"]["validation.jsonl"]["rows"] == 40
    # the release's test split is the reconstruction's: the same built file
    assert hub["files"]["test.jsonl"]["sha256"] == _manifest(data_dir)["files"]["test.jsonl"]["sha256"]
    rc, out, err = cli("data", "build", "econlogicqa", "--upstream", "hub", "--source", src, env=env)
    assert rc == 0, err
    assert "econlogicqa (upstream hub): test.jsonl 130 rows, train.jsonl 150 rows, validation.jsonl 40 rows" in out
    rc, listing, _ = cli("data", "list", "--json", env=env)
    entry = json.loads(listing)[0]
    assert entry["built_from"] == "hub" and entry["files"]["train.jsonl"] == {"rows": 150, "state": "ok"}
    assert entry["files"]["flame_llama31_8b_predictions.jsonl"]["state"] == "ok"  # a file the release does not build stays
    # a run records the upstream it used; the manifest's own records none (its identity as before)
    run = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:a", "--task", "econlogicqa-1shot", "--limit", "4", "-q", "--bootstrap", "0",
                     "--out", run, env=env)
    assert rc == 0, err
    task = json.loads((run / "run.json").read_text())["tasks"]["econlogicqa-1shot"]
    assert task["dataset"]["upstream"] == "hub" and task["dataset"]["files"]["train.jsonl"] == hub["files"]["train.jsonl"]["sha256"]
    assert task["settings"]["shot_source"] == "train (150 rows of upstream hub)"
    rc, md, _ = cli("report", run, env=env)
    assert "few-shot demonstrations from the full train split (390 rows, upstream hub)" in md
    one_line(*cli("data", "pack", "--out", tmp_path / "p.tar", env=env), 1, "built from upstream hub")
    # a file other than the pinned one is refused by hash, and nothing is changed
    built = (data_dir / "econlogicqa" / "train.jsonl").read_bytes()
    with open(src / "econlogicqa_hub" / "train.csv", "a", encoding="utf-8") as fh:
        fh.write('"One more question?",a,b,c,d,"A, B, C, D"\n')
    one_line(*cli("data", "build", "econlogicqa", "--upstream", "hub", "--source", src, env=env), 1,
             "train.csv does not match the manifest's sha256")
    assert (data_dir / "econlogicqa" / "train.jsonl").read_bytes() == built
    # back to the manifest's own: the folder says so, and the run of the release is not resumed on it
    assert cli("data", "build", "econlogicqa", env=env)[0] == 0
    assert not (data_dir / "econlogicqa" / "upstream.json").exists()
    line = one_line(*cli("run", "--model", "fake:a", "--task", "econlogicqa-1shot", "--limit", "4", "-q", "--bootstrap", "0",
                         "--out", run, env=env), 2, "holds a different run")
    assert "dataset" in line


def test_the_committed_entries_say_what_is_missing(cli):
    """The full releases are out of reach here: EconLogicQA's hub entry knows the rows and its test
    split's built hash (the reconstruction's), not its files' hashes; the STEER-ME authors' package
    cannot even be listed. Each build refuses in one line saying so."""
    m = json.loads((REPO / "datasets_bundled" / "econlogicqa" / "manifest.json").read_text())
    hub = m["upstreams"]["hub"]
    assert {k: v["rows"] for k, v in hub["files"].items()} == {"test.jsonl": 130, "train.jsonl": 390, "validation.jsonl": 130}
    assert hub["files"]["test.jsonl"]["sha256"] == m["files"]["test.jsonl"]["sha256"]
    assert set(hub["upstream"]) == {"train.csv", "validation.csv", "test.csv"} and not any(hub["upstream"].values())
    one_line(*cli("data", "build", "steer-me", "--upstream", "authors"), 1, "lists none of the release's files", "not public",
             "-T questions=DIR")
    one_line(*cli("data", "build", "--upstream", "hub"), 2, "name the benchmark")
