"""`econeval run` end to end on the tiny model: the run folder, resuming, refusing a mixed run."""

import json

import pytest

from conftest import read_lines

from econeval.registry import tasks

TASKS = tasks()


@pytest.fixture
def registry(tiny_registry):
    return tiny_registry


lines = read_lines


ARGS = ("run", "--task", "econnli-zero", "--task", "econlogicqa-1shot", "--limit", "3", "--quiet")


def test_run_writes_the_run_folder(cli, tmp_path, registry):
    out = tmp_path / "run"
    rc, stdout, err = cli(*ARGS, "--out", out, env=registry)
    assert rc == 0, err
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "complete" and meta["seed"] == 1234
    assert meta["backend"]["model"]["name"] == "tiny" and len(meta["backend"]["model"]["sha256"]) == 64
    assert meta["tasks"]["econnli-zero"]["prompt_version"] == TASKS["econnli-zero"].prompt_version
    assert meta["tasks"]["econnli-zero"]["dataset"]["version"] == "1.0.0"
    assert meta["tasks"]["econlogicqa-1shot"]["settings"]["shots"] == "per-item"  # drawn per item (ids: shots_for)
    assert meta["backend"]["device"] == "cpu" and "schedule" in meta["backend"]
    samples = lines(out / "samples.jsonl")
    assert [s["id"] for s in samples] == [f"econnli/test/{i}" for i in range(3)] + [f"econlogicqa/test/{i}" for i in range(3)]
    s0 = samples[0]
    assert {"id", "task", "prompt_hash", "response", "parsed", "gold", "correct", "option_logprobs"} <= set(s0)
    res = json.loads((out / "results.json").read_text())["tasks"]
    assert res["econnli-zero"]["n"] == 3 and set(res["econnli-zero"]["paper"]) >= {"Negative Pairs", "Positive Pairs", "Average"}
    assert res["econnli-zero"]["n_scored"] + res["econnli-zero"]["n_unparsed"] == 3
    assert "logprob" in res["econnli-zero"]["extras"]
    assert res["econlogicqa-1shot"]["n"] == 3
    assert "econnli-zero" in stdout and "econlogicqa-1shot" in stdout  # the summary table


def test_interrupted_run_resumes_to_the_same_results(cli, tmp_path, registry):
    out = tmp_path / "run"
    assert cli(*ARGS, "--out", out, env=registry)[0] == 0
    first = (out / "results.json").read_text()
    samples = (out / "samples.jsonl").read_bytes().splitlines(keepends=True)
    # a crash: the last two items never finished, one line torn in half
    (out / "samples.jsonl").write_bytes(b"".join(samples[:-2]) + samples[-2][:20])
    (out / "results.json").unlink()
    rc, _, err = cli(*ARGS, "--out", out, env=registry)
    assert rc == 0, err
    assert len(lines(out / "samples.jsonl")) == 6
    assert (out / "results.json").read_text() == first
    assert json.loads((out / "run.json").read_text())["resumed"] == 1


def test_a_different_run_into_the_same_folder_is_refused(cli, tmp_path, registry):
    out = tmp_path / "run"
    assert cli(*ARGS, "--out", out, env=registry)[0] == 0
    before = (out / "samples.jsonl").read_bytes()
    rc, _, err = cli(*ARGS, "--seed", "7", "--out", out, env=registry)
    assert rc == 2 and "holds a different run" in err
    assert (out / "samples.jsonl").read_bytes() == before  # nothing lost


def test_progress_line_on_stderr(cli, tmp_path, registry):
    rc, _, err = cli("run", "--task", "econnli-zero", "--limit", "3", "--out", tmp_path / "r", env=registry)
    assert rc == 0
    line = [l for l in err.splitlines() if l.startswith("econnli-zero: 3/3")]
    assert line and "items/s" in line[0] and "ETA" in line[0]
    assert "tokens/s" in line[0] and "elapsed" in line[0]
    assert any(l.startswith("econeval: run folder ") and "loading model tiny" in l for l in err.splitlines())
    import llama_cpp

    where = "on CUDA" if llama_cpp.llama_supports_gpu_offload() else "on CPU (no GPU offload: a CPU build)"
    assert any(l.startswith("econeval: model tiny loaded") and where in l and "parallel 8" in l for l in err.splitlines()), err


def test_gpu_layers_on_a_build_without_offload_warn_loudly(cli, tmp_path, registry):
    import llama_cpp

    if llama_cpp.llama_supports_gpu_offload():
        pytest.skip("this llama.cpp build offloads to a GPU")
    rc, _, err = cli("run", "--task", "econnli-zero", "--limit", "1", "--n-gpu-layers", "5", "--quiet",
                     "--out", tmp_path / "r", env=registry)
    assert rc == 0 and "warning: n_gpu_layers was given but this llama.cpp build has no GPU offload" in err
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["backend"]["device"] == "cpu" and meta["backend"]["n_gpu_layers"] == 0
    assert meta["backend"]["device_note"] == "CPU (no GPU offload: a CPU build)"


