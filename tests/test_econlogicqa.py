"""EconLogicQA: the answer reader, pairwise accuracy, prompts and few-shot draws."""

import json

import pytest

from econeval import data
from econeval.benchmarks.econlogicqa import FiveShot, OneShot, format_question, pairwise_accuracy, read_order
from econeval.context import RunContext


@pytest.mark.parametrize("text", [
    "B, D, A, C", " B, D, A, C", "B,D,A,C", "B -> D -> A -> C", "B → D → A → C", "B > D > A > C",
    "B; D; A; C", "BDAC", "b, d, a, c", "The correct order is B, D, A, C.", "**Answer:** B, D, A, C",
    "B, D, A, C\n\nQuestion: What comes next?\nA. x\nB. y", "(B), (D), (A), (C)", "B, D, A and C",
    "Event A looks first, but C, A and D need B.\nSo the answer is: B, D, A, C",
    "B, D, A, C\n\nThe order of events is as follows: event (D) follows event (B).",
])
def test_reader_accepts_committed_orderings(text):
    assert read_order(text)[0] == "B, D, A, C"


@pytest.mark.parametrize("text", [
    "A, C, A, D", "A, A, B, D, C", "B, D, A", "A. Rates rise.\nB. Prices fall.\nC. Output grows.\nD. Jobs return.",
    "I am not sure.", "", "Event B happens before event D.",
])
def test_reader_refuses_to_guess(text):
    assert read_order(text)[0] is None


def test_last_answer_marker_wins():
    assert read_order("First guess: A, B, C, D. On reflection the answer is D, C, B, A")[0] == "D, C, B, A"


def test_real_model_outputs_regression():
    """FLaME's Llama-3.1-8B-Instruct outputs: 19/130 exact on the first line; the full texts,
    which run on into explanations, must read the same; 2 are not permutations."""
    gold = {r["id"]: r["answer"] for r in data.load("econlogicqa", "test.jsonl")}
    preds = data.load("econlogicqa", "flame_llama31_8b_predictions.jsonl")
    full = [read_order(p["response"])[0] for p in preds]
    first = [read_order(p["first_line"])[0] for p in preds]
    assert full == first
    assert sum(o == gold[p["id"]] for o, p in zip(full, preds)) == 19
    assert sum(o is None for o in full) == 2


def test_pairwise_accuracy():
    assert pairwise_accuracy("B, D, A, C", "B, D, A, C") == 1.0
    assert pairwise_accuracy("C, A, D, B", "B, D, A, C") == 0.0
    assert pairwise_accuracy("D, B, A, C", "B, D, A, C") == pytest.approx(5 / 6)


def test_few_shot_demonstrations_are_drawn_per_item_from_train_and_seeded():
    task = FiveShot()
    p1, p2, p3 = (task.prepare(RunContext(seed=s)) for s in (1, 1, 2))
    a, b = p1.items[0], p1.items[1]
    shots = lambda p, it: [s["id"] for s in task.shots_for(it, p)]  # noqa: E731
    assert shots(p1, a) == shots(p2, a) != shots(p3, a)  # seeded: the same on repeat, another seed draws others
    assert shots(p1, a) != shots(p1, b)  # per item, as the harness samples them
    assert len(set(shots(p1, a))) == 5 and all(s.startswith("econlogicqa/train/") for s in shots(p1, a))
    draws = {tuple(shots(p1, it)) for it in p1.items}
    assert len(draws) > 100  # 130 items rest on many draws, not on one set
    g = task.requests(a, p1, {})["response"]
    assert g.prompt.count("Question:") == 6 and g.prompt.endswith(format_question(a))
    assert g.prompt.endswith("\nD. " + a["options"]["D"] + "\nAnswer:")
    assert g.max_tokens == 64 and g.stop == ("\n\n", "Question:")
    one = OneShot().requests(a, OneShot().prepare(RunContext(seed=1)), {})["response"]
    assert one.prompt.count("Question:") == 2


def test_fixed_demonstrations_stay_available_as_an_option():
    p = FiveShot().prepare(RunContext(seed=1, task_options={"shots": "fixed"}))
    assert len(p.settings["shot_ids"]) == 5
    g1, g2 = (FiveShot().requests(it, p, {})["response"] for it in p.items[:2])
    assert g1.prefix == g2.prefix and g1.prefix.count("Question:") == 5 and g1.prompt.startswith(g1.prefix)


