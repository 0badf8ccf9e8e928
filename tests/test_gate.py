"""The sequential gate: its betting e-processes' error rates and items by simulation (seeded), its
verdicts on folders that try to pass by omission, mismatch or edits, and real gates of the tiny
model through the CLI (a pass at another --parallel, a planted regression)."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from econeval.judge.gate import Gated
from econeval.judge.sequential import Interval, MarginPair, first_decision

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from gate_simulation import population, previous_rule  # noqa: E402  (the rule the e-processes replaced)

MARGIN, ALPHA = 0.05, 0.05


def _decide(w, alpha_pass=ALPHA, alpha_regression=ALPHA, chunk=16):
    pair = MarginPair(MARGIN, len(w), alpha_pass, alpha_regression)
    return first_decision(*pair.feed(w), chunk)


def _gates(w0, trials, rng, **kw):
    return [_decide(rng.permutation(w0), **kw) for _ in range(trials)]


def test_false_pass_at_a_true_drop_exactly_equal_to_the_margin_is_at_most_alpha():
    """2,000 random orders of populations whose mean drop is the margin (or a hair more, never
    less), for 0/1 accuracy and for continuous metrics (Brier-like in [0, 2] lower is better,
    similarity-like in [-1, 1]), mapped to w = s (c - b) / R as the gate maps them."""
    rng = np.random.default_rng(11)
    acc = population(1026, 0.15, MARGIN)
    assert acc.mean() <= -MARGIN
    runs = _gates(acc, 2000, rng)
    false_pass = sum(v == "pass" for v, _ in runs) / len(runs)
    assert false_pass <= ALPHA, false_pass
    # continuous metrics, mapped as the gate maps them (Gated: w = s (c - b) / R, checked on one
    # gate below): a Brier-like metric in [0, 2], lower is better, the candidate worse by exactly
    # the margin; a similarity in [-1, 1]
    for direction, lo, hi in ((-1, 0.0, 2.0), (1, -1.0, 1.0)):
        span = hi - lo
        base = rng.uniform(lo + 0.3 * span, lo + 0.7 * span, 800)
        noise = rng.normal(0, 0.05 * span, 800)
        cand = base - direction * (noise - noise.mean() + MARGIN * span)  # mean s (c - b) = -margin exactly
        g = Gated("t", "m", direction, lo, hi, 800, MARGIN * span, ALPHA, ALPHA, show=False)
        g.add(list(zip(base, cand)))
        assert math.isclose(g.candidate_sum - g.baseline_sum, -direction * MARGIN * span * 800, rel_tol=1e-9)
        w = direction * (cand - base) / span
        runs = _gates(w, 1000, rng)
        assert sum(v == "pass" for v, _ in runs) / len(runs) <= ALPHA, direction


def test_power_at_no_drop_and_at_twice_the_margin():
    rng = np.random.default_rng(12)
    no_drop = _gates(population(1026, 0.15, 0.0), 300, rng)
    assert sum(v == "pass" for v, _ in no_drop) / 300 >= 0.99
    twice = _gates(population(1026, 0.15, 2 * MARGIN), 300, rng, alpha_regression=ALPHA / 2)
    assert sum(v == "regression" for v, _ in twice) / 300 >= 0.99
    assert np.mean([n for _, n in twice]) < 1026 / 2  # decided long before the end
    # continuous: a Brier-like metric (lower is better, span 2) at no drop
    w = np.clip(rng.normal(0, 0.05, 1026), -1, 1)
    w -= w.mean()
    runs = _gates(w, 200, rng)
    assert all(v == "pass" for v, _ in runs) and np.mean([n for _, n in runs]) < 100


def test_the_betting_test_spends_far_fewer_items_than_the_previous_rule():
    """The issue's targets on its grid (fewer orders here than tools/gate_simulation.py uses):
    at most 0.7 x the previous rule's mean items to a pass, 0.55 x at 5% discordance; the
    baseline against itself within 130 items of econnli-zero's 1,026."""
    rng = np.random.default_rng(13)
    for n in (1026, 6400):
        for d, target in ((0.05, 0.55), (0.15, 0.7), (0.30, 0.7)):
            w = population(n, d, 0.0)
            orders = [rng.permutation(w) for _ in range(200 if n < 2000 else 50)]  # the same orders for both rules
            new = np.mean([_decide(x)[1] for x in orders])
            old = np.mean([previous_rule(x, 16)[1] for x in orders])
            assert new <= target * old, (n, d, new, old)
    verdict, used = _decide(np.zeros(1026))
    assert verdict == "pass" and used <= 130, used


