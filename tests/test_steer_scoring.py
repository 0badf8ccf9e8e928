"""STEER-ME scoring: the authors' metric definitions on hand-computed cases."""

import json
import math

import pytest

from econeval import data
from econeval.benchmarks.steer_me import (NOTA, SteerMe, apply_car, argmax, distribution, free_text_correct,
                                          letter_from_text, metrics, number_from_text, rpm)
from econeval.metrics import brier, ece, normalized_accuracy
from econeval.context import RunContext

LN = math.log


def test_distribution_and_rpm():
    raw, alpha = distribution({"A": LN(0.2), " B": LN(0.9), "B": LN(0.3), "C": LN(0.1), "<top>": LN(0.3)}, 3)
    assert raw == pytest.approx([0.2, 0.3, 0.1]) and alpha == pytest.approx(0.6)
    assert rpm(raw, alpha, "renormalized") == pytest.approx([1 / 3, 1 / 2, 1 / 6])
    # mix: alpha·p_cond + (1 − alpha)/K
    assert rpm(raw, alpha, "mixed") == pytest.approx([0.6 / 3 + 0.4 / 3, 0.6 / 2 + 0.4 / 3, 0.6 / 6 + 0.4 / 3])


def test_alpha_zero_gives_uniform_under_both_mappings():
    raw, alpha = distribution({}, 4)
    assert alpha == 0
    assert rpm(raw, alpha, "renormalized") == [0.25] * 4 == rpm(raw, alpha, "mixed")


def test_ties_pick_the_first_option_under_both_mappings():
    assert argmax([0.4, 0.4, 0.2]) == 0
    raw = [0.1, 0.3, 0.3, 0.1]
    assert argmax(rpm(raw, 0.8, "renormalized")) == argmax(rpm(raw, 0.8, "mixed")) == 1


def test_brier_epa_and_normalized_accuracy_k3_k5():
    assert brier([0.5, 0.3, 0.2], 0) == pytest.approx(0.25 + 0.09 + 0.04)
    assert brier([0.2] * 5, 4) == pytest.approx(0.64 + 4 * 0.04)
    # K=3: wrong costs 1/2; K=5: wrong costs 1/4
    assert normalized_accuracy([True, False], [3, 3]) == pytest.approx((1 - 0.5) / 2)
    assert normalized_accuracy([False, False, False, False, True], [5] * 5) == pytest.approx(0.0)


def test_ece_bins_with_confidence_one_in_the_top_bin():
    # bins: [0.9, 1.0] holds 1.0 and 0.95; [0.3, 0.4) holds 0.35
    conf, ok = [1.0, 0.95, 0.35], [True, False, True]
    expected = (abs(1 - 1.95) + abs(1 - 0.35)) / 3
    assert ece(conf, ok) == pytest.approx(expected)
    assert ece([], []) is None


def _rec(p, gold, k, domain="finance", typ="linear", top_invalid=False):
    raw = p
    alpha = sum(raw)
    p_ren, p_mix = rpm(raw, alpha, "renormalized"), rpm(raw, alpha, "mixed")
    top = argmax(p_ren)
    return {"answered": True, "parsed": top, "correct": top == gold, "k": k, "gold": gold, "alpha": alpha,
            "p_renormalized": p_ren, "p_mixed": p_mix, "top_token_invalid": top_invalid, "domain": domain, "type": typ}


def test_metrics_bundle_by_hand():
    recs = [_rec([0.6, 0.2, 0.1], 0, 3), _rec([0.1, 0.1, 0.1, 0.1, 0.5], 1, 5, domain="sports", top_invalid=True)]
    m = metrics(recs)
    assert m["accuracy"] == 0.5
    assert m["normalized_accuracy"] == pytest.approx((1 - 0.25) / 2)
    assert m["invalid_mass"] == pytest.approx(((1 - 0.9) + (1 - 0.9)) / 2)
    assert m["invalid_top_rate"] == 0.5
    p1, p2 = [0.6 / 0.9, 0.2 / 0.9, 0.1 / 0.9], [0.1 / 0.9] * 4 + [0.5 / 0.9]
    assert m["renormalized"]["epa"] == pytest.approx((p1[0] + p2[1]) / 2)
    assert m["renormalized"]["brier"] == pytest.approx((brier(p1, 0) + brier(p2, 1)) / 2)
    assert m["renormalized"]["ece"] == pytest.approx((abs(1 - p1[0]) + abs(0 - p2[4])) / 2)
    assert m["domain_robustness"]["spread"] == 1.0 and m["domain_robustness"]["worst"] == "sports"


