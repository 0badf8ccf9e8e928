"""`econeval compare` as a release gate, on run folders written by `econeval score --out`."""

import json
import xml.etree.ElementTree as ET

import pytest

from econeval import data
from econeval.judge.compare import mcnemar_exact

from conftest import read_lines


def _scored(cli, tmp_path, name, wrong_every=0, seed=1234):
    """A run folder from predictions: gold orderings, every k-th one made wrong."""
    rows = data.load("econlogicqa", "test.jsonl")[:60]
    pred = tmp_path / f"{name}.jsonl"
    lines = []
    for i, r in enumerate(rows):
        answer = r["answer"]
        if wrong_every and i % wrong_every == 0:
            answer = ", ".join(reversed(answer.split(", ")))
        lines.append({"id": r["id"], "response": " " + answer})
    pred.write_text("\n".join(json.dumps(x) for x in lines))
    out = tmp_path / name
    rc, stdout, err = cli("score", "--task", "econlogicqa-1shot", "--predictions", pred, "--seed", seed, "--out", out)
    assert rc == 0, err
    assert json.loads((out / "results.json").read_text())["tasks"] == json.loads(stdout)["tasks"]
    return out


def test_mcnemar_exact_matches_hand_computation():
    assert mcnemar_exact(0, 0) == 1.0
    assert abs(mcnemar_exact(0, 5) - 2 / 32) < 1e-12  # 2 * P(X <= 0), X ~ Bin(5, 1/2)
    assert abs(mcnemar_exact(1, 9) - 2 * 11 / 1024) < 1e-12


def test_a_run_compared_with_itself_passes_where_its_items_can_resolve_the_margin(cli, tmp_path):
    base = _scored(cli, tmp_path, "base")
    assert len(read_lines(base / "samples.jsonl")) == 60
    rc, out, err = cli("compare", base, base, "--bootstrap", "200", "--max-drop", "0.1")
    assert rc == 0, err
    assert "econlogicqa-1shot" in out and "regression" not in out and out.strip().splitlines()[-1].startswith("verdict: pass")
    # 60 identical answers cannot rule out a drop of 0.02 (a discordance rate up to 3.7/60 fits them)
    rc, out, _ = cli("compare", base, base, "--bootstrap", "200")
    assert rc == 3 and "verdict: inconclusive" in out and "run more items" in out


def test_few_items_are_inconclusive_and_say_what_they_could_detect(cli, tmp_path):
    rows = data.load("econlogicqa", "test.jsonl")[:8]
    folders = []
    for name, flip in (("b", set()), ("c", {0, 4})):  # 2 of 8 answers made wrong: -0.25, not separable from 0 here
        pred = tmp_path / f"{name}.jsonl"
        pred.write_text("\n".join(json.dumps({"id": r["id"], "response": " " + (", ".join(reversed(r["answer"].split(", ")))
                                                                                if i in flip else r["answer"])})
                                  for i, r in enumerate(rows)))
        assert cli("score", "--task", "econlogicqa-1shot", "--predictions", pred, "--out", tmp_path / name)[0] == 0
        folders.append(tmp_path / name)
    rc, out, _ = cli("compare", *folders, "--format", "json")
    doc = json.loads(out)
    acc = next(r for r in doc["rows"] if r["metric"] == "accuracy")
    assert rc == 3 and doc["verdict"] == "inconclusive" and acc["verdict"] == "inconclusive"
    assert acc["diff"] == -0.25 and acc["high"] == 0.0 and acc["detectable"] > 0.25


def test_a_clear_drop_fails_the_gate_and_the_junit_file_says_so(cli, tmp_path):
    base = _scored(cli, tmp_path, "base")
    cand = _scored(cli, tmp_path, "cand", wrong_every=2)  # accuracy 1.0 -> 0.5
    junit = tmp_path / "gate.xml"
    rc, out, err = cli("compare", base, cand, "--bootstrap", "300", "--junit", junit, "--format", "json")
    assert rc == 1 and "regression: econlogicqa-1shot accuracy" in err
    rows = {r["metric"]: r for r in json.loads(out)["rows"]}
    acc = rows["accuracy"]
    assert acc["baseline"] == 1.0 and acc["candidate"] == 0.5 and acc["diff"] == -0.5
    assert acc["high"] < 0 and acc["p_mcnemar"] < 1e-6 and acc["verdict"] == "regression"
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == str(sum(r["verdict"] == "regression" for r in rows.values()))
    failed = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert any(c.get("name") == "accuracy" and "dropped from 1.0000 to 0.5000" in c.find("failure").get("message") for c in failed)
    # the other way round is an improvement, not a failure (at a margin 60 items can resolve for the unanswered share,
    # which neither run has: 60 agreeing pairs cannot rule out a rise of 0.02, 3.7/60 can be)
    assert cli("compare", cand, base, "--bootstrap", "200", "--max-drop", "0.1")[0] == 0


