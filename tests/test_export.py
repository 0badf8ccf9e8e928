"""econeval export: every suite's run as a per-item table (CSV, Parquet) and as lm-eval's
results.json, read back with the consumers' own readers (pyarrow, csv, json), the numbers equal to
results.json's; refusals in one line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from conftest import read_lines


@pytest.fixture(scope="module")
def every_suite(tmp_path_factory):
    from conftest import run_cli_inprocess

    run = tmp_path_factory.mktemp("export") / "run"
    rc, _, err = run_cli_inprocess("run", "--model", "fake:m", "--suite", "all", "--limit", "3", "--quiet", "--bootstrap", "0",
                                   "--out", run)
    assert rc == 0, err
    return run


def _csv_rows(path: Path) -> list[dict]:
    rows = list(csv.DictReader(path.read_text().splitlines()))
    assert rows and all(r["econeval_export"].startswith("table/3 econeval ") for r in rows)
    return rows


def test_the_table_holds_every_item_and_the_item_metrics(cli, tmp_path, every_suite):
    pq = pytest.importorskip("pyarrow.parquet")
    from econeval import registry
    from econeval.publish.export import metric_column, table_columns

    samples = read_lines(every_suite / "samples.jsonl")
    rc, _, err = cli("export", every_suite, "--format", "table", "--out", tmp_path / "t.parquet")
    assert rc == 0, err
    table = pq.read_table(tmp_path / "t.parquet")
    assert table.num_rows == len(samples)
    assert [f.name for f in table.schema][:len(table_columns())] == [c for c, _ in table_columns()]
    rows = table.to_pylist()
    assert {(r["task"], r["item_id"]) for r in rows} == {(s["task"], s["id"]) for s in samples}
    rc, _, err = cli("export", every_suite, "--format", "table", "--out", tmp_path / "t.csv")
    assert rc == 0, err
    assert [(r["task"], r["item_id"]) for r in _csv_rows(tmp_path / "t.csv")] == [(r["task"], r["item_id"]) for r in rows]
    # each item metric's column is the task's own value of each record
    by_key = {(s["task"], s["id"]): s for s in samples}
    for r in rows:
        task = registry.get_task(r["task"])
        rec = by_key[(r["task"], r["item_id"])]
        if rec.get("error") or rec.get("skipped"):
            continue
        values = task.item_values(rec)
        for m in task.item_metrics:
            v = values.get(m.name)
            assert r[metric_column(m.name)] == (None if v is None else float(v)), (r["task"], m.name)
        assert r["correct"] == (rec["correct"] if isinstance(rec.get("correct"), bool) else None)
    # the mean of an item metric that is the paper's number is that number, to the last digit
    results = json.loads((every_suite / "results.json").read_text())["tasks"]
    logic = [r["metric_accuracy"] for r in rows if r["task"] == "econlogicqa-1shot"]
    assert sum(logic) / len(logic) == results["econlogicqa-1shot"]["paper"]["accuracy"]
    steer = [r for r in rows if r["task"] == "steer-me"]
    assert steer and all(r["group"] == r["element"] for r in steer)
    # CFBenchmark's answer is its extraction (`answer`): the parsed column holds it, its sub-task is a label
    cf = [r for r in rows if r["task"].startswith("cfbenchmark")]
    assert cf and all(r["parsed"] == (by_key[(r["task"], r["item_id"])].get("answer") or None) for r in cf)
    assert all(r["subtask"] == r["group"] for r in cf)
    # pandas reads both as they are, with no option, the same columns and types (docs/exports.md's worked example)
    pd = pytest.importorskip("pandas")
    for frame in (pd.read_parquet(tmp_path / "t.parquet"), pd.read_csv(tmp_path / "t.csv")):
        assert list(frame.columns) == [f.name for f in table.schema] and frame.columns[-1] == "econeval_export"
        assert len(frame) == len(samples) and frame["econeval_export"].str.startswith("table/3 econeval ").all()
        by = frame[frame.task == "steer-me"].groupby("element")["metric_accuracy"].agg(["mean", "count"])
        assert by["count"].sum() == len(steer) and by["mean"].between(0, 1).all()
        assert frame["metric_accuracy"].dtype == "float64" and frame["n_prompt_tokens"].dropna().astype(int).ge(0).all()


LM_EVAL = "0.4.13"  # the lm-evaluation-harness whose result schema the export is checked against


@pytest.fixture(scope="session")
def lm_eval_schema(tmp_path_factory):
    """lm-eval's own results schema (`lm_eval/result_schema.py`, EvalResults) as a pydantic
    TypeAdapter: from an installed lm-eval, else that one file read from lm-eval's wheel (pip
    download --no-deps: lm-eval's dependencies are not needed to read its schema)."""
    import importlib.util
    import subprocess
    import sys
    import zipfile

    pydantic = pytest.importorskip("pydantic")
    try:
        from lm_eval import result_schema as module  # type: ignore[import-not-found]
    except ImportError:
        from conftest import REAL_CACHE

        wheels = REAL_CACHE / "test-tools" / f"lm-eval-{LM_EVAL}"
        found = sorted(wheels.glob("lm_eval-*.whl"))
        if not found:
            got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels),
                                  f"lm-eval=={LM_EVAL}"], capture_output=True, text=True, timeout=600)
            assert got.returncode == 0, got.stderr[-2000:]
            found = sorted(wheels.glob("lm_eval-*.whl"))
        where = tmp_path_factory.mktemp("lm_eval") / "result_schema.py"
        with zipfile.ZipFile(found[0]) as whl:
            where.write_bytes(whl.read("lm_eval/result_schema.py"))
        spec = importlib.util.spec_from_file_location("lm_eval_result_schema", where)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return pydantic.TypeAdapter(module.EvalResults)