def test_the_shown_interval_covers_the_mean_at_all_times_and_the_known_mean_decides_at_the_end():
    rng = np.random.default_rng(14)
    misses = 0
    w0 = population(600, 0.3, 0.02)
    class Coarse(Interval):  # a coarser grid of means: wider bounds, the same guarantee, a faster test
        STEPS = 50

    for _ in range(40):
        iv = Coarse(len(w0), ALPHA / 2, ALPHA / 2)
        w = rng.permutation(w0)
        for start in range(0, len(w), 100):
            iv.feed(w[start:start + 100])
            low, high = iv.bounds()
            if not (low - 1e-9 <= w0.mean() <= high + 1e-9):
                misses += 1
                break
    assert misses / 40 <= ALPHA, misses
    assert iv.bounds() == (w0.mean(), w0.mean())
    pair = MarginPair(MARGIN, 3, ALPHA, ALPHA)
    pair.feed(np.array([0.0, -0.1, -0.1]))  # mean -0.067: every item in, below the margin
    assert pair.verdict() == "regression"


def _questions(cli, tmp_path, per_element=12):
    q = tmp_path / "q.jsonl"
    assert cli("steer", "generate", "--elements", "consumer_surplus,find_eq_price", "--per-element", str(per_element),
               "--out", q)[0] == 0
    return q


def test_gate_passes_the_same_model_at_another_parallel_and_resumes(cli, tmp_path, tiny_model):
    q = _questions(cli, tmp_path)
    base = tmp_path / "base"
    rc, _, err = cli("run", "--model", tiny_model, "-t", "steer-me", "-T", f"questions={q}", "-P", "4", "--quiet", "--out", base)
    assert rc == 0, err
    cand = tmp_path / "cand"
    rc, out, err = cli("gate", base, "--model", tiny_model, "-P", "1", "--max-drop", "0.05", "--quiet", "--out", cand,
                       "--junit", tmp_path / "gate.xml")
    assert rc == 0, (out, err)
    assert "gate: pass" in out and "steer-me" in out and "not gated" in out
    assert out.split()[:11][-3:] == ["above", "below", "verdict"]  # the interval's ends: the means it rules out
    xml = (tmp_path / "gate.xml").read_text()
    assert 'name="accuracy"' in xml and "<failure" not in xml
    meta = json.loads((cand / "run.json").read_text())
    assert meta["status"] == "complete" and meta["tasks"]["steer-me"]["options"]["questions"] == str(q)
    rc, out2, err = cli("gate", base, "--model", tiny_model, "-P", "1", "--max-drop", "0.05", "--quiet", "--out", cand,
                        "--format", "json")
    doc = json.loads(out2)
    assert rc == 0 and doc["verdict"] == "pass" and doc["items_used"] == 24, (out2, err)
    # an ordinary run folder: the same run continues it (here it is whole already: nothing to run)
    rc, out3, err = cli("run", "--model", tiny_model, "-t", "steer-me", "-T", f"questions={q}", "-P", "1", "--quiet",
                        "--out", cand)
    assert rc == 0 and json.loads((cand / "results.json").read_text())["tasks"]["steer-me"]["n"] == 24, err
    # a refused gate writes nothing: not into its baseline, not into an ordinary run of the same model
    before = {p.name: p.read_bytes() for p in base.iterdir() if p.is_file() and p.name != ".lock"}
    rc, out, err = cli("gate", base, "--model", tiny_model, "-P", "4", "--quiet", "--out", base)
    assert rc == 2 and "would write into its baseline" in err and "Traceback" not in err, err
    ordinary = tmp_path / "ordinary"
    rc, _, err = cli("run", "--model", tiny_model, "-t", "steer-me", "-T", f"questions={q}", "-P", "1", "--limit", "2",
                     "--quiet", "--out", ordinary)
    assert rc == 0, err
    rc, out, err = cli("gate", base, "--model", tiny_model, "-P", "1", "--quiet", "--out", ordinary)
    assert rc == 2 and "holds an ordinary run" in err, err
    assert {p.name: p.read_bytes() for p in base.iterdir() if p.is_file() and p.name != ".lock"} == before
    # without --out the gate has a folder of its own: the same model against its own baseline passes
    rc, out, err = cli("gate", base, "--model", tiny_model, "-P", "4", "--quiet", "--format", "json")
    assert rc == 0 and json.loads(out)["verdict"] == "pass" and "/gates/" in json.loads(out)["candidate"], (out, err)
    assert {p.name: p.read_bytes() for p in base.iterdir() if p.is_file() and p.name != ".lock"} == before


