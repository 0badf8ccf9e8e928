"""The four HTML pages (`report --format html`, `view`, `gate --plot`, auto-STEER's review.html)
through one Jinja2 layout and stylesheet (econeval/publish/pages.py, publish/templates/): one
stylesheet, no escaping written by hand, figures that say what they rest on, the gate's page
naming both e-processes with its numbers in a table, no absolute paths. What a browser makes of
them (alignment, wrapping, the legend's place) is tested in tests/test_browser.py."""

import json
import re
from html.parser import HTMLParser

import pytest

from conftest import REPO

WRITER = ("-M", "respond=econeval.plugins.auto_steer.fake_writer:respond")


class _Rows(HTMLParser):
    """The cell texts of each row of the tables of one class."""

    def __init__(self, cls: str):
        super().__init__()
        self.cls, self.rows, self.inside, self.cell = cls, [], False, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.inside = self.cls in (dict(attrs).get("class") or "").split()
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag == "td":
            self.cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.rows[-1].append("".join(self.cell).strip())
            self.cell = None
        elif tag == "table":
            self.inside = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def rows(page: str, cls: str) -> list[list[str]]:
    parser = _Rows(cls)
    parser.feed(page)
    return [r for r in parser.rows if r]


def _run(cli, out, *args):
    rc, _, err = cli("run", *args, "-q", "--out", out)
    assert rc == 0, err
    return out


def test_every_page_has_the_one_layout_and_stylesheet_and_no_page_escapes_by_hand(cli, tmp_path):
    """Issue #59: the four pages were strings, each with a stylesheet of its own and html.escape
    written at every value; now one base layout and one stylesheet (templates/style.css) hold
    them all, and Jinja2's autoescaping escapes."""
    pytest.importorskip("matplotlib")
    run = _run(cli, tmp_path / "run", "--model", "fake:a", "-t", "econnli-zero", "-t", "steer-me", "--limit", "2")
    pages = {name: tmp_path / f"{name}.html" for name in ("report", "view", "gate")}
    assert cli("report", run, "--format", "html", "--out", pages["report"])[0] == 0
    assert cli("view", run, "--out", pages["view"])[0] == 0
    assert cli("gate", run, "--replay", run, "--plot", pages["gate"])[0] == 0
    w = tmp_path / "w"
    assert cli("steer", "write", "--writer", "fake:w", *WRITER, "--out", w, "--element", "average_cost", "--domain", "medical")[0] == 0
    assert cli("steer", "check", w, "--checker", "fake:c", *WRITER, "--questions", "1")[0] == 0
    pages["review"] = w / "review.html"
    sheet = REPO / "econeval" / "publish" / "templates" / "style.css"
    assert sheet.is_file(), sheet
    for name, path in pages.items():
        text = path.read_text()
        style = re.findall(r"<style>(.*?)</style>", text, re.S)
        assert text.startswith("<!DOCTYPE html>") and len(style) == 1 and style[0].strip() == sheet.read_text().strip(), name
    hand = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "econeval").rglob("*.py") if "html.escape" in p.read_text())
    assert not hand, hand


def test_figures_say_what_they_rest_on_and_a_chart_of_zeros_is_not_drawn(cli, tmp_path):
    """Issue #59: EconLogicQA's chart of a run whose every answer was unreadable was an empty
    frame; the STEER-ME heatmap of a run of one item per element showed 64 cells of one item
    each as if they were numbers; a compare of two alike runs drew a row of dots at 0."""
    pytest.importorskip("matplotlib")
    args = ("--model", "fake:a", "-t", "econlogicqa-1shot", "-t", "steer-me", "--limit", "1")
    one, same = _run(cli, tmp_path / "one", *args), _run(cli, tmp_path / "same", *args)
    page = tmp_path / "r.html"
    assert cli("report", one, same, "--format", "html", "--out", page)[0] == 0
    text = page.read_text()

    def section(title):
        start = text.index(title)
        return text[start:text.find("<h2", start + 1)]

    logic = section("EconLogicQA Table 2")
    assert "<svg" not in logic and "Not drawn: every value is 0" in logic
    heat = section("STEER-ME by element")
    assert "<svg" in heat and re.search(r"Cells resting on one item \(dotted: each is that one item&#39;s score\): "
                                        r"a \[one\]: 64 of 64; a \[same\]: 64 of 64\.", heat), heat[-600:]
    compared = section("Compare: ")
    assert "Every difference and its interval is 0" in compared


def test_the_gate_page_names_both_e_processes_and_tables_their_numbers(cli, tmp_path):
    """Issue #59: the gate's page said only "log wealth" beside two unnamed lines, with no number
    in words or figures; now its legend names what each e-process gathers evidence for, and a
    table under the plot holds each metric's last values, thresholds and what decided it, and
    its steps."""
    pytest.importorskip("matplotlib")
    base = _run(cli, tmp_path / "base", "--model", "fake:a", "-t", "econnli-zero", "-t", "econlogicqa-1shot", "--limit", "40")
    cand = _run(cli, tmp_path / "cand", "--model", "fake:b", "-t", "econnli-zero", "-t", "econlogicqa-1shot", "--limit", "40")
    page = tmp_path / "gate.html"
    rc, out, err = cli("gate", base, "--replay", cand, "--plot", page, "--format", "json")
    assert rc in (0, 1, 3), err
    progress = json.loads(out)["progress"]
    text = page.read_text()
    svg = text[text.index("<svg"):text.index("</svg>")]
    assert "pass: evidence that the candidate is no worse than −max_drop" in svg
    assert "regression: evidence that the candidate is worse by more than max_drop" in svg
    got = rows(text, "gate")
    assert [r[:3] for r in got] == [[m["task"], m["metric"], m["verdict"]] for m in progress]
    for row, m in zip(got, progress):
        last = m["steps"][-1]
        assert row[3] == f"{last['items']:,} of {m['of']:,}"
        for cell, value in ((row[4], last["log_wealth_pass"]), (row[6], last["log_wealth_regression"])):
            assert cell == ("–" if value is None else f"{value:.2f}".replace("-0.00", "0.00"))
        assert (row[5], row[7]) == (f"{m['threshold_pass']:.2f}", f"{m['threshold_regression']:.2f}") and row[8]
    steps = re.findall(r"<summary>([^<]*): (\d+) steps?</summary>", text)
    assert steps == [(f"{m['task']} {m['metric']}", str(len(m["steps"]))) for m in progress]


def test_the_view_names_its_run_folder_not_its_absolute_path(cli, tmp_path):
    """Issue #59: the view's header printed the run folder's absolute path; now the folder as the
    page's folder reaches it (beside the page: its name)."""
    run = _run(cli, tmp_path / "deep" / "run", "--model", "fake:a", "-t", "econnli-zero", "--limit", "2")
    for page, shown in ((tmp_path / "v.html", "run folder deep/run"), (tmp_path / "deep" / "v.html", "run folder run"),
                        (tmp_path / "elsewhere" / "v.html", "run folder run")):
        page.parent.mkdir(exist_ok=True)
        rc, _, err = cli("view", run, "--out", page)
        assert rc == 0, err
        text = page.read_text()
        assert shown in text and str(tmp_path) not in text