def test_lm_eval_results_pass_lm_evals_own_schema(cli, tmp_path, every_suite, lm_eval_schema):
    from econeval import registry

    out = tmp_path / "results.json"
    rc, _, err = cli("export", every_suite, "--format", "lm-eval", "--out", out)
    assert rc == 0, err
    doc = json.loads(out.read_text())
    lm_eval_schema.validate_python(doc)  # lm-eval's own reader: raises with every error it finds
    results = json.loads((every_suite / "results.json").read_text())["tasks"]
    assert set(doc["results"]) == set(results)
    left_out = 0
    for name, res in results.items():
        task = registry.get_task(name)
        row = doc["results"][name]
        assert row["name"] == row["alias"] == name and row["sample_len"] == res["n"]
        for metric, value in task.headline(res).items():
            if value is None:  # not computed: no number, and the task's config names it
                assert f"{metric},none" not in row and metric in doc["configs"][name]["not_computed"]
                left_out += 1
            else:
                assert row[f"{metric},none"] == value
            assert f"{metric}_stderr,none" not in row  # a full run: no interval, so no standard error
        assert doc["versions"][name] == task.prompt_version
        assert doc["n-samples"][name]["effective"] == res["n"]
    assert left_out > 0  # the fake model leaves econnli-cot unparsed: the case the schema refused as null
    assert doc["n-shot"]["econlogicqa-5shot"] == 5 and doc["n-shot"]["cfbenchmark-few"] == 3
    assert doc["higher_is_better"]["steer-me"]["ECE"] is False
    # the model as lm-eval writes model_args (key=value), read as Every Eval Ever's `convert lm_eval` reads it:
    # a model whose developer nothing names is its bare name (the converter then asks for a developer)
    assert doc["config"]["model_args"] == "pretrained=m" and doc["model_name"] == "m"
    started = json.loads((every_suite / "run.json").read_text())["started"]
    from datetime import datetime

    assert doc["date"] == datetime.fromisoformat(started).timestamp()
    assert json.loads(doc["configs"]["steer-me"]["seed"])["value"] == 42  # the authors' seed drew, not --seed's default
    assert doc["configs"]["econnli-zero"]["seed"] == "1234"
    # what the schema refused before: a task without name and sample_len, an ISO date, a null metric
    for bad in ({**doc, "date": started}, {**doc, "results": {**doc["results"], "steer-me": {"alias": "steer-me"}}},
                {**doc, "results": {**doc["results"], "steer-me": {**doc["results"]["steer-me"], "acc,none": None}}}):
        with pytest.raises(Exception, match="validation error"):
            lm_eval_schema.validate_python(bad)


def _as_eee_reads_model_args(model_args: str) -> dict[str, str]:
    """lm-eval's model_args as Every Eval Ever 0.3.0's lm-eval converter parses it
    (converters/lm_eval/utils.py, parse_model_args: comma-separated key=value pairs)."""
    out: dict[str, str] = {}
    for part in model_args.split(","):
        if "=" in part:
            key, value = part.split("=", 1)
            out[key.strip()] = value.strip()
        elif out:
            out[list(out)[-1]] += "," + part
    return out


