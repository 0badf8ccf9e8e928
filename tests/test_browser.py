"""The pages in headless Chromium, offline: the view's filters work, the report's headline
columns are in view at 1,400 px, every header sits over its column and no label is cut (at 1,400
and 800 px), the gate's legend lies on no panel, review.html names each option once, and the
pages are not blank."""

import json
import os
import re
import shutil
import subprocess

import pytest

from test_report import _chromium

pytestmark = pytest.mark.slow  # a real browser


def _browser():
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing (tools/system_test_deps.sh installs it)")
        pytest.skip("chromium is not installed (tools/system_test_deps.sh installs it)")
    return browser


def _run_in_browser(page, probe: str, tmp_path, shot=None, width: int = 1400) -> dict:
    """Open a copy of `page` with `probe` (JavaScript that returns a JSON-able value) run after
    the page's own script, in a window `width` pixels wide; the value comes back through the DOM."""
    browser = _browser()
    probe_page = tmp_path / f"probe-{page.name}"
    text = page.read_text()
    script = f"<script>document.body.setAttribute('data-probe', JSON.stringify((function(){{{probe}}})()));</script>"
    probe_page.write_text(text.replace("</body>", script + "</body>"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
             "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},3000"]
    offline = ["unshare", "-n"] if shutil.which("unshare") and os.geteuid() == 0 else []
    dom = subprocess.run([*offline, browser, *flags, "--dump-dom", probe_page.as_uri()], capture_output=True, text=True,
                         timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'data-probe="([^"]*)"', dom.stdout)
    assert found, dom.stdout[-2000:]
    if shot is not None:
        subprocess.run([*offline, browser, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=180)
        from matplotlib.image import imread

        img = imread(shot)
        assert img[..., :3].std() > 0.05  # not a blank page
    import html

    return json.loads(html.unescape(found.group(1)))


def test_the_view_filters_work_in_chromium(cli, tmp_path, tiny_model):
    pytest.importorskip("matplotlib")
    out = tmp_path / "run"
    assert cli("run", "--model", tiny_model, "--task", "econnli-zero", "--task", "steer-me", "--limit", "3", "--quiet",
               "--out", out)[0] == 0
    page = tmp_path / "view.html"
    assert cli("view", out, "--out", page)[0] == 0
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    wrong = sum(r.get("correct") is False for r in records)
    one_element = sum(r.get("element") == "linear_system_eq" for r in records)
    probe = """
      const shown = () => [...document.querySelectorAll('details.item')].filter(d => !d.hidden).length;
      const set = (id, v) => { const el = document.getElementById(id); el.value = v;
                               el.dispatchEvent(new Event(id === 'f-text' ? 'input' : 'change')); };
      const r = {all: shown()};
      set('f-outcome', 'wrong'); r.wrong = shown();
      set('f-outcome', ''); set('f-task', 'econnli-zero'); r.task = shown();
      set('f-task', ''); set('f-group', 'linear_system_eq'); r.group = shown();
      r.count = document.getElementById('count').textContent;
      return r;"""
    got = _run_in_browser(page, probe, tmp_path, shot=tmp_path / "view.png")
    assert got["all"] == len(records) and got["wrong"] == wrong and 0 < wrong < len(records)
    assert got["task"] == 3 and got["group"] == one_element == 3
    assert got["count"] == f"3 of {len(records)} items"


def test_the_reports_headline_columns_are_in_view_at_1400_px(cli, tmp_path, tiny_model):
    pytest.importorskip("matplotlib")
    from tiny_bert import write_tiny_bert

    emb = write_tiny_bert(tmp_path / "tiny-bert")
    runs = []
    for name, par in (("a", "8"), ("b", "2")):
        out = tmp_path / name
        rc, _, err = cli("run", "--model", tiny_model, "--task", "econnli-zero", "--task", "econnli-icl", "--task",
                         "cfbenchmark-zero", "--embedder", emb, "--limit", "1", "-P", par, "--n-ctx", "4096", "--quiet", "--out", out)
        assert rc == 0, err
        runs.append(out)
    page = tmp_path / "report.html"
    rc, _, err = cli("report", *runs, "--format", "html", "--out", page)
    assert rc == 0, err
    probe = """
      const out = [];
      for (const t of document.querySelectorAll('table.results')) {
        const box = t.getBoundingClientRect();
        for (const th of t.querySelectorAll('thead th')) {
          const r = th.getBoundingClientRect();
          out.push({th: th.textContent, visible: r.left >= box.left - 1 && r.right <= Math.min(box.right, window.innerWidth) + 1});
        }
      }
      return out;"""
    cells = _run_in_browser(page, probe, tmp_path, shot=tmp_path / "report.png")
    headline = {"Average precision", "Average recall", "Average F1", "R.Avg", "C.Avg", "G.Avg", "Avg"}
    seen = {c["th"] for c in cells if c["th"] in headline}
    assert seen == headline
    assert all(c["visible"] for c in cells if c["th"] in headline | {"model", "source"}), \
        [c for c in cells if not c["visible"]]


def test_runs_differing_in_tasks_get_short_labels_and_every_figure_fits_the_page(cli, tmp_path):
    """Two runs whose tasks differ: a label names the model and what tells the runs apart, not
    every task option of both (which made the EconNLI chart 1,234 pt and the STEER-ME heatmap
    2,007 pt wide); every figure lies within the page at 1,400 px, legend included."""
    pytest.importorskip("matplotlib")
    runs = []
    for name, tasks in (("m", ("econnli-zero", "econnli-icl", "econlogicqa-1shot", "steer-me")), ("n", ("econnli-zero", "steer-me"))):
        out = tmp_path / name
        rc, _, err = cli("run", "--model", f"fake:{name}", *(a for t in tasks for a in ("--task", t)), "--limit", "3", "-q",
                         "--out", out)
        assert rc == 0, err
        runs.append(out)
    page = tmp_path / "report.html"
    rc, _, err = cli("report", *runs, "--format", "html", "--out", page)
    assert rc == 0, err
    text = page.read_text()
    assert "<b>m</b>" in text and "<b>n</b>" in text and "shots per-item" not in text  # nothing but the model tells them apart
    probe = """
      const width = document.documentElement.clientWidth;
      return [...document.querySelectorAll('figure svg')].map(s => {
        const r = s.getBoundingClientRect(); return {left: r.left, right: r.right, width: width}; });"""
    figures = _run_in_browser(page, probe, tmp_path, shot=tmp_path / "report.png")
    assert len(figures) >= 3  # the EconNLI bars, STEER-ME's reliability diagrams and heatmap, the forest plot
    assert all(f["left"] >= 0 and f["right"] <= f["width"] + 1 for f in figures), figures


def test_headers_sit_over_their_columns_and_labels_wrap_rather_than_being_cut(cli, tmp_path):
    """Issue #59: every header was right-aligned over left-aligned names, and a label past 22rem
    was cut (no tooltip) while half the page stood empty ("2 Consumption Decisions in
    Non-Strategic En…"); at 1,400 and 800 px every header now aligns as its column's cells, and no
    cell holds more than it shows."""
    pytest.importorskip("matplotlib")
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        rc, _, err = cli("run", "--model", f"fake:{name}", "-t", "econnli-zero", "-t", "steer-me", "--limit", "2", "-q", "--out", out)
        assert rc == 0, err
        runs.append(out)
    page = tmp_path / "report.html"
    rc, _, err = cli("report", *runs, "--format", "html", "--out", page)
    assert rc == 0, err
    assert "2 Consumption Decisions in Non-Strategic Environments" in page.read_text()
    probe = """
      const out = {tables: 0, misaligned: [], cut: []};
      for (const t of document.querySelectorAll('table')) {
        const first = t.querySelector('tbody tr');
        if (!first) continue;
        out.tables++;
        [...t.querySelectorAll('thead th')].forEach((th, i) => {
          const td = first.children[i];
          if (td && getComputedStyle(th).textAlign !== getComputedStyle(td).textAlign) out.misaligned.push(th.textContent);
        });
        for (const td of t.querySelectorAll('td'))
          if (td.scrollWidth > td.clientWidth + 1) out.cut.push(td.textContent.slice(0, 80));
      }
      return out;"""
    for width in (1400, 800):
        got = _run_in_browser(page, probe, tmp_path, shot=tmp_path / f"report-{width}.png", width=width)
        assert got["tables"] >= 6 and not got["misaligned"] and not got["cut"], (width, got)


def test_the_gate_legend_lies_on_no_panel_and_review_names_each_option_once(cli, tmp_path):
    """Issue #59: the gate's legend sat inside each panel, on the regression threshold's dashed
    line; now one legend for all lies below them. review.html listed each option as "A. A. 135.00"
    (a lettered list of lettered options): now the letter once."""
    pytest.importorskip("matplotlib")
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        rc, _, err = cli("run", "--model", f"fake:{name}", "-t", "econnli-zero", "-t", "econlogicqa-1shot", "--limit", "40", "-q",
                         "--out", out)
        assert rc == 0, err
        runs.append(out)
    page = tmp_path / "gate.html"
    rc, _, err = cli("gate", runs[0], "--replay", runs[1], "--plot", page)
    assert rc in (0, 1, 3), err
    probe = """
      const box = el => el.getBoundingClientRect();
      const legends = [...document.querySelectorAll('svg g[id^="legend_"]')].map(box);
      const panels = [...document.querySelectorAll('svg g[id^="axes_"] > g[id^="patch_"]')].map(box);
      const overlap = legends.some(l => panels.some(a => l.left < a.right && a.left < l.right && l.top < a.bottom && a.top < l.bottom));
      return {legends: legends.length, panels: panels.length, overlap: overlap};"""
    got = _run_in_browser(page, probe, tmp_path, shot=tmp_path / "gate.png")
    assert got["legends"] >= 1 and got["panels"] >= 2 and not got["overlap"], got
    w = tmp_path / "w"
    fake = ("-M", "respond=econeval.plugins.auto_steer.fake_writer:respond")
    assert cli("steer", "write", "--writer", "fake:w", *fake, "--out", w, "--element", "average_cost", "--domain", "medical")[0] == 0
    assert cli("steer", "check", w, "--checker", "fake:c", *fake, "--questions", "1")[0] == 0
    probe = """
      const items = [...document.querySelectorAll('li')].filter(li => /^[A-J]\\. /.test(li.textContent.trim()));
      return {options: items.length, twice: items.filter(li => getComputedStyle(li).listStyleType !== 'none').length};"""
    got = _run_in_browser(w / "review.html", probe, tmp_path, shot=tmp_path / "review.png")
    assert got["options"] >= 4 and got["twice"] == 0, got