def test_text_only_answers_leave_calibration_unavailable():
    recs = [{"answered": True, "parsed": 1, "correct": True, "k": 4, "gold": 1},
            {"answered": False, "parsed": None, "correct": False, "k": 4, "gold": 2}]
    m = metrics(recs)
    assert m["renormalized"] is None and m["mixed"] is None
    assert m["accuracy"] == 1.0 and m["no_answer_rate"] == 0.5


@pytest.mark.parametrize("text,k,expected", [
    ("B", 4, 1), (" B. because", 4, 1), ("(C)", 4, 2), ("D: 12.5", 4, 3), ("Thinking... the answer is A.", 4, 0),
    ("ANSWER: C", 4, 2), ("so the answer is B, no wait, the answer is D", 4, 3), ("E", 4, None), ("none", 4, None),
])
def test_letter_from_text(text, k, expected):
    assert letter_from_text(text, k) == expected


def test_number_from_text_and_free_text_rule():
    assert number_from_text("so x = \\boxed{12.5} and \\boxed{1,250}") == 1250
    assert number_from_text("ANSWER: $3,300 units, not 22") == 3300
    assert number_from_text("first 3 then 4.75") == 4.75
    assert number_from_text("no numbers") is None
    assert free_text_correct(101.5, 100.0, [90.0, 120.0])        # within 2%, closest to gold
    assert not free_text_correct(103.0, 100.0, [90.0, 120.0])    # 3% off
    assert not free_text_correct(100.9, 100.0, [101.0])          # closer to another option
    assert not free_text_correct(None, 100.0, [])


def test_car_replaces_the_correct_option_in_exactly_one_in_k_questions():
    items = [q for q in data.load("steer-me", "questions.jsonl") if q["element"] == "consumer_surplus"]
    car = apply_car(items, seed=7)
    assert sum(q["nota_is_correct"] for q in car) == round(len(items) / 4)
    for before, after in zip(items, car):
        assert after["options"].count(NOTA) == 1
        idx = after["options"].index(NOTA)
        assert (idx == before["correct_index"]) == after["nota_is_correct"]
        assert after["correct_index"] == before["correct_index"]
    assert apply_car(items, seed=7) == car and apply_car(items, seed=8) != car


def test_score_command_with_logprobs_and_text(cli, tmp_path):
    qs = data.load("steer-me", "questions.jsonl")[:4]
    lines = []
    for i, q in enumerate(qs):
        g = "ABCD"[q["correct_index"]]
        lp = {L: (-0.1 if L == g else -4.0) for L in "ABCD"} if i < 2 else None
        line = {"id": q["id"], "response": g if i == 2 else "I cannot tell"}
        if lp:
            line["option_logprobs"] = lp
        lines.append(line)
    p = tmp_path / "p.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines))
    rc, out, err = cli("score", "--task", "steer-me", "--predictions", p)
    assert rc == 0, err
    res = json.loads(out)["tasks"]["steer-me"]
    o = res["paper"]["overall"]
    assert o["accuracy"] == 1.0 and o["no_answer_rate"] == 0.25
    assert o["renormalized"] is None  # mixed: some items have no log-probabilities
    assert res["adaptation"] == "direct" and res["n_unparsed"] == 1


def test_cot_requests_take_two_stages_in_econevals_own_prompt_set():
    task = SteerMe()
    prep = task.prepare(RunContext(task_options={"adaptation": "cot-hidden", "prompts": "econeval1"}))
    item = prep.items[0]
    first = task.requests(item, prep, {})["reasoning"]
    assert "A. " not in first.prompt and first.prompt.endswith("Let's think step by step.")
    second = task.requests(item, prep, {"reasoning": " because"})["option_logprobs"]
    assert "A. " + item["options"][0] in second.prompt and second.prompt.endswith("the answer is")
    assert second.options == ("A", "B", "C", "D")
    assert task.requests(item, prep, {"reasoning": "x", "option_logprobs": {}}) == {}
    shown = SteerMe().prepare(RunContext(task_options={"adaptation": "cot-shown", "prompts": "econeval1"}))
    assert "A. " in task.requests(item, shown, {})["reasoning"].prompt


ANSWER = ("\nAnswer by writing the option letter corresponding to the correct option. RESPOND WITH ONLY A SINGLE LETTER.\nA:")
REASON = "\nPlease reason step by step, and put your final answer within \\boxed{}."


