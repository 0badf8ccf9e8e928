"""EconNLI Table 4 from predictions: the released parse rule and sklearn's arithmetic."""

import csv
import json
from pathlib import Path

import pytest

from econeval.benchmarks.econnli import cot_votes, parse_answer, released_icl_parse, table_row
from econeval import data


@pytest.mark.parametrize("text,expected", [
    ("Yes", 1), (" yes.", 1), ("\nNo", 0), ("No, because", 0), ("YES", 1),
    ("Not likely", 0),  # the released rule: "no" inside the first word
    ("Maybe", None), ("", None), ("   ", None), ("The answer is yes", None),
])
def test_released_parse_rule(text, expected):
    assert parse_answer(text) == expected


def test_released_cot_rules():
    # released-llama ('Yes.' then 'No.'), released-finma (independent 'Yes' / 'No'), released-gpt (last line)
    answer = " Demand rises, so prices rise. Not obvious.\n Yes. \n"
    assert cot_votes(answer, "released-llama") == [1]
    assert cot_votes(answer, "released-finma") == [1, 0]  # "Not" contains "No": counted twice
    assert cot_votes(answer, "released-gpt") == [1]
    assert cot_votes("Borrowing raises rates.\n No.", "released-llama") == [0]
    assert cot_votes("Borrowing raises rates.\n no", "released-llama") == []  # case-sensitive, with the period
    assert cot_votes("Yes, because demand rises.\nIt is known.", "released-gpt") == [0]  # 'no' in "known"
    assert cot_votes("Yes.\n### Question: ... No.", "released-finma") == [1]  # cut at the next question
    assert cot_votes("Maybe", "released-finma") == [] and cot_votes("maybe\n", "released-gpt") == []


def test_the_raw_reply_option_reads_the_gpt_cells_reply_as_they_did():
    """Issue #32 item 12: the released GPT cells read the raw reply's last line, uncut and
    unstripped, with no token cap; the default reads the stop-cut, stripped 200-token answer."""
    from econeval.benchmarks.econnli import CoTTask
    from econeval.context import RunContext

    assert cot_votes("Rates rise.\nYes.\n", "released-gpt") == [1]
    assert cot_votes("Rates rise.\nYes.\n", "released-gpt", raw=True) == []  # the last line is empty
    assert cot_votes("Yes.\n### Question: is it known?", "released-gpt", raw=True) == [0]  # 'no' in "known", uncut
    assert cot_votes("Yes.\n### Question: is it known?", "released-gpt") == [1]
    assert cot_votes("Yes.\n### Question: No.", "released-finma", raw=True) == [1]  # the open-model rules cut as released
    task = CoTTask()
    for reply, tokens, stop in (("cut", 200, ("### Question:", "### Answer:")), ("raw", 4096, ())):
        ctx = RunContext(task_options={"cot_reply": reply})
        prep = task.prepare(ctx)
        prep.options = ctx.options_for(task)  # as the runner sets them
        req = task.requests(prep.items[0], prep, {})["response"]
        assert (req.max_tokens, req.stop) == (tokens, stop)
        assert prep.settings["max_tokens"] == tokens and prep.settings["stop"] == list(stop)
        record = task.score(prep.items[0], {"response": "Rates rise.\nYes.\n"}, prep)
        assert record["votes"]["released-gpt"] == ([] if reply == "raw" else [1])


def test_released_icl_parse_reads_the_demonstration():
    """The released open-model ICL code splits prompt + output at the first 'answer:'."""
    from econeval.benchmarks.econnli import ICL

    prompt = ICL.format(p_pos="a", h_pos="b", p_neg="c", h_neg="d", premise="e", hypothesis="f")
    assert released_icl_parse(prompt, " No") == 1 and released_icl_parse(prompt, "") == 1
    assert parse_answer(" No") == 0  # econeval's headline reads the model's own continuation