def test_lm_eval_model_args_name_the_model_and_its_developer(cli, tmp_path, every_suite, organised_gguf_run, lm_eval_schema):
    """Every Eval Ever's `convert lm_eval` takes the model's id from model_args' `pretrained` and its
    developer from the part before the `/`, and refuses a record without one: model_args is
    lm-eval's key=value form, the developer named as the Every Eval Ever export names it."""
    cases = [(organised_gguf_run[0], [], "TinyLab/tiny-llama-1K"), (every_suite, ["--developer", "fake-lab"], "fake-lab/m")]
    for run, more, model in cases:
        out = tmp_path / "r.json"
        rc, _, err = cli("export", run, "--format", "lm-eval", *more, "--out", out)
        assert rc == 0, err
        doc = json.loads(out.read_text())
        lm_eval_schema.validate_python(doc)
        args = _as_eee_reads_model_args(doc["config"]["model_args"])
        assert args == {"pretrained": model} and args["pretrained"].split("/")[0] == model.split("/")[0]
        assert doc["model_name"] == model and doc["model_name_sanitized"] == model.replace("/", "__")
        # the same model id as the Every Eval Ever export's
        eee = _eee_path(tmp_path, *model.split("/"))
        rc, _, err = cli("export", run, "--format", "every-eval-ever", *more, "--out", eee)
        assert rc == 0, err
        assert json.loads(eee.read_text())["model_info"]["id"] == model


def test_a_sample_runs_intervals_become_standard_errors(cli, tmp_path, lm_eval_schema):
    run = tmp_path / "s"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econlogicqa-1shot", "--sample", "40", "-q", "--out", run)
    assert rc == 0, err
    rc, _, err = cli("export", run, "--format", "lm-eval", "--out", tmp_path / "r.json")
    assert rc == 0, err
    res = json.loads((tmp_path / "r.json").read_text())["results"]["econlogicqa-1shot"]
    low, high = json.loads(next(run.glob("results-sample-*.json")).read_text())["tasks"]["econlogicqa-1shot"]["intervals"]["accuracy"]
    assert res["accuracy_stderr,none"] == pytest.approx((high - low) / (2 * 1.959964))
    lm_eval_schema.validate_python(json.loads((tmp_path / "r.json").read_text()))


def test_export_refusals(cli, tmp_path, every_suite):
    other = tmp_path / "notes.csv"
    other.write_text("mine")
    cases = [
        (("export", every_suite, "--format", "table", "--out", other), "not an earlier export"),
        (("export", every_suite, "--format", "table", "--out", tmp_path / "t.xlsx"), ".csv or .parquet"),
        (("export", every_suite, every_suite, "--format", "lm-eval", "--out", tmp_path / "r.json"), "one run"),
    ]
    running = tmp_path / "running"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "2", "-q", "--out", running)
    assert rc == 0, err
    meta = json.loads((running / "run.json").read_text())
    (running / "run.json").write_text(json.dumps({**meta, "status": "running"}))
    cases.append((("export", running, "--format", "table", "--out", tmp_path / "x.csv"), "not a finished run"))
    for args, says in cases:
        rc, _, err = cli(*args)
        assert rc == 2 and says in err and len(err.strip().splitlines()) == 1, (args, err)
    assert other.read_text() == "mine" and not (tmp_path / "x.csv").exists()
    # an earlier export is replaced, an older table format's (a `# econeval_export table/2` first line) too
    out = tmp_path / "again.csv"
    for _ in range(2):
        rc, _, err = cli("export", every_suite, "--format", "table", "--out", out)
        assert rc == 0, err
    out.write_text("# econeval_export table/2 econeval 0.2.0\nrun,model\nr,m\n")
    rc, _, err = cli("export", every_suite, "--format", "table", "--out", out)
    assert rc == 0 and not out.read_text().startswith("#"), err