def test_the_open2025_prompts_are_the_authors_strings_and_turns():
    task = SteerMe()
    item = task.prepare(RunContext()).items[0]
    q, opts = "Q: " + item["question"], "".join(f"\n{L}. {o}" for L, o in zip("ABCD", item["options"]))
    prep = {a: task.prepare(RunContext(task_options={"adaptation": a})) for a in ("direct", "cot-shown", "cot-hidden", "free-text")}
    assert prep["direct"].settings["prompts"]["set"] == "open2025" and prep["direct"].settings["reasoning_tokens"] == 4096
    direct = task.requests(item, prep["direct"], {})["option_logprobs"]
    assert direct.prompt == q + opts + "\n" + ANSWER and direct.turns == ()
    for a, first_turn, answer_turn in (("cot-shown", q + opts + "\n" + REASON, ANSWER),
                                       ("cot-hidden", q + "\n" + REASON, opts.lstrip("\n") + "\n" + ANSWER)):
        reasoning = task.requests(item, prep[a], {})["reasoning"]
        assert reasoning.prompt == first_turn and reasoning.max_tokens == 4096
        answer = task.requests(item, prep[a], {"reasoning": " I think so. "})["option_logprobs"]
        assert answer.turns == (first_turn, "I think so.", answer_turn)  # the answer is a second user turn
        assert answer.prompt == "\n".join(answer.turns) and answer.options == ("A", "B", "C", "D")
    free = task.requests(item, prep["free-text"], {})["response"]
    assert free.prompt == q + "\n" + REASON


def test_few_shot_examples_per_cell_from_a_separate_pool():
    task = SteerMe()
    prep = task.prepare(RunContext(task_options={"shots": "2"}))
    items = [it for it in prep.items if it["element"] == prep.items[0]["element"]]
    a = task.requests(items[0], prep, {})["option_logprobs"]
    assert a.prefix and a.prompt.startswith(a.prefix) and a.prefix.endswith("\n\n") and a.prefix.count("Q: ") == 2
    assert a.prefix.count(ANSWER + " ") == 2  # each example answered: the instruction, a space, its letter
    assert all(it["question"] not in a.prefix for it in prep.items)  # never an evaluated question
    same_cell = [it for it in items[1:] if (it["type"], it["domain"]) == (items[0]["type"], items[0]["domain"])]
    if same_cell:
        assert task.requests(same_cell[0], prep, {})["option_logprobs"].prefix == a.prefix
    assert prep.settings["shots"] == 2


def test_car_table_hand_computed():
    from econeval.benchmarks.steer_me import car_table

    recs = [{"nota_is_correct": t, "chose_nota": c} for t, c in
            [(True, True), (True, False), (False, True), (False, False), (False, False), (True, True)]]
    recs.append({"nota_is_correct": True})  # unanswered: did not choose NOTA
    t = car_table(recs)
    assert (t["n"], t["n_nota_correct"], t["n_chose_nota"]) == (7, 4, 3)
    assert t["precision"] == pytest.approx(2 / 3) and t["recall"] == pytest.approx(2 / 4)
    assert t["f1"] == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert car_table([{"nota_is_correct": False, "chose_nota": False}])["recall"] is None  # nothing to recall: null


def test_car_is_balanced_over_the_items_that_run_and_scored_as_table_2(cli, tmp_path):
    """CAR is applied after --limit: 8 questions of an element get exactly round(8/4) = 2
    NOTA-correct questions; choosing NOTA on those two and one other gives P 2/3, R 1, F1 0.8."""
    items = [q for q in data.load("steer-me", "questions.jsonl") if q["element"] == "consumer_surplus"][:8]
    car = apply_car(items, seed=1234)
    assert sum(q["nota_is_correct"] for q in car) == 2
    wrong_one = next(q for q in car if not q["nota_is_correct"])
    lines = []
    for q in car:
        pick = q["car_replaced"] if (q["nota_is_correct"] or q is wrong_one) else (q["car_replaced"] + 1) % 4
        lines.append({"id": q["id"], "response": "", "option_logprobs": {L: (-0.1 if i == pick else -4.0) for i, L in enumerate("ABCD")}})
    p = tmp_path / "p.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines))
    rc, out, err = cli("score", "--task", "steer-me", "--car", "--predictions", p)
    assert rc == 0, err
    t = json.loads(out)["tasks"]["steer-me"]["paper"]["overall"]["car"]
    assert (t["n"], t["n_nota_correct"], t["n_chose_nota"]) == (8, 2, 3)
    assert t["precision"] == pytest.approx(2 / 3) and t["recall"] == 1.0 and t["f1"] == pytest.approx(0.8)