def test_icl_released_code_extra_reproduces_the_published_open_model_row(cli, tmp_path):
    """Whatever the answers, the released parse gives Table 4's open-model ICL row on the full test set."""
    test = data.load("econnli", "test.jsonl")
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps({"id": r["id"], "response": [" No", " Yes", "??"][i % 3]}) for i, r in enumerate(test)))
    rc, out, err = cli("score", "--task", "econnli-icl", "--predictions", path)
    assert rc == 0, err
    res = json.loads(out)["tasks"]["econnli-icl"]
    assert _round3(res["extras"]["released_code"]) == [0.0, 0.0, 0.0, 0.5, 1.0, 0.667, 0.25, 0.5, 0.333]
    assert res["extras"]["released_code"]["n"] == 1026
    assert _round3(res["paper"]) != _round3(res["extras"]["released_code"])  # the headline reads the model's answer


def test_cot_headline_follows_the_chosen_released_rule(cli, tmp_path):
    test = data.load("econnli", "test.jsonl")[:6]
    answers = ["Reason.\nYes.", "Reason.\nNo.", "Not sure.\nYes.", "Reason.\nno", "Reason", "Reason.\nYes."]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps({"id": r["id"], "response": a}) for r, a in zip(test, answers)))
    gold = [r["label"] for r in test]
    rc, out, err = cli("score", "--task", "econnli-cot", "--predictions", path)
    assert rc == 0, err
    res = json.loads(out)["tasks"]["econnli-cot"]
    assert res["parse_rule"] == "released-llama" and res["n_unparsed"] == 2  # "no" (no period) and "Reason"
    assert res["paper"]["accuracy"] == pytest.approx(sum(g == p for g, p in zip(gold, [1, 0, 1, None, None, 1]) if p is not None) / 4)
    finma = res["extras"]["released-finma"]
    assert finma["n_predictions"] == 5 and finma["n_counted_twice"] == 1  # "Not sure.\nYes." counts as No and Yes
    rc, out, err = cli("score", "--task", "econnli-cot", "--predictions", path, "-T", "cot_parse=released-gpt")
    res = json.loads(out)["tasks"]["econnli-cot"]
    assert res["parse_rule"] == "released-gpt" and res["n_unparsed"] == 1  # only "Reason" has no yes/no on its last line


def test_cot_prompt_is_the_released_notebook_text():
    from econeval.benchmarks.econnli import COT_DEMOS, COT_QUESTION

    prompt = COT_DEMOS + COT_QUESTION.format(premise="P", hypothesis="H")
    assert prompt.count("### Answer:") == 3 and prompt.endswith("premise:P, hypothesis: H \n \n### Answer:\n")
    assert "premise: government borrowing creates higher demand for credit in the financial markets,hypothesis: " \
           "interest rates decreases across the market. \n ### Answer:When the government borrows money" in prompt


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


def test_judge_label_parsing_and_prompt_follow_the_released_code():
    from econeval.benchmarks.econnli import GenTask, parse_judge, released_gen_answer

    assert parse_judge(" Entailment") == "entailment"
    assert parse_judge("contradiction, not entailment") == "entailment"  # released order: entailment is checked first
    assert parse_judge("IRRELEVANT.") == "irrelevant"
    assert parse_judge("unclear") is None
    item = {"id": "x", "premise": "demand rises", "hypothesis": "prices rise"}
    gen = GenTask()
    first = gen.requests(item, None, {})["response"]
    assert first.max_tokens == 100 and first.stop == () and not first.chat  # 100 tokens, no newline cut, raw prompt
    assert released_gen_answer(first.prompt, " Prices go up.\nMore text. ") == "Prices go up.\nMore text."
    judge = gen.requests(item, None, {"response": " Prices go up."})["judge_response"]
    assert judge.prompt.endswith("Only provide the label.Event 1: prices rise, event 2:Prices go up.")  # (hypothesis, answer)


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
    assert meta["roles"]["judge"]["identity"]["model"]["sha256"] == meta["backend"]["model"]["sha256"]  # default judge: the evaluated model
    assert meta["roles"]["judge"]["named"] is False
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


# Answers that each released CoT rule reads as Yes, No, both (released-finma counts it twice) or nothing.
_COT_TEXT = {"yes": "The premise makes it more likely.\nYes.", "no": "It does not follow from the premise.\nNo.",
             "both": "Yes, the premise can cause it.\nNo.", "none": "It depends on the circumstances.\nMaybe."}
