"""`econeval steer` and `econeval run --task steer-me` end to end (tiny model)."""

import json

import pytest


@pytest.fixture
def registry(tiny_registry):
    return tiny_registry


def test_generate_is_deterministic_and_usable_by_run(cli, tmp_path, registry):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        rc, _, err = cli("steer", "generate", "--elements", "consumer_surplus,find_eq_price", "--per-element", "8",
                         "--seed", "11", "--out", path)
        assert rc == 0, err
    assert a.read_bytes() == b.read_bytes()
    rows = [json.loads(l) for l in a.read_text().splitlines()]
    assert [r["element"] for r in rows[:1]] == ["find_eq_price"]  # taxonomy order
    out = tmp_path / "run"
    rc, _, err = cli("run", "--task", "steer-me", "--questions", a, "--adaptation", "cot-shown", "-T", "reasoning_tokens=64",
             "--quiet", "--out", out, env=registry)
    assert rc == 0, err
    meta = json.loads((out / "run.json").read_text())
    s = meta["tasks"]["steer-me"]["settings"]
    assert s["adaptation"] == "cot-shown" and s["source"]["questions_file"] == str(a) and len(s["source"]["sha256"]) == 64
    res = json.loads((out / "results.json").read_text())["tasks"]["steer-me"]
    assert res["n"] == 16 and set(res["paper"]["element"]) == {"consumer_surplus", "find_eq_price"}
    assert set(res["heatmap"]["values"]) == {"consumer_surplus", "find_eq_price"}
    samples = [json.loads(l) for l in (out / "samples.jsonl").read_text().splitlines()]
    assert all(s["reasoning"] is not None and s["calls"]["option_logprobs"]["top_logprob"] is not None for s in samples)


def test_run_direct_with_car_on_the_bundled_set(cli, tmp_path):
    """CAR's balance and tables over the whole bundled set (--limit 4 of each element): what the
    runner and the task do around a model, on the fake model."""
    out = tmp_path / "run"
    rc, stdout, err = cli("run", "--model", "fake:car", "--task", "steer-me", "--car", "--limit", "4", "--quiet", "--out", out)
    assert rc == 0, err
    res = json.loads((out / "results.json").read_text())["tasks"]["steer-me"]
    assert res["n"] == 256 and len(res["paper"]["element"]) == 64  # --limit counts per element
    # CAR is balanced over the questions that ran: round(4/4) = 1 NOTA-correct question per element
    assert all(e["car"]["n_nota_correct"] == 1 for e in res["paper"]["element"].values())
    assert res["paper"]["overall"]["car"]["n"] == 256
    assert len(res["paper"]["setting"]) == 5
    assert res["adaptation"] == "direct+car"
    o = res["paper"]["overall"]
    assert 0 <= o["accuracy"] <= 1 and o["renormalized"]["brier"] is not None and 0 <= o["invalid_mass"] <= 1
    assert "nota_selection_rate" in o
    assert "steer-me" in stdout


def test_free_text_adaptation_end_to_end(cli, tmp_path, registry):
    out = tmp_path / "run"
    rc, _, err = cli("run", "--task", "steer-me", "--adaptation", "free-text", "--limit", "1", "-T", "reasoning_tokens=64",
                     "--quiet", "--out", out, env=registry)
    assert rc == 0, err
    res = json.loads((out / "results.json").read_text())["tasks"]["steer-me"]
    assert res["adaptation"] == "free-text" and res["n"] == 64
    assert res["paper"]["overall"]["renormalized"] is None  # no option probabilities in free text
    samples = [json.loads(l) for l in (out / "samples.jsonl").read_text().splitlines()]
    assert all("option_logprobs" not in s for s in samples)  # one generation per question, no letter scoring
    assert all(isinstance(s["response"], str) and "correct" in s for s in samples)
    assert all(s["answered"] == (s["parsed"] is not None) for s in samples)
    assert "judge" not in json.loads((out / "run.json").read_text())["roles"]  # no --judge: the regex reads the number
    judged = tmp_path / "judged"
    rc, _, err = cli("run", "--task", "steer-me", "--adaptation", "free-text", "--judge", "tiny", "--limit", "1",
                     "-T", "reasoning_tokens=64", "--quiet", "--out", judged, env=registry)
    assert rc == 0, err
    meta = json.loads((judged / "run.json").read_text())
    assert meta["roles"]["judge"]["identity"] and meta["roles"]["judge"]["named"]
    assert "evaluator" in meta["tasks"]["steer-me"]["settings"]["free_text_extractor"]
    samples = [json.loads(l) for l in (judged / "samples.jsonl").read_text().splitlines()]
    assert all(isinstance(s["extracted"], str) and "regex_parsed" in s for s in samples)


def test_steer_errors(cli, tmp_path):
    rc, _, err = cli("steer", "generate", "--elements", "nonsense", "--out", tmp_path / "x.jsonl")
    assert rc == 2 and "unknown element(s): nonsense" in err
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"id": "x"}\n')
    rc, _, err = cli("score", "--task", "steer-me", "--questions", bad, "--predictions", bad)
    assert rc == 2 and "lacks" in err and "Traceback" not in err


