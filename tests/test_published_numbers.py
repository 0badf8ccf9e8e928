"""What leaves econeval is what the samples make: the exports and `econeval report` recompute each
task's table from the records it counts and refuse a folder whose results.json says otherwise (in
one line, exit 2, as the gate refuses a folder that contradicts itself), whatever type the edit
left."""

from __future__ import annotations

import importlib.util
import json

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