def test_incomparable_runs_are_refused(cli, tmp_path):
    base = _scored(cli, tmp_path, "base")
    other_seed = _scored(cli, tmp_path, "seed7", seed=7)
    rc, _, err = cli("compare", base, other_seed)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "used different seeds" in err  # per-item draws differ
    rc, _, err = cli("compare", base, tmp_path / "nope")
    assert rc == 2


def test_intervals_contain_the_estimate_and_narrow_with_more_items(cli, tmp_path):
    widths = []
    for n in (20, 120):
        rows = data.load("econlogicqa", "test.jsonl")[:n]
        pred = tmp_path / f"p{n}.jsonl"
        pred.write_text("\n".join(json.dumps({"id": r["id"], "response": r["answer"] if i % 3 else "A, B, C, D"})
                                  for i, r in enumerate(rows)))
        rc, out, err = cli("score", "--task", "econlogicqa-1shot", "--predictions", pred)
        assert rc == 0, err
        res = json.loads(out)["tasks"]["econlogicqa-1shot"]
        lo, hi = res["intervals"]["accuracy"]
        assert lo <= res["paper"]["accuracy"] <= hi and lo < hi
        widths.append(hi - lo)
        assert "1000 resamples" in res["intervals"]["method"]
    assert widths[1] < widths[0]
    rc, out, _ = cli("score", "--task", "econlogicqa-1shot", "--predictions", pred, "--bootstrap", "0")
    assert "intervals" not in json.loads(out)["tasks"]["econlogicqa-1shot"]


def test_compare_and_gate_write_junit_one_way():
    """One JUnit writer (junit.py): counts, escaped names and messages, failures and skips."""
    from econeval.judge.compare import Row
    from econeval.judge.gate import junit as gate_junit

    rows = [Row('a"<b>', "accuracy", 10, None, None, -0.1, -0.2, -0.05, None, "regression", of=10, failed=0),
            Row("t", "F1", 5, None, None, 0.0, -0.1, 0.1, None, "inconclusive", of=9, failed=1),
            Row("t", "P", 9, None, None, 0.0, -0.01, 0.01, None, "pass", of=9, failed=0)]
    root = ET.fromstring(gate_junit(rows, 0.05))
    assert (root.get("name"), root.get("tests"), root.get("failures"), root.get("skipped")) == ("econeval gate", "3", "1", "1")
    cases = list(root.iter("testcase"))
    assert cases[0].get("classname") == 'a"<b>' and cases[0].find("failure").get("message").startswith("regression: diff -0.1000")
    assert cases[1].find("skipped").get("message").startswith("inconclusive:") and cases[2].find("failure") is None


def _flipped(cli, tmp_path, n, flip, name):
    """A folder of econlogicqa-1shot's first n items scored from predictions: the gold ordering,
    reversed (wrong) for the items in `flip`."""
    rows = data.load("econlogicqa", "test.jsonl")[:n]
    pred = tmp_path / f"{name}.jsonl"
    pred.write_text("\n".join(json.dumps({"id": r["id"], "response": " " + (", ".join(reversed(r["answer"].split(", ")))
                                                                            if i in flip else r["answer"])})
                              for i, r in enumerate(rows)))
    assert cli("score", "--task", "econlogicqa-1shot", "--predictions", pred, "--out", tmp_path / name)[0] == 0
    return tmp_path / name


def test_two_items_are_too_few_for_any_verdict_though_the_bootstrap_sees_one(cli, tmp_path):
    """Both items wrong in the candidate: every bootstrap draw is -1, an interval of one point that
    excludes zero. An exact paired test cannot show any change with 2 items (its smallest p is 0.5),
    so the metric is inconclusive, "too few items", not a regression (the issue's 2-item case)."""
    base, cand = _flipped(cli, tmp_path, 2, set(), "b2"), _flipped(cli, tmp_path, 2, {0, 1}, "c2")
    rc, out, err = cli("compare", base, cand, "--format", "json", "--max-drop", "0.1")
    doc = json.loads(out)
    acc = next(r for r in doc["rows"] if r["metric"] == "accuracy")
    assert (acc["diff"], acc["low"], acc["high"]) == (-1.0, -1.0, -1.0)  # the degenerate interval the bootstrap gives
    assert rc == 3 and acc["verdict"] == "inconclusive" and acc["note"].startswith("too few items") and acc["p_paired"] == 0.5
    assert doc["verdict_line"].startswith("verdict: inconclusive: too few items")
    rc, out, _ = cli("compare", base, cand, "--max-drop", "0.1")
    assert rc == 3 and "too few items" in out and "REGRESSION" not in out


