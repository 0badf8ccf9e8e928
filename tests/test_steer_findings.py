"""STEER-ME's findings beyond its headline tables (issue #57): robustness across perspectives,
the mistakes wrong answers make, the options' order, the paper's experiment matrix. Each number
is checked against one computed here from the run's samples and the questions file."""

import json
from collections import defaultdict

import pytest

from econeval import data

from conftest import edit_samples, read_lines


def questions() -> dict[str, dict]:
    return {q["id"]: q for q in data.load("steer-me", "questions.jsonl")}


def fake_steer(cli, out, *extra, model="fake:a", limit=4):
    rc, _, err = cli("run", "--model", model, "--task", "steer-me", "--limit", str(limit), "--quiet", "--out", out,
                     "--bootstrap", "0", *extra)
    assert rc == 0, err
    return json.loads((out / "results.json").read_text())["tasks"], read_lines(out / "samples.jsonl")


def spread_of(samples, key_of) -> dict:
    """Accuracy over the answered questions of each group, and max - min."""
    by = defaultdict(list)
    for s in samples:
        if s["answered"]:
            by[key_of(s)].append(float(s["correct"]))
    acc = {k: sum(v) / len(v) for k, v in by.items()}
    return {"by_group": acc, "spread": max(acc.values()) - min(acc.values())}


# ---- 1. perspective -------------------------------------------------------------------------
def test_each_sample_records_its_perspective_and_results_report_robustness_across_them(cli, tmp_path):
    res, samples = fake_steer(cli, tmp_path / "run")
    qs = questions()
    assert all(s["perspective"] == qs[s["id"]]["perspective"] for s in samples)
    assert len({s["perspective"] for s in samples}) == 5  # the paper's five perspectives
    paper = res["steer-me"]["paper"]
    mine = spread_of(samples, lambda s: qs[s["id"]]["perspective"])
    got = paper["overall"]["perspective_robustness"]
    assert got["by_group"] == pytest.approx(mine["by_group"]) and got["spread"] == pytest.approx(mine["spread"])
    element = "deriving_demand"
    mine = spread_of([s for s in samples if s["element"] == element], lambda s: qs[s["id"]]["perspective"])
    assert paper["element"][element]["perspective_robustness"]["by_group"] == pytest.approx(mine["by_group"])


def test_the_table_export_fills_the_perspective_column(cli, tmp_path):
    fake_steer(cli, tmp_path / "run")
    rc, _, err = cli("export", tmp_path / "run", "--format", "table", "-o", tmp_path / "t.csv")
    assert rc == 0, err
    import csv

    rows = list(csv.DictReader(l for l in (tmp_path / "t.csv").read_text().splitlines() if not l.startswith("#")))
    qs = questions()
    assert rows and all(r["perspective"] == qs[r["item_id"]]["perspective"] for r in rows)


def test_a_folder_written_before_perspectives_were_recorded_is_read_and_resumed(cli, tmp_path):
    """Lines without the field (written by an earlier econeval) are no contradiction and take the
    question's perspective in the numbers; a line whose perspective was edited is refused."""
    run = tmp_path / "run"
    res, _ = fake_steer(cli, run)
    edit_samples(run, lambda r: {k: v for k, v in r.items() if k != "perspective"})
    rc, out, err = cli("compare", run, run, "--bootstrap", "100")
    assert rc == 0, err
    half = tmp_path / "half"  # a folder half written before: its other half is run now
    rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "--limit", "2", "--quiet", "--out", half, "--bootstrap", "0")
    assert rc == 0, err
    edit_samples(half, lambda r: {k: v for k, v in r.items() if k != "perspective"})
    again, samples = fake_steer(cli, half)
    assert sum("perspective" in s for s in samples) == len(samples) // 2
    assert again["steer-me"]["paper"]["overall"]["perspective_robustness"] == res["steer-me"]["paper"]["overall"]["perspective_robustness"]
    first = read_lines(run / "samples.jsonl")[0]["id"]
    other = "second person" if questions()[first]["perspective"] != "second person" else "first person"
    edit_samples(run, lambda r: {**r, "perspective": other} if r["id"] == first else r)
    rc, _, err = cli("compare", run, run, "--bootstrap", "100")
    assert rc == 2 and "perspective" in err and "contradicts itself" in err


