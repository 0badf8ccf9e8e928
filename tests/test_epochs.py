"""`econeval run --epochs N`: N ordinary run folders under one parent (OUT/epoch-K), epoch k the
command with --seed S+k-1, each resumed as any run folder; `econeval report OUT` shows each number
as the mean ± std over the epochs, as the EconNLI paper reports its repeated runs."""

import json
import statistics

import pytest

from conftest import edit_samples, one_line, read_lines

TASKS = ("--task", "econnli-icl", "--task", "econnli-zero")  # ICL's demonstrations follow the seed; zero-shot's prompt does not


def _run(cli, out, *extra, limit=40):
    return cli("run", "--model", "fake:a", *TASKS, "--limit", str(limit), "--out", out, "-q", "--bootstrap", "0", *extra)


@pytest.fixture(scope="module")
def epochs(tmp_path_factory):
    from conftest import run_cli_inprocess as cli

    out = tmp_path_factory.mktemp("epochs") / "three"
    rc, stdout, err = _run(cli, out, "--epochs", "3")
    assert rc == 0, err
    return out, stdout


def test_each_epoch_is_the_run_with_its_seed(cli, tmp_path, epochs):
    out, stdout = epochs
    assert sorted(p.name for p in out.iterdir()) == ["epoch-1", "epoch-2", "epoch-3"]
    recs = [json.loads((out / f"epoch-{k}" / "run.json").read_text()) for k in (1, 2, 3)]
    assert [(r["seed"], r["seed_given"], r["status"]) for r in recs] == [(1234, False, "complete"), (1235, False, "complete"),
                                                                          (1236, False, "complete")]
    assert "the means over 3 epochs (seeds 1234, 1235, 1236" in stdout
    for where in (out, out.parent):  # `econeval runs` lists each epoch, given the parent or the folder above it
        rc, listed, err = cli("runs", where, "--json")
        assert rc == 0 and sorted(r["folder"] for r in json.loads(listed)) == [str(out / f"epoch-{k}") for k in (1, 2, 3)], err
    plain = tmp_path / "seed-1235"
    assert _run(cli, plain, "--seed", "1235")[0] == 0
    assert read_lines(plain / "samples.jsonl") == read_lines(out / "epoch-2" / "samples.jsonl")  # epoch 2: the run with --seed 1235
    demos = [{r["id"]: r["demonstrations"] for r in read_lines(out / f"epoch-{k}" / "samples.jsonl") if r["task"] == "econnli-icl"}
             for k in (1, 2, 3)]
    assert demos[0] != demos[1] != demos[2]  # each epoch draws its own ICL demonstrations


def test_the_report_shows_the_mean_and_std_over_the_epochs(cli, epochs):
    out, _ = epochs
    rc, doc, err = cli("report", out, "--format", "json")
    assert rc == 0, err
    doc = json.loads(doc)
    assert doc["runs"][0]["epochs"] == 3 and doc["runs"][0]["seed"] == [1234, 1235, 1236] and "3 epochs" in doc["runs"][0]["label"]
    table4 = next(t for t in doc["tables"] if t["id"] == "econnli-table4")
    icl = next(r for r in table4["rows"] if r["source"] == "run" and r["setting"] == "ICL")
    # an independent route: each epoch's own results.json, averaged here
    per = [json.loads((out / f"epoch-{k}" / "results.json").read_text())["tasks"]["econnli-icl"]["paper"] for k in (1, 2, 3)]
    f1 = [p["Average"]["f1"] for p in per]
    assert icl["values"][-1] == pytest.approx(statistics.fmean(f1)) and icl["std"][-1] == pytest.approx(statistics.stdev(f1))
    assert statistics.stdev(f1) > 0 and icl["intervals"] is None  # the spread over epochs, not an interval over items
    zero = next(r for r in table4["rows"] if r["source"] == "run" and r["setting"] == "Zero")
    assert zero["std"] == [0.0] * 9  # greedy zero-shot: every epoch the same
    rc, md, _ = cli("report", out)
    assert f"{statistics.fmean(f1):.3f} ± {statistics.stdev(f1):.3f} |" in md and "mean ± std over 3 epochs" in md
    rc, csv_text, _ = cli("report", out, "--format", "csv")
    assert csv_text.splitlines()[0].endswith(",n,std")


