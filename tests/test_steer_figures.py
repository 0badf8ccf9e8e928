"""STEER-ME's §5 figures in `econeval report` (issue #57): a heatmap per setting (Figs. 4, 5, 7, 9)
with the models largest first, Fig. 3 (Exponents against the downstream Cobb-Douglas − linear
gap, Pearson's r), Fig. 8 (exact match by the answer's digits), Fig. 11 (accuracy by functional
family), Fig. 12 (choosing "No other option is correct") and Fig. 14 (hidden against free text).
Each number is checked against one computed here from the runs' samples and the questions file;
the HTML page draws each figure and says what it rests on, or why it is not drawn."""

import json
import re
import statistics
from collections import defaultdict

import pytest

from econeval import data

from conftest import read_lines


def questions() -> dict[str, dict]:
    return {q["id"]: q for q in data.load("steer-me", "questions.jsonl")}


def taxonomy() -> list[dict]:
    return data.load("steer-me", "taxonomy.jsonl")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """fake models a, b and c in the paper's configuration (0-CoT shown, no CAR), d run directly,
    a and d with CAR: 4 questions of each element."""
    from conftest import run_cli_inprocess as run_cli

    base = tmp_path_factory.mktemp("figures")
    env = {"ECONEVAL_HOME": str(base / "home")}
    out = {}
    for name, model, extra in (("a", "fake:a", ("--adaptation", "cot-shown")), ("b", "fake:b", ("--adaptation", "cot-shown")),
                               ("c", "fake:c", ("--adaptation", "cot-shown")), ("d", "fake:d", ()),
                               ("a-car", "fake:a", ("--adaptation", "cot-shown", "--car")), ("d-car", "fake:d", ("--car",))):
        out[name] = base / name
        rc, _, err = run_cli("run", "--model", model, "--task", "steer-me", "--limit", "4", "-q", "--bootstrap", "0",
                             "--out", out[name], *extra, env=env)
        assert rc == 0, err
    return out


def report(cli, *folders) -> dict[str, dict]:
    rc, out, err = cli("report", *folders, "--format", "json")
    assert rc == 0, err
    return {t["id"]: t for t in json.loads(out)["tables"]}


def samples(folder) -> list[dict]:
    return read_lines(folder / "samples.jsonl")


def acc(recs) -> float | None:
    answered = [r for r in recs if r["answered"]]
    return sum(r["correct"] is True for r in answered) / len(answered) if answered else None


# ---- Figs. 4, 5, 7, 9 ---------------------------------------------------------------------------
def test_a_heatmap_per_setting_in_the_papers_configuration_other_runs_marked(cli, runs):
    tables = report(cli, runs["a"], runs["b"], runs["d"])
    heatmaps = tables["steer-me-setting"]["figures"]
    tax = taxonomy()
    settings = sorted({t["setting"] for t in tax})
    assert [h["setting"] for h in heatmaps] == settings
    assert [h["paper_figure"] for h in heatmaps] == [None, "Fig. 4", "Fig. 5", "Fig. 7", "Fig. 9"]
    by_model = {m: samples(runs[m]) for m in "abd"}
    for h in heatmaps:
        assert h["columns"] == [t["element"] for t in tax if t["setting"] == h["setting"]]  # the taxonomy's order
        assert "0-CoT shown without CAR (the steer-me-paper-shown task" in h["caption"]
        assert h["marked"] == [False, False, True] and h["rows"][2].startswith("d (") and h["rows"][2].endswith(" †")
        assert "†: a run with no result" in h["caption"]
        for row, model in zip(h["values"], "abd"):
            for element, value in zip(h["columns"], row):
                answered = [s for s in by_model[model] if s["element"] == element and s["answered"]]
                mine = sum(1.0 if s["correct"] else -1 / (s["k"] - 1) for s in answered) / len(answered)
                assert value == pytest.approx(mine)
        assert h["n"] == [[4] * len(h["columns"])] * 3


