"""EconNLI Table 4 from predictions: the released parse rule and sklearn's arithmetic."""

import json

import pytest

from econeval.benchmarks.econnli import parse_answer, parse_cot, table_row
from econeval import data


@pytest.mark.parametrize("text,expected", [
    ("Yes", 1), (" yes.", 1), ("\nNo", 0), ("No, because", 0), ("YES", 1),
    ("Not likely", 0),  # the released rule: "no" inside the first word
    ("Maybe", None), ("", None), ("   ", None), ("The answer is yes", None),
])
def test_released_parse_rule(text, expected):
    assert parse_answer(text) == expected


def test_cot_reads_the_line_after_the_reasoning():
    assert parse_cot(" Demand rises, so prices rise.\n Yes. \n") == 1
    assert parse_cot("Borrowing raises rates.\n\n No.") == 0
    assert parse_cot("Yes, because demand rises.") is None  # reasoning only, no answer line


def _round3(row):
    return [round(row[c][k], 3) for c in ("Negative Pairs", "Positive Pairs", "Average") for k in ("precision", "recall", "f1")]


def test_gpt4_zero_shot_row_from_its_confusion_matrix():
    # negatives 391 right / 122 wrong, positives 467 right / 46 wrong
    y_true = [0] * 513 + [1] * 513
    y_pred = [0] * 391 + [1] * 122 + [1] * 467 + [0] * 46
    assert _round3(table_row(y_true, y_pred)) == [.895, .762, .823, .793, .910, .848, .844, .836, .835]


def _predictions(tmp_path, right0, wrong0, right1, wrong1, unparsed0=0, unparsed1=0):
    """A predictions file whose parsed answers give the wanted confusion counts."""
    test = data.load("econnli", "test.jsonl")
    neg = [r["id"] for r in test if r["label"] == 0]
    pos = [r["id"] for r in test if r["label"] == 1]
    answers = (["No"] * right0 + ["Yes"] * wrong0 + ["Perhaps"] * unparsed0
               + ["Yes"] * right1 + ["No"] * wrong1 + ["Perhaps"] * unparsed1)
    ids = neg[: right0 + wrong0 + unparsed0] + pos[: right1 + wrong1 + unparsed1]
    path = tmp_path / "pred.jsonl"
    path.write_text("".join(json.dumps({"id": i, "response": " " + a}) + "\n" for i, a in zip(ids, answers)))
    return path


def test_score_command_reproduces_chatgpt_zero_shot_with_dropped_items(cli, tmp_path):
    # LLM_results.txt, ChatGPT zero-shot: supports 511 / 513 (two unparsable negatives dropped)
    path = _predictions(tmp_path, right0=313, wrong0=198, right1=468, wrong1=45, unparsed0=2)
    rc, out, err = cli("score", "--task", "econnli-zero", "--predictions", path)
    assert rc == 0, err
    res = json.loads(out)["tasks"]["econnli-zero"]
    assert (res["n"], res["n_scored"], res["n_unparsed"]) == (1026, 1024, 2)
    row = res["paper"]
    got = [round(row[c][k], 4) for c in ("Negative Pairs", "Positive Pairs", "Average") for k in ("precision", "recall", "f1")]
    assert got == [.8743, .6125, .7204, .7027, .9123, .7939, .7885, .7624, .7571]
    assert row["Negative Pairs"]["support"] == 511
    # the strict variant counts the two unparsable negatives as wrong
    assert res["extras"]["strict"]["Negative Pairs"]["support"] == 513
    assert res["extras"]["strict"]["Negative Pairs"]["recall"] == pytest.approx(313 / 513)


def test_score_uses_option_logprobs_when_given(cli, tmp_path):
    test = data.load("econnli", "test.jsonl")[:4]
    path = tmp_path / "p.jsonl"
    lines = [{"id": r["id"], "response": "??", "option_logprobs": {"Yes": -0.1 if r["label"] else -3.0, "No": -2.5}} for r in test]
    path.write_text("\n".join(json.dumps(x) for x in lines))
    rc, out, err = cli("score", "--task", "econnli-zero", "--predictions", path)
    assert rc == 0, err
    res = json.loads(out)["tasks"]["econnli-zero"]
    assert res["n_unparsed"] == 4
    assert res["extras"]["logprob"]["accuracy"] == 1.0


def test_judge_label_parsing():
    from econeval.benchmarks.econnli import parse_judge

    assert parse_judge(" Entailment") == "entailment"
    assert parse_judge("contradiction, not entailment") == "contradiction"
    assert parse_judge("IRRELEVANT.") == "irrelevant"
    assert parse_judge("unclear") is None


def test_generation_task_with_a_judge(cli, tmp_path, tiny_model):
    reg = tmp_path / "models.toml"
    reg.write_text(f'default = "tiny"\n[models.tiny]\npath = "{tiny_model}"\nn_ctx = 2048\nchat = "off"\n')
    env = {"ECONEVAL_MODELS": str(reg)}
    out = tmp_path / "run"
    rc, _, err = cli("run", "--task", "econnli-gen", "--limit", "3", "--quiet", "--out", out, env=env)
    assert rc == 0, err
    res = json.loads((out / "results.json").read_text())["tasks"]["econnli-gen"]
    assert list(res["paper"]) == ["Ent.", "Con.", "Irr.", "Con./Ent.(%)"]
    assert res["n"] == 3 and res["n_scored"] + res["n_unparsed"] == 3
    assert sum(res["extras"]["judge_logprob"][k] for k in ("Ent.", "Con.", "Irr.")) == 3
    meta = json.loads((out / "run.json").read_text())
    assert meta["judge"]["identity"]["model"]["sha256"] == meta["backend"]["model"]["sha256"]  # default judge: the evaluated model
    samples = [json.loads(l) for l in (out / "samples.jsonl").read_text().splitlines()]
    assert all(s["id"] in {r["id"] for r in data.load("econnli", "test.jsonl") if r["label"] == 1} for s in samples)
    assert all("judge_response" in s for s in samples)
    # scoring external generations needs an explicit judge
    pred = tmp_path / "gen.jsonl"
    pred.write_text(json.dumps({"id": samples[0]["id"], "response": "Prices rise."}) + "\n")
    rc, _, err = cli("score", "--task", "econnli-gen", "--predictions", pred, env=env)
    assert rc == 2 and "needs a judge model" in err
    rc, out_json, err = cli("score", "--task", "econnli-gen", "--predictions", pred, "--judge", tiny_model, env=env)
    assert rc == 0, err
    assert json.loads(out_json)["tasks"]["econnli-gen"]["n"] == 1


def test_generation_stops_only_where_the_released_parse_is_settled():
    """Once the early-stop pattern matches, no continuation can change the released parse."""
    import re

    from econeval.benchmarks.econnli import ZeroShot

    settled = re.compile(ZeroShot.settled)
    starts = [" Yes", " yes.", "\n YES", " 'Yes", ' "No-yes', " Nope, yes", " No", " Maybe", " no\tye", ""]
    tails = ["", " no", "\n\nNo.", "s no", "\tno", " yes", "NO"]
    for start in starts:
        if settled.search(start):
            assert all(parse_answer(start + t) == 1 for t in tails), start
    assert settled.search(" Yes") and settled.search(' "No-yes') and not settled.search(" No") and not settled.search(" no\tye")
    assert not settled.search(" Nope, yes")  # the first word ended at the space: the space stop ends it instead