def test_a_gate_folder_is_no_lm_eval_result(cli, tmp_path):
    base = tmp_path / "base"
    rc, _, err = cli("run", "--model", "fake:a", "--task", "econnli-zero", "--limit", "32", "-q", "--out", base)
    assert rc == 0, err
    gate = tmp_path / "gate"
    rc, _, err = cli("gate", base, "--model", "fake:a", "--out", gate)
    assert rc in (0, 3), err
    meta = json.loads((gate / "run.json").read_text())
    (gate / "run.json").write_text(json.dumps({**meta, "status": "complete"}))
    rc, _, err = cli("export", gate, "--format", "lm-eval", "--out", tmp_path / "r.json")
    assert rc == 2 and "gate" in err, err


def test_inspect_logs_read_back_with_inspects_own_reader(cli, tmp_path, every_suite):
    pytest.importorskip("inspect_ai", reason="the inspect extra (installed by tools/bootstrap.sh)")
    from inspect_ai.log import read_eval_log

    from econeval import registry

    out = tmp_path / "logs"
    rc, _, err = cli("export", every_suite, "--format", "inspect", "--out", out)
    assert rc == 0, err
    samples = read_lines(every_suite / "samples.jsonl")
    results = json.loads((every_suite / "results.json").read_text())["tasks"]
    from econeval.publish.export_inspect import log_name

    from datetime import datetime

    meta = json.loads((every_suite / "run.json").read_text())
    started, timing = meta["started"], meta["timing"]
    # Inspect's own `.eval` logs by default, named as Inspect names them
    assert {p.name for p in out.iterdir() if not p.name.startswith(".")} == {log_name(started, name, "eval") for name in results}
    leads, as_eval = {}, {}
    for name, res in results.items():
        log = as_eval[name] = read_eval_log(str(out / log_name(started, name, "eval")))
        task = registry.get_task(name)
        recs = {s["id"]: s for s in samples if s["task"] == name}
        assert log.status == "success" and log.eval.task == f"econeval/{name}" and log.eval.model == "fake/m"
        assert len(log.samples) == len(recs) and log.results.total_samples == len(recs)
        # what `inspect view`'s log list shows, from the log's header alone: samples, tokens, duration, task arguments
        head = read_eval_log(str(out / log_name(started, name, "eval")), header_only=True)
        assert head.samples is None and head.results.total_samples == len(recs)
        assert head.stats.model_usage == log.stats.model_usage and sum(u.total_tokens for u in head.stats.model_usage.values()) > 0
        assert (head.stats.started_at, head.stats.completed_at) == (log.stats.started_at, log.stats.completed_at)
        assert head.eval.task_args == head.eval.task_args_passed == dict(meta["tasks"][name]["options"])
        # each sample's conversation: every prompt once as a user turn, every text answer once as an assistant turn
        for s in log.samples:
            rec = recs[s.id]
            prompts = list(dict.fromkeys(rec.get("prompts", {}).values()))
            answers = [rec[k] for k in rec.get("calls", {}) if isinstance(rec.get(k), str) and k in rec.get("prompts", {})]
            assert [m.text for m in s.messages if m.role == "user"] == prompts, (name, s.id)
            assert [m.text for m in s.messages if m.role == "assistant"] == answers, (name, s.id)
            assert s.input == (prompts[0] if prompts else "") and s.messages[0].role == "user"
        if name == "econnli-zero":  # an answer and the option log-probabilities on the same prompt: one exchange
            assert all([m.role for m in s.messages] == ["user", "assistant"] for s in log.samples)
        metrics = log.results.scores[0].metrics
        if task.lead and metrics:
            leads[name] = next(iter(metrics))
        for metric, value in task.headline(res).items():
            if value is not None:
                assert metrics[metric].value == value  # to the last digit
        for s in log.samples:
            rec = recs[s.id]
            if rec.get("error") or rec.get("skipped"):
                continue
            values = task.item_values(rec)
            assert s.scores["econeval"].value == {m.name: values.get(m.name) for m in task.item_metrics}
        assert log.eval.metadata["seed"] == 1234 and log.eval.packages["econeval"]
        # the tokens each request counted are the log's usage (Inspect shows 0 without them)
        counted = {k: sum(c.get(k, 0) for s in recs.values() for c in s["calls"].values()) for k in ("n_prompt_tokens", "n_tokens")}
        usage = log.stats.model_usage
        assert counted["n_prompt_tokens"] > 0
        assert sum(u.input_tokens for u in usage.values()) == counted["n_prompt_tokens"]
        assert sum(u.output_tokens for u in usage.values()) == counted["n_tokens"]
        assert sum(s.model_usage["fake/m"].input_tokens for s in log.samples) == usage["fake/m"].input_tokens
        # the task's own measured time, not the run's
        spent = datetime.fromisoformat(log.stats.completed_at) - datetime.fromisoformat(log.stats.started_at)
        assert spent.total_seconds() == pytest.approx(timing[name]["seconds"], abs=1e-3)
        # the paper's lead number first (Inspect's headline), and answers as a reader reads them
        lead = task.lead_metric()
        if res and task.headline(res).get(lead) is not None:
            assert next(iter(metrics)) == lead
        for s in log.samples:
            rec = recs[s.id]
            if name.startswith("econnli-") and name != "econnli-gen":
                assert s.target == {1: "Yes", 0: "No"}[rec["gold"]]
                assert s.scores["econeval"].answer == {1: "Yes", 0: "No", None: None}[rec.get("parsed")]
            if name == "steer-me" and isinstance(rec.get("gold"), int):
                assert s.target == "ABCDEFGHIJ"[rec["gold"]]
                assert s.scores["econeval"].answer == (None if rec.get("parsed") is None else "ABCDEFGHIJ"[rec["parsed"]])
    assert leads == {"econnli-zero": "F1", "econnli-icl": "F1", "cfbenchmark-zero": "Avg", "cfbenchmark-few": "Avg"}
    # the folder is replaced by a later export (here in Inspect's JSON log format), and another folder is refused
    rc, _, err = cli("export", every_suite, "--format", "inspect", "--log-format", "json", "--out", out)
    assert rc == 0, err
    assert {p.name for p in out.iterdir() if not p.name.startswith(".")} == {log_name(started, name, "json") for name in results}
    again = read_eval_log(str(out / log_name(started, "econnli-zero", "json")))
    assert again.results == as_eval["econnli-zero"].results and again.stats == as_eval["econnli-zero"].stats
    assert len(again.samples) == len([s for s in samples if s["task"] == "econnli-zero"])
    rc, _, err = cli("export", every_suite, "--format", "table", "--log-format", "json", "--out", tmp_path / "t.csv")
    assert rc == 2 and "--log-format is for --format inspect" in err, err
    other = tmp_path / "mine"
    other.mkdir()
    (other / "keep.txt").write_text("keep")
    rc, _, err = cli("export", every_suite, "--format", "inspect", "--out", other)
    assert rc == 2 and "not an earlier export" in err and (other / "keep.txt").read_text() == "keep"