# ---- 2. the mistakes wrong answers make -----------------------------------------------------
NOTA = "No other option is correct."


def shown_options(sample) -> list[str]:
    """The options as the prompt showed them (`\\nA. …` lines)."""
    prompt = next(iter(sample["prompts"].values()))
    return [line[3:] for line in prompt.split("\n") if len(line) > 3 and line[0] in "ABCD" and line[1:3] == ". "]


def shares_of(wrong: list[str], offered: list[str]) -> dict:
    return {m: (wrong.count(m), wrong.count(m) / len(wrong) if wrong else None) for m in offered}


def test_a_wrong_choice_records_the_mistake_its_option_encodes_and_results_give_the_shares(cli, tmp_path):
    res, samples = fake_steer(cli, tmp_path / "run", "--car")
    qs = questions()
    by: dict[str, list[str]] = defaultdict(list)
    for s in samples:
        q, shown = qs[s["id"]], shown_options(s)
        assert len(shown) == 4 and shown.count(NOTA) == 1
        if s["correct"]:
            assert s["mistake"] is None
            continue
        mine = 'chose "No other option is correct."' if shown[s["parsed"]] == NOTA else q["distractor_reasons"][s["parsed"]]
        assert s["mistake"] == mine and mine != "correct"
        by[s["element"]].append(mine)
    got = res["steer-me"]["mistakes"]["element"]
    assert set(got) == {s["element"] for s in samples}
    for element, e in got.items():
        offered = list(e["mistakes"])
        assert shares_of(by[element], offered) == {m: (v["n"], v["share"]) for m, v in e["mistakes"].items()}
        assert e["n_wrong"] == len(by[element]) and sum(v["n"] for v in e["mistakes"].values()) == len(by[element])
        reasons = {r for s in samples if s["element"] == element for r in qs[s["id"]]["distractor_reasons"]} - {"correct"}
        assert reasons <= set(offered)  # every mistake the questions offer is listed, chosen or not
    some = next(v for e in got.values() for v in e["mistakes"].values() if v["n"] == 1 and e["n_wrong"] == 3)
    assert some["interval"] == pytest.approx([0.0615, 0.7923], abs=1e-4)  # Wilson, 1 of 3


def test_shares_over_no_wrong_answer_are_null_with_their_count():
    from econeval.benchmarks.steer_me import SteerMe
    from econeval.context import RunContext

    task = SteerMe()
    prep = task.prepare(RunContext())
    item = next(q for q in prep.items if q["element"] == "deadweight_loss")
    outputs = {"option_logprobs": {L: (-0.1 if i == item["correct_index"] else -5.0) for i, L in enumerate("ABCD")}}
    rec = {"id": item["id"], **task.score(item, outputs, prep)}
    assert rec["correct"] and rec["mistake"] is None
    e = task.aggregate([rec], prep)["mistakes"]["element"]["deadweight_loss"]
    assert e["n_wrong"] == 0 and set(e["mistakes"]) == set(item["distractor_reasons"]) - {"correct"}
    assert all(v == {"n": 0, "share": None, "interval": None} for v in e["mistakes"].values())


QUESTIONS_BY_TEXT: dict[str, dict] = {}


def kind_of(question: str) -> int:
    """What the fake model writes for a question: 0 its value, 1 a wrong option's, 2 a number near
    no option (by the question's text: 13 texts of the bundled set are asked twice)."""
    import zlib

    return zlib.crc32(question.encode()) % 3


def first_wrong(q: dict) -> int:
    """The wrong option whose label sorts first (the same whatever the options' order)."""
    return min((r, i) for i, r in enumerate(q["distractor_reasons"]) if r != "correct")[1]


def number_writer(prompt: str) -> str:
    """A fake model's free-text answers (`-M respond=`), as `kind_of` says; a wrong option's value
    is written 1% off."""
    if not QUESTIONS_BY_TEXT:
        QUESTIONS_BY_TEXT.update({q["question"]: q for q in questions().values()})
    q = QUESTIONS_BY_TEXT[prompt.split("\n")[0][3:]]
    value = [q["solution"]["value"], float(q["options"][first_wrong(q)].replace(",", "")) * 1.01, 7e9][kind_of(q["question"])]
    return f"So the answer is \\boxed{{{value:.4f}}}."