def test_heatmap_rows_are_the_largest_model_first_and_unknown_sizes_last_by_label(cli, tmp_path):
    """Sizes as run.json says them: llama.cpp's parameter count (recorded now), else the GGUF's
    size label; fake models have none and come last, in label order."""
    from gguf import GGUFReader
    from tiny_gguf import write_tiny_llama

    small = write_tiny_llama(tmp_path / "small.gguf", general={"general.size_label": "9B"})  # the count wins over the label
    big = write_tiny_llama(tmp_path / "big.gguf", shapes={"n_embd": 128, "n_ff": 256})
    qfile = tmp_path / "q.jsonl"  # two questions: the sizes are what is tested
    qfile.write_text("".join(json.dumps(q) + "\n" for q in list(questions().values())[:2]))
    folders = []
    for model in (small, big, "fake:zeta", "fake:alpha"):
        out = tmp_path / (model.stem if hasattr(model, "stem") else model.replace(":", "-"))
        rc, _, err = cli("run", "--model", model, "--task", "steer-me", "--questions", qfile, "-q", "--bootstrap", "0",
                         "--out", out)
        assert rc == 0, err
        folders.append(out)
    counts = {name: sum(int(t.n_elements) for t in GGUFReader(path).tensors) for name, path in (("small", small), ("big", big))}
    h = report(cli, *folders)["steer-me-setting"]["figures"][0]
    assert [r.split(" ")[0] for r in h["rows"]] == ["big", "small", "alpha", "zeta"]
    assert h["sizes"] == [counts["big"], counts["small"], None, None] and counts["big"] > counts["small"]


# ---- Fig. 3 -------------------------------------------------------------------------------------
def fig3_points(folder) -> list[tuple[str, float, float]]:
    """(element, gap, calibrated Exponents) of one run, from its samples and the questions file."""
    recs, qs = samples(folder), questions()
    forms = defaultdict(set)
    for q in qs.values():
        forms[q["element"]].add(q["type"])
    downstream = sorted(e for e, f in forms.items() if {"cobb-douglas", "linear"} <= f and e != "exponents")
    assert downstream == ["diminishing_marginal_product", "mrs_utility", "output_elasticity", "returns_to_scale"]
    y = acc([r for r in recs if r["element"] == "exponents"]) / acc(recs)
    out = []
    for e in downstream:
        cd = acc([r for r in recs if r["element"] == e and qs[r["id"]]["type"] == "cobb-douglas"])
        lin = acc([r for r in recs if r["element"] == e and qs[r["id"]]["type"] == "linear"])
        out.append((e, cd - lin, y))
    return out


def test_fig3_puts_exponents_against_the_downstream_gap_with_pearsons_r(cli, runs):
    tables = report(cli, runs["a"], runs["b"], runs["c"])
    [fig] = tables["steer-me-fig3"]["figures"]
    assert fig["kind"] == "scatter" and "not_drawn" not in fig
    mine = {m: fig3_points(runs[m]) for m in "abc"}
    for series, model in zip(fig["series"], "abc"):
        got = [(p["label"], p["x"], p["y"]) for p in series["points"]]
        assert [g[0] for g in got] == [m[0] for m in mine[model]]
        assert [v for g in got for v in g[1:]] == pytest.approx([v for m in mine[model] for v in m[1:]])
    xs = [x for m in "abc" for _, x, _ in mine[m]]
    ys = [y for m in "abc" for _, _, y in mine[m]]
    r = statistics.correlation(xs, ys)
    assert fig["pearson"] == pytest.approx({"r": r, "n_points": 12, "n_models": 3})
    assert f"Pearson r = {r:.3f} over 12 points of 3 models" in fig["caption"]
    assert tables["steer-me-fig3"]["rows"][0]["label"] == "a: diminishing_marginal_product"
    # two models: no r
    [fig] = report(cli, runs["a"], runs["b"])["steer-me-fig3"]["figures"]
    assert fig["pearson"]["r"] is None and fig["pearson"]["n_models"] == 2 and "Pearson r: not computed" in fig["caption"]


