"""STEER-ME against the authors' package (issue #32 items 4-10, issue #56 items 6-7): each
difference is the package's behaviour by default or a named option, and these tests hold the
package's behaviour quoted in the issue against each."""

import json
import math

import pytest

from econeval import api
from econeval.benchmarks.steer_me import SteerMe, letter_from_text, number_as_package_reads
from econeval.context import RunContext


def _prep(**options):
    task = SteerMe()
    ctx = RunContext(seed_given=False, task_options=options)
    return task, task.prepare(ctx)


@pytest.mark.parametrize("reasoning,stop,kept", [("econeval", ("\nQ: ",), "I reason.\nSo C."),
                                                 ("package", (), "  I reason.\nSo C.\n")])
def test_the_reasoning_turn_stops_and_goes_back_into_the_conversation_by_the_reasoning_option(reasoning, stop, kept):
    """Item 4-5: the package's solver sets no stop and appends the completion unchanged."""
    task, prep = _prep(adaptation="cot-shown", reasoning=reasoning)
    item = prep.items[0]
    first = task.requests(item, prep, {})["reasoning"]
    assert first.stop == stop and first.max_tokens == 4096
    answer = task.requests(item, prep, {"reasoning": "  I reason.\nSo C.\n"})["option_logprobs"]
    assert answer.turns[1] == kept  # the model's reasoning as the next message
    assert prep.settings["reasoning"] == reasoning


def _predictions(path, n=64, not_letter=32):
    """n predictions of the bundled set; for the first `not_letter` the top token is no letter (its
    log-probability above every letter's), the rest put their top token on a letter."""
    from econeval import data

    rows = []
    for k, q in enumerate(data.load("steer-me", "questions.jsonl")[:n]):
        lp = {"A": math.log(0.2), "B": math.log(0.1), "C": math.log(0.05), "D": math.log(0.05)}
        lp["<top>"] = math.log(0.6) if k < not_letter else math.log(0.2)
        rows.append({"id": q["id"], "response": "", "option_logprobs": lp})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_packages_no_answer_rate_is_reported_and_its_rule_is_an_option(tmp_path):
    """Item 6: 64 predictions whose top token is no letter for 32: the package gives a no-answer
    rate of 0.5; econeval's restricted rule answers all 64."""
    preds = _predictions(tmp_path / "p.jsonl")
    paper = api.score_predictions("steer-me", preds, bootstrap=0)["tasks"]["steer-me"]["paper"]["overall"]
    assert paper["no_answer_rate"] == 0.0 and paper["package_no_answer_rate"] == 0.5 and paper["invalid_top_rate"] == 0.5
    package = api.score_predictions("steer-me", preds, bootstrap=0, task_options={"answer_rule": "generated"})
    o = package["tasks"]["steer-me"]["paper"]["overall"]
    assert o["no_answer_rate"] == 0.5 and o["package_no_answer_rate"] == 0.5 and o["renormalized"]["brier"] is not None
    assert package["tasks"]["steer-me"]["answer_rule"]["name"] == "generated"


@pytest.mark.parametrize("text,k,expected", [
    ("**B**", 4, 1), ("B, because the price falls", 4, 1), ("The answer is **C**.", 4, 2), ("Answer: option C", 4, 2),
    ("( D ) is right", 4, 3), ("the answer is c", 4, None), ("E", 4, None), ("Answer: E, or rather the answer is B", 4, 1),
])
def test_the_text_reader_reads_the_forms_the_packages_parse_letter_reads(text, k, expected):
    """Item 7: `**B**`, `B, because`, `The answer is **C**.`, `Answer: option C`."""
    assert letter_from_text(text, k) == expected


def test_a_text_only_answer_turn_is_capped_or_not_by_the_option():
    """Item 7: text-only APIs got 8 tokens for the answer turn; the package leaves it uncapped."""
    for value, tokens in (("8", 8), ("none", None), ("64", 64)):
        task, prep = _prep(text_answer_tokens=value)
        assert task.requests(prep.items[0], prep, {})["option_logprobs"].text_tokens == tokens
        assert prep.settings["text_answer_tokens"] == tokens