@pytest.fixture
def inspect_view():
    """`inspect view` (Inspect's own viewer server) on 127.0.0.1 over a folder: a function that
    starts it and returns its address; stopped after the test."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    servers = []

    def start(folder: Path) -> str:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        inspect = Path(sys.executable).with_name("inspect")
        servers.append(subprocess.Popen([str(inspect), "view", "--log-dir", str(folder), "--host", "127.0.0.1", "--port", str(port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        url = f"http://127.0.0.1:{port}"
        for _ in range(240):  # it starts in seconds; a loaded machine may take a minute
            try:
                urllib.request.urlopen(f"{url}/api/logs", timeout=2).read()
                return url
            except OSError:
                assert servers[-1].poll() is None, "inspect view exited"
                time.sleep(0.5)
        raise AssertionError("inspect view did not answer in 120 s")

    yield start
    for server in servers:
        server.terminate()
        server.wait(timeout=30)


def test_inspect_views_log_list_has_each_logs_samples_tokens_duration_and_task_arguments(cli, tmp_path, every_suite, inspect_view):
    """What `inspect view`'s log list shows of each log, read through the viewer's own server as its
    page reads it: it lists the folder (/api/logs), and reads an `.eval` log's header (the samples
    count, token usage, start and end, task arguments) from the log's bytes (/api/log-bytes); of a
    `.json` log it has only a preview (task, model, score) until it has downloaded the whole log,
    so the list showed `-` for those four."""
    import urllib.parse
    import urllib.request
    from datetime import datetime

    pytest.importorskip("inspect_ai", reason="the inspect extra (installed by tools/bootstrap.sh)")
    from inspect_ai.log import read_eval_log

    out = tmp_path / "logs"
    rc, _, err = cli("export", every_suite, "--format", "inspect", "--out", out)
    assert rc == 0, err
    url = inspect_view(out)
    meta = json.loads((every_suite / "run.json").read_text())
    samples = read_lines(every_suite / "samples.jsonl")

    def get(path: str) -> bytes:
        return urllib.request.urlopen(f"{url}/api/{path}", timeout=60).read()

    listed = json.loads(get("logs"))["files"]
    assert sorted(f["task"] for f in listed) == sorted(meta["tasks"])
    for entry in listed:
        assert entry["name"].endswith(".eval"), entry["name"]  # the viewer reads a full header of an .eval log only
        name = urllib.parse.quote(entry["name"], safe="")  # as the page names it (encodeURIComponent)
        size = int(get(f"log-size/{name}"))
        got = tmp_path / "served.eval"
        got.write_bytes(get(f"log-bytes/{name}?start=0&end={size - 1}"))
        head = read_eval_log(str(got), header_only=True)
        task = entry["task"]
        recs = [s for s in samples if s["task"] == task]
        assert head.results.total_samples == head.results.completed_samples == len(recs)  # Samples
        counted = sum(c.get("n_prompt_tokens", 0) + c.get("n_tokens", 0) for s in recs for c in s["calls"].values())
        assert sum(u.total_tokens for u in head.stats.model_usage.values()) == counted > 0  # Tokens
        spent = datetime.fromisoformat(head.stats.completed_at) - datetime.fromisoformat(head.stats.started_at)
        assert spent.total_seconds() == pytest.approx(meta["timing"][task]["seconds"], abs=1e-3)  # Duration
        assert head.eval.task_args_passed == dict(meta["tasks"][task]["options"])  # Task Args
        # the server's own header read (/api/log-headers) agrees
        served = json.loads(get(f"log-headers?file={name}"))[0]
        assert served["results"]["total_samples"] == len(recs) and served["eval"]["task_args_passed"] == head.eval.task_args_passed


@pytest.mark.slow  # a real browser
def test_inspect_view_shows_the_exported_logs_in_chromium(cli, tmp_path, every_suite, inspect_view):
    """`inspect view` (Inspect's own viewer, served on 127.0.0.1) lists every exported task's log
    in Debian's Chromium, with nothing fetched from outside."""
    import subprocess

    pytest.importorskip("inspect_ai", reason="the inspect extra (installed by tools/bootstrap.sh)")
    from test_browser import _browser

    browser = _browser()
    out = tmp_path / "logs"
    rc, _, err = cli("export", every_suite, "--format", "inspect", "--out", out)
    assert rc == 0, err
    url = inspect_view(out) + "/"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
             "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1000",
             "--virtual-time-budget=60000"]
    names = [f"econeval/{name}" for name in json.loads((every_suite / "results.json").read_text())["tasks"]]
    for _ in range(4):  # the viewer reads the logs' headers on its first listing: a later page has them all
        dom = subprocess.run([browser, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=240)
        assert dom.returncode == 0, dom.stderr[-2000:]
        if all(n in dom.stdout for n in names):
            break
    assert [n for n in names if n not in dom.stdout] == []
    shot = tmp_path / "inspect-view.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", url], capture_output=True, timeout=240)
    assert shot.stat().st_size > 10_000