_PUB = json.loads((Path(__file__).resolve().parent.parent / "econeval/published/econnli.json").read_text())["tables"]["table4"]


def _paper3(row):
    """The paper's rounding: sklearn's 4-digit report (the released results file) rounded half up to 3."""
    from decimal import ROUND_HALF_UP, Decimal

    return [float(Decimal(f"{v:.4f}").quantize(Decimal("0.001"), ROUND_HALF_UP))
            for v in (row[c][k] for c in ("Negative Pairs", "Positive Pairs", "Average") for k in ("precision", "recall", "f1"))]


def _cot_predictions(tmp_path, name, neg, pos):
    """A predictions file: for the gold-negative items `neg` (kind → count), then for the
    gold-positive ones `pos`, in the test file's order."""
    test = data.load("econnli", "test.jsonl")
    lines = []
    for label, counts in ((0, neg), (1, pos)):
        ids = iter(r["id"] for r in test if r["label"] == label)
        for kind, n in counts.items():
            lines += [json.dumps({"id": next(ids), "response": _COT_TEXT[kind]}) for _ in range(n)]
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("model,neg,pos,support", [
    # counts from the released results file (LLM_results.txt): support and recall per class give them
    ("LLAMA2 (7B)", {"no": 88, "yes": 425}, {"yes": 486, "no": 25, "both": 2}, (513, 515)),  # 1,028 predictions
    ("FINMA", {"no": 397, "yes": 116}, {"yes": 225, "no": 288}, (513, 513)),
    ("GPT-4", {"no": 315, "yes": 196, "none": 2}, {"yes": 479, "no": 32, "none": 2}, (511, 511)),  # 4 dropped
])
def test_published_cot_rows_are_reproduced_by_the_rule_their_record_names(tmp_path, model, neg, pos, support):
    from econeval.api import score_predictions

    row = next(r for r in _PUB["rows"] if r["model"] == model and r["prompting"] == "CoT")
    rule = row["reproduced_by"]["cot_parse"]
    path = _cot_predictions(tmp_path, model.split()[0], neg, pos)
    got = {}
    for r in ("released-llama", "released-finma", "released-gpt"):
        res = score_predictions("econnli-cot", path, task_options={"cot_parse": r}, bootstrap=0)["tasks"]["econnli-cot"]
        got[r] = (_paper3(res["paper"]), (res["paper"]["Negative Pairs"]["support"], res["paper"]["Positive Pairs"]["support"]))
    assert got[rule] == (row["values"], support)  # exactly the published row, on the released file's supports
    if model == "LLAMA2 (7B)":  # 1,028 predictions on 1,026 items: no other rule can give them
        assert all(got[r][1] != support for r in got if r != rule)


def test_the_report_shows_each_cot_run_under_every_rule_beside_the_rows_they_reproduce(cli, tmp_path):
    path = _cot_predictions(tmp_path, "llama7b", {"no": 88, "yes": 425}, {"yes": 486, "no": 25, "both": 2})
    out = tmp_path / "scored"
    assert cli("score", "--task", "econnli-cot", "--predictions", path, "-T", "cot_parse=released-finma", "--out", out)[0] == 0
    rc, text, err = cli("report", out, "--format", "json")
    assert rc == 0, err
    tab = next(t for t in json.loads(text)["tables"] if t["id"] == "econnli-table4")
    paper = {(r["label"], r["setting"]): r["values"] for r in tab["rows"] if r["source"] == "paper"}
    mine = {r["setting"]: r for r in tab["rows"] if r["source"] == "run"}
    assert set(mine) == {"CoT (released-finma)", "CoT (released-llama)", "CoT (released-gpt)"}
    v = mine["CoT (released-finma)"]["values"]
    as_row = {c: {k: v[3 * i + j] for j, k in enumerate(("precision", "recall", "f1"))}
              for i, c in enumerate(("Negative Pairs", "Positive Pairs", "Average"))}
    assert _paper3(as_row) == paper[("LLAMA2 (7B)", "CoT (released-finma)")]
    assert mine["CoT (released-finma)"]["n"] == 1026 and mine["CoT (released-llama)"]["n"] == 1026
    assert ("ChatGPT", "Zero (weighted avg)") in paper and any("weighted average" in n for n in tab["notes"])


