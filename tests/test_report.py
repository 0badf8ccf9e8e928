"""`econeval report`: the published rows are the papers' numbers, the runs' rows and intervals
appear in every format, and the HTML page renders in a real headless browser without network."""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import REPO

PAPERS = REPO.parent / "shared" / "papers"


def _fmt(value, decimals, percent=False):
    text = str(value) if isinstance(value, int) else f"{value:.{decimals}f}"
    return text + ("%" if percent else "")


@pytest.mark.parametrize("paper", ["econnli", "econlogicqa", "cfbenchmark", "steer_me"])
def test_every_published_number_is_in_the_paper(paper):
    doc = json.loads((REPO / "econeval" / "published" / f"{paper}.json").read_text())
    path = REPO.parent / "shared" / doc["source"].removeprefix("../shared/")
    if not path.is_file():
        pytest.skip(f"the paper text {path} is not beside the repository")
    text = path.read_text()
    checked = 0
    for name, table in doc["tables"].items():
        for row in table["rows"]:
            dec = table["decimals"]
            if paper == "steer_me":  # an HTML table: <td>model</td> then one <td> per value
                cells = [re.escape(f"<td>{row['model']}</td>")] + [re.escape(f"<td>{_fmt(v, dec)}</td>") for v in row["values"]]
                assert re.search(r"\s*".join(cells), text), row
            else:
                percent = [paper == "econlogicqa" or (name == "table6" and i == 3) for i in range(len(row["values"]))]
                values = "\t".join(_fmt(v, dec, p) for v, p in zip(row["values"], percent))
                if row.get("std"):  # Table 3: each value with its std over three fine-tunings, as the paper prints it
                    values = "\t".join(f"{_fmt(v, dec)}_{{$\\pm$ {s}}}" for v, s in zip(row["values"], row["std"]))
                lead = row.get("prompting") or row.get("size")
                expected = f"{lead}\t{values}" if lead else values
                starts = [m.start() for m in re.finditer(re.escape(row["model"]), text)]
                assert starts, row["model"]
                # the numbers follow the row's name within its table block (Table 4: the model's 3 lines)
                assert any(expected in text[s:s + 400] for s in starts), (row, expected)
            checked += 1
    assert checked >= 5


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two runs of the fake model named "tiny" (a report reads folders, whatever model wrote them;
    the same run twice is a valid comparison)."""
    from conftest import run_cli_inprocess as run_cli

    base = tmp_path_factory.mktemp("report")
    reg = base / "models.toml"
    reg.write_text('default = "tiny"\n[models.tiny]\nkind = "fake"\nanswers = "Yes,No"\n')
    env = {"ECONEVAL_MODELS": str(reg), "ECONEVAL_HOME": str(base / "home")}
    folders = []
    for name in ("a", "b"):
        out = base / name
        rc, _, err = run_cli("run", "--task", "econnli-zero", "--task", "steer-me", "--task", "econlogicqa-1shot",
                             "--car", "--limit", "6", "--bootstrap", "200", "--quiet", "--out", out, env=env)
        assert rc == 0, err
        folders.append(out)
    return folders


def test_report_formats(cli, two_runs):
    a, b = two_runs
    rc, md, err = cli("report", a, "--format", "md")
    assert rc == 0, err
    assert "## EconNLI Table 4" in md and "| paper | GPT-4 | Zero | 0.895 | 0.762 | 0.823 |" in md
    # no row of EconLogicQA's table names a setting: no empty "setting" column
    assert "## EconLogicQA Table 2: accuracy (%)" in md and "| paper | GPT-4-Turbo | 56.92 | 56.15 |" in md
    run_rows = [line for line in md.splitlines() if line.startswith("| run | tiny |")]
    assert run_rows and any(re.search(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", line) for line in run_rows)  # value [interval]
    assert "re-implementation" in md and "partial train split" in md and "--limit 6" in md
    assert "| source | element | tiny | n |" in md and "| source | module | tiny | n |" in md  # group tables name their rows
    rc, text, _ = cli("report", a, b, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    mine = [r for r in rows if r["source"] == "run" and r["table"] == "econnli-table4"]
    assert len(mine) == 2 * 9 and all(r["n"] == "6" for r in mine)
    rc, text, _ = cli("report", a, b, "--format", "json")
    doc = json.loads(text)
    assert {t["id"] for t in doc["tables"]} >= {"econnli-table4", "econlogicqa-table2", "steer-me-overall", "steer-me-element",
                                                "steer-me-table2"}
    car = next(t for t in doc["tables"] if t["id"] == "steer-me-table2")
    assert [r["label"] for r in car["rows"]][:5] == ["o1-preview", "gpt-4o", "claude-3-5-sonnet", "gpt-4o-mini", "claude-3-haiku"]
    assert [r["n"] for r in car["rows"] if r["source"] == "run"] == [6 * 64, 6 * 64]
    assert doc["compare"][0]["rows"] and all(r["verdict"] in ("ok", "inconclusive", "n/a") for r in doc["compare"][0]["rows"])
    scored = a.parent / "from-predictions"
    rc, _, err = cli("score", "--task", "econnli-zero", "--predictions", a / "samples.jsonl", "--out", scored)
    assert rc == 0, err
    rc, md, err = cli("report", scored, "--format", "md")
    assert rc == 0 and "| run | from-predictions | Zero |" in md, err
    rc, _, err = cli("report", a.parent / "nothing-here")
    assert rc == 2 and "Traceback" not in err


def _chromium() -> str | None:
    """The browser, where installed (tools/system_test_deps.sh installs Debian's; CI runs it first)."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow  # a real browser
def test_html_report_renders_offline_in_chromium(cli, two_runs, tmp_path):
    pytest.importorskip("matplotlib", reason="plots need the report extra (installed by tools/bootstrap.sh)")
    page = tmp_path / "report.html"
    rc, _, err = cli("report", *two_runs, "--format", "html", "--out", page)
    assert rc == 0, err
    html = page.read_text()
    assert not re.search(r"<(script|link|img|iframe)\b", html) and not re.search(r"(src|href)=\"?https?:", html)  # self-contained
    assert html.count("<svg") >= 3  # EconNLI bars, STEER-ME heatmap, reliability diagrams, forest plot
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing (tools/system_test_deps.sh installs it)")
        pytest.skip("chromium is not installed (tools/system_test_deps.sh installs it)")
    shot = tmp_path / "shot.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
             "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,4000"]
    offline = ["unshare", "-n"] if shutil.which("unshare") and os.geteuid() == 0 else []
    dom = subprocess.run([*offline, browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    tables = re.findall(r'<table class="results">.*?</table>', dom.stdout, re.S)
    assert len(tables) >= 4 and all("<td" in t for t in tables)
    svgs = re.findall(r"<svg.*?</svg>", dom.stdout, re.S)
    assert len(svgs) >= 3 and all(len(re.findall(r"<path\b", s)) >= 3 for s in svgs)  # plots with drawn marks
    subprocess.run([*offline, browser, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=180)
    assert shot.is_file() and shot.stat().st_size > 20_000
    from matplotlib.image import imread

    img = imread(shot)
    assert img.shape[0] >= 1000 and img[..., :3].std() > 0.05  # not a blank page


def test_the_f1_bars_carry_the_published_rows_as_reference_marks(cli, two_runs):
    rc, text, err = cli("report", *two_runs, "--format", "json")
    assert rc == 0, err
    tab = next(t for t in json.loads(text)["tables"] if t["id"] == "econnli-table4")
    [bars] = [f for f in tab["figures"] if f["kind"] == "bars"]
    marks = {m["name"]: m["values"] for m in bars["marks"]}
    assert set(marks) == {"GPT-4 (published)", "LLAMA2 (7B) (published)"}
    assert marks["GPT-4 (published)"] == [[0.823, 0.848]] * len(bars["groups"])  # Zero: negative, positive F1


def test_tables_of_groups_have_one_setting_column_and_the_forest_reads_better_to_the_right(cli, tmp_path):
    pytest.importorskip("matplotlib")
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        rc, _, err = cli("run", "--model", f"fake:{name}", "--task", "steer-me", "--limit", "2", "-q", "--out", out)
        assert rc == 0, err
        runs.append(out)
    page = tmp_path / "r.html"
    rc, _, err = cli("report", *runs, "--format", "html", "--out", page)
    assert rc == 0, err
    text = page.read_text()
    by_setting = text[text.index("STEER-ME by setting"):]
    head = by_setting[:by_setting.index("</tr>")]
    assert re.findall(r"<th[^>]*>([^<]*)</th>", head) == ["source", "setting", "a", "b", "n"]  # one "setting": the row's group
    rc, md, _ = cli("report", *runs)
    line = next(x for x in md[md.index("STEER-ME by setting"):].splitlines() if x.startswith("| source"))
    assert line.count("setting") == 1, line
    forest = text[text.rindex("<figure"):]
    assert "-max_drop (-0.02)" in forest and "ECE (lower is better: negated)" in forest and "Brier (lower is better: negated)" in forest
    assert "acc (lower" not in forest


def test_the_view_shows_labels_not_codes_and_a_shared_prompt_once(cli, tmp_path):
    run = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--task", "steer-me", "--limit", "2", "-q", "--out", run)
    assert rc == 0, err
    rc, _, err = cli("view", run, "--out", tmp_path / "v.html")
    assert rc == 0, err
    page = (tmp_path / "v.html").read_text()
    golds = re.findall(r"· gold ([^<·]*)", page)
    assert golds and {g.strip() for g in golds} <= {"Yes", "No", "A", "B", "C", "D", "E", "F", "G", "H", "I", "J"}, golds
    assert '<p class="k">prompt response, option_logprobs</p>' in page and '<p class="k">prompt response</p>' not in page


def test_econlogicqa_and_cfbenchmark_get_their_bars(cli, two_runs):
    """The figures hold the tables' own numbers: EconLogicQA's accuracy per run and shot count, and
    (for a CFBenchmark run) each sub-task's score per run and setting."""
    from econeval.judge.compare import report_entry
    from econeval.publish.report import build

    doc = build(two_runs, compare=report_entry)
    logic = next(t for t in doc["tables"] if t["id"] == "econlogicqa-table2")
    fig = logic["figures"][0]
    runs = [r for r in logic["rows"] if r["source"] == "run"]
    assert fig["kind"] == "bars" and fig["groups"] == logic["columns"]
    assert [s["values"] for s in fig["series"]] == [r["values"] for r in runs] and len(runs) == 2
    assert fig["reference"]["value"] == pytest.approx(100 / 24)


def test_cfbenchmark_bars_are_the_tables_sub_task_columns(cli, tmp_path):
    from econeval.publish.report import build
    from tiny_bert import write_tiny_bert

    out = tmp_path / "cf"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "cfbenchmark-zero", "--limit", "1", "-q", "--out", out,
                     "--embedder", write_tiny_bert(tmp_path / "tiny-bert"))
    assert rc == 0, err
    tab = next(t for t in build([out])["tables"] if t["id"] == "cfbenchmark-table2")
    fig = tab["figures"][0]
    row = next(r for r in tab["rows"] if r["source"] == "run")
    assert fig["groups"] == [c for c in tab["columns"] if not c.endswith("Avg")] and len(fig["groups"]) == 8
    assert fig["series"][0]["values"] == [row["values"][tab["columns"].index(g)] for g in fig["groups"]]


def test_a_sample_runs_estimates_are_plotted_with_their_intervals(cli, tmp_path):
    pytest.importorskip("matplotlib")
    from econeval import registry

    run = tmp_path / "s"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--task", "econnli-gen", "--sample", "30", "-q",
                     "--out", run)
    assert rc == 0, err
    rc, out, err = cli("report", run, "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    results = json.loads(next(run.glob("results-sample-*.json")).read_text())["tasks"]
    rows = {(r["task"], r["metric"]): r for r in doc["estimates"][0]["rows"]}
    for metric, value in registry.get_task("econnli-zero").headline(results["econnli-zero"]).items():
        if value is not None:
            r = rows[("econnli-zero", metric)]
            assert r["value"] == value and [r["low"], r["high"]] == results["econnli-zero"]["intervals"][metric]
            assert (r["from"], r["of"]) == (30, 1026)
    assert not any(task == "econnli-gen" and m in ("Ent.", "Con.", "Irr.") for task, m in rows)  # counts: another scale
    rc, md, _ = cli("report", run)
    assert "## Estimates: m" in md
    rc, _, err = cli("report", run, "--format", "html", "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert rc == 0 and "<h2>Estimates: m</h2>" in page and "econnli-zero F1 (30 of 1,026)" in page


def slow_answer(prompt: str) -> str:
    """A fake model's answer after a pause (`-M respond=test_report:slow_answer`): a --budget of a
    second stops a task of 1,026 items long before its end, on any machine."""
    time.sleep(0.02)
    return "Yes"


def _run(cli, out, *args):
    rc, _, err = cli("run", *args, "-q", "--out", out)
    assert rc == 0, err
    return out


def test_runs_are_labelled_by_what_they_are_not_by_a_dash_or_a_path(cli, tmp_path):
    """Issue #59: a --budget run beside a --limit run was labelled "a (limit -)", a run of a
    written question set "a (steer-me questions /the/absolute/q.jsonl)" beside "a (steer-me
    questions -)"; the labels are every format's (md, json, csv, html)."""
    slow = ("--model", "fake:a", "-M", "respond=test_report:slow_answer", "-t", "econnli-zero")
    limited, budget = _run(cli, tmp_path / "limited", *slow, "--limit", "8"), _run(cli, tmp_path / "budget", *slow, "--budget", "1s")
    est = json.loads((budget / "results-partial.json").read_text())["tasks"]["econnli-zero"]["estimate"]
    assert 0 < est["from"] < est["of"] == 1026
    rc, text, err = cli("report", limited, budget, "--format", "json")
    assert rc == 0, err
    assert [r["label"] for r in json.loads(text)["runs"]] == ["a (limit 8)", f"a (budget 1s, {est['from']:,} of 1,026 items)"]
    q = tmp_path / "sets" / "q.jsonl"
    q.parent.mkdir()
    assert cli("steer", "generate", "--elements", "consumer_surplus", "--per-element", "4", "--out", q)[0] == 0
    bundled = _run(cli, tmp_path / "bundled", "--model", "fake:a", "-t", "steer-me", "--limit", "4")
    written = _run(cli, tmp_path / "written", "--model", "fake:a", "-t", "steer-me", "-T", f"questions={q}", "--limit", "4")
    rc, text, err = cli("report", bundled, written, "--format", "json")
    assert [r["label"] for r in json.loads(text)["runs"]] == ["a (steer-me questions not set)", "a (steer-me questions q.jsonl)"]