def test_free_text_names_the_wrong_option_whose_value_the_number_is_within_the_2_percent_rule(cli, tmp_path):
    res, samples = fake_steer(cli, tmp_path / "run", "--adaptation", "free-text", "-M",
                              "respond=test_steer_findings:number_writer", model="fake:writer")
    qs = questions()
    counted, hits = defaultdict(list), []
    for s in samples:
        q = qs[s["id"]]
        n = kind_of(q["question"])
        if n == 0:
            assert s["correct"] and s["mistake"] is None
            continue
        values = [float(o.replace(",", "")) for o in q["options"]]
        v, gold = s["parsed"], q["solution"]["value"]
        right = abs(v - gold) <= 0.02 * abs(gold) and all(abs(v - gold) < abs(v - x) for j, x in enumerate(values)
                                                          if j != q["correct_index"])
        assert s["correct"] == right  # 1% off a wrong option 1.6% from the answer is right (aggregation_of_consumer_demand/2)
        if right:
            assert s["mistake"] is None
            continue
        # 1% off the wrong option: that option's mistake, unless another option lies nearer
        near = [i for i, w in enumerate(values) if i != q["correct_index"] and abs(v - w) <= 0.02 * abs(w)
                and all(abs(v - w) < abs(v - x) for j, x in enumerate(values) if j != i)]
        mine = q["distractor_reasons"][near[0]] if near else "no option's value"
        if n == 1:
            hits.append(mine == q["distractor_reasons"][first_wrong(q)])  # unless another option lies nearer still
        if n == 2:
            assert mine == "no option's value"
        assert s["mistake"] == mine
        counted[s["element"]].append(mine)
    assert sum(hits) >= 0.9 * len(hits)
    got = res["steer-me"]["mistakes"]["element"]
    for element, e in got.items():
        assert shares_of(counted[element], list(e["mistakes"])) == {m: (v["n"], v["share"]) for m, v in e["mistakes"].items()}
    assert sum(e["mistakes"].get("no option's value", {}).get("n", 0) for e in got.values()) == \
        sum(1 for s in samples if kind_of(qs[s["id"]]["question"]) == 2)


def test_under_the_packages_grading_a_number_names_the_option_it_equals_at_3_figures():
    from econeval.benchmarks.steer_me import SteerMe
    from econeval.context import RunContext

    task = SteerMe()
    prep = task.prepare(RunContext(task_options={"adaptation": "free-text", "free_text_grading": "package"}))
    item = next(q for q in prep.items if q["element"] == "intertemporal_consumption_smoothing")
    wrong = next(i for i, r in enumerate(item["distractor_reasons"]) if r != "correct")
    value = float(item["options"][wrong].replace(",", ""))
    rec = task.score(item, {"response": f"\\boxed{{{value * 1.0004:.6f}}}"}, prep)  # the same at 3 figures
    assert not rec["correct"] and rec["mistake"] == item["distractor_reasons"][wrong]
    rec = task.score(item, {"response": f"\\boxed{{{value * 1.01:.6f}}}"}, prep)  # within 2%, not at 3 figures
    assert rec["mistake"] == "no option's value"


# ---- 3. the options' order ------------------------------------------------------------------
def test_permute_0_is_todays_run_byte_for_byte_and_the_same_run_identity(cli, tmp_path):
    for extra in ((), ("-T", "permute=0")):
        out = tmp_path / f"run{len(extra)}"
        fake_steer(cli, out, "--car", *extra)
    for name in ("results.json", "samples.jsonl"):
        assert (tmp_path / "run0" / name).read_bytes() == (tmp_path / "run2" / name).read_bytes()
    ids = [json.loads((tmp_path / r / "run.json").read_text())["identity"] for r in ("run0", "run2")]
    assert ids[0] == ids[1] and "permute" not in ids[0]["tasks"]["steer-me"]["options"]


