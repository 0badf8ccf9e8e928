"""CFBenchmark-Basic: the released prompt, post-processing and F1; embedding similarity; Table 2."""

import json

import numpy as np
import pytest

from econeval import data
from econeval.backends.onnx_embed import OnnxEmbedder
from econeval.benchmarks.cfbenchmark import build_prompt, decoding, extract, row_f1, table2
from econeval.config import ModelSpec
from tiny_bert import write_tiny_bert


@pytest.fixture(scope="module")
def tiny_embedder_dir(tmp_path_factory):
    return write_tiny_bert(tmp_path_factory.mktemp("emb") / "tiny-bert")


@pytest.fixture
def registry(tmp_path, tiny_model, tiny_embedder_dir):
    reg = tmp_path / "models.toml"
    reg.write_text(f'default = "tiny"\ndefault_embedder = "tiny-bert"\n'
                   f'[models.tiny]\npath = "{tiny_model}"\nn_ctx = 512\nchat = "off"\n'
                   f'[embedders.tiny-bert]\npath = "{tiny_embedder_dir}"\npooling = "cls"\n')
    return {"ECONEVAL_MODELS": str(reg)}


# ---- F1 exactly as released ---------------------------------------------------------------
def test_row_f1_hand_computed():
    labels = ["积极", "中性", "消极"]
    assert row_f1("积极", "积极", labels) == 1.0
    assert row_f1("积极", "消极", labels) == 0.0
    # nothing predicted: the extra slot is set in y_pred → P = 0/1 ... F1 0
    assert row_f1("积极", "", labels) == 0.0
    # one right, one outside the label list: y_true [1,0,0,0], y_pred [1,0,0,1] → P 1, R .5
    assert row_f1("积极", "积极,看涨", labels) == pytest.approx(2 * 1 * 0.5 / 1.5)
    # recognition: L is the gold answer split on '，'; full-width and ASCII commas both split predictions
    assert row_f1("华数传媒，华为", "华为", ["华数传媒", "华为"]) == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert row_f1("华数传媒，华为", "华为，华数传媒", ["华数传媒", "华为"]) == 1.0


def test_released_post_processing():
    zero_prompt = "指令新闻内容：文本\n回答："
    assert extract(zero_prompt, " 天康生物\n其他", few=False) == "天康生物"
    assert extract(zero_prompt, "\n天康生物", few=False) == ""  # the first line is empty
    few_prompt = "Case1 回答：甲\nCase2 回答：乙\nCase3 回答：丙\ncase4：\n新闻内容：x\n回答："
    assert extract(few_prompt, "丁\n", few=True) == "丁"
    # an input that itself contains '回答：' shifts the split, as in the released code
    assert extract("新闻：问：…回答：是\n回答：", "丁", few=False) == "是"
    # split('回答：', k)[-1]: a later '回答：' on the answer's line stays in it (it cut the answer there)
    assert extract(zero_prompt, "A公司回答：B公司\n其他", few=False) == "A公司回答：B公司"
    assert extract(few_prompt, "丁回答：戊\n", few=True) == "丁回答：戊"
    assert extract("没有标记", "甲\n乙", few=False) == "没有标记甲"  # no mark at all: the whole text's first line, as released


def test_prompts_follow_the_released_construction():
    item = next(r for r in data.load("cfbenchmark", "sector.jsonl"))
    prefix, prompt = build_prompt(item, None)
    assert prefix == item["instruction"] and prompt == item["instruction"] + item["input"] + "\n回答："
    few = {r["task"]: r["text"] for r in data.load("cfbenchmark", "fewshot.jsonl")}
    prefix, prompt = build_prompt(item, few["sector"])
    cands = item["instruction"].split("（")[1].split("）")[0]
    assert prefix == few["sector"] + "\ncase4：\n新闻内容："
    assert prompt == prefix + item["input"] + "\n类别：（" + cands + "）\n" + "\n回答："
    company = data.load("cfbenchmark", "company.jsonl")[0]
    assert "类别" not in build_prompt(company, few["company"])[1]
    assert (prompt + "x").count("回答：") == 4


def test_decoding_settings_and_the_summary_quirk():
    assert decoding("company", few=False, summary_mode="released") == (64, 1.00)
    assert decoding("sentiment", few=True, summary_mode="released") == (64, 1.03)
    assert decoding("risk", few=False, summary_mode="released") == (512, 1.02)
    assert decoding("suggestion", few=True, summary_mode="released") == (512, 1.05)
    assert decoding("summary", few=False, summary_mode="released") == (64, 1.00)
    assert decoding("summary", few=True, summary_mode="intended") == (512, 1.05)


def test_table2_averages():
    s = {"company": .8, "product": .6, "sector": .3, "event": .2, "sentiment": .4, "summary": .7, "risk": .6, "suggestion": .5}
    row = table2(s)
    assert list(row) == ["Company", "Product", "R.Avg", "Sector", "Event", "Sentiment", "C.Avg", "Summary", "Risk", "Suggestion", "G.Avg", "Avg"]
    assert row["R.Avg"] == pytest.approx(.7) and row["C.Avg"] == pytest.approx(.3) and row["G.Avg"] == pytest.approx(.6)
    assert row["Avg"] == pytest.approx((.7 + .3 + .6) / 3)
    partial = table2({"company": 1.0})
    assert partial["Company"] == 1.0 and partial["R.Avg"] is None and partial["Avg"] is None