def _eee_path(root: Path, developer: str = "fake", model: str = "m") -> Path:
    """Where the Every Eval Ever datastore keeps a record: data/<benchmark>/<developer>/<model>/<uuid>.json."""
    import uuid

    where = root / "data" / "econeval" / developer / model
    where.mkdir(parents=True, exist_ok=True)
    return where / f"{uuid.uuid4()}.json"


def test_every_eval_ever_records_hold_the_headline_numbers(cli, tmp_path, every_suite):
    from econeval import registry

    out = _eee_path(tmp_path)
    rc, _, err = cli("export", every_suite, "--format", "every-eval-ever", "--out", out)
    assert rc == 0, err
    doc = json.loads(out.read_text())
    assert doc["source_metadata"]["source_type"] == "evaluation_run" and doc["eval_library"]["name"] == "econeval"
    results = json.loads((every_suite / "results.json").read_text())["tasks"]
    got = {r["evaluation_result_id"]: r for r in doc["evaluation_results"]}
    for name, res in results.items():
        for metric, value in registry.get_task(name).headline(res).items():
            if value is None:
                assert f"{name}/{metric}" not in got  # not computed: no number written
            else:
                assert got[f"{name}/{metric}"]["score_details"]["score"] == value
                assert got[f"{name}/{metric}"]["score_details"]["uncertainty"]["num_samples"] == res["n"]
    # the instance records beside it: one per item that is right or wrong, tied to the task's first result
    lines = [json.loads(line) for line in out.with_name(out.stem + "_samples.jsonl").read_text().splitlines()]
    graded = [s for s in read_lines(every_suite / "samples.jsonl") if isinstance(s.get("correct"), bool)
              and not s.get("error") and not s.get("skipped")]
    assert len(lines) == len(graded) == doc["detailed_evaluation_results"]["total_rows"]
    assert {(x["evaluation_name"], x["sample_id"], x["evaluation"]["is_correct"]) for x in lines} == \
        {(s["task"], s["id"], s["correct"]) for s in graded}
    assert doc["detailed_evaluation_results"]["file_path"] == f"data/econeval/fake/m/{out.stem}_samples.jsonl"
    rc, _, err = cli("export", every_suite, "--format", "every-eval-ever", "--out", out)  # an earlier record is replaced
    assert rc == 0, err
    # the backend is no developer: nothing in a fake run names one, so it is "unknown" and the id flat
    info = json.loads(out.read_text())["model_info"]
    assert (info["id"], info["developer"]) == ("m", "unknown") and "inference_engine" not in info
    rc, _, err = cli("export", every_suite, "--format", "every-eval-ever", "--developer", "fake-lab", "--out", out)
    assert rc == 0, err
    info = json.loads(out.read_text())["model_info"]
    assert (info["id"], info["developer"]) == ("fake-lab/m", "fake-lab")
    for bad in ("", "a/b"):
        rc, _, err = cli("export", every_suite, "--format", "every-eval-ever", "--developer", bad, "--out", out)
        assert rc == 2 and "--developer" in err and len(err.strip().splitlines()) == 1, err
    rc, _, err = cli("export", every_suite, "--format", "table", "--developer", "x", "--out", tmp_path / "r.csv")
    assert rc == 2 and "every-eval-ever" in err, err