def test_permuted_orders_report_accuracy_circular_accuracy_and_letter_bias(cli, tmp_path):
    res, samples = fake_steer(cli, tmp_path / "run", "-T", "permute=3", "--car")
    qs = questions()
    by = defaultdict(dict)
    for s in samples:
        base, _, order = s["id"].partition("~")
        by[base][int(order or 0)] = s
    assert len(by) == 256 and all(sorted(o) == [0, 1, 2, 3] for o in by.values())
    for base, orders in by.items():
        q, shown = qs[base], [shown_options(s) for s in orders.values()]
        assert len({tuple(x) for x in shown}) == 4 and all(sorted(x) == sorted(shown[0]) for x in shown)  # one set, 4 orders
        nota = {x.index(NOTA) == s["gold"] for x, s in zip(shown, orders.values())}
        assert len(nota) == 1  # "No other option" is right in every order or in none
        if nota == {False}:  # the gold option is the question's answer in every order
            assert {x[s["gold"]] for x, s in zip(shown, orders.values())} == {q["options"][q["correct_index"]]}
    o = res["steer-me"]["orders"]
    first = [s for s in samples if "~" not in s["id"]]
    assert o["original"]["accuracy"] == pytest.approx(sum(s["correct"] for s in first) / len(first))
    assert o["all_orders"]["accuracy"] == pytest.approx(sum(s["correct"] for s in samples) / len(samples))
    circular = sum(all(s["correct"] for s in orders.values()) for orders in by.values()) / len(by)
    assert o["circular"]["accuracy"] == pytest.approx(circular) and o["circular"]["n"] == 256
    for i, letter in enumerate("ABCD"):
        chosen = sum(s["parsed"] == i for s in samples) / len(samples)
        right = sum(s["gold"] == i for s in samples) / len(samples)
        assert o["letters"][letter]["chosen"] == pytest.approx(chosen) and o["letters"][letter]["correct"] == pytest.approx(right)
        assert o["letters"][letter]["bias"] == pytest.approx(chosen - right)
    car = res["steer-me"]["paper"]["element"]["deadweight_loss"]["car"]
    assert car["n"] == 16 and car["n_nota_correct"] == 4  # round(4/4) = 1 question of 4, in each of its 4 orders
    e = o["element"]["deadweight_loss"]
    mine = [all(s["correct"] for s in orders.values()) for base, orders in by.items() if qs[base]["element"] == "deadweight_loss"]
    assert e["circular"]["accuracy"] == pytest.approx(sum(mine) / len(mine)) and e["n_questions"] == 4


def test_permute_keeps_each_questions_orders_together_under_limit_and_is_refused_for_free_text(cli, tmp_path):
    _, samples = fake_steer(cli, tmp_path / "run", "-T", "permute=2", limit=2)
    per_element = defaultdict(set)
    for s in samples:
        per_element[s["element"]].add(s["id"].partition("~")[0])
    assert all(len(v) == 2 for v in per_element.values()) and len(samples) == 64 * 2 * 3
    rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "--adaptation", "free-text", "-T", "permute=2",
                     "--limit", "1", "--out", tmp_path / "free")
    assert rc == 2 and "free text shows no options" in err
    rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "-T", "permute=24", "--limit", "1", "--out", tmp_path / "x")
    assert rc == 2 and "out of range" in err


# ---- 4. the paper's experiment matrix -------------------------------------------------------
PAPER = {"shown": ("cot-shown", False), "shown-car": ("cot-shown", True), "hidden": ("cot-hidden", False),
         "hidden-car": ("cot-hidden", True), "free": ("free-text", False), "direct": ("direct", False),
         "direct-car": ("direct", True)}


def test_the_paper_suite_lists_each_experiment_with_the_figures_it_feeds_and_stays_out_of_all(cli):
    from econeval import registry

    rc, out, err = cli("list")
    assert rc == 0, err
    lines = {l.split()[0]: l for l in out.splitlines() if l.startswith("  steer-me-paper-")}
    assert set(lines) == {f"steer-me-paper-{k}" for k in PAPER}
    assert "Figs. 4, 5, 7, 9" in lines["steer-me-paper-shown"] and "Table 2" in lines["steer-me-paper-shown-car"]
    assert "Fig. 10" in lines["steer-me-paper-free"] and "o1-preview" in lines["steer-me-paper-direct"]
    assert "steer-me-paper's" in out.splitlines()[-1]
    suites = registry.suites()
    assert suites["steer-me"] == ["steer-me"] and not set(suites["all"]) & set(suites["steer-me-paper"])