def test_an_exact_paired_test_confirms_a_clear_drop_over_a_dozen_items(cli, tmp_path):
    """12 items all made wrong: the exact sign-flip test over all 4,096 assignments gives 2/4096,
    McNemar's exact p for 12 discordant pairs, and the regression stands."""
    base, cand = _flipped(cli, tmp_path, 12, set(), "b12"), _flipped(cli, tmp_path, 12, set(range(12)), "c12")
    rc, out, _ = cli("compare", base, cand, "--format", "json", "--max-drop", "0.1")
    acc = next(r for r in json.loads(out)["rows"] if r["metric"] == "accuracy")
    assert rc == 1 and acc["verdict"] == "regression" and acc["note"] is None
    assert abs(acc["p_paired"] - 2 / 4096) < 1e-15 and abs(acc["p_paired"] - mcnemar_exact(12, 0)) < 1e-15


def test_the_paired_test_is_mcnemars_for_right_or_wrong_items_and_monte_carlo_beyond_exact():
    from econeval.judge.compare import exact_floor, paired_p

    # records as 0/1: a mean over items; b pairs only the baseline right, c only the candidate right
    for b, c, same in ((3, 0, 5), (5, 1, 10), (2, 2, 4), (7, 1, 20)):
        base = [1] * b + [0] * c + [1] * same
        cand = [0] * b + [1] * c + [1] * same
        n = len(base)
        values = base + cand
        numbers = lambda idx: {"acc": sum(values[i] for i in idx) / len(idx)}  # noqa: E731
        observed = (sum(cand) - sum(base)) / n
        p = paired_p(numbers, n, "acc", observed, 4000, 0)
        if 2 ** n <= 4096:
            assert abs(p - mcnemar_exact(b, c)) < 1e-12, (b, c, same)
        else:  # Monte Carlo: within a few standard errors of the exact value
            assert abs(p - mcnemar_exact(b, c)) < 4 * (mcnemar_exact(b, c) / 4000) ** 0.5 + 2e-3, (b, c, same, p)
    assert exact_floor(5) > 0.05 > exact_floor(6)


# ---- what a compare cannot pass on: a metric it could not compute, answers it could not read ----
def _econnli(cli, tmp_path, name, answer, n=200):
    """An econnli-zero folder of the first n items from predictions: `answer(item, i)` the reply."""
    rows = data.load("econnli", "test.jsonl")[:n]
    pred = tmp_path / f"{name}.jsonl"
    pred.write_text("".join(json.dumps({"id": r["id"], "response": answer(r, i)}) + "\n" for i, r in enumerate(rows)))
    rc, _, err = cli("score", "--task", "econnli-zero", "--predictions", pred, "--out", tmp_path / name, "--bootstrap", "0")
    assert rc == 0, err
    return tmp_path / name


def _right(r, i):
    return "Yes" if r["label"] == 1 else "No"


def test_a_candidate_that_answers_garbage_cannot_pass_on_a_metric_it_cannot_compute(cli, tmp_path):
    """Every EconNLI answer garbage: the paper's F1 (over the parsed answers) has no value, and
    compare --metric F1 said "verdict: pass … (0 metrics)", exit 0. Now the F1 row is inconclusive
    and says why, and the unanswered share (0 to 1) is a regression."""
    base, cand = _econnli(cli, tmp_path, "base", _right), _econnli(cli, tmp_path, "cand", lambda r, i: "qwerty")
    rc, out, err = cli("compare", base, cand, "--metric", "F1", "--format", "json")
    doc = json.loads(out)
    rows = {r["metric"]: r for r in doc["rows"]}
    assert rc == 1 and doc["verdict"] == "regression", doc["verdict_line"]
    assert rows["F1"]["verdict"] == "inconclusive" and rows["F1"]["candidate"] is None
    assert rows["F1"]["note"] == "cannot be computed for the candidate: 200 of its 200 paired answers are unparsed"
    assert (rows["unanswered"]["baseline"], rows["unanswered"]["candidate"], rows["unanswered"]["verdict"]) == (0.0, 1.0, "regression")
    assert "econnli-zero F1 cannot be computed for the candidate" in doc["verdict_line"] and "0 metrics" not in doc["verdict_line"]
    rc, out, _ = cli("compare", base, cand, "--metric", "F1")
    assert rc == 1 and "verdict: REGRESSION" in out and "cannot be computed for the candidate" in out


