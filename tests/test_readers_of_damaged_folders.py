"""Report and view on what a run folder holds, whatever it holds: everything escaped, wrongly typed
run.json fields read as absent, each page's caps."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
from conftest import fake_run, one_line, read_lines


@pytest.mark.parametrize("edit", [
    {"identity": []}, {"identity": {"model": "x"}}, {"identity": {"model": {"settings": [1]}}},
    {"data_package": "1.0"}, {"options": ["x"]}, {"options": {"econnli-zero": 5}}, {"backend": 3},
])
def test_report_reads_wrongly_typed_run_json_fields(cli, tmp_path, edit):
    run = fake_run(cli, tmp_path / "run", n=4)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, **edit}))
    rc, _, err = cli("report", run)
    assert rc in (0, 2) and "Traceback" not in err and "internal error" not in err, err


def test_view_shows_at_most_its_item_cap(cli, tmp_path, monkeypatch):
    from econeval.publish import browse

    run = fake_run(cli, tmp_path / "run", n=12)
    monkeypatch.setattr(browse, "SHOWN_ITEMS", 5)
    assert browse.write_view(run, tmp_path / "p.html") == 5
    page = (tmp_path / "p.html").read_text()
    assert page.count('<details class="item') == 5 and "the first 5 of 12 items shown" in page


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def test_report_escapes_everything_from_a_run_folder(cli, tmp_path, tiny_model):
    reg = tmp_path / "models.toml"
    name = "tiny \x1b]0;owned\x07\x1b[31m$\\x$\u202eevil"
    reg.write_text(f'[models.{json.dumps(name)}]\npath = "{tiny_model}"\nchat = "off"\n')
    run = tmp_path / "run"
    rc, out, err = cli("run", "--model", name, "--task", "econnli-zero", "--limit", "3", "--quiet", "--out", run,
                       env={"ECONEVAL_MODELS": str(reg)})
    assert rc == 0, err
    assert "\x1b" not in out and "\u202e" not in out
    meta = json.loads((run / "run.json").read_text())
    meta["econeval_version"], meta["data_package"]["version"] = "<script>alert(1)</script>", "<img src=x onerror=alert(1)>"
    (run / "run.json").write_text(json.dumps(meta))
    page = tmp_path / "r.html"
    rc, _, err = cli("report", run, "--format", "html", "--out", page)
    assert rc == 0, err
    html = page.read_text()
    tags = _Tags()
    tags.feed(html)
    assert "script" not in tags.tags and "img" not in tags.tags and "&lt;script&gt;" in html
    assert "\x1b" not in html and "\u202e" not in html
    rc, md, _ = cli("report", run)
    assert rc == 0 and "\x1b" not in md and "\u202e" not in md and "tiny ?" in md


def test_a_model_name_with_a_newline_and_html_stays_plain_text_in_the_markdown_report(cli, tmp_path):
    run = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econlogicqa-1shot", "--limit", "4", "--quiet", "--out", run)
    assert rc == 0, err
    meta = json.loads((run / "run.json").read_text())
    meta["backend"]["model"]["name"] = "evil\n# heading <img src=x onerror=alert(1)> | cell"
    (run / "run.json").write_text(json.dumps(meta))
    rc, md, err = cli("report", run)
    assert rc == 0, err
    assert "<img" not in md and not any(line.startswith("# heading") for line in md.splitlines())
    assert "evil # heading &lt;img src=x onerror=alert(1)&gt; \\| cell" in md


def test_view_caps_what_a_page_shows_of_each_item_and_shows_damaged_lines_as_they_are(cli, tmp_path):
    """Issue #33 items 7-8: 48 MiB of samples made a 144 MiB page (no per-item cap); samples with
    `prompts` a list or a string, `task` a list or `id` an object were internal errors."""
    run = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econlogicqa-1shot", "--limit", "3", "--quiet", "--out", run)
    assert rc == 0, err
    recs = read_lines(run / "samples.jsonl")
    recs[0]["response"] = "B, D, A, C. " * 10_000  # 120,000 characters
    recs[1]["prompts"] = ["a list", "of prompts"]
    recs[2]["prompts"] = "a string prompt"
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    page = tmp_path / "page.html"
    rc, _, err = cli("view", run, "--out", page)
    assert rc == 0, err
    text = page.read_text()
    assert "100,000 more characters not shown" in text and len(text) < 60_000
    assert "a string prompt" in text and "of prompts" in text
    for field, value in (("task", ["econlogicqa-1shot"]), ("id", {"x": 1})):
        bad = [dict(recs[0], **{field: value})] + recs[1:]
        (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bad))
        one_line(*cli("view", run, "--out", tmp_path / "p2.html"), 2, "samples.jsonl:1 is not a sample line")
        assert not (tmp_path / "p2.html").exists()
