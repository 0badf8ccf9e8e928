"""Property-based: generated malformed inputs to econeval's readers — predictions files, run.json /
results.json documents, data package indexes, served models' answers — keep the contract: exit 0
(an input that happens to be valid), 1 or 2 with one line on stderr, never a traceback or an
internal error, and nothing outside the intended folder changed. In-process (econeval.cli.main)
so that many examples run."""

import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fake_http import JSONHandler, serve

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                              st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                           max_leaves=12)


def call(capsys, *args) -> tuple[int, str]:
    from econeval.cli import main

    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    return code, capsys.readouterr().err


def holds(code, err):
    assert code in (0, 1, 2, 3), (code, err)  # 3: compare's inconclusive verdict
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [l for l in err.splitlines() if l.strip() and not l.startswith(("econeval: run folder", "econeval: model "))]
    if code in (1, 2):
        assert len(lines) == 1, err


def tree(root: Path, skip: Path | None = None) -> dict:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and (skip is None or skip not in p.parents)}


def _json_line(v) -> bytes:
    return json.dumps(v, allow_nan=True).encode()


@SETTINGS
@given(rows=st.lists(st.one_of(json_values, st.fixed_dictionaries({"id": json_values, "response": json_values}),
                               st.fixed_dictionaries({"id": st.just("econnli/test/0"), "response": st.text(max_size=5),
                                                      "option_logprobs": json_values})), max_size=4),
       raw=st.binary(max_size=40))
def test_predictions_files(capsys, tmp_path_factory, rows, raw):
    d = tmp_path_factory.mktemp("pred")
    f = d / "p.jsonl"
    f.write_bytes(b"\n".join(_json_line(r) for r in rows) + b"\n" + raw)
    before = tree(d)
    holds(*call(capsys, "score", "--task", "econnli-zero", "--predictions", f, "--bootstrap", "0"))
    assert tree(d) == before


@SETTINGS
@given(meta=json_values, results=json_values, samples=st.lists(json_values, max_size=3))
def test_run_folders(capsys, tmp_path_factory, meta, results, samples):
    d = tmp_path_factory.mktemp("runs")
    run = d / "run"
    run.mkdir()
    (run / "run.json").write_bytes(_json_line(meta))
    (run / "results.json").write_bytes(_json_line(results))
    (run / "samples.jsonl").write_bytes(b"\n".join(_json_line(s) for s in samples))
    before = tree(d)
    holds(*call(capsys, "report", run))
    holds(*call(capsys, "compare", run, run, "--bootstrap", "100"))
    assert tree(d) == before


@SETTINGS
@given(index=json_values, names=st.lists(st.text(min_size=1, max_size=12), max_size=3))
def test_data_package_indexes(capsys, tmp_path_factory, index, names):
    d = tmp_path_factory.mktemp("pkg")
    os.environ["ECONEVAL_HOME"] = str(d / "home")
    archive = d / "p.tar"
    with tarfile.open(archive, "w") as tar:
        for name, blob in [("econeval-data.json", _json_line(index)), *((n, b"x") for n in names)]:
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    code, err = call(capsys, "data", "install", archive)
    holds(code, err)
    assert code != 0
    assert not list((d / "home" / "data").glob(".staging-*")) if (d / "home" / "data").exists() else True


class Answers(JSONHandler):
    body = b"{}"

    def do_GET(self):
        self._send(200, {"object": "list", "data": [{"id": "m", "owned_by": "me"}]})

    def do_POST(self):
        self.read_json()
        self._send_raw(200, type(self).body)


@pytest.fixture(scope="module")
def answer_server():
    srv, url = serve(Answers)
    yield url
    srv.shutdown()


@SETTINGS
@given(doc=st.one_of(json_values, st.fixed_dictionaries({"choices": st.lists(json_values, max_size=2), "usage": json_values}),
                     st.fixed_dictionaries({"choices": st.lists(st.fixed_dictionaries(
                         {"text": json_values, "logprobs": json_values, "finish_reason": json_values}), min_size=1, max_size=1)})))
def test_served_answers(capsys, tmp_path_factory, answer_server, doc):
    d = tmp_path_factory.mktemp("served")
    Answers.body = _json_line(doc)
    out = d / "run"
    holds(*call(capsys, "run", "--model", "openai:m", "--base-url", answer_server, "--task", "econnli-zero", "--limit", "1",
                "--max-retries", "0", "--timeout", "5", "--quiet", "--bootstrap", "0", "--out", out))
    assert set(tree(d)) <= {p for p in tree(d) if out in p.parents}