def test_the_authors_seed_is_steer_mes_default_and_a_given_seed_wins(tmp_path):
    """Item 8: the package's seed is 42; NOTA placement follows it unless --seed is given."""
    from econeval.benchmarks.steer_me import apply_car

    task = SteerMe()
    plain = task.prepare(RunContext(seed_given=False, task_options={"car": True}))
    given = task.prepare(RunContext(seed=1234, seed_given=True, task_options={"car": True}))
    assert plain.settings["seed"] == {"value": 42, "from": "the authors' package (no --seed given)"}
    assert given.settings["seed"] == {"value": 1234, "from": "--seed"}
    items = plain.items[:400]
    placed = [it["car_replaced"] for it in task.finalize_items(items, plain)]
    assert placed == [it["car_replaced"] for it in apply_car(items, 42)]
    assert placed != [it["car_replaced"] for it in task.finalize_items(items, given)]
    assert RunContext(seed=7, seed_given=False).seed_for(task) == 42 and RunContext(seed=7).seed_for(task) == 7


def test_a_run_without_seed_records_it_and_verifies(cli, tmp_path):
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:car", "--task", "steer-me", "--car", "--limit", "2", "--quiet", "--out", out)
    assert rc == 0, err
    meta = json.loads((out / "run.json").read_text())
    assert meta["seed"] == 1234 and meta["seed_given"] is False
    assert meta["tasks"]["steer-me"]["settings"]["seed"]["value"] == 42
    rc, _, err = cli("run", "--model", "fake:car", "--task", "steer-me", "--car", "--limit", "3", "--quiet", "--out", out)
    assert rc == 0, err  # resumed and extended: the folder's draws are the protocol seed's again
    assert json.loads((out / "results.json").read_text())["tasks"]["steer-me"]["n"] == 192
    rc, _, err = cli("run", "--model", "fake:car", "--task", "steer-me", "--car", "--limit", "3", "--seed", "1234", "--quiet",
                     "--out", out)
    assert rc == 2 and "seed" in err  # other draws: not mixed into this folder


def test_free_text_grading_the_packages_way_is_an_option(tmp_path):
    """Item 10: at 32/64 right, econeval's normalised accuracy is 0.333 and the package's 0.5
    (a wrong number costs 0 there); the package compares at 3 significant figures."""
    from econeval import data

    qs = [q for q in data.load("steer-me", "questions.jsonl") if q["element"] == "add_sub"][:64]
    rows = [{"id": q["id"], "response": f"ANSWER: {q['solution']['value'] if k < 32 else -1e9}"} for k, q in enumerate(qs)]
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    opts = {"adaptation": "free-text"}
    paper = api.score_predictions("steer-me", preds, bootstrap=0, task_options=opts)["tasks"]["steer-me"]["paper"]["overall"]
    assert paper["accuracy"] == 0.5 and paper["normalized_accuracy"] == pytest.approx(1 / 3)
    doc = api.score_predictions("steer-me", preds, bootstrap=0, task_options={**opts, "free_text_grading": "package"})
    package = doc["tasks"]["steer-me"]["paper"]["overall"]
    assert package["accuracy"] == 0.5 and package["normalized_accuracy"] == 0.5
    assert number_as_package_reads("so Answer: −1,234.5 units") == -1234.5 and number_as_package_reads("\\boxed{2.5e3}") == 2500.0


def test_the_generated_rule_applies_to_every_part_of_a_group():
    """A multi-part group is answered only when every part's top token is a valid letter under
    `answer_rule=generated`; the package's no-answer rate says so under either rule."""
    item = {"element": "e", "options": ["1", "2"], "correct_index": 0,
            "parts": [{"question": "p0", "options": ["1", "2"], "correct_index": 0},
                      {"question": "p1", "options": ["3", "4"], "correct_index": 1}]}
    lp0, lp1 = {"A": math.log(0.6), "B": math.log(0.3)}, {"C": math.log(0.2), "D": math.log(0.3)}
    outputs = {"option_logprobs": lp0, "option_logprobs@2": lp1,
               "calls": {"option_logprobs": {"top_logprob": math.log(0.6)},
                         "option_logprobs@2": {"top_logprob": math.log(0.5)}}}  # part 2: a non-letter on top
    restricted = SteerMe._score_group(item, outputs, {}, "restricted")
    generated = SteerMe._score_group(item, outputs, {}, "generated")
    assert restricted["answered"] and restricted["parsed"] == [0, 1] and restricted["generated_answer"] is False
    assert not generated["answered"] and generated["parsed"] == [0, None]