def test_the_gate_judges_the_items_in_the_order_it_ran_them_when_the_baseline_is_partial(cli, tmp_path, tiny_model):
    from econeval.judge.gate import gate_order

    q = _questions(cli, tmp_path)
    base, cand = tmp_path / "base", tmp_path / "cand"
    rc, _, err = cli("run", "--model", tiny_model, "-t", "steer-me", "-T", f"questions={q}", "--limit", "5", "--quiet",
                     "--out", base)
    assert rc == 0, err
    rc, out, err = cli("gate", base, "--model", tiny_model, "-P", "1", "--quiet", "--out", cand, "--format", "json")
    assert rc in (0, 3), (out, err)
    baseline_ids = [json.loads(line)["id"] for line in (base / "samples.jsonl").read_text().splitlines()]
    ran = [json.loads(line)["id"] for line in (cand / "samples.jsonl").read_text().splitlines()]
    assert len(baseline_ids) == 10 and set(ran) <= set(baseline_ids)  # only the baseline's items run
    assert ran == gate_order("steer-me", baseline_ids, 1234)[:len(ran)]  # the order the verdict is computed in


def test_a_planted_regression_is_caught_by_the_gate_and_by_compare(cli, tmp_path, tiny_model):
    """Predictions scored with `econeval score`: the candidate flips the answers of 40% of the items."""
    rc, out, err = cli("data", "export", "econnli", "--out", tmp_path / "items.jsonl")
    assert rc == 0, err
    items = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    rng = np.random.default_rng(3)
    good = [{"id": it["id"], "response": "Yes" if it["label"] == 1 else "No"} for it in items]
    flipped = [{**p, "response": {"Yes": "No", "No": "Yes"}[p["response"]]} if rng.random() < 0.4 else p for p in good]
    for name, preds in (("good", good), ("bad", flipped)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
        rc, _, err = cli("score", "-t", "econnli-zero", "-p", tmp_path / f"{name}.jsonl", "--out", tmp_path / name,
                         "--bootstrap", "0")
        assert rc == 0, err
    rc, out, err = cli("gate", tmp_path / "good", "--replay", tmp_path / "bad", "--max-drop", "0.05", "--format", "json",
                       "--plot", tmp_path / "gate.html")
    doc = json.loads(out)
    assert rc == 1 and doc["verdict"] == "regression", (out, err)
    assert doc["items_used"] < len(items) / 4  # decided long before the end
    # the e-processes step by step: a chunk a step, the regression's crossing its threshold at the last one only
    assert [p["metric"] for p in doc["progress"]] == ["accuracy", "unanswered"]  # the unanswered share is gated too
    prog = doc["progress"][0]
    steps = prog["steps"]
    assert (prog["task"], prog["metric"], prog["verdict"]) == ("econnli-zero", "accuracy", "regression")
    assert [x["items"] for x in steps] == list(range(16, 16 * len(steps) + 1, 16)) and steps[-1]["items"] == doc["items_used"]
    assert prog["threshold_regression"] == pytest.approx(np.log(2 / 0.05))  # alpha split over the two gated metrics
    crossed = [x["log_wealth_regression"] is None or x["log_wealth_regression"] >= prog["threshold_regression"] for x in steps]
    assert crossed[-1] and not any(crossed[:-1])
    page = (tmp_path / "gate.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "econnli-zero accuracy: regression after" in page
    rc, out, err = cli("gate", tmp_path / "good", "--replay", tmp_path / "good", "--max-drop", "0.05")
    assert rc == 0 and "gate: pass" in out, (out, err)
    rc, out, err = cli("compare", tmp_path / "good", tmp_path / "bad", "--max-drop", "0.05")
    assert rc == 1 and "REGRESSION" in out, (out, err)
    (tmp_path / "empty").mkdir()
    for baseline, replay, says in ((tmp_path / "good", tmp_path / "empty", "is not a run folder"),
                                   (tmp_path / "empty", tmp_path / "good", "is not a run folder")):
        rc, out, err = cli("gate", baseline, "--replay", replay)
        assert rc == 2 and says in err and "Traceback" not in err, err
    rc, out, err = cli("gate", tmp_path / "good", "--replay", tmp_path / "bad", "--metric", "nope")
    assert rc == 2 and "item metrics of these tasks: accuracy" in err, err


def test_a_budget_run_stops_on_time_reports_estimates_for_every_task_and_continues_to_the_full_set(cli, tmp_path, tiny_model,
                                                                                                  monkeypatch):
    from econeval.run import selection
    from fake_clock import CLOCK, on_clock

    q = _questions(cli, tmp_path, per_element=40)
    folder = tmp_path / "budget"
    base = ("run", "--model", tiny_model, "-t", "steer-me", "-t", "econnli-cot", "-T", f"questions={q}", "-P", "2",
            "--quiet", "--out", folder)
    rc, out, err = cli(*base, "--budget", "0.01s")  # spent before the model has loaded: nothing runs, nothing is made up
    assert rc == 1 and out.count("not reached") == 2 and not (folder / "results.json").exists(), (out, err)
    assert "nothing was evaluated" in err
    assert json.loads((folder / "results-partial.json").read_text())["not_reached"] == ["steer-me", "econnli-cot"]
    # a fake model whose answers take a second each of the tests' clock: the budget binds the same on any machine
    # (econnli-cot's chunks take 16 s of it, steer-me's, scored by log-probabilities, none)
    CLOCK.reset()
    monkeypatch.setattr(selection, "from_flags", on_clock(selection.from_flags))
    folder = tmp_path / "fake"
    base = ("run", "--model", "fake:m", "-M", "respond=fake_clock:slow", "-t", "steer-me", "-t", "econnli-cot",
            "-T", f"questions={q}", "--quiet", "--out", folder)
    rc, out, err = cli(*base, "--budget", "40s")
    assert rc == 0, err
    assert CLOCK.now() <= 40.0
    meta = json.loads((folder / "run.json").read_text())
    assert meta["stopped_early"]["why"] == "budget spent"
    doc = json.loads((folder / "results-partial.json").read_text())
    assert set(doc["tasks"]) == {"steer-me", "econnli-cot"}  # both reached, the cheaper per item first
    assert json.loads((folder / "samples.jsonl").read_text().splitlines()[0])["task"] == "steer-me"
    for res in doc["tasks"].values():
        est = res.get("estimate")
        assert est is None or (0 < est["from"] < est["of"] and res["intervals"] and "stratified sample" in est["note"])
    cot = doc["tasks"]["econnli-cot"]["estimate"]  # 1,026 items of a second each: far more than 40 s
    assert cot["of"] == 1026 and cot["strata"] == 2 and not (folder / "results.json").exists()
    assert f"(estimates: {cot['from']:,} of 1,026 items)" in out
    rc, out, err = cli(*base[:7], *base[9:])  # steer-me alone (a task of the folder) to its full set
    assert rc == 0, err
    full = json.loads((folder / "results.json").read_text())
    assert full["tasks"]["steer-me"]["n"] == 80 and "estimate" not in full["tasks"]["steer-me"]
    for bad in ("0", "-5m", "soon"):
        rc, out, err = cli(*base, "--budget", bad)
        assert rc == 2 and "--budget" in err and "Traceback" not in err


# ---- verdicts that must not pass: omission, mismatch, edits (folders made by `econeval score`) ----
@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """B: an econnli-zero baseline of 1,026 items, about 70% right; C10: the same with 10% of its
    right answers flipped (a regression at --max-drop 0.05); folders written by score --out."""
    from econeval import data
    from econeval.api import score_predictions

    root = tmp_path_factory.mktemp("scored")
    items = data.load("econnli", "test.jsonl")
    rng = np.random.default_rng(7)
    truth = ["Yes" if it["label"] == 1 else "No" for it in items]
    base = [t if rng.random() < 0.7 else {"Yes": "No", "No": "Yes"}[t] for t in truth]
    c10 = [{"Yes": "No", "No": "Yes"}[b] if b == t and rng.random() < 0.1 else b for b, t in zip(base, truth)]

    def folder(name, answers, **kw):
        preds = root / f"{name}.jsonl"
        preds.write_text("".join(json.dumps({"id": it["id"], "response": a}) + "\n" for it, a in zip(items, answers)))
        score_predictions("econnli-zero", preds, out=root / name, bootstrap=0, **kw)
        return root / name

    return {"B": folder("B", base), "C10": folder("C10", c10), "paper": folder("paper", c10, task_options={"prompt": "paper"}),
            "seed99": folder("seed99", c10, seed=99), "root": root}


def _edited(src: Path, dst: Path, edit) -> Path:
    """A copy of a run folder whose samples pass through `edit(records) -> records`."""
    import shutil

    shutil.copytree(src, dst)
    lines = [json.loads(x) for x in (dst / "samples.jsonl").read_text().splitlines()]
    (dst / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in edit(lines)))
    return dst


def _gate(cli, *args):
    rc, out, err = cli("gate", *args, "--max-drop", "0.05", "--format", "json")
    assert "Traceback" not in err, err
    return rc, (json.loads(out) if rc in (0, 1, 3) else None), err


def test_the_scored_regression_is_caught_and_the_baseline_passes_against_itself_quickly(cli, scored):
    rc, doc, err = _gate(cli, scored["B"], "--replay", scored["C10"])
    assert rc == 1 and doc["verdict"] == "regression", err
    rc, doc, err = _gate(cli, scored["B"], "--replay", scored["B"])
    assert rc == 0 and doc["items_used"] <= 130, (doc, err)


def test_a_regression_cannot_pass_by_omission(cli, scored, tmp_path):
    """C10's wrong items marked error, marked skipped, or deleted; an interrupted C10 holding its
    first 700 items: none passes (errors and skips count as the worst value; the order stops at a
    missing item)."""
    def mark(key):
        return lambda recs: [({"id": r["id"], "task": r["task"], "response": r["response"], key: "made up"}
                              if r.get("correct") is not True else r) for r in recs]

    cases = {"errors": mark("error"), "skips": mark("skipped"),
             "deleted": lambda recs: [r for r in recs if r.get("correct") is True],
             "interrupted": lambda recs: recs[:700]}
    for name, edit in cases.items():
        folder = _edited(scored["C10"], tmp_path / name, edit)
        rc, doc, err = _gate(cli, scored["B"], "--replay", folder)
        assert rc in (1, 3) and doc["verdict"] != "pass", (name, doc["verdict_line"])
        if name in ("errors", "skips"):
            assert rc == 1 and doc["candidate_failed"] > 0 and "counted as the worst value" in doc["verdict_line"], name
        else:
            assert rc == 3 and any("lacks" in n for n in doc["notes"]), (name, doc["notes"])


def test_a_failed_candidate_item_counts_as_the_worst_value_in_a_live_gate():
    """The watcher of a live gate: records whose log-probabilities were invalid (errors) on the
    items the candidate would get wrong count against it."""
    from econeval import registry
    from econeval.judge.gate import Gate

    task = registry.get_task("econnli-zero")
    ids = [f"econnli/test/{i}" for i in range(400)]
    right = {i: {"id": i, "task": task.name, "parsed": 1, "gold": 1, "correct": True} for i in ids}
    g = Gate.build(1234, [task.name], {task.name: right}, 0.05, 0.05)
    cand = {i: (r if k % 4 else {"id": i, "task": task.name, "error": "the backend's log-probabilities are not finite"})
            for k, (i, r) in enumerate(right.items())}
    order = g.tasks[task.name].order
    for end in range(16, 401, 16):  # each chunk's new records, as the runner feeds them
        enough, _ = g.watch(task, [cand[i] for i in order[end - 16:end]])
        if enough:
            break
    row = g.rows()[0]
    assert row.verdict == "regression" and row.failed > 0, row


def test_runs_that_are_not_comparable_are_refused_by_replay_as_by_compare(cli, scored):
    for name, says in (("paper", "the runs differ in"), ("seed99", "different seeds")):
        rc, _, err = _gate(cli, scored["B"], "--replay", scored[name])
        assert rc == 2 and says in err, (name, err)
        rc, _, err = cli("compare", scored["B"], scored[name])
        assert rc == 2 and says in err, (name, err)


def test_edited_scores_duplicates_and_impossible_margins_are_refused(cli, scored, tmp_path):
    lie = _edited(scored["B"], tmp_path / "lie", lambda recs: [{**r, "correct": True, "parsed": r["gold"]} for r in recs])
    for args in (("gate", scored["B"], "--replay", lie), ("gate", lie, "--replay", scored["C10"]),
                 ("compare", lie, scored["C10"])):
        rc, _, err = cli(*args)
        assert rc == 2 and "contradicts itself" in err and "econnli/test/" in err, (args, err)
    twice = _edited(scored["C10"], tmp_path / "twice", lambda recs: recs + recs[:1])
    rc, _, err = cli("gate", scored["B"], "--replay", twice)
    assert rc == 2 and "a second time" in err, err
    rc, _, err = cli("gate", scored["B"], "--replay", scored["C10"], "--max-drop", "5")
    assert rc == 2 and "not below the range" in err, err
    rc, _, err = cli("gate", scored["B"], "--replay", scored["C10"], "--metric", "pairwise")
    assert rc == 2 and "item metrics of these tasks: accuracy" in err, err


def test_a_metric_the_baseline_cannot_provide_is_not_gated_and_the_task_says_which_metric_it_lacks():
    from econeval import registry
    from econeval.judge.compare import verdict_of
    from econeval.judge.gate import Gate

    logic = registry.get_task("econlogicqa-1shot")
    recs = {f"steer-me/x/{i}": {"id": f"steer-me/x/{i}", "task": "steer-me", "correct": bool(i % 2), "parsed": "A"}
            for i in range(64)}
    g = Gate.build(1, ["steer-me"], {"steer-me": recs}, 0.05, 0.05)
    assert [r.metric for tg in g.tasks.values() for r in tg.rows] == ["accuracy", "unanswered"]
    assert "steer-me Brier" in g.not_gated
    g.replay({"steer-me": recs})
    assert verdict_of(r.verdict for r in g.rows()) == "pass"  # the baseline against itself
    logic_recs = {f"econlogicqa/test/{i}": {"id": f"econlogicqa/test/{i}", "task": logic.name, "correct": True,
                                           "pairwise": 1.0} for i in range(32)}
    g = Gate.build(1, ["steer-me", logic.name], {"steer-me": recs, logic.name: logic_recs}, 0.05, 0.05, metrics=("pairwise",))
    assert g.not_gated["steer-me"] == "no item metric 'pairwise'"


def test_values_outside_a_metrics_range_are_refused_not_clamped():
    from econeval.errors import UsageError
    from econeval.judge.gate import Gate

    task = "econlogicqa-1shot"
    recs = {f"econlogicqa/test/{i}": {"id": f"econlogicqa/test/{i}", "task": task, "correct": True, "pairwise": 1.0}
            for i in range(20)}
    recs["econlogicqa/test/3"]["pairwise"] = 1.5
    with pytest.raises(UsageError, match="outside its range"):
        Gate.build(1, [task], {task: recs}, 0.05, 0.05)
    recs["econlogicqa/test/3"]["pairwise"] = 1.0
    g = Gate.build(1, [task], {task: recs}, 0.05, 0.05)
    bad = {i: {**r, "pairwise": -0.5} for i, r in recs.items()}
    with pytest.raises(UsageError, match="outside its range"):
        g.replay({task: bad})


def test_the_gate_names_the_baselines_judge_for_the_candidate_or_refuses(cli, tmp_path):
    """A STEER-ME free-text baseline read by a judge: a gate without --judge scored the candidate by
    the regex instead and passed (its comparability check compared the baseline with itself)."""
    base = tmp_path / "base"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "steer-me", "--adaptation", "free-text", "--judge", "fake:j",
                     "--limit", "1", "--quiet", "--out", base)
    assert rc == 0, err
    gate = ("gate", base, "--model", "fake:m2", "--quiet")
    rc, _, err = cli(*gate, "--out", tmp_path / "g1")
    assert rc == 2 and "the baseline named j for the role judge" in err and "--judge" in err, err
    rc, _, err = cli(*gate, "--judge", "fake:k", "--out", tmp_path / "g2")
    assert rc == 2 and "the baseline's model is j, the candidate's k" in err, err
    assert not (tmp_path / "g1").exists() and not (tmp_path / "g2").exists()
    rc, _, err = cli(*gate, "--judge", "fake:j", "--out", tmp_path / "g3")
    assert rc == 0, err
    meta = json.loads((tmp_path / "g3" / "run.json").read_text())
    assert meta["roles"]["judge"]["named"] and meta["tasks"]["steer-me"]["settings"] == \
        json.loads((base / "run.json").read_text())["tasks"]["steer-me"]["settings"]
    plain = tmp_path / "plain"
    assert cli("run", "--model", "fake:m", "--task", "steer-me", "--adaptation", "free-text", "--limit", "1", "--quiet",
               "--out", plain)[0] == 0
    rc, _, err = cli("gate", plain, "--model", "fake:m2", "--judge", "fake:j", "--quiet", "--out", tmp_path / "g4")
    assert rc == 2 and "differ in settings" in err, err
