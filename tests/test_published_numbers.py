"""What leaves econeval is what the samples make: the exports and `econeval report` recompute each
task's table from the records it counts and refuse a folder whose results.json says otherwise (in
one line, exit 2, as the gate refuses a folder that contradicts itself), whatever type the edit
left; a folder of another run format or prompt version is named as another econeval's."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
from conftest import fake_run, one_line, read_lines

TASK = "econnli-zero"


def _edit_results(folder, change) -> None:
    path = folder / "results.json"
    doc = json.loads(path.read_text())
    change(doc, doc["tasks"][TASK])
    path.write_text(json.dumps(doc))


def _set(doc, res, **paths):
    for dotted, value in paths.items():
        *head, last = dotted.split("__")
        node = res
        for k in head:
            node = node[k]
        node[last] = value


def _nudge_interval(res) -> None:
    """An interval moved by 0.01, still within its bounds and around its number: plausible."""
    name = next(k for k, v in res["intervals"].items() if isinstance(v, list))
    lo, hi = res["intervals"][name]
    res["intervals"][name] = [max(0.0, lo - 0.01), hi]


EDITS = {  # (how results.json was edited, what the one line names)
    "a plausible F1": (lambda d, r: _set(d, r, paper__Average__f1=0.95), "paper.Average.f1 is 0.95"),
    "an impossible F1": (lambda d, r: _set(d, r, paper__Average__f1=-5.0), "paper.Average.f1 is -5.0"),
    "a count": (lambda d, r: _set(d, r, n_unparsed=0), "n_unparsed is 0"),
    "a number as text": (lambda d, r: _set(d, r, paper__Average__f1="high"), "is 'high'"),
    "the task's entry a list": (lambda d, r: d["tasks"].__setitem__(TASK, [1, 2]), "its result is list"),
    "the paper table a list": (lambda d, r: _set(d, r, paper=["x"]), "its paper is a list of 1"),
    "n as text": (lambda d, r: _set(d, r, n="40"), "its n is '40'"),
    "intervals as text": (lambda d, r: _set(d, r, intervals="x"), "intervals ('x')"),
    "an interval beyond the bounds": (lambda d, r: _set(d, r, intervals={"method": "m", "F1": [0.2, 1.5]}), "interval of F1"),
    "a plausible interval": (lambda d, r: _nudge_interval(r), "redrawn with the run's seed"),
    "a task the run does not have": (lambda d, r: d["tasks"].__setitem__("econlogicqa-1shot", r), "a task the run does not have"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_exports_and_report_refuse_results_its_samples_do_not_make(cli, tmp_path, edit):
    """Issue #56 items 2 and 3: a results.json whose F1 said 0.95 (or -5.0) where the samples give
    0.56 was exported to lm-eval and Every Eval Ever and reported as such; an entry of another type
    crashed the exports or dropped the task silently. Now every command that publishes numbers
    refuses the folder in one line, exit 2, and writes nothing."""
    change, says = EDITS[edit]
    run = fake_run(cli, tmp_path / "run", n=40, extra=("--bootstrap", "50"))
    _edit_results(run, change)
    outs = tmp_path / "out"
    commands = [("export", run, "--format", "lm-eval", "--out", outs / "l.json"),
                ("export", run, "--format", "every-eval-ever", "--out", outs / "e.json"),
                ("export", run, "--format", "table", "--out", outs / "t.csv"),
                ("report", run, "--out", outs / "r.md"), ("report", run, "--format", "json", "--out", outs / "r.json")]
    if importlib.util.find_spec("inspect_ai"):  # the inspect extra (installed by tools/bootstrap.sh)
        commands.append(("export", run, "--format", "inspect", "--out", outs / "inspect"))
    for args in commands:
        line = one_line(*cli(*args), 2, "results.json", says, "contradicts itself")
        assert "Traceback" not in line and "internal error" not in line
    assert not outs.exists() or not any(outs.iterdir())


def test_results_of_a_smaller_limit_and_a_sample_in_one_folder_are_recomputed_from_their_own_items(cli, tmp_path):
    """A folder whose samples hold more items than results.json counts (a --sample run after a
    --limit run: the sample reaches items past the limit) is exported, each table recomputed from
    the items of its own file's selection; a sample's alone too."""
    run = tmp_path / "run"
    for extra in (("--limit", "20"), ("--sample", "30")):
        rc, _, err = cli("run", "--model", "fake:a", "--task", TASK, *extra, "--bootstrap", "50", "-q", "--out", run)
        assert rc == 0, err
    lines = [r for r in read_lines(run / "samples.jsonl") if r["task"] == TASK]
    assert len(lines) > 20 == json.loads((run / "results.json").read_text())["tasks"][TASK]["n"]
    rc, _, err = cli("export", run, "--format", "lm-eval", "--out", tmp_path / "l.json")
    assert rc == 0, err
    sample = tmp_path / "sample"
    rc, _, err = cli("run", "--model", "fake:a", "--task", TASK, "--sample", "0.05", "--bootstrap", "50", "-q", "--out", sample)
    assert rc == 0, err
    for args in (("export", sample, "--format", "every-eval-ever", "--out", tmp_path / "e.json"), ("report", sample)):
        rc, _, err = cli(*args)
        assert rc == 0, (args, err)
    _edit_results(run, lambda d, r: _set(d, r, paper__Average__f1=0.95))
    one_line(*cli("report", run), 2, "results.json", "paper.Average.f1 is 0.95")


def _as_run_format_2(folder) -> None:
    """The folder as econeval 0.1.0 wrote it in run format 2 (2026-11-30 to 2026-12-01): run_format
    2, the judge and embedder at the top of run.json, econnli-zero's prompts of version 1 (a run of
    spaces in its instruction was one space) in run.json and in every sample line."""
    meta = json.loads((folder / "run.json").read_text())
    meta.pop("roles", None)
    meta.update(run_format=2, econeval_version="0.1.0", judge=None, embedder=None)
    meta["tasks"][TASK]["prompt_version"] = "econnli-zero/1"
    (folder / "run.json").write_text(json.dumps(meta))
    rows = read_lines(folder / "samples.jsonl")
    for r in rows:
        r["prompts"] = {k: re.sub(r" {2,}", " ", v) for k, v in r["prompts"].items()}
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_folder_of_run_format_2_is_named_with_the_econeval_that_reads_it(cli, tmp_path):
    """Issue #56 item 4: a run folder of econeval 0.1.0 (run format 2) was refused as edited ("its
    stored prompts are not the prompts econnli-zero sends ... contradicts itself"). Now every reader
    that re-derives it names its layout and the econeval that reads it."""
    old = fake_run(cli, tmp_path / "old", n=8)
    new = fake_run(cli, tmp_path / "new", n=8)
    _as_run_format_2(old)
    for args in (("export", old, "--format", "lm-eval", "--out", tmp_path / "l.json"), ("report", old),
                 ("compare", old, new), ("gate", old, "--replay", new)):
        line = one_line(*cli(*args), 2, "is in run format 2", "written by econeval 0.1.0",
                        "econeval 0.1.0 from commit cf16fc0 (2026-11-30) until d6cfabe (2026-12-01) reads it",
                        "reads run format 3")
        assert "contradicts itself" not in line


def test_a_task_run_with_another_prompt_version_is_named_as_such(cli, tmp_path):
    """A folder of this run format whose task ran with an earlier prompt version (econeval 0.1.0
    after run format 3 began) is another econeval's to re-derive, not an edited one."""
    run = fake_run(cli, tmp_path / "run", n=8)
    _as_run_format_2(run)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, "run_format": 3}))
    line = one_line(*cli("export", run, "--format", "lm-eval", "--out", tmp_path / "l.json"), 2,
                    "econnli-zero was run with its prompts of econnli-zero/1", "sends econnli-zero/2")
    assert "contradicts itself" not in line