def test_a_figure_with_nothing_to_draw_says_why(cli, tmp_path):
    """Questions of Exponents only: no downstream element, so Fig. 3 has no point, nor Fig. 8 a
    question of Aggregation of Consumer Demand; the page says why each is not drawn."""
    pytest.importorskip("matplotlib")
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in questions().values() if q["element"] == "exponents"))
    out = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "--questions", qfile, "--limit", "3", "-q",
                     "--bootstrap", "0", "--out", out)
    assert rc == 0, err
    tables = report(cli, out)
    assert "both Cobb-Douglas and linear forms" in tables["steer-me-fig3"]["figures"][0]["not_drawn"]
    assert "Aggregation of Consumer Demand" in tables["steer-me-fig8"]["figures"][0]["not_drawn"]
    assert "steer-me-fig12" not in tables and "steer-me-fig14" not in tables  # no CAR, no pair of adaptations
    page = tmp_path / "r.html"
    assert cli("report", out, "--format", "html", "--out", page)[0] == 0
    text = page.read_text()
    for title, why in (("STEER-ME Fig. 3", "Not drawn: no element&#39;s questions come in both Cobb-Douglas and linear"),
                       ("STEER-ME Fig. 8", "Not drawn: no run has an answered question of Aggregation of Consumer Demand"),
                       ("STEER-ME Fig. 11", "Not drawn: no element&#39;s questions come in two or more types")):
        start = text.index(f"<h2 id=\"steer-me-fig{title.split('. ')[1]}\"")
        part = text[start:text.find("<h2", start + 1)]
        assert "<svg" not in part and why in part, part[-800:]


# ---- Fig. 8 -------------------------------------------------------------------------------------
def test_fig8_gives_exact_match_by_the_answers_digits(cli, runs):
    tables = report(cli, runs["a"], runs["b"])
    tab = tables["steer-me-fig8"]
    qs = questions()
    mine = {}
    for m in "ab":
        by = defaultdict(list)
        for s in samples(runs[m]):
            if s["element"] == "aggregation_of_consumer_demand" and s["answered"]:
                by[len(str(int(abs(qs[s["id"]]["solution"]["value"]))))].append(s["correct"])
        mine[m] = by
    digits = sorted(set(mine["a"]) | set(mine["b"]))
    assert len(digits) >= 2 and tab["columns"] == [f"{d} digits" for d in digits]
    for row, m in zip(tab["rows"], "ab"):
        assert row["values"] == pytest.approx([sum(mine[m][d]) / len(mine[m][d]) for d in digits])
        assert row["n"] == "/".join(str(len(mine[m][d])) for d in digits)
    [fig] = tab["figures"]
    assert fig["groups"] == tab["columns"] and [s["values"] for s in fig["series"]] == [r["values"] for r in tab["rows"]]


# ---- Fig. 11 ------------------------------------------------------------------------------------
def test_fig11_gives_accuracy_by_functional_family_and_agrees_with_type_robustness(cli, runs):
    tab = report(cli, runs["a"], runs["b"])["steer-me-fig11"]
    qs = questions()
    types = defaultdict(set)
    for q in qs.values():
        types[q["element"]].add(q["type"])
    elements = sorted(e for e, t in types.items() if len(t) > 1 and t & {"cobb-douglas", "leontief", "linear"})
    assert [f["element"] for f in tab["figures"]] == elements and "returns_to_scale" in elements
    rows = {r["label"]: r for r in tab["rows"]}
    for m, col in (("a", 0), ("b", 1)):
        recs = samples(runs[m])
        robust = json.loads((runs[m] / "results.json").read_text())["tasks"]["steer-me"]["paper"]["element"]
        for e in elements:
            for t in types[e]:
                mine = acc([s for s in recs if s["element"] == e and qs[s["id"]]["type"] == t])
                assert rows[f"{e}: {t}"]["values"][col] == pytest.approx(mine)
                assert robust[e]["type_robustness"]["by_group"][t] == pytest.approx(mine)
    rts = next(f for f in tab["figures"] if f["element"] == "returns_to_scale")
    assert rts["groups"] == ["cobb-douglas", "leontief", "linear"] and rts["reference"]["value"] == 0.25