# ---- the ONNX embedder --------------------------------------------------------------------
def test_embedder_normalises_pads_and_truncates(tiny_embedder_dir):
    for pooling in ("cls", "mean"):
        e = OnnxEmbedder(ModelSpec(name="t", options={"path": str(tiny_embedder_dir), "pooling": pooling}))
        texts = ["公司营业收入同比增长", "公司营业收入同比增长", "银行股票基金", "公司" * 2000]
        v = e.embed(texts)
        assert v.shape == (4, 32) and v.dtype == np.float32
        assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
        assert v[0] @ v[1] == pytest.approx(1.0, abs=1e-6)
        assert v[0] @ v[2] < 0.999
        alone = e.embed(["银行股票基金"])[0]
        assert np.abs(alone - v[2]).max() < 1e-5  # padding inside a batch changes nothing
    cls = OnnxEmbedder(ModelSpec(name="t", options={"path": str(tiny_embedder_dir), "pooling": "cls"})).embed(["银行股票"])
    mean = OnnxEmbedder(ModelSpec(name="t", options={"path": str(tiny_embedder_dir), "pooling": "mean"})).embed(["银行股票"])
    assert not np.allclose(cls, mean)


def test_missing_embedder_is_a_clean_error(cli, tmp_path, registry):
    p = tmp_path / "p.jsonl"
    p.write_text(json.dumps({"id": "cfbenchmark/risk/0", "response": "风险"}) + "\n")
    rc, out, err = cli("score", "--task", "cfbenchmark-zero", "--predictions", p, "--embedder", "m3e-small", env=registry)
    assert rc == 1 and "is not built" in err and "Traceback" not in err


# ---- score and run end to end -------------------------------------------------------------
def _gold_predictions(path, n=3):
    """Responses that reproduce the gold answer through the released post-processing."""
    lines = []
    for t in ("company", "product", "sector", "event", "sentiment", "summary", "risk", "suggestion"):
        single_line = [r for r in data.load("cfbenchmark", f"{t}.jsonl") if r["response"] and "\n" not in r["response"]]
        for r in single_line[:n]:
            lines.append({"id": r["id"], "response": r["response"] + "\n多余的内容"})
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))


def test_score_gold_answers_gives_the_top_of_the_scale(cli, tmp_path, registry):
    p = tmp_path / "gold.jsonl"
    _gold_predictions(p)
    rc, out, err = cli("score", "--task", "cfbenchmark-zero", "--predictions", p, env=registry)
    assert rc == 0, err
    row = json.loads(out)["tasks"]["cfbenchmark-zero"]["paper"]
    for col in ("Company", "Product", "Sector", "Event", "Sentiment", "Summary", "Risk", "Suggestion", "Avg"):
        assert row[col] == pytest.approx(1.0, abs=1e-5), col


def test_score_only_some_subtasks(cli, tmp_path, registry):
    p = tmp_path / "some.jsonl"
    rows = data.load("cfbenchmark", "sentiment.jsonl")[:4]
    p.write_text("".join(json.dumps({"id": r["id"], "response": "积极"}, ensure_ascii=False) + "\n" for r in rows))
    res = json.loads(cli("score", "--task", "cfbenchmark-few", "--predictions", p, env=registry)[1])["tasks"]["cfbenchmark-few"]
    expected = sum(r["response"] == "积极" for r in rows) / 4
    assert res["paper"]["Sentiment"] == pytest.approx(expected)
    assert res["paper"]["Company"] is None and res["paper"]["Avg"] is None
    assert res["n"] == 4


