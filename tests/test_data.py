"""The data package: deterministic build, manifest checks, export."""

import json
import shutil

from econeval import data


def test_build_is_deterministic_and_matches_the_manifests(cli, tmp_path):
    dst = tmp_path / "data"
    shutil.copytree(data.data_dir(), dst, ignore=shutil.ignore_patterns("*.jsonl", "__pycache__"))
    env = {"ECONEVAL_DATA_DIR": str(dst)}
    rc, out, err = cli("data", "build", "econnli", "econlogicqa", env=env)
    assert rc == 0, err
    assert "econnli: test.jsonl 1026 rows, train.jsonl 10810 rows" in out
    for bench in ("econnli", "econlogicqa"):
        for name in data.manifest(bench)["files"]:
            assert (dst / bench / name).read_bytes() == (data.data_dir() / bench / name).read_bytes()


def test_build_refuses_an_upstream_file_that_is_not_the_recorded_release(cli, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(data.default_source() / "econnli", src / "econnli")
    (src / "econnli" / "raw" / "EconNLI_test.csv").chmod(0o644)
    with open(src / "econnli" / "raw" / "EconNLI_test.csv", "a") as fh:
        fh.write("x,y,z,w,1\n")
    dst = tmp_path / "data"
    shutil.copytree(data.data_dir(), dst, ignore=shutil.ignore_patterns("*.jsonl", "__pycache__"))
    rc, out, err = cli("data", "build", "econnli", "--source", src, env={"ECONEVAL_DATA_DIR": str(dst)})
    assert rc == 1 and "does not match the manifest's sha256" in err
    assert not (dst / "econnli" / "test.jsonl").exists()


def test_list_shows_versions_licences_and_partial_splits(cli):
    rc, out, _ = cli("data", "list")
    assert rc == 0
    assert "econnli 1.0.0  [built]" in out
    assert "PARTIAL reconstruction: 189 of 390" in out
    rc, out, _ = cli("data", "list", "--json")
    rows = {r["benchmark"]: r for r in json.loads(out)}
    assert rows["econlogicqa"]["files"]["test.jsonl"] == {"rows": 130, "state": "ok"}


def test_verify_and_export(cli, tmp_path):
    rc, out, _ = cli("data", "verify")
    assert rc == 0 and "match" in out
    target = tmp_path / "items.jsonl"
    rc, _, err = cli("data", "export", "econlogicqa", "--out", target)
    assert rc == 0, err
    rows = [json.loads(l) for l in target.read_text().splitlines()]
    assert len(rows) == 130 and rows[5]["id"] == "econlogicqa/test/5" and set(rows[0]["options"]) == set("ABCD")
    assert cli("data", "export", "nosuch", "--out", target)[0] == 1
