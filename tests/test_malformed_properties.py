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

# FUZZ_EXAMPLES=400 explores further (a session's search for new crash sites); 30 in CI
SETTINGS = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "30")), deadline=None, suppress_health_check=list(HealthCheck),
                    derandomize=True)
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


# ---- the readers added since (issue #33): shard run.json, view samples, runs listing, config ----
@pytest.fixture(scope="module")
def two_shards(tmp_path_factory):
    from conftest import run_cli_inprocess

    base = tmp_path_factory.mktemp("shards") / "run"
    for k in (1, 2):
        rc, _, err = run_cli_inprocess("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "16", "--shard",
                                       f"{k}/2", "--quiet", "--bootstrap", "0", "--out", base)
        assert rc == 0, err
    return [base / f"shard-{k}-of-2" for k in (1, 2)]


SHARD_KEYS = ("shard", "schedule", "bootstrap", "seed", "samples", "tasks", "identity", "status", "limit")


@SETTINGS
@given(edits=st.dictionaries(st.sampled_from(SHARD_KEYS), json_values, min_size=1, max_size=3),
       inner=st.dictionaries(st.sampled_from(("index", "count", "chunk_items")), json_values, max_size=2))
def test_shard_run_files(capsys, tmp_path_factory, two_shards, edits, inner):
    import shutil

    d = tmp_path_factory.mktemp("merge")
    shards = [d / s.name for s in two_shards]
    for s, copy in zip(two_shards, shards):
        shutil.copytree(s, copy)
    meta = json.loads((shards[0] / "run.json").read_text())
    for key in ("shard", "schedule"):
        if isinstance(meta.get(key), dict):
            meta[key] = {**meta[key], **{k: v for k, v in inner.items() if (k == "chunk_items") == (key == "schedule")}}
    (shards[0] / "run.json").write_bytes(_json_line({**meta, **edits}))
    before = tree(d)
    code, err = call(capsys, "merge", *shards, "--out", d / "merged")
    holds(code, err)
    assert {p for p in tree(d) if d / "merged" not in p.parents} == set(before)
    if code:
        assert not (d / "merged").exists() and not list(d.glob(".merged*"))


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    from conftest import run_cli_inprocess

    run = tmp_path_factory.mktemp("view") / "run"
    rc, _, err = run_cli_inprocess("run", "--model", "fake:m", "--task", "steer-me", "--limit", "1", "--quiet",
                                   "--bootstrap", "0", "--out", run)
    assert rc == 0, err
    return run


@SETTINGS
@given(edits=st.lists(st.dictionaries(st.sampled_from(("prompts", "task", "id", "element", "parsed", "gold", "correct",
                                                       "error", "skipped", "response", "reasoning")), json_values, max_size=3),
                      min_size=1, max_size=3))
def test_view_samples(capsys, tmp_path_factory, one_run, edits):
    import shutil

    d = tmp_path_factory.mktemp("v")
    run = d / "run"
    shutil.copytree(one_run, run)
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()][:len(edits)]
    (run / "samples.jsonl").write_bytes(b"\n".join(_json_line({**r, **e}) for r, e in zip(rows, edits)) + b"\n")
    before = tree(run)
    code, err = call(capsys, "view", run, "--out", d / "page.html")
    holds(code, err)
    assert tree(run) == before and (d / "page.html").exists() == (code == 0)


@SETTINGS
@given(metas=st.lists(st.one_of(json_values, st.dictionaries(st.sampled_from(
    ("tasks", "status", "started", "backend", "limit", "shard")), json_values, min_size=1)), min_size=1, max_size=4))
def test_runs_listing(capsys, tmp_path_factory, metas):
    d = tmp_path_factory.mktemp("listing")
    for n, meta in enumerate(metas):
        (d / f"r{n}").mkdir()
        (d / f"r{n}" / "run.json").write_bytes(_json_line(meta))
    before = tree(d)
    code, err = call(capsys, "runs", d, "--json")
    holds(code, err)
    assert code == 0 and tree(d) == before  # a damaged run.json is skipped, never the listing


TOML_VALUES = st.sampled_from(['1', '0', '-1', '1.5', '1e400', 'inf', 'nan', 'true', '"x"', '"paper"', '""', '[1, 2]',
                               '["econnli-zero"]', '{a = 1}', '"econnli-zero"', '"fake:m"', '2e2', '[[1]]', '"1h"'])
TOML_KEYS = st.sampled_from(["model", "suite", "tasks", "limit", "sample", "seed", "n_ctx", "chat", "judge", "embedder",
                             "bootstrap", "quiet", "budget", "nonsense"])