# ---- Fig. 12 ------------------------------------------------------------------------------------
def test_fig12_splits_choosing_no_other_option_by_whether_it_was_right(cli, runs):
    tab = report(cli, runs["a"], runs["a-car"], runs["d-car"])["steer-me-fig12"]
    assert [r["label"].split(" ")[0] for r in tab["rows"]] == ["a", "d"]  # the runs with CAR only
    assert tab["rows"][1]["label"].endswith(" †") and not tab["rows"][0]["label"].endswith("†")
    for row, m in zip(tab["rows"], ("a-car", "d-car")):
        answered = [s for s in samples(runs[m]) if s["answered"]]
        right = [s for s in answered if s["nota_is_correct"]]
        wrong = [s for s in answered if not s["nota_is_correct"]]

        def rate(rs):
            return sum(s["chose_nota"] for s in rs) / len(rs)

        assert row["values"] == pytest.approx([rate(answered), len(right) / len(answered), rate(right), rate(wrong)])
        overall = json.loads((runs[m] / "results.json").read_text())["tasks"]["steer-me"]["paper"]["overall"]
        assert row["values"][:2] == pytest.approx([overall["nota_selection_rate"], overall["nota_correct_rate"]])
        assert row["n"] == f"{len(answered)}/{len(right)}/{len(wrong)}"
    assert "steer-me-fig12" not in report(cli, runs["a"], runs["b"])  # no run with CAR


# ---- Fig. 14 ------------------------------------------------------------------------------------
def test_fig14_sets_hidden_against_free_text_on_the_papers_four_elements(cli, tmp_path):
    paper = tmp_path / "paper"
    rc, _, err = cli("run", "--model", "fake:writer", "-M", "respond=test_steer_findings:number_writer", "--suite",
                     "steer-me-paper", "--limit", "4", "--quiet", "--out", paper, "--bootstrap", "0")
    assert rc == 0, err
    by = defaultdict(dict)
    for s in samples(paper):
        by[s["task"]][s["id"]] = s
    tab = report(cli, paper)["steer-me-fig14"]
    elements = ["intertemporal_consumption_smoothing", "profit_maximization", "aggregation_of_consumer_demand", "producer_surplus"]
    assert [r["label"] for r in tab["rows"]] == [f"writer: {e}" for e in elements]
    for row, e in zip(tab["rows"], elements):
        hidden = [s for s in by["steer-me-paper-hidden"].values() if s["element"] == e]
        free = [by["steer-me-paper-free"][s["id"]] for s in hidden]
        right = lambda s: bool(s["answered"]) and s["correct"] is True  # noqa: E731
        h, f = sum(map(right, hidden)) / len(hidden), sum(map(right, free)) / len(free)
        assert row["n"] == 4 and row["values"] == pytest.approx([h, f, h - f])
    [fig] = tab["figures"]
    assert fig["groups"] == elements and [s["name"] for s in fig["series"]] == ["writer 0-CoT hidden", "writer free text"]
    assert fig["series"][1]["values"] == pytest.approx([r["values"][1] for r in tab["rows"]])


# ---- the page -----------------------------------------------------------------------------------
def test_the_page_draws_each_figure_and_names_what_rests_on_one_item(cli, tmp_path):
    """One question per element: every bar of Fig. 8 and every Fig. 3 point rests on one item,
    and the page says so under each."""
    pytest.importorskip("matplotlib")
    folders = []
    for model in ("a", "b", "c"):
        out = tmp_path / model
        rc, _, err = cli("run", "--model", f"fake:{model}", "--task", "steer-me", "--adaptation", "cot-shown", "--car",
                         "--limit", "2", "-q", "--bootstrap", "0", "--out", out)
        assert rc == 0, err
        folders.append(out)
    page = tmp_path / "r.html"
    assert cli("report", *folders, "--format", "html", "--out", page)[0] == 0
    text = page.read_text()

    def section(table_id):
        start = text.index(f'<h2 id="{table_id}"')
        return text[start:text.find("<h2", start + 1)]

    assert section("steer-me-setting").count("<svg") == 5
    for table_id in ("steer-me-fig3", "steer-me-fig8", "steer-me-fig12"):
        assert "<svg" in section(table_id), table_id
    fig11 = section("steer-me-fig11")  # a chart of nothing but zeros is not drawn, and says so
    assert fig11.count("<svg") + fig11.count("Not drawn: every value is 0") == 6 and fig11.count("<svg") >= 3
    assert re.search(r"Bars resting on one item \(each that item&#39;s 0 or 1\): a \(cot-shown\+car\) †: \d digits",
                     section("steer-me-fig8"))
    assert "Points resting on one item (ringed): " in section("steer-me-fig3")
