"""STEER-ME's findings beyond its headline tables (issue #57): robustness across perspectives,
the mistakes wrong answers make, the options' order, the paper's experiment matrix. Each number
is checked against one computed here from the run's samples and the questions file."""

import json
from collections import defaultdict

import pytest

from econeval import data

from conftest import edit_samples, read_lines


def questions() -> dict[str, dict]:
    return {q["id"]: q for q in data.load("steer-me", "questions.jsonl")}


def fake_steer(cli, out, *extra, model="fake:a"):
    rc, _, err = cli("run", "--model", model, "--task", "steer-me", "--limit", "4", "--quiet", "--out", out,
                     "--bootstrap", "0", *extra)
    assert rc == 0, err
    return json.loads((out / "results.json").read_text())["tasks"], read_lines(out / "samples.jsonl")


def spread_of(samples, key_of) -> dict:
    """Accuracy over the answered questions of each group, and max - min."""
    by = defaultdict(list)
    for s in samples:
        if s["answered"]:
            by[key_of(s)].append(float(s["correct"]))
    acc = {k: sum(v) / len(v) for k, v in by.items()}
    return {"by_group": acc, "spread": max(acc.values()) - min(acc.values())}


# ---- 1. perspective -------------------------------------------------------------------------
def test_each_sample_records_its_perspective_and_results_report_robustness_across_them(cli, tmp_path):
    res, samples = fake_steer(cli, tmp_path / "run")
    qs = questions()
    assert all(s["perspective"] == qs[s["id"]]["perspective"] for s in samples)
    assert len({s["perspective"] for s in samples}) == 5  # the paper's five perspectives
    paper = res["steer-me"]["paper"]
    mine = spread_of(samples, lambda s: qs[s["id"]]["perspective"])
    got = paper["overall"]["perspective_robustness"]
    assert got["by_group"] == pytest.approx(mine["by_group"]) and got["spread"] == pytest.approx(mine["spread"])
    element = "deriving_demand"
    mine = spread_of([s for s in samples if s["element"] == element], lambda s: qs[s["id"]]["perspective"])
    assert paper["element"][element]["perspective_robustness"]["by_group"] == pytest.approx(mine["by_group"])


def test_the_table_export_fills_the_perspective_column(cli, tmp_path):
    fake_steer(cli, tmp_path / "run")
    rc, _, err = cli("export", tmp_path / "run", "--format", "table", "-o", tmp_path / "t.csv")
    assert rc == 0, err
    import csv

    rows = list(csv.DictReader(l for l in (tmp_path / "t.csv").read_text().splitlines() if not l.startswith("#")))
    qs = questions()
    assert rows and all(r["perspective"] == qs[r["item_id"]]["perspective"] for r in rows)


def test_a_folder_written_before_perspectives_were_recorded_is_read_and_resumed(cli, tmp_path):
    """Lines without the field (written by an earlier econeval) are no contradiction and take the
    question's perspective in the numbers; a line whose perspective was edited is refused."""
    run = tmp_path / "run"
    res, _ = fake_steer(cli, run)
    edit_samples(run, lambda r: {k: v for k, v in r.items() if k != "perspective"})
    rc, out, err = cli("compare", run, run, "--bootstrap", "100")
    assert rc == 0, err
    half = tmp_path / "half"  # a folder half written before: its other half is run now
    rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "--limit", "2", "--quiet", "--out", half, "--bootstrap", "0")
    assert rc == 0, err
    edit_samples(half, lambda r: {k: v for k, v in r.items() if k != "perspective"})
    again, samples = fake_steer(cli, half)
    assert sum("perspective" in s for s in samples) == len(samples) // 2
    assert again["steer-me"]["paper"]["overall"]["perspective_robustness"] == res["steer-me"]["paper"]["overall"]["perspective_robustness"]
    first = read_lines(run / "samples.jsonl")[0]["id"]
    other = "second person" if questions()[first]["perspective"] != "second person" else "first person"
    edit_samples(run, lambda r: {**r, "perspective": other} if r["id"] == first else r)
    rc, _, err = cli("compare", run, run, "--bootstrap", "100")
    assert rc == 2 and "perspective" in err and "contradicts itself" in err