def test_an_epoch_resumes_as_any_run_folder_and_more_epochs_extend_the_parent(cli, tmp_path):
    out = tmp_path / "run"
    assert _run(cli, out, "--epochs", "2")[0] == 0
    whole = read_lines(out / "epoch-2" / "samples.jsonl")
    edit_samples(out / "epoch-2", lambda r: r if r["id"] not in {f"econnli/test/{i}" for i in range(32, 40)} else None)
    assert len(read_lines(out / "epoch-2" / "samples.jsonl")) == len(whole) - 16  # the last chunk of both tasks lost
    first = (out / "epoch-1" / "samples.jsonl").read_bytes()
    rc, _, err = _run(cli, out, "--epochs", "3")
    assert rc == 0, err
    assert sorted(read_lines(out / "epoch-2" / "samples.jsonl"), key=lambda r: (r["task"], r["id"])) == \
        sorted(whole, key=lambda r: (r["task"], r["id"]))  # rerun, the same answers
    assert (out / "epoch-1" / "samples.jsonl").read_bytes() == first and (out / "epoch-3" / "run.json").is_file()


def test_epochs_are_refused_where_they_do_not_fit(cli, tmp_path):
    plain = tmp_path / "plain"
    assert _run(cli, plain, limit=4)[0] == 0
    one_line(*_run(cli, plain, "--epochs", "2", limit=4), 2, "is a run folder", "epoch-1")
    parent = tmp_path / "parent"
    assert _run(cli, parent, "--epochs", "1", limit=4)[0] == 0
    one_line(*_run(cli, parent, limit=4), 2, "not a run folder")  # a plain run never mixes into the epochs' parent
    (parent / "notes.txt").write_text("mine")
    one_line(*_run(cli, parent, "--epochs", "1", limit=4), 2, "notes.txt", "not an epoch's run folder")
    one_line(*_run(cli, tmp_path / "s", "--epochs", "2", "--shard", "1/2", limit=4), 2, "--epochs and --shard")
    one_line(*cli("run", "--model", "fake:a", *TASKS, "--budget", "60", "--epochs", "2", "--out", tmp_path / "b", "-q"), 2,
             "--epochs repeats a whole run", "--budget")


def test_a_task_with_its_authors_seed_moves_it_with_the_epochs(cli, tmp_path):
    """STEER-ME without --seed draws with its authors' seed 42; in --epochs it drew with 42 in epoch 1
    but with the run's 1235 in epoch 2 (its 1234 + 1), so the epochs mixed two seed families. Each
    epoch now moves the authors' seed as far as the run's: 42, 43; with --seed 7: 7, 8."""
    for extra, seeds in (((), [42, 43]), (("--seed", "7"), [7, 8])):
        out = tmp_path / f"e{len(extra)}"
        rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "--limit", "8", "--out", out, "-q", "--bootstrap", "0",
                         "--epochs", "2", *extra)
        assert rc == 0, err
        got = [json.loads((out / f"epoch-{k}" / "run.json").read_text())["tasks"]["steer-me"]["settings"]["seed"]["value"]
               for k in (1, 2)]
        assert got == seeds
    rc, _, err = cli("report", tmp_path / "e0")  # each epoch re-derived with its own seed
    assert rc == 0, err


def test_the_figures_of_an_epochs_run_are_the_means_over_its_epochs(cli, tmp_path):
    """The report of an --epochs run showed each table number as the mean over the epochs but drew
    the figures made from items (STEER-ME's reliability diagram, Figs. 8, 11, 12) from epoch 1's
    alone: with the NOTA placement following the seed (-T car=true) the diagram was epoch 1's.
    Each figure is now drawn per epoch and averaged where the report shows that run alone (a
    figure with intervals over items is not: a note says it rests on epoch 1's items), and beside
    other runs the note says so for every figure."""
    out = tmp_path / "ep"
    rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "-T", "car=true", "--limit", "10", "--epochs", "2",
                     "--out", out, "-q", "--bootstrap", "0")
    assert rc == 0, err

    def report(*folders):
        path = tmp_path / f"r{len(list(tmp_path.glob('r*.json')))}.json"
        rc, _, err = cli("report", *folders, "--format", "json", "--out", path)
        assert rc == 0, err
        return {t["id"]: t for t in json.loads(path.read_text())["tables"]}

    per = [report(out / f"epoch-{k}")["steer-me-overall"]["figures"][0]["bins"] for k in (1, 2)]
    whole = report(out)
    got = whole["steer-me-overall"]["figures"][0]
    assert [b["low"] for b in per[0]] == [b["low"] for b in per[1]] == [b["low"] for b in got["bins"]]
    assert [b["accuracy"] for b in per[0]] != [b["accuracy"] for b in per[1]]  # the seeds place NOTA differently
    for key in ("accuracy", "confidence"):
        assert [b[key] for b in got["bins"]] == pytest.approx([(a[key] + b[key]) / 2 for a, b in zip(*per)])
    assert "the mean over 2 epochs" in got["caption"]
    assert any("rest on epoch 1's items" in n for n in whole["steer-me-fig12"]["notes"])  # bars with intervals over items
    beside = report(out, out / "epoch-1")["steer-me-overall"]  # with another run: said, not averaged
    assert any("rest on epoch 1's items (seed 1234)" in n for n in beside["notes"]), beside["notes"]