def test_exported_prompts_differ_by_item_and_repeat(cli, tmp_path):
    outs = [tmp_path / f"p{k}.jsonl" for k in (1, 2)]
    for out in outs:
        assert cli("data", "export", "econlogicqa-1shot", "--prompts", "--limit", "4", "--out", out)[0] == 0
    assert outs[0].read_bytes() == outs[1].read_bytes()
    demos = [json.loads(line)["prompts"]["response"].split("Answer:")[0] for line in outs[0].read_text().splitlines()]
    assert len(set(demos)) == 4


def test_score_command_on_the_real_outputs(cli):
    path = data.data_dir() / "econlogicqa" / "flame_llama31_8b_predictions.jsonl"
    rc, out, err = cli("score", "--task", "econlogicqa-5shot", "--predictions", path)
    assert rc == 0, err
    res = json.loads(out)["tasks"]["econlogicqa-5shot"]
    assert res["paper"]["accuracy"] == pytest.approx(19 / 130)
    assert (res["n"], res["n_unparsed"]) == (130, 2)
    assert 0 < res["extras"]["pairwise_accuracy"]["value"] < 1


def test_always_bdac_sanity_floor(cli, tmp_path):
    p = tmp_path / "bdac.jsonl"
    p.write_text("".join(json.dumps({"id": f"econlogicqa/test/{i}", "response": " B, D, A, C"}) + "\n" for i in range(130)))
    res = json.loads(cli("score", "--task", "econlogicqa-1shot", "--predictions", p)[1])["tasks"]["econlogicqa-1shot"]
    assert round(res["paper"]["accuracy"], 3) == 0.123


def test_the_harness_prs_reader_is_an_option_and_reads_flame_as_described():
    """Issue #32 item 13: on FLaME's 130 responses, after the task's stops, both readers give
    19/130; they differ on one parse, test/53."""
    from econeval.backends.llamacpp_batch import stop_at
    from econeval.benchmarks.econlogicqa import STOP, order_as_pr_reads

    gold = {r["id"]: r["answer"] for r in data.load("econlogicqa", "test.jsonl")}
    preds = data.load("econlogicqa", "flame_llama31_8b_predictions.jsonl")
    cut = [stop_at(p["response"], STOP, after_text=False) or p["response"] for p in preds]
    mine, pr = [read_order(t)[0] for t in cut], [order_as_pr_reads(t) for t in cut]
    assert sum(o == gold[p["id"]] for o, p in zip(mine, preds)) == sum(o == gold[p["id"]] for o, p in zip(pr, preds)) == 19
    assert [(p["id"], a, b) for a, b, p in zip(mine, pr, preds) if a != b] == [("econlogicqa/test/53", None, "A, B, D, C")]
    assert order_as_pr_reads("first D, next A, then C, B") == "D, A, C, B" and order_as_pr_reads("DACB") == "D, A, C, B"
    assert order_as_pr_reads("A. Firms enter\nB. Prices fall") is None
    task = FiveShot()
    ctx = RunContext(task_options={"reader": "extract_order"})
    prep = task.prepare(ctx)
    item = next(it for it in prep.items if it["id"] == "econlogicqa/test/53")
    response = next(p["response"] for p in preds if p["id"] == item["id"])
    assert task.score(item, {"response": response}, prep)["parsed"] == "A, B, D, C"
    assert prep.settings["reader"].startswith("the harness PR #4120's extract_order")


def test_the_harness_stops_are_an_option():
    """Issue #32 item 13: the harness cuts at the first blank line anywhere, so an answer that
    starts with one scores 0 there; econeval applies the stops once text appears."""
    from econeval.backends.llamacpp_batch import stop_at

    for mode, after in (("after-text", True), ("harness", False)):
        prep = FiveShot().prepare(RunContext(task_options={"stops": mode}))
        g = FiveShot().requests(prep.items[0], prep, {})["response"]
        assert g.stop_after_text is after and g.stop == ("\n\n", "Question:")
        assert stop_at("\n\nB, D, A, C\n\nQuestion:", g.stop, g.stop_after_text) == ("\n\nB, D, A, C" if after else "")