def test_each_experiment_is_the_public_task_with_its_adaptation_and_car(cli, tmp_path):
    """A model that does not reason runs the 0-CoT experiments and free text, not the direct ones;
    each experiment's samples and numbers are the steer-me task's with that adaptation and CAR."""
    paper = tmp_path / "paper"
    rc, _, err = cli("run", "--model", "fake:a", "--suite", "steer-me-paper", "--limit", "1", "--quiet", "--out", paper,
                     "--bootstrap", "0")
    assert rc == 0, err
    doc = json.loads((paper / "results.json").read_text())
    ran = {k for k in PAPER if f"steer-me-paper-{k}" in doc["tasks"]}
    assert ran == {"shown", "shown-car", "hidden", "hidden-car", "free"}
    assert set(doc["not_run"]) == {"steer-me-paper-direct", "steer-me-paper-direct-car"}
    samples = defaultdict(dict)
    for s in read_lines(paper / "samples.jsonl"):
        samples[s["task"]][s["id"]] = s
    for k in sorted(ran):
        adaptation, car = PAPER[k]
        alone = tmp_path / k
        rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "--adaptation", adaptation,
                         *(["--car"] if car else []), "--limit", "1", "--quiet", "--out", alone, "--bootstrap", "0")
        assert rc == 0, err
        mine = json.loads((alone / "results.json").read_text())["tasks"]["steer-me"]
        theirs = doc["tasks"][f"steer-me-paper-{k}"]
        assert theirs["paper"] == mine["paper"] and theirs["adaptation"] == mine["adaptation"]
        for s in read_lines(alone / "samples.jsonl"):
            other = samples[f"steer-me-paper-{k}"][s["id"]]
            assert {**other, "task": "steer-me"} == s
    options = json.loads((paper / "run.json").read_text())["tasks"]["steer-me-paper-shown"]["options"]
    assert "adaptation" not in options and "car" not in options  # the experiment's, not options
    rc, _, err = cli("run", "--model", "fake:a", "--suite", "steer-me-paper", "-T", "adaptation=direct", "--limit", "1",
                     "--out", tmp_path / "x")
    assert rc == 2 and "adaptation" in err


def test_a_reasoning_model_runs_the_papers_direct_experiments_only(cli, tmp_path):
    out = tmp_path / "r"
    rc, _, err = cli("run", "--model", "fake:r", "-M", "answers=<think>so</think>B", "--suite", "steer-me-paper",
                     "--limit", "1", "--quiet", "--out", out, "--bootstrap", "0")
    assert rc == 0, err
    doc = json.loads((out / "results.json").read_text())
    assert set(doc["tasks"]) == {"steer-me-paper-direct", "steer-me-paper-direct-car", "steer-me-paper-free"}
    assert doc["tasks"]["steer-me-paper-direct-car"]["adaptation"] == "direct+car"
    assert set(doc["not_run"]) == {f"steer-me-paper-{k}" for k in ("shown", "shown-car", "hidden", "hidden-car")}
    assert all("steer-me-paper-direct" in why for why in doc["not_run"].values())


def test_the_report_sets_the_experiments_side_by_side(cli, tmp_path):
    paper = tmp_path / "paper"
    rc, _, err = cli("run", "--model", "fake:a", "--suite", "steer-me-paper", "--limit", "1", "--quiet", "--out", paper,
                     "--bootstrap", "0")
    assert rc == 0, err
    rc, out, err = cli("report", paper, "--format", "json")
    assert rc == 0, err
    tables = {t["id"]: t for t in json.loads(out)["tables"]}
    assert tables["steer-me-element"]["columns"] == ["a cot-shown", "a cot-shown+car", "a cot-hidden",
                                                     "a cot-hidden+car", "a free-text"]
    assert "rows a cot-shown." in tables["steer-me-element"]["figures"][0]["caption"]
    assert [r.get("setting") for r in tables["steer-me-table2"]["rows"] if r["source"] == "run"] == ["cot-shown+car",
                                                                                                     "cot-hidden+car"]
    assert tables["steer-me-mistakes"]["columns"] == tables["steer-me-element"]["columns"]


# ---- 5. the same questions under two adaptations (§5.3) -------------------------------------
def test_newcombes_paired_interval_is_the_papers_method_10():
    from econeval.intervals import newcombe_paired

    # Newcombe (1998), Statistics in Medicine 17:2635, Table II, method 10
    assert newcombe_paired(36, 12, 2, 0) == pytest.approx((0.0569, 0.3404), abs=1e-4)
    assert newcombe_paired(263, 3, 0, 0) == pytest.approx((-0.0048, 0.0326), abs=1e-4)
    assert newcombe_paired(0, 0, 0, 0) is None


