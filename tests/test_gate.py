"""The sequential gate: its confidence sequence's error rates by simulation (seeded), and real
gates of the tiny model through the CLI (a pass at another --parallel, a planted regression)."""

import json
import math

import numpy as np

from econeval.sequential import PairedSequence, bounds

N, DELTA, ALPHA = 2000, 0.05, 0.05


def _population(rng, drop, p01=0.05):
    """Paired items (baseline, candidate) right or wrong: the candidate loses p01 + drop of the
    items and wins p01 (the rest agree), so its accuracy is lower by `drop`."""
    u = rng.random(N)
    base = (rng.random(N) < 0.6).astype(float)
    lose, win = u < p01 + drop, (u >= p01 + drop) & (u < 2 * p01 + drop)
    base[lose], base[win] = 1.0, 0.0
    cand = base.copy()
    cand[lose], cand[win] = 0.0, 1.0
    return base, cand


def _gate(base, cand, rng, max_drop=DELTA, alpha=ALPHA):
    """One gate, one decision per item: (verdict, items used)."""
    order = rng.permutation(len(base))
    w = cand[order] - base[order]
    low, high = bounds((w + 1) / 2, alpha, len(w))
    low, high = 2 * low - 1, 2 * high - 1
    low[-1] = high[-1] = w.mean()  # every item in: the mean is known (as PairedSequence says)
    decided = np.nonzero((low > -max_drop) | (high < -max_drop))[0]
    if not len(decided):
        return "inconclusive", len(w)
    t = decided[0]
    return ("pass" if low[t] > -max_drop else "regression"), t + 1


def test_the_confidence_sequence_covers_the_mean_at_all_times_as_often_as_it_says():
    rng = np.random.default_rng(1)
    misses, trials = 0, 1000
    for _ in range(trials):
        pop = rng.beta(0.5, 0.8, 800)
        x = rng.permutation(pop)
        low, high = bounds(x, ALPHA, len(x))
        misses += bool(np.any((low > pop.mean() + 1e-12) | (high < pop.mean() - 1e-12)))
    assert misses / trials <= ALPHA, misses / trials
    with_replacement = bounds(rng.random(500), ALPHA)
    assert np.all(with_replacement[0] <= with_replacement[1])


def test_gate_error_rates_and_items_used_against_a_fixed_sample_test(capsys):
    rng = np.random.default_rng(2)
    trials = 1000
    null = [_gate(*_population(rng, 0.0), rng) for _ in range(trials)]
    bad = [_gate(*_population(rng, 2 * DELTA), rng) for _ in range(trials)]
    false_alarm = sum(v == "regression" for v, _ in null) / trials
    false_pass = sum(v == "pass" for v, _ in bad) / trials
    caught_early = sum(v == "regression" and n < N for v, n in bad) / trials
    assert false_alarm <= ALPHA and false_pass <= ALPHA, (false_alarm, false_pass)
    assert caught_early >= 0.8, caught_early
    # a one-sided fixed-sample test of "drop > max_drop" at the same alpha with 80% power at a true
    # drop of 2 x max_drop, for the same variance of the paired difference
    sd = math.sqrt((2 * 0.05 + 2 * DELTA) - (2 * DELTA) ** 2)
    fixed = ((1.644854 + 0.841621) * sd / DELTA) ** 2
    used_bad = np.mean([n for _, n in bad])
    used_null = np.mean([n for _, n in null])
    with capsys.disabled():
        print(f"\ngate simulation (N {N}, max-drop {DELTA}, alpha {ALPHA}, {trials} gates each): false alarm {false_alarm:.3f}, "
              f"pass at 2x drop {false_pass:.3f}, regression before the end {caught_early:.3f}; mean items "
              f"{used_bad:.0f} at 2x drop ({used_bad / fixed:.2f}x the fixed test's {fixed:.0f}), {used_null:.0f} at no drop "
              f"(passes: {sum(v == 'pass' for v, _ in null) / trials:.3f})")


def test_paired_sequence_maps_directions_and_knows_the_mean_when_every_item_is_in():
    seq = PairedSequence(direction=-1, span=2.0, population=3, alpha=0.05)  # Brier-like: lower is better, in [0, 2]
    for b, c in ((0.5, 0.7), (0.2, 0.4), (1.0, 1.2)):
        seq.add(b, c)
    assert math.isclose(seq.mean_worse(), -0.2)  # the candidate's Brier is 0.2 higher: worse
    assert seq.interval() == (seq.mean_worse(), seq.mean_worse())
    assert seq.decision(0.1) == "regression" and seq.decision(0.3) == "pass"


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
    rc, out, err = cli("gate", base, "--model", tiny_model, "-P", "4", "--quiet", "--out", base)
    assert rc == 2 and "nothing to gate" in err and "Traceback" not in err, err


def test_the_gate_judges_the_items_in_the_order_it_ran_them_when_the_baseline_is_partial(cli, tmp_path, tiny_model):
    from econeval.gate import gate_order

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
    rc, out, err = cli("gate", tmp_path / "good", "--replay", tmp_path / "bad", "--max-drop", "0.05", "--format", "json")
    doc = json.loads(out)
    assert rc == 1 and doc["verdict"] == "regression", (out, err)
    assert doc["items_used"] < len(items) / 4  # decided long before the end
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


def test_a_budget_run_stops_on_time_reports_estimates_for_every_task_and_continues_to_the_full_set(cli, tmp_path, tiny_model):
    q = _questions(cli, tmp_path, per_element=40)
    folder = tmp_path / "budget"
    base = ("run", "--model", tiny_model, "-t", "steer-me", "-t", "econnli-cot", "-T", f"questions={q}", "-P", "2",
            "--quiet", "--out", folder)
    rc, out, err = cli(*base, "--budget", "0.01s")  # spent before the model has loaded: nothing runs, nothing is made up
    assert rc == 0 and out.count("not reached") == 2 and not (folder / "results.json").exists(), (out, err)
    assert json.loads((folder / "results-partial.json").read_text())["not_reached"] == ["steer-me", "econnli-cot"]
    rc, out, err = cli(*base, "--budget", "12s")
    assert rc == 0, err
    meta = json.loads((folder / "run.json").read_text())
    assert meta["stopped_early"]["why"] == "budget spent"
    doc = json.loads((folder / "results-partial.json").read_text())
    assert set(doc["tasks"]) == {"steer-me", "econnli-cot"}  # both reached, the cheaper per item first
    assert json.loads((folder / "samples.jsonl").read_text().splitlines()[0])["task"] == "steer-me"
    for res in doc["tasks"].values():
        est = res.get("estimate")
        assert est is None or (0 < est["from"] < est["of"] and res["intervals"] and "stratified sample" in est["note"])
    cot = doc["tasks"]["econnli-cot"]["estimate"]  # 1,026 items of up to 200 tokens each: far more than 12 s
    assert cot["of"] == 1026 and cot["strata"] == 2 and not (folder / "results.json").exists()
    assert f"(estimates: {cot['from']:,} of 1,026 items)" in out
    rc, out, err = cli(*base[:5], *base[7:])  # steer-me alone (a task of the folder) to its full set
    assert rc == 0, err
    full = json.loads((folder / "results.json").read_text())
    assert full["tasks"]["steer-me"]["n"] == 80 and "estimate" not in full["tasks"]["steer-me"]
    for bad in ("0", "-5m", "soon"):
        rc, out, err = cli(*base, "--budget", bad)
        assert rc == 2 and "--budget" in err and "Traceback" not in err