@SETTINGS
@given(run=st.lists(st.tuples(TOML_KEYS, TOML_VALUES), max_size=5),
       tables=st.lists(st.tuples(st.sampled_from(["task_options", "model_options", "roles"]),
                                 st.sampled_from(["prompt", "concurrency", "timeout", "judge", "x"]), TOML_VALUES), max_size=3),
       raw=st.binary(max_size=20))
def test_config_files(capsys, tmp_path_factory, run, tables, raw):
    d = tmp_path_factory.mktemp("cfg")
    lines = ["[run]"] + [f"{k} = {v}" for k, v in dict(run).items()]
    for table, key, value in tables:
        lines += [f"[run.{table}]", f"{key} = {value}"]
    cfg = d / "eval.toml"
    cfg.write_bytes("\n".join(lines).encode() + b"\n" + raw)
    code, err = call(capsys, "run", "--config", cfg, "--model", "fake:m", "--task", "econnli-zero", "--limit", "1",
                     "--quiet", "--bootstrap", "0", "--out", d / "out")
    holds(code, err)
    assert {p for p in tree(d) if d / "out" not in p.parents} == {cfg}


# ---- the readers the fourth audit crashed (issue #42): package rows, run.json for report and gate,
# prediction lines that carry `calls` ----------------------------------------------------------------
PACKAGE_FIELDS = ("part", "correct_index", "options", "question_text", "grading", "consistency_rule", "base_id", "type")


@SETTINGS
@given(edits=st.lists(st.dictionaries(st.sampled_from(PACKAGE_FIELDS), json_values, max_size=3), min_size=1, max_size=2))
def test_steer_me_package_rows(capsys, tmp_path_factory, edits):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("pkg")
    pkg = d / "pkg"
    where = pkg / "data" / "linear_system_eq"
    where.mkdir(parents=True)
    (pkg / "elements.csv").write_text("element,setting,module\nlinear_system_eq,Foundations,Systems\n")
    base = dict(element="linear_system_eq", base_id="0", part=0, question_text="Solve x + 1 = 3. What is x?",
                options=["1", "2", "3", "4"], correct_index=1, grading="answer", type="standard", consistency_rule=None)
    rows = [{k: json.dumps(v) if isinstance(v, (dict, list)) and k != "options" else v for k, v in {**base, **e}.items()}
            for e in edits]
    try:
        pq.write_table(pa.Table.from_pylist(rows), where / "test.parquet")
    except (pa.ArrowException, TypeError, ValueError, OverflowError):  # not a table parquet can hold: nothing to read
        return
    before = tree(pkg)
    holds(*call(capsys, "run", "--model", "fake:m", "--task", "steer-me", "-T", f"questions={pkg}", "--quiet",
                "--bootstrap", "0", "--out", d / "r"))
    assert tree(pkg) == before


RUN_KEYS = ("identity", "data_package", "options", "tasks", "backend", "roles", "seed", "status", "limit", "gate", "shard")


@SETTINGS
@given(edits=st.dictionaries(st.sampled_from(RUN_KEYS), json_values, min_size=1, max_size=3),
       inner=st.dictionaries(st.sampled_from(("model", "roles", "tasks", "settings")), json_values, max_size=2))
def test_run_json_fields_for_report_and_gate(capsys, tmp_path_factory, one_run, edits, inner):
    import shutil

    d = tmp_path_factory.mktemp("rj")
    run = d / "run"
    shutil.copytree(one_run, run)
    meta = json.loads((run / "run.json").read_text())
    meta["identity"] = {**meta["identity"], **inner}
    (run / "run.json").write_bytes(_json_line({**meta, **edits}))
    before = tree(d)
    holds(*call(capsys, "report", run))
    holds(*call(capsys, "gate", run, "--replay", one_run))
    holds(*call(capsys, "gate", one_run, "--replay", run))
    assert tree(d) == before


@SETTINGS
@given(line=st.fixed_dictionaries({"id": st.one_of(st.just("econnli/test/0"), json_values),
                                   "calls": st.one_of(json_values, st.dictionaries(
                                       st.sampled_from(("response", "x")),
                                       st.one_of(json_values, st.fixed_dictionaries({"kind": st.one_of(
                                           st.sampled_from(("generate", "option_logprobs", "similarity")), json_values)})),
                                       max_size=2))},
                                  optional={"response": json_values, "x": json_values, "thinking": json_values}))
def test_prediction_lines_with_calls(capsys, tmp_path_factory, line):
    d = tmp_path_factory.mktemp("calls")
    f = d / "p.jsonl"
    f.write_bytes(_json_line(line) + b"\n")
    before = tree(d)
    holds(*call(capsys, "score", "--task", "econnli-zero", "--predictions", f, "--bootstrap", "0"))
    assert tree(d) == before