@pytest.fixture(scope="module")
def organised_gguf_run(tmp_path_factory):
    """A llama.cpp run of a GGUF that names its organisation, base name and size (as converted
    models do), in a folder of its own."""
    from conftest import run_cli_inprocess
    from tiny_gguf import write_tiny_llama

    root = tmp_path_factory.mktemp("gguf-org")
    model = write_tiny_llama(root / "tiny.gguf", general={"general.organization": "TinyLab", "general.basename": "tiny-llama",
                                                          "general.size_label": "1K"})
    run = root / "run"
    rc, _, err = run_cli_inprocess("run", "--model", model, "--task", "econnli-zero", "--limit", "2", "-q", "--bootstrap", "0",
                                   "--out", run)
    assert rc == 0, err
    return run, model


def test_every_eval_ever_files_a_gguf_under_its_developer_with_the_engines_build(cli, tmp_path, organised_gguf_run):
    import llama_cpp

    run, model = organised_gguf_run
    out = _eee_path(tmp_path, "TinyLab", "tiny-llama-1K")
    rc, _, err = cli("export", run, "--format", "every-eval-ever", "--out", out)
    assert rc == 0, err
    body = out.read_text()
    info = json.loads(body)["model_info"]
    assert (info["id"], info["developer"]) == ("TinyLab/tiny-llama-1K", "TinyLab")
    assert info["inference_engine"]["version"] == llama_cpp.__version__ == json.loads((run / "run.json").read_text())["backend"]["llama_cpp_python"]
    assert info["additional_details"]["sha256"] and str(model) not in body and str(model.parent) not in body  # no local path
    # the option wins over the GGUF's metadata
    rc, _, err = cli("export", run, "--format", "every-eval-ever", "--developer", "other", "--out", out)
    assert rc == 0, err
    assert json.loads(out.read_text())["model_info"]["id"] == "other/tiny-llama-1K"