def test_elements_listing(cli):
    rc, out, _ = cli("steer", "elements", "--json")
    rows = json.loads(out)
    assert len(rows) == 64
    cs = next(r for r in rows if r["element"] == "consumer_surplus")
    assert cs["covered"] and cs["domains"] == 10 and cs["perspectives"] == 5


def _package(root, words=False):
    """A small STEER-ME data package in the authors' staged layout (their steer_bench/data.py);
    `words`: one more question, answered by a word."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    root.mkdir()
    (root / "elements.csv").write_text("element,setting,module\nlinear_system_eq,Foundations,Systems of Equations\n")
    rows = [dict(element="linear_system_eq", base_id=str(i), part=0, question_text=f"Solve x + {i} = {i + 2}. What is x?",
                 options=["1", "2", "3", "4"], correct_index=1, grading="answer", type="standard", domain="shopping",
                 perspective="second person", template_id="t0", consistency_rule=None) for i in range(3)]
    rows += [dict(rows[0], base_id="m", part=k, question_text=f"part {k}", correct_index=k) for k in (1, 0)]  # a multi-part group
    rows += [dict(rows[0], base_id="c", part=k, question_text=f"brand {k}", options=["X", "Y"], correct_index=None,
                  grading="consistency", consistency_rule="same_brand:00,11") for k in (0, 1)]  # consistency-graded
    if words:
        rows.append(dict(rows[0], base_id="w", question_text="Which is a normal good?", options=["bread", "salt", "rent", "tea"]))
    where = root / "data" / "foundations" / "systems_of_equations" / "linear_system_eq"
    where.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), where / "test.parquet")
    return root


def test_the_authors_staged_data_package_runs(cli, tmp_path, tiny_model):
    pkg = _package(tmp_path / "steer-me-package")
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", tiny_model, "--task", "steer-me", "-T", f"questions={pkg}", "--quiet", "--out", out)
    assert rc == 0, err
    res = json.loads((out / "results.json").read_text())["tasks"]["steer-me"]
    assert res["n"] == 5
    source = json.loads((out / "run.json").read_text())["tasks"]["steer-me"]["settings"]["source"]
    assert source["questions"] == 5 and source["multi_part_groups"] == 2 and source["consistency_graded_groups"] == 1
    assert len(source["sha256"]) == 64
    samples = {s["id"]: s for s in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    assert list(samples) == [f"steer-me/linear_system_eq/{i}/0" for i in range(3)] + [
        "steer-me/linear_system_eq/m", "steer-me/linear_system_eq/c"]
    # the multi-part group: one conversation, the second part's letters continue (E-H), after the
    # model's answer to the first part; graded right only when both parts are
    multi = samples["steer-me/linear_system_eq/m"]
    assert multi["parts"] == 2 and len(multi["parsed"]) == 2 and multi["penalty"] == 1 / 3
    assert set(multi["option_logprobs@2"]) == set("EFGH") and "\nE. 1\nF. 2" in multi["prompts"]["option_logprobs@2"]
    first = multi["prompts"]["option_logprobs"]
    assert first.startswith("Q: part 0\nA. 1") and multi["prompts"]["option_logprobs@2"].startswith(first + "\n")
    assert multi["correct"] == (multi["parsed"] == [0, 1])
    brand = samples["steer-me/linear_system_eq/c"]  # a rule: the same brand in both parts (2 of 4 choices: penalty 1)
    assert brand["grading"] == "consistency" and brand["penalty"] == 1.0 and "p_renormalized" not in brand
    assert brand["correct"] == (brand["parsed"] in ([0, 0], [1, 1]))
    rc, out_, err = cli("data", "export", "steer-me", "--prompts", "-T", f"questions={pkg}", "--out", tmp_path / "p.jsonl")
    assert rc == 0, err
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "p.jsonl").read_text().splitlines())}
    m = rows["steer-me/linear_system_eq/m"]
    assert m["turns"]["option_logprobs@2"][1] == "<reply to option_logprobs>" and m["requests"]["option_logprobs@2"]["stage"] == 2
    rc, _, err = cli("run", "--model", tiny_model, "--task", "steer-me", "-T", f"questions={pkg}", "-T", "prompts=econeval1",
                     "--quiet", "--out", tmp_path / "one-at-a-time")
    assert rc == 0, err  # econeval1 asks one question at a time: the two groups are counted, not run
    meta = json.loads((tmp_path / "one-at-a-time" / "run.json").read_text())
    assert meta["tasks"]["steer-me"]["settings"]["source"]["not_run"]["groups"] == 2
    rc, _, err = cli("run", "--model", tiny_model, "--task", "steer-me", "-T", f"questions={tmp_path}", "--quiet",
                     "--out", tmp_path / "run2")
    assert rc == 2 and "not a STEER-ME data package (no elements.csv)" in err


def test_free_text_runs_the_package_questions_answered_by_a_number_and_counts_the_rest(cli, tmp_path, tiny_model):
    pkg = _package(tmp_path / "pkg", words=True)
    out = tmp_path / "run"
    rc, _, err = cli("score", "--task", "steer-me", "-T", f"questions={pkg}", "-T", "adaptation=free-text", "--predictions",
                     _free_text_predictions(tmp_path / "p.jsonl"), "--out", out)
    assert rc == 0, err  # it was "internal error: TypeError: unsupported operand type(s) for -: 'float' and 'NoneType'"
    res = json.loads((out / "results.json").read_text())["tasks"]["steer-me"]
    overall = res["paper"]["overall"]
    assert res["n"] == 3 and overall["accuracy"] == 0.5 and overall["no_answer_rate"] == pytest.approx(1 / 3)  # 2 = 2, 7 ≠ 2, none
    source = json.loads((out / "run.json").read_text())["tasks"]["steer-me"]["settings"]["source"]
    assert source["not_run_free_text"]["questions"] == 1 and source["not_run"]["groups"] == 2


def _free_text_predictions(path):
    rows = [{"id": f"steer-me/linear_system_eq/{i}/0", "response": f"ANSWER: {a}"} for i, a in ((0, 2), (1, 7), (2, "none"))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_answer_turn_follows_the_models_reasoning_in_the_chat(cli, tmp_path, tiny_chat_model):
    questions = tmp_path / "q.jsonl"
    assert cli("steer", "generate", "--elements", "consumer_surplus", "--per-element", "2", "--out", questions)[0] == 0
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", tiny_chat_model, "--task", "steer-me", "--questions", questions, "--adaptation",
                     "cot-hidden", "-T", "reasoning_tokens=8", "--chat", "on", "--quiet", "--out", out)
    assert rc == 0, err
    for s in (json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()):
        rendered = s["rendered"]["option_logprobs"]
        first, answer = rendered.index("Please reason step by step"), rendered.index("RESPOND WITH ONLY A SINGLE LETTER")
        # three messages: the reasoning turn, the model's reasoning (the tests' template renders every
        # message alike), the answer turn
        assert f"<|end|><|user|>{s['reasoning'].strip()}<|end|><|user|>A. " in rendered[first:answer]
        assert rendered.count("<|end|>") == 3 and rendered.endswith("<|assistant|>")


def test_exported_prompts_show_the_open2025_turns(cli, tmp_path):
    out = tmp_path / "p.jsonl"
    rc, _, err = cli("data", "export", "steer-me", "--prompts", "--limit", "1", "--adaptation", "cot-shown", "--out", out)
    assert rc == 0 and "placeholder" in err, err
    row = json.loads(out.read_text().splitlines()[0])
    first = row["prompts"]["reasoning"]
    assert first.startswith("Q: ") and first.endswith("\n\nPlease reason step by step, and put your final answer within \\boxed{}.")
    assert row["turns"]["option_logprobs"] == [first, "<reply to reasoning>", "\nAnswer by writing the option letter corresponding "
                                               "to the correct option. RESPOND WITH ONLY A SINGLE LETTER.\nA:"]
    assert row["requests"]["reasoning"]["stage"] == 1 and row["requests"]["option_logprobs"]["stage"] == 2


def test_car_drops_consistency_graded_groups_as_the_packages_none_format(cli, tmp_path):
    """Issue #32 item 9: `if format in ("none", "free") and grading != "answer": continue`."""
    pkg = _package(tmp_path / "pkg")
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:car", "--task", "steer-me", "-T", f"questions={pkg}", "--car", "--quiet", "--out", out)
    assert rc == 0, err
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert "steer-me/linear_system_eq/c" not in {s["id"] for s in samples} and len(samples) == 4
    source = json.loads((out / "run.json").read_text())["tasks"]["steer-me"]["settings"]["source"]
    assert source["not_run_car"]["groups"] == 1


def test_the_release_layout_and_a_parent_folder_read_as_the_staging_layout(tmp_path):
    """Issue #32 item 11: the authors' data.py also reads data/<element>/test.parquet (setting and
    module from the columns, else elements.csv) and a parent folder holding steer-me/."""
    import shutil

    from econeval.benchmarks.steer_me.package import load

    staged = _package(tmp_path / "staged")
    release = tmp_path / "parent" / "STEER-ME"
    (release / "data" / "linear_system_eq").mkdir(parents=True)
    shutil.copy(staged / "elements.csv", release / "elements.csv")
    shutil.copy(next(staged.glob("data/*/*/*/test.parquet")), release / "data" / "linear_system_eq" / "test.parquet")
    a, b = load(staged)[0], load(tmp_path / "parent")[0]
    assert len(a) == len(b) == 5
    assert [{**x, "setting": None, "module": None} for x in a] == [{**x, "setting": None, "module": None} for x in b]
    assert {x["setting"] for x in b} == {"Foundations"} and {x["module"] for x in b} == {"Systems of Equations"}