def test_intervals_and_estimates_are_redrawn_as_the_run_drew_them(cli, tmp_path):
    """An interval edited within its bounds (0.01 wider) or a sample's estimate said to be of
    another population was published as results.json said: intervals were only checked for being
    intervals. They are redrawn from the records with the run's seed and resamples (a sample's
    design from run.json), so an edit is refused; a run whose records were written in another order
    (a predictions file in its own order, shards merged) publishes as it is."""
    sample = tmp_path / "sample"
    rc, _, err = cli("run", "--model", "fake:a", "--task", TASK, "--sample", "40", "--bootstrap", "50", "-q", "--out", sample)
    assert rc == 0, err
    file = next(sample.glob("results-sample-*.json"))
    assert cli("export", sample, "--format", "lm-eval", "--out", tmp_path / "l.json")[0] == 0
    doc = json.loads(file.read_text())
    doc["tasks"][TASK]["estimate"]["of"] += 100
    file.write_text(json.dumps(doc))
    one_line(*cli("report", sample), 2, "estimate.of is", "redrawn", "contradicts itself")
    not_a_folder = tmp_path / "cache-file"
    not_a_folder.write_text("x")  # a cache that cannot hold marks costs a redraw, never a verdict
    one_line(*cli("report", sample, env={"ECONEVAL_CACHE": str(not_a_folder)}), 2, "estimate.of is", "redrawn")
    # a predictions file scored in an order of its own: its intervals rest on that order
    from econeval import data

    rows = data.load("econlogicqa", "test.jsonl")[:30][::-1]
    pred = tmp_path / "p.jsonl"
    pred.write_text("".join(json.dumps({"id": r["id"], "response": " " + (r["answer"] if i % 3 else "A")}) + "\n"
                            for i, r in enumerate(rows)))
    scored = tmp_path / "scored"
    assert cli("score", "--task", "econlogicqa-1shot", "--predictions", pred, "--out", scored)[0] == 0
    assert json.loads((scored / "results.json").read_text())["tasks"]["econlogicqa-1shot"]["intervals"]
    rc, _, err = cli("export", scored, "--format", "every-eval-ever", "--out", tmp_path / "e.json")
    assert rc == 0, err