def test_free_text_uses_the_evaluator_model_when_a_judge_is_given():
    from econeval.benchmarks.steer_me import number_from_evaluator
    from econeval.types import JUDGE

    assert number_from_evaluator(" 12.5") == 12.5 and number_from_evaluator("None") is None
    assert number_from_evaluator("The answer is $1,250.") == 1250.0 and number_from_evaluator("unclear") is None
    task = SteerMe()
    judged = task.prepare(RunContext(task_options={"adaptation": "free-text"}, given=frozenset({"judge"})))
    plain = task.prepare(RunContext(task_options={"adaptation": "free-text"}))
    assert judged.roles == ("model", "judge") and plain.roles is None and plain.state["extractor"] == "regex"
    item = next(q for q in judged.items if q["element"] == "consumer_surplus")
    gold = item["solution"]["value"]
    response = f"The surplus is {gold:.2f} dollars, rounded to 2 decimals."
    ask = task.requests(item, judged, {"response": response})["extracted"]
    assert ask.role == JUDGE and response in ask.prompt and "None" in ask.prompt
    assert task.requests(item, plain, {"response": response}) == {}  # no judge: the regex reads it
    rec = task.score(item, {"response": response, "extracted": f" {gold:.2f}"}, judged)
    assert rec["correct"] and rec["parsed"] == pytest.approx(gold, abs=0.01)
    assert rec["regex_parsed"] == 2.0 and not rec["regex_correct"]  # the last-number fallback grabs the stray 2
    assert not task.score(item, {"response": response}, plain)["correct"]
    agg = task.aggregate([rec], judged)
    assert agg["extras"]["regex_extraction"]["agreement_with_evaluator"] == 0.0


def test_nota_goes_to_the_correct_option_in_floor_n_over_k_plus_a_half_questions():
    from econeval.benchmarks.steer_me import apply_car

    # 2 questions with 4 options: the authors' floor(2/4 + 1/2) = 1 (Python's round(0.5) would give 0)
    items = [{"id": f"q{i}", "element": "e", "options": ["1", "2", "3", "4"], "correct_index": 0} for i in range(2)]
    out = apply_car(items, seed=7)
    assert sum(it["nota_is_correct"] for it in out) == 1
    assert all(it["options"][it["car_replaced"]] == "No other option is correct." for it in out)


def test_car_replaces_an_option_in_every_part_of_a_group_and_leaves_rule_graded_groups_alone():
    from econeval.benchmarks.steer_me import apply_car

    parts = [{"question": f"p{k}", "options": ["1", "2", "3"], "correct_index": k, "question_id": f"e/g{i}/{k}"}
             for i in range(3) for k in (0, 1)]
    groups = [{"id": f"g{i}", "element": "e", "options": ["1", "2", "3"], "correct_index": 0, "parts": parts[2 * i:2 * i + 2]}
              for i in range(3)]
    rule = {"id": "r", "element": "e", "options": ["X", "Y"], "correct_index": None, "grading": "consistency",
            "parts": [{"question": "b", "options": ["X", "Y"], "correct_index": None}]}
    out = {it["id"]: it for it in apply_car(groups + [rule], seed=7)}
    assert out["r"] == rule
    assert sum(out[f"g{i}"]["nota_is_correct"] for i in range(3)) == 1  # floor(3/3 + 1/2)
    for i in range(3):
        g = out[f"g{i}"]
        for part in g["parts"]:
            assert part["options"].count("No other option is correct.") == 1
            assert (part["options"][part["correct_index"]] == "No other option is correct.") == g["nota_is_correct"]


def test_the_resampler_gives_exactly_the_numbers_of_the_resampled_records():
    """The intervals' fast path: each record's terms computed once, summed in the same order, so
    every resample's numbers equal `numbers_of` on its records to the last bit (also where some
    items are unanswered, rule-graded, penalised or lack probabilities)."""
    import random

    rng = random.Random(3)
    task = SteerMe()

    def record(i, with_probs=True):
        k = rng.choice((3, 4, 5))
        p = [rng.random() for _ in range(k)]
        p = [x / sum(p) for x in p]
        r = {"id": f"s/{i}", "answered": rng.random() < 0.9, "correct": rng.random() < 0.4, "k": k, "gold": rng.randrange(k)}
        if rng.random() < 0.1:
            r["penalty"] = 0.5
        if rng.random() < 0.1:
            r["grading"] = "consistency"
        elif with_probs:
            r["p_renormalized"], r["p_mixed"], r["top_correct"] = p, p, rng.random() < 0.5
            r["alpha"], r["top_token_invalid"] = 0.9, False
        return r

    for recs in ([record(i) for i in range(60)], [record(i, with_probs=i % 7 != 0) for i in range(60)]):
        numbers = task.resampler(recs, None)
        for _ in range(200):
            idx = [rng.randrange(len(recs)) for _ in recs]
            assert numbers(idx) == task.numbers_of([recs[i] for i in idx], None)
    assert task.resampler(recs, None)([]) == task.numbers_of([], None)