def counts(before: dict, after: dict, only=None) -> tuple[int, int, int, int]:
    right = lambda s: bool(s["answered"]) and s["correct"] is True  # noqa: E731
    ids = [i for i in before if i in after and (only is None or i in only)]
    a = sum(right(before[i]) and right(after[i]) for i in ids)
    b = sum(right(before[i]) and not right(after[i]) for i in ids)
    c = sum(not right(before[i]) and right(after[i]) for i in ids)
    return a, b, c, len(ids) - a - b - c


def test_the_report_pairs_one_models_adaptations_by_question(cli, tmp_path):
    from econeval.intervals import newcombe_paired

    paper = tmp_path / "paper"
    rc, _, err = cli("run", "--model", "fake:writer", "-M", "respond=test_steer_findings:number_writer", "--suite",
                     "steer-me-paper", "--limit", "2", "--quiet", "--out", paper, "--bootstrap", "0")
    assert rc == 0, err
    by = defaultdict(dict)
    for s in read_lines(paper / "samples.jsonl"):
        by[s["task"].removeprefix("steer-me-paper-")][s["id"]] = s
    rc, out, err = cli("report", paper, "--format", "json")
    assert rc == 0, err
    tables = {t["id"]: t for t in json.loads(out)["tables"]}
    rows = {r["setting"]: r for r in tables["steer-me-transitions"]["rows"]}
    nota = {i for i, s in by["shown-car"].items() if s["nota_is_correct"]}
    assert len(nota) == 64  # round(2/4) = 1 question of each element
    for setting, before, after, only in (("cot-shown → cot-hidden", "shown", "hidden", None),
                                         ("cot-shown+car → cot-hidden+car", "shown-car", "hidden-car", None),
                                         ('cot-shown → cot-shown+car, where "No other option" is right', "shown", "shown-car", nota),
                                         ("cot-hidden → free-text", "hidden", "free", None)):
        a, b, c, d = counts(by[before], by[after], only)
        n = a + b + c + d
        row = rows[setting]
        assert row["n"] == n and row["values"] == pytest.approx([(a + b) / n, (a + c) / n, (b - c) / n])
        assert row["intervals"][2] == pytest.approx(list(newcombe_paired(a, b, c, d)))
    qs = questions()
    gap = [i for i, s in by["hidden"].items() if s["correct"] and not by["free"][i]["correct"]]
    closest = 0
    for i in gap:
        v, q = by["free"][i]["parsed"], qs[i]
        values = [float(o.replace(",", "")) for o in q["options"]]
        closest += min(range(4), key=lambda k: (abs(v - values[k]), k)) == q["correct_index"]
    fig15 = tables["steer-me-fig15"]["rows"][0]
    assert 0 < closest < len(gap) and fig15["values"] == pytest.approx([len(gap), closest, closest / len(gap)])


def test_runs_of_one_model_that_differ_in_adaptation_only_are_paired_and_others_not(cli, tmp_path):
    runs = {}
    for name, extra in (("shown", ("--adaptation", "cot-shown")), ("hidden", ("--adaptation", "cot-hidden")),
                        ("other", ("--adaptation", "cot-hidden", "-T", "prompts=econeval1"))):
        _, samples = fake_steer(cli, tmp_path / name, *extra, limit=2)
        runs[name] = {s["id"]: s for s in samples}
    rc, out, err = cli("report", tmp_path / "shown", tmp_path / "hidden", "--format", "json")
    assert rc == 0, err
    row, = next(t for t in json.loads(out)["tables"] if t["id"] == "steer-me-transitions")["rows"]
    a, b, c, d = counts(runs["shown"], runs["hidden"])
    assert row["label"] == "a" and row["values"][2] == pytest.approx((b - c) / (a + b + c + d))
    rc, out, err = cli("report", tmp_path / "shown", tmp_path / "other", "--format", "json")
    assert rc == 0, err
    assert "steer-me-transitions" not in {t["id"] for t in json.loads(out)["tables"]}  # other prompts: not paired