def test_a_protocol_seed_run_and_a_given_seed_run_get_their_own_default_folders(cli, tmp_path):
    """No --seed draws STEER-ME with 42 under the run's seed 1234, so the default folder is named
    by the task's seed too: a run with --seed 1234 is another run, not a refused resume."""
    env = {"ECONEVAL_HOME": str(tmp_path / "home")}
    args = ("run", "--model", "fake:m", "--task", "steer-me", "--limit", "1", "--quiet")
    for extra in ((), ("--seed", "1234")):
        rc, _, err = cli(*args, *extra, env=env)
        assert rc == 0, err
    assert len(list((tmp_path / "home").rglob("run.json"))) == 2


def aisha(prompt: str) -> str:
    """A model's reply at STEER-ME's answer turn (the fake backend's `respond`): for about half the
    questions a sentence whose first word begins with a capital letter, for the rest the letter B."""
    import hashlib

    return "Aisha would buy more of it." if hashlib.sha256(prompt.encode()).digest()[0] % 2 else "B"


def test_the_generated_rule_reads_the_reply_as_the_packages_parse_letter(cli, tmp_path):
    """Issue #56 item 6: under -T answer_rule=generated the answer is the letter the model's reply
    commits to, read as the package's parse_letter reads it: "Aisha would ..." is no answer (its
    first token, "A", is a letter, which the rule read as A before); "B" is B. The package's
    no-answer rate is then the share of such replies."""
    from conftest import read_lines

    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:m", "-M", "respond=test_steer_package_rules:aisha", "--task", "steer-me",
                     "-T", "answer_rule=generated", "--sample", "24", "--out", out, "-q", "--bootstrap", "0")
    assert rc == 0, err
    recs = read_lines(out / "samples.jsonl")
    words = [r for r in recs if r.get("answer_text", "").startswith("Aisha")]
    assert 0 < len(words) < len(recs) == 24
    assert all(r["parsed"] is None and r["answered"] is False for r in words)
    assert all(r["parsed"] == 1 for r in recs if r not in words)
    overall = json.loads(next(out.glob("results*.json")).read_text())["tasks"]["steer-me"]["paper"]["overall"]
    assert overall["package_no_answer_rate"] == overall["no_answer_rate"] == pytest.approx(len(words) / 24)


def test_a_groups_next_part_follows_the_models_reply_under_the_generated_rule():
    """Issue #56 item 7: between the parts of a group the authors' solver sends the model's own
    reply at the answer turn; under the generated rule econeval sends it too (under the paper's
    restricted rule, the letter its probabilities chose)."""
    item = {"id": "g", "element": "e", "options": ["1", "2"], "correct_index": 0,
            "parts": [{"question": "p0", "options": ["1", "2"], "correct_index": 0},
                      {"question": "p1", "options": ["3", "4"], "correct_index": 1}]}
    lp = {"A": math.log(0.3), "B": math.log(0.6)}
    reply = "B. Because the price falls, the quantity rises."
    for rule, said in (("generated", reply), ("restricted", "B")):
        task, prep = _prep(answer_rule=rule)
        first = task.requests(item, prep, {})
        assert set(first) == ({"option_logprobs", "answer_text"} if rule == "generated" else {"option_logprobs"})
        outputs = {"option_logprobs": lp, "answer_text": reply, "calls": {"option_logprobs": {"top_logprob": math.log(0.6)}}}
        second = task.requests(item, prep, outputs)
        assert second["option_logprobs@2"].turns[1] == said, rule
        if rule == "generated":
            assert second["answer_text@2"].turns == second["option_logprobs@2"].turns