def test_run_zero_shot_and_report_context_skips(cli, tmp_path, registry):
    out = tmp_path / "run"
    rc, stdout, err = cli("run", "--task", "cfbenchmark-zero", "--limit", "1", "--quiet", "--out", out, env=registry)
    assert rc == 0, err
    res = json.loads((out / "results.json").read_text())["tasks"]["cfbenchmark-zero"]
    assert res["n"] == 8
    assert list(res["paper"]) == ["Company", "Product", "R.Avg", "Sector", "Event", "Sentiment", "C.Avg",
                                  "Summary", "Risk", "Suggestion", "G.Avg", "Avg"]  # the paper's column order
    # the tiny model's context is 512 tokens: long Chinese inputs are skipped, counted, with a reason
    assert res["n_skipped"] >= 1 and all("longer than the model context" in k for k in res["skip_reasons"])
    meta = json.loads((out / "run.json").read_text())
    assert meta["roles"]["embedder"]["name"] == "tiny-bert" and len(meta["roles"]["embedder"]["sha256"]) == 64
    assert meta["tasks"]["cfbenchmark-zero"]["settings"]["summary_decoding"] == "released"
    assert meta["options"] == {"cfbenchmark-zero": {"summary_decoding": "released"}}
    samples = [json.loads(l) for l in (out / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 8
    kept = [s for s in samples if not s.get("skipped")]
    assert all(("f1" in s) != ("similarity" in s) for s in kept)


def _released_f1(gold: str, output: str, label_list: list[str]) -> float:
    """CFBenchmark.py's get_y + get_f1_score, transcribed (numpy arrays, the released conditions)."""
    import numpy as np

    y_true, y_pred = np.zeros(len(label_list) + 1), np.zeros(len(label_list) + 1)
    response = set([i.strip() for i in str(gold).replace("，", ",").strip().split(",") if i])
    out = set([i.strip() for i in str(output).replace("，", ",").strip().split(",") if i])
    for i, lab in enumerate(label_list):
        y_true[i] = lab in response
        y_pred[i] = lab in out
    if y_pred.sum() == 0 or len(out) > y_pred.sum():
        y_pred[-1] = 1
    with np.errstate(invalid="ignore", divide="ignore"):
        prec, reca = (y_true * y_pred).sum() / y_true.sum(), (y_true * y_pred).sum() / y_pred.sum()
    return 0.0 if prec == 0 or reca == 0 or np.isnan(prec) else float(2 * prec * reca / (prec + reca))


def test_f1_extra_slot_follows_the_released_condition_on_repeated_labels():
    # a label repeated in the gold list is counted twice in y_pred: one item outside the list then
    # does not set the extra slot (released), where "any item outside the list" would
    assert row_f1("A，B，A", "A,C", ["A", "B", "A"]) == pytest.approx(0.8)  # hand: P 2/3, R 2/2
    assert _released_f1("A，B，A", "A,C", ["A", "B", "A"]) == pytest.approx(0.8)
    rows = {t: data.load("cfbenchmark", f"{t.split('/')[0]}.jsonl")[int(t.split('/')[1])]
            for t in ("product/102", "product/137", "product/167", "company/187")}
    for name, row in rows.items():
        gold = row["response"]
        labels = gold.split("，")
        assert len(labels) > len(set(labels)), name  # these rows repeat an entity
        repeated = next(x for x in labels if labels.count(x) > 1)
        for pred in (f"{repeated},不在列表", f"{repeated}，{labels[0]}，外部公司，另一个", "不在列表", "", f"{repeated}, ,"):
            assert row_f1(gold, pred, labels) == pytest.approx(_released_f1(gold, pred, labels)), (name, pred)


def test_missing_reference_and_empty_answers_are_embedded_as_nan():
    from econeval.benchmarks.cfbenchmark import FewShot, ZeroShot, released_text
    from econeval.types import Prepared

    assert released_text(None) == "nan" and released_text("") == "nan" and released_text("None") == "nan"
    assert released_text("利好") == "利好"
    prep = Prepared(items=[], state={"fewshot": None, "labels": {}, "mode": "released"})
    missing = data.load("cfbenchmark", "summary.jsonl")[426]
    assert missing["response"] is None
    sim = ZeroShot().requests(missing, prep, {"response": "公司业绩增长"})["similarity"]
    assert sim.a == "公司业绩增长" and sim.b == "nan"  # released: str(NaN) is embedded
    item = data.load("cfbenchmark", "risk.jsonl")[0]
    sim = ZeroShot().requests(item, prep, {"response": "\n"})["similarity"]
    assert sim.a == "nan" and sim.b == item["response"]
    rec = ZeroShot().score(item, {"response": "", "similarity": 0.3}, prep)
    assert rec["nan_substituted"] == ["answer"]
    agg = ZeroShot().aggregate([{**rec, "similarity": 0.3}], prep)
    assert agg["paper"]["Risk"] == 0.3 and agg["extras"]["missing_as_zero"]["Risk"] == 0.0
    assert agg["extras"]["nan_substituted"]["n"] == 1
    assert not FewShot().requests(item, Prepared(items=[], state={"fewshot": {"risk": "x"}, "labels": {}, "mode": "released"}),
                                  {"response": ""})["similarity"].a == ""


def test_compare_refuses_a_stored_value_outside_its_metrics_bounds(cli, tmp_path, registry):
    """Issue #33 item 8: a baseline similarity of 1e300 (a value the scorer cannot re-derive from
    the response: the embedder's) was an internal OverflowError in compare."""
    for name in ("a", "b"):
        rc, _, err = cli("run", "--model", f"fake:{name}", "--task", "cfbenchmark-zero", "--limit", "1", "--embedder",
                         "tiny-bert", "--quiet", "--out", tmp_path / name, env=registry)
        assert rc == 0, err
    rows = [json.loads(line) for line in (tmp_path / "a" / "samples.jsonl").read_text().splitlines()]
    next(r for r in rows if "similarity" in r)["similarity"] = 1e300
    (tmp_path / "a" / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rc, _, err = cli("compare", tmp_path / "a", tmp_path / "b", env=registry)
    assert rc == 2 and "item score 1e+300 is not a number within [-1.0, 1.0]" in err and "Traceback" not in err, err