def test_zero_shot_and_icl_prompts_follow_the_released_cells_whitespace_included():
    import re

    from econeval.benchmarks.econnli import ICLTask, ZeroShot
    from econeval.context import RunContext

    def first(task, variant):
        prep = task.prepare(RunContext(task_options={"prompt": variant}))
        req = task.requests(prep.items[0], prep, {})["response"]
        assert req.prompt.startswith(req.prefix) and req.prefix
        return req

    spaces = {v: [len(m) for m in re.findall(r" +(?=whether|premise:)", first(ZeroShot(), v).prompt)]
              for v in ("released-open", "released-api", "paper")}
    assert spaces == {"released-open": [9, 17], "released-api": [2, 10], "paper": [1, 1]}
    assert first(ZeroShot(), "released-open").max_tokens == 10 and first(ICLTask(), "released-open").max_tokens == 3
    icl_open, icl_api = first(ICLTask(), "released-open").prompt, first(ICLTask(), "released-api").prompt
    assert icl_open.count("answer:Yes \n premise: ") == 1 and "answer:No \n Conduct inference on the following" in icl_open
    assert "answer:Yes; premise: " in icl_api and "answer:No; Conduct inference on the following" in icl_api
    assert ZeroShot().prepare(RunContext()).settings["prompt_variant"] == "released-open"  # the default


def test_the_api_variant_strips_newlines_only_as_released():
    from econeval.benchmarks.econnli import ZeroShot
    from econeval.context import RunContext

    task = ZeroShot()
    api, local = (task.prepare(RunContext(task_options={"prompt": v})) for v in ("released-api", "released-open"))
    item = api.items[0]
    assert task.score(item, {"response": "\nYes"}, api)["parsed"] == 1
    assert task.score(item, {"response": " Yes"}, api)["parsed"] is None  # empty first token, as the released cell read it
    assert task.score(item, {"response": " Yes"}, local)["parsed"] == 1


# The released fine-tuning notebook's evaluation prompt (fine-tuned_model_evaluation.ipynb,
# get_zero_shot_results_from_llama), line by line as its source cell holds it: an f-string whose
# lines end in a backslash continuation, and a "\n" escape before "### Answer:".
SFT_NOTEBOOK_LINES = ["### Question: Conduct inference on economic events. We provide a premise and a hypothesis,\\",
                      "both of them are economical events. Infer \\",
                      "whether the premise can cause the happening of the hypothesis. Only answer 'Yes' or 'No'. \\",
                      "premise: {cause}, hypothesis: {effect}. \\",
                      "\\n ### Answer:"]


def test_the_sft_prompt_is_the_released_fine_tuning_notebooks_and_only_zero_shot_takes_it():
    from econeval.benchmarks.econnli import ICLTask, ZeroShot
    from econeval.context import RunContext
    from econeval.errors import UsageError

    source = "".join(line[:-1] if line.endswith("\\") else line for line in SFT_NOTEBOOK_LINES).replace("\\n", "\n")
    task = ZeroShot()
    prep = task.prepare(RunContext(task_options={"prompt": "sft"}))
    item = prep.items[0]
    req = task.requests(item, prep, {})["response"]
    assert req.prompt == source.format(cause=item["premise"], effect=item["hypothesis"])
    assert req.prompt.endswith(". \n ### Answer:") and req.prompt.startswith(req.prefix) and req.prefix.endswith("'No'. ")
    assert req.max_tokens == 3  # the notebook's max_new_tokens
    assert prep.settings["prompt_variant"] == "sft" and prep.settings["variant_version"] == "econnli-sft/1"
    assert "variant_version" not in task.prepare(RunContext()).settings  # the other variants keep their identity
    assert task.score(item, {"response": " Yes"}, prep)["parsed"] == 1  # the text after "### Answer:", stripped
    assert task.score(item, {"response": " no."}, prep)["parsed"] == 0
    with pytest.raises(UsageError, match="'sft' is not one of"):
        ICLTask().prepare(RunContext(task_options={"prompt": "sft"}))