def test_unparsed_answers_a_papers_number_leaves_out_fail_compare_and_the_gate(cli, tmp_path):
    """The candidate turns its wrong answers into garbage: EconNLI's P, R and F1 (over the parsed
    answers) rise and the gate's accuracy (an unparsed answer wrong) is unchanged, so both passed
    (exit 0) though 30% of its answers are unreadable. Now the unanswered share regresses in both."""
    wrong = {i for i in range(1026) if (i * 7) % 10 < 3}  # 30% of the items, spread evenly

    def base_answer(r, i):
        return ({"Yes": "No", "No": "Yes"}[_right(r, i)]) if i in wrong else _right(r, i)

    base = _econnli(cli, tmp_path, "base", base_answer, n=1026)
    cand = _econnli(cli, tmp_path, "cand", lambda r, i: "qwerty" if i in wrong else _right(r, i), n=1026)
    rc, out, _ = cli("compare", base, cand, "--format", "json", "--bootstrap", "200")
    doc = json.loads(out)
    assert rc == 1 and doc["verdict"] == "regression", doc["verdict_line"]
    rows = {r["metric"]: r for r in doc["rows"]}
    assert rows["F1"]["verdict"] == "improvement" and rows["unanswered"]["verdict"] == "regression"
    assert rows["unanswered"]["diff"] == pytest.approx(0.3, abs=0.01)
    rc, out, err = cli("gate", base, "--replay", cand, "--max-drop", "0.05", "--format", "json")
    doc = json.loads(out)
    verdicts = {r["metric"]: r["verdict"] for r in doc["rows"]}
    assert rc == 1 and doc["verdict"] == "regression" and verdicts["unanswered"] == "regression", (doc["verdict_line"], err)
    assert verdicts["accuracy"] != "regression"  # the accuracy alone cannot see it


def test_a_comparison_that_decides_no_metric_is_not_a_pass():
    """Only counts (no direction), or nothing either run can compute: nothing decided, and the
    verdict was pass (exit 0)."""
    from econeval.judge.compare import Comparison, Row

    count = Row("t", "Ent.", 30, 10.0, 12.0, 2.0, 0.0, 4.0, None, "n/a")
    neither = Row("t", "F1", 30, None, None, None, None, None, None, "n/a", note="cannot be computed for either run (...)")
    guard = Row("t", "unanswered", 30, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, "ok")
    c = Comparison([count, neither, guard], {}, [], 0.2)
    assert c.verdict == "inconclusive"
    line = c.verdict_line()
    assert line.startswith("verdict: inconclusive: no metric could be decided") and "t Ent.: a count" in line
    assert "t F1: cannot be computed for either run" in line


def test_the_detectable_drop_stays_within_the_metrics_bounds(cli, tmp_path):
    """Six items, half of them right in both runs: the smallest drop six pairs can detect (3.7/6,
    0.615) is more than an accuracy of 0.5 can drop; compare said "a drop must be about 0.615 to be
    detected". Now that metric's detectable drop is none, and the line says no drop is detectable."""
    base, cand = _flipped(cli, tmp_path, 6, {0, 2, 4}, "b6"), _flipped(cli, tmp_path, 6, {0, 2, 4}, "c6")
    rc, out, _ = cli("compare", base, cand, "--format", "json")
    doc = json.loads(out)
    acc = next(r for r in doc["rows"] if r["metric"] == "accuracy")
    assert rc == 3 and acc["baseline"] == 0.5 and acc["verdict"] == "inconclusive" and acc["detectable"] is None
    assert "no drop that econlogicqa-1shot accuracy" in doc["verdict_line"]
    for r in doc["rows"]:  # no number past what the metric can drop from the baseline (a [0, 1] one)
        room = r["baseline"] if r["metric"] != "unanswered" else 1 - r["baseline"]
        assert r["detectable"] is None or r["detectable"] <= room, r
    rc, out, _ = cli("compare", base, cand, "--format", "md")
    assert "| accuracy | 6 | 0.5000 | 0.5000 | 0.0000 | 0.0000 | 0.0000 | 1.0000 | none | inconclusive |" in out