def _python312() -> str | None:
    """A Python >= 3.12 for the every-eval-ever validator (pyenv's where the PATH has none)."""
    import glob
    import os
    import shutil
    import subprocess

    candidates = [shutil.which(n) for n in ("python3.13", "python3.12")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")))
    for c in filter(None, candidates):
        try:
            ok = subprocess.run([c, "-c", "import sys; assert sys.version_info >= (3, 12)"], capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if ok.returncode == 0:
            return c
    return None


@pytest.fixture(scope="module")
def eee_validator(tmp_path_factory):
    import subprocess

    python = _python312()
    if python is None:
        pytest.skip("no Python >= 3.12 here: the every-eval-ever validator needs one")
    venv = tmp_path_factory.mktemp("eee") / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
    got = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "every-eval-ever==0.3.0"],
                         capture_output=True, text=True, timeout=900)
    assert got.returncode == 0, got.stderr[-2000:]
    return venv / "bin" / "python"


@pytest.mark.slow  # a Python 3.12 environment with the every-eval-ever package
def test_every_eval_ever_records_pass_the_packages_own_validator(cli, tmp_path, every_suite, eee_validator, organised_gguf_run):
    import subprocess

    sample = tmp_path / "sample"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--task", "steer-me", "--sample", "80", "-q",
                     "--out", sample)
    assert rc == 0, err
    outs = [_eee_path(tmp_path), _eee_path(tmp_path), _eee_path(tmp_path, "TinyLab", "tiny-llama-1K")]
    for run, out, more in zip((every_suite, sample, organised_gguf_run[0]), outs, (["--developer", "fake"],) * 2 + ([],)):
        rc, _, err = cli("export", run, "--format", "every-eval-ever", "--out", out, *more)
        assert rc == 0, err
    assert any("confidence_interval" in r["score_details"].get("uncertainty", {})
               for r in json.loads(outs[1].read_text())["evaluation_results"])
    files = [str(p.relative_to(tmp_path)) for p in sorted((tmp_path / "data").rglob("*.json*"))]
    assert len(files) == 6  # three records, each with its instance records
    check = subprocess.run([str(eee_validator), "-m", "every_eval_ever.validator.validate", "--format", "json", *files],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    # exit 0: valid and merge-ready (2: valid with warnings, such as an id filed under another developer's folder)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-2000:]
    # a record whose developer nothing names is filed honestly as "unknown": the validator says it is not merge-ready
    flat = _eee_path(tmp_path / "flat", "unknown", "m")
    rc, _, err = cli("export", every_suite, "--format", "every-eval-ever", "--out", flat)
    assert rc == 0, err
    check = subprocess.run([str(eee_validator), "-m", "every_eval_ever.validator.validate", "--format", "json",
                            str(flat.relative_to(tmp_path / "flat"))], capture_output=True, text=True, timeout=300, cwd=tmp_path / "flat")
    assert check.returncode == 2 and "model_info" in check.stdout, check.stdout[-3000:]


@pytest.mark.slow  # a Python 3.12 environment with the every-eval-ever package
def test_every_eval_ever_converts_and_validates_the_lm_eval_export(cli, tmp_path, every_suite, eee_validator, organised_gguf_run):
    """Every Eval Ever's own `convert lm_eval` reads the lm-eval export (it refused a bare model
    name: "model_info.developer is required"), and its validator passes what it writes."""
    import subprocess

    tool = eee_validator.with_name("every_eval_ever")
    cases = [(organised_gguf_run[0], [], "TinyLab/tiny-llama-1K"), (every_suite, ["--developer", "fake-lab"], "fake-lab/m")]
    for n, (run, more, model) in enumerate(cases):
        out = tmp_path / f"results-{n}.json"
        rc, _, err = cli("export", run, "--format", "lm-eval", *more, "--out", out)
        assert rc == 0, err
        got = subprocess.run([str(tool), "convert", "lm_eval", "--log_path", str(out), "--output_dir", f"data-{n}/data"],
                             capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert got.returncode == 0, got.stdout[-2000:] + got.stderr[-2000:]
        files = sorted(str(p.relative_to(tmp_path / f"data-{n}")) for p in (tmp_path / f"data-{n}").rglob("*.json"))
        # one record per task with a number (econnli-cot: every answer unparsed, no number to convert)
        numbers = [t for t, r in json.loads(out.read_text())["results"].items() if any(k.endswith(",none") for k in r)]
        assert len(files) == len(numbers) > 0, (files, numbers)
        assert {json.loads((tmp_path / f"data-{n}" / f).read_text())["model_info"]["id"] for f in files} == {model}
        check = subprocess.run([str(tool), "validate", "--format", "json", *files], capture_output=True, text=True,
                               timeout=300, cwd=tmp_path / f"data-{n}")
        assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-2000:]