def test_a_fine_tuned_models_run_is_a_table_3_row_beside_the_published_mean_and_std(cli, tmp_path):
    out = tmp_path / "sft"
    rc, _, err = cli("run", "--model", "fake:tuned", "--task", "econnli-zero", "-T", "prompt=sft", "--limit", "8", "-q",
                     "--bootstrap", "0", "--out", out)
    assert rc == 0, err
    rc, md, err = cli("report", out)
    assert rc == 0, err
    table3 = md.split("## EconNLI Table 3")[1].split("\n## ")[0]
    assert "| paper | LLAMA2-chat(7B) | SFT (LoRA) | 0.889 ± 0.003 | 0.867 ± 0.008 |" in table3
    assert "| paper | BERT | SFT (classifier head) | 0.769 ± 0.006 |" in table3 and "| run | tuned | SFT prompt (D.1) |" in table3
    assert "## EconNLI Table 4" not in md  # a fine-tuned model's row is not a prompting method's
    rc, doc, _ = cli("report", out, "--format", "json")
    rows = {t["id"]: t["rows"] for t in json.loads(doc)["tables"]}
    assert [r["std"] for r in rows["econnli-table3"] if r["label"] == "LLAMA2-chat(13B)"] == \
        [[0.012, 0.06, 0.031, 0.045, 0.014, 0.021, 0.021, 0.025, 0.026]]


def test_a_self_judged_table_6_row_says_so_in_every_table_and_export(cli, tmp_path):
    """Table 6 without --judge (the default): the evaluated model labels its own answers. Such a row
    is never shown as if GPT-4 had judged it, as the paper's rows were."""
    runs = {}
    for name, judge in (("self", ()), ("same", ("--judge", "fake:a")), ("other", ("--judge", "fake:j"))):
        runs[name] = tmp_path / name
        rc, _, err = cli("run", "--model", "fake:a", *judge, "--task", "econnli-gen", "--limit", "4", "-q", "--bootstrap", "0",
                         "--out", runs[name])
        assert rc == 0, err
    rc, doc, err = cli("report", *runs.values(), "--format", "json")
    assert rc == 0, err
    table6 = next(t for t in json.loads(doc)["tables"] if t["id"] == "econnli-table6")
    assert {r["setting"] for r in table6["rows"] if r["source"] == "paper"} == {"judge: GPT-4"}
    assert [r["setting"] for r in table6["rows"] if r["source"] == "run"] == ["self-judged", "self-judged", "judge: j"]
    assert any(n.startswith("self-judged: the evaluated model labelled its own answers") for n in table6["notes"])
    for name, want in (("self", "self-judged"), ("same", "self-judged"), ("other", "j")):
        folder = runs[name]
        table = tmp_path / f"{name}.csv"
        assert cli("export", folder, "--format", "table", "--out", table)[0] == 0
        rows = list(csv.DictReader(line for line in table.read_text().splitlines() if not line.startswith("#")))
        assert rows and {r["judge"] for r in rows} == {want}
        lm = tmp_path / f"{name}-lm.json"
        assert cli("export", folder, "--format", "lm-eval", "--out", lm)[0] == 0
        assert json.loads(lm.read_text())["configs"]["econnli-gen"]["judge"] == want
        eee = tmp_path / f"{name}-eee.json"
        assert cli("export", folder, "--format", "every-eval-ever", "--out", eee)[0] == 0
        results = json.loads(eee.read_text())["evaluation_results"]
        assert {r["source_data"]["additional_details"]["judge"] for r in results} == {want}
        assert {r["score_details"]["details"]["judge"] for r in results} == {want}
    pytest.importorskip("inspect_ai")
    from econeval.publish.export_inspect import eval_logs
    from econeval.store.finished import open_checked

    log = eval_logs(open_checked(runs["self"]))["econnli-gen"]
    assert log.results.scores[0].metadata["judge"] == "self-judged"