def test_model_kind_and_backend_options_in_the_registry(cli, tmp_path, tiny_model):
    reg = tmp_path / "models.toml"
    reg.write_text(f'[models.tiny]\nkind = "llamacpp"\npath = "{tiny_model}"\n[models.tiny.options]\nparallel = 2\n')
    env = {"ECONEVAL_MODELS": str(reg)}
    rc, out, err = cli("models", "list", "--json", env=env)
    assert rc == 0, err
    models = json.loads(out)["models"]
    assert models["tiny"]["kind"] == "llamacpp" and models["tiny"]["options"] == {"path": str(tiny_model), "parallel": 2}
    other = tmp_path / "other.toml"
    other.write_text('[models.other]\nkind = "vllm"\nbase_url = "http://127.0.0.1:9"\n')
    rc, _, err = cli("run", "--model", "other", "--task", "econnli-zero", "--limit", "1", "--out", tmp_path / "r",
                     env={"ECONEVAL_MODELS": str(other)})
    assert rc == 2 and "unknown backend kind 'vllm'" in err and "llamacpp" in err and "openai" in err
    assert not (tmp_path / "r").exists()
    hosted = tmp_path / "hosted.toml"
    hosted.write_text('[models.hosted]\nbase_url = "http://127.0.0.1:9"\n')
    rc, _, err = cli("run", "--model", "hosted", "--task", "econnli-zero", "--limit", "1", "--out", tmp_path / "h",
                     env={"ECONEVAL_MODELS": str(hosted)})
    assert rc == 2 and "model 'hosted' needs api_model" in err  # the backend checks its own spec


def test_json_output_and_default_out_folder(cli, tmp_path, registry):
    rc, stdout, err = cli("run", "--task", "econnli-icl", "--limit", "2", "--json", "--quiet", env=registry)
    assert rc == 0, err
    doc = json.loads(stdout)
    assert doc["tasks"]["econnli-icl"]["n"] == 2
    runs = list((tmp_path / "home" / "runs").iterdir())
    assert len(runs) == 1 and (runs[0] / "results.json").is_file()
    samples = lines(runs[0] / "samples.jsonl")
    assert all(len(s["demonstrations"]) == 2 for s in samples)


def test_list_commands(cli, registry):
    rc, out, _ = cli("list", "--json")
    doc = json.loads(out)
    assert doc["suites"]["econnli"] == ["econnli-zero", "econnli-icl", "econnli-cot", "econnli-gen"]
    assert doc["suites"]["econlogicqa"] == ["econlogicqa-1shot", "econlogicqa-5shot"]
    rc, out, _ = cli("models", "list", env=registry)
    assert rc == 0 and "tiny" in out
    rc, out, _ = cli("--help")  # the help text is documentation: every suite is named there
    assert rc == 0 and all(s in out for s in doc["suites"] if s != "all")
    rc, out, _ = cli("run", "--help")
    assert rc == 0 and all(s in out for s in doc["suites"])


def test_each_fact_is_worked_out_once_per_run(tmp_path, tiny_model, monkeypatch):
    """A run builds each item's first-stage prompts once (the estimate's are reused), checks the
    model file's GGUF header once, and STEER-ME's intervals resample its overall numbers, which
    are the numbers its whole table gives."""
    import econeval
    from econeval import registry
    from econeval.backends import llamacpp
    from econeval.config import ModelSpec
    from econeval.types import Task

    task = registry.get_task("econnli-zero")
    built, checked = [], []
    real_requests, real_check = type(task).requests, llamacpp.check_gguf
    monkeypatch.setattr(type(task), "requests", lambda self, item, prep, out: built.append(item["id"]) or
                        real_requests(self, item, prep, out))
    monkeypatch.setattr(llamacpp, "check_gguf", lambda path: checked.append(path) or real_check(path))
    spec = ModelSpec(name="tiny", options={"path": str(tiny_model)}, n_ctx=2048, chat="off")
    econeval.evaluate(model=spec, tasks=["econnli-zero"], selection=econeval.Limit(5), out=tmp_path / "run", bootstrap=0)
    assert sorted(built) == sorted(set(built)) and len(built) == 5, built
    assert len(checked) == 1, checked
    steer = registry.get_task("steer-me")
    from econeval.store.finished import open_checked

    econeval.evaluate(model="fake:x", tasks=["steer-me"], selection=econeval.Limit(2), out=tmp_path / "steer", bootstrap=0)
    run = open_checked(tmp_path / "steer")
    recs, prep = list(run.samples["steer-me"].values()), run.preps["steer-me"]
    assert steer.numbers_of(recs, prep) == Task.numbers_of(steer, recs, prep)


def test_the_summary_on_an_80_column_terminal_breaks_between_numbers_only(cli, tmp_path):
    """A --sample run's summary line is ~180 characters: a terminal wrapped it mid-number. On a
    terminal rich lays it out: no line past 80 columns, each number with its interval whole."""
    import io

    from rich.console import Console

    from econeval.cli import summary_rows, summary_table

    out = tmp_path / "s"
    rc, stdout, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--task", "steer-me", "--sample", "40", "-q",
                          "--out", out)
    assert rc == 0, err
    assert max(len(line) for line in stdout.splitlines()) > 80  # the piped summary: one long line per task, as scripts read it
    doc = {"tasks": json.loads(next(out.glob("results-sample-*.json")).read_text())["tasks"]}
    rows = summary_rows(doc)
    buf = io.StringIO()
    Console(file=buf, width=80, highlight=False).print(summary_table(rows))
    lines = buf.getvalue().splitlines()
    assert lines and max(len(line.rstrip()) for line in lines) <= 80, buf.getvalue()
    for r in rows:
        for c in r["cells"]:
            assert "[" in c and any(c in line for line in lines), (c, buf.getvalue())
