"""The everyday flow: the same command resumes, Ctrl-C is acknowledged at once, folder refusals
come before the model loads and name the setting, a subset of a folder's tasks runs into it,
the gate cannot pass by omission, past runs are listed, a run configuration file drives run
and compare, and the Python API reports progress."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

ZERO = ("--task", "econnli-zero")


def _folders(home: Path) -> list[Path]:
    return sorted(p for p in (home / "runs").iterdir() if p.is_dir()) if (home / "runs").is_dir() else []


def test_the_same_command_resumes_its_own_folder_and_new_starts_another(cli, tmp_path, tiny_model):
    home = tmp_path / "home"
    env = {"ECONEVAL_HOME": str(home)}
    rc, _, err = cli("run", "--model", tiny_model, *ZERO, "--limit", "3", env=env)
    assert rc == 0, err
    [folder] = _folders(home)
    assert "resuming" not in err and folder.name.startswith("tiny-econnli-zero-")
    rc, _, err = cli("run", "--model", tiny_model, *ZERO, "--limit", "5", env=env)
    assert rc == 0 and _folders(home) == [folder], err
    assert f"resuming {folder}: 3 of 5 items done, 2 to run" in err
    assert len((folder / "samples.jsonl").read_text().splitlines()) == 5
    rc, _, err = cli("run", "--model", tiny_model, *ZERO, "--limit", "2", "--new", env=env)
    assert rc == 0 and len(_folders(home)) == 2 and "resuming" not in err, err
    rc, _, err = cli("run", "--model", tiny_model, *ZERO, "--limit", "2", "--seed", "7", env=env)  # another run: its own folder
    assert rc == 0 and len(_folders(home)) == 3


def _start(args, env, **kw):
    return subprocess.Popen([sys.executable, "-m", "econeval", *map(str, args)], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env}, cwd=REPO, **kw)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP])
def test_a_signal_is_acknowledged_at_once_and_what_it_says_is_saved(tmp_path, tiny_model, signum):
    out = tmp_path / "run"
    proc = _start(["run", "--model", tiny_model, "--task", "econnli-cot", "--limit", "400", "--threads", "1", "--out", out],
                  {"ECONEVAL_HOME": str(tmp_path / "home")})
    sent, acked, lines, saves = None, None, [], []
    for line in proc.stderr:
        lines.append(line)
        if sent is None and re.search(r"econnli-cot: [1-9]\d*/400 saved", line):
            saves.append(time.monotonic())
            if len(saves) == 2:  # a chunk's time measured: what "at once" is held against, on a loaded machine too
                proc.send_signal(signum)
                sent = time.monotonic()
        elif sent is not None and "stopping" in line:
            acked = time.monotonic() - sent
    proc.wait(timeout=120)
    text = "".join(lines)
    assert proc.returncode == 128 + signum, text
    # at once: well within the chunk in progress (not at its end), however slow the machine is now
    assert acked is not None and acked < max(1.0, (saves[1] - saves[0]) / 2), text
    said = re.search(r"stopping: .*?; (\d+) of 400 items are saved", text)
    final = re.search(r"interrupted by SIG\w+; run.json is marked interrupted; (\d+) of 400 items are saved", text)
    assert said and final, text
    on_disk = len((out / "samples.jsonl").read_text().splitlines())
    assert int(final.group(1)) == on_disk and int(said.group(1)) <= on_disk, text
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"


def test_a_folder_of_other_settings_is_refused_before_the_model_loads(cli, tmp_path, tiny_model):
    out = tmp_path / "run"
    assert cli("run", "--model", tiny_model, *ZERO, "--limit", "2", "-P", "2", "--out", out)[0] == 0
    rc, _, err = cli("run", "--model", tiny_model, *ZERO, "--limit", "2", "-P", "1", "--out", out)
    assert rc == 2 and "parallel: 2 in the folder, 1 now" in err, err
    assert "loading model" not in err  # refused before the model loaded


def test_some_or_more_of_a_folders_tasks_run_into_it(cli, tmp_path, tiny_model):
    out = tmp_path / "run"
    both = ("--task", "econnli-zero", "--task", "econnli-icl")
    assert cli("run", "--model", tiny_model, *both, "--limit", "2", "--quiet", "--out", out)[0] == 0
    rc, _, err = cli("run", "--model", tiny_model, "--task", "econnli-icl", "--limit", "2", "--out", out)
    assert rc == 0 and "2 of 2 items done, 0 to run" in err, err
    assert set(json.loads((out / "results.json").read_text())["tasks"]) == {"econnli-zero", "econnli-icl"}
    rc, _, err = cli("run", "--model", tiny_model, *both, "--task", "steer-me", "--limit", "2", "--quiet", "--out", out)
    assert rc == 0, err
    doc = json.loads((out / "results.json").read_text())
    assert set(doc["tasks"]) == {"econnli-zero", "econnli-icl", "steer-me"}
    meta = json.loads((out / "run.json").read_text())
    assert set(meta["tasks"]) == set(meta["identity"]["tasks"]) == {"econnli-zero", "econnli-icl", "steer-me"}
    # each task's timing is what was measured when it ran, not the zero of a later run that had nothing to do
    assert set(meta["timing"]) == {"econnli-zero", "econnli-icl", "steer-me"}
    assert all(t["items_run"] > 0 and t["seconds"] > 0 for t in meta["timing"].values()), meta["timing"]


def test_the_gate_cannot_pass_by_omission(cli, tmp_path, tiny_model):
    base, cand = tmp_path / "base", tmp_path / "cand"
    assert cli("run", "--model", tiny_model, "--task", "econnli-zero", "--task", "econnli-icl", "--limit", "6", "--quiet",
               "--out", base)[0] == 0
    assert cli("run", "--model", tiny_model, *ZERO, "--limit", "3", "-P", "2", "--quiet", "--out", cand)[0] == 0
    rc, out, err = cli("compare", base, cand)
    assert rc == 2 and "task econnli-icl (6 items)" in err and "econnli-zero: 3 of 6 items" in err, err
    rc, out, err = cli("compare", base, cand, "--allow-missing")
    assert rc == 3, err  # 3 paired items cannot rule out a drop of 0.02
    assert "dropped: econnli-icl: 6 of 6 baseline items have no candidate score (task not run)" in out
    assert "the runs differ in parallel: 8 in the baseline, 2 in the candidate" in out
    assert out.strip().splitlines()[-1].startswith("verdict: inconclusive") and "9 baseline items dropped" in out
    rc, out, _ = cli("compare", base, base, "--format", "json", "--max-drop", "0.7")
    doc = json.loads(out)
    assert rc == 0 and doc["verdict"] == "pass" and doc["dropped"] == {} and doc["differences"] == []


def test_report_and_compare_give_the_same_intervals(cli, tmp_path, tiny_model):
    a, b = tmp_path / "a", tmp_path / "b"
    for out, par in ((a, "8"), (b, "2")):
        assert cli("run", "--model", tiny_model, *ZERO, "--limit", "12", "-P", par, "--quiet", "--out", out)[0] == 0
    rc, out, _ = cli("compare", a, b, "--format", "json")
    rows = {r["metric"]: (r["low"], r["high"]) for r in json.loads(out)["rows"]}
    rc, out, _ = cli("report", a, b, "--format", "json")
    doc = json.loads(out)
    assert {r["metric"]: (r["low"], r["high"]) for r in doc["compare"][0]["rows"]} == rows
    assert [r["label"] for r in doc["runs"]] == ["tiny (parallel 8)", "tiny (parallel 2)"]  # labelled by what differs


def test_runs_lists_past_runs_and_view_writes_their_answers(cli, tmp_path, tiny_model):
    home = tmp_path / "home"
    env = {"ECONEVAL_HOME": str(home)}
    assert cli("run", "--model", tiny_model, *ZERO, "--task", "steer-me", "--limit", "2", "--quiet", env=env)[0] == 0
    rc, out, err = cli("runs", env=env)
    assert rc == 0, err
    [folder] = _folders(home)
    assert f"{folder.name}  complete  tiny  2 tasks  130 items saved" in out and re.search(r"econnli-zero\s+P \d\.\d{3}", out)
    rc, out, _ = cli("runs", "--json", env=env)
    [row] = json.loads(out)
    assert row["items_saved"] == 130 and set(row["headline"]) == {"econnli-zero", "steer-me"}
    meta = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**meta, "status": "running"}))  # killed without a word: no lock holder
    assert f"{folder.name}  stopped  tiny" in cli("runs", env=env)[1]
    (folder / "run.json").write_text(json.dumps(meta))
    page = tmp_path / "view.html"
    rc, _, err = cli("view", folder, "--out", page)
    assert rc == 0, err
    html = page.read_text()
    assert html.count('<details class="item') == 130 and 'data-group="linear_system_eq"' in html
    assert "<summary>econnli/test/0 · econnli-zero" in html and "Answer" in html  # the prompt is shown
    assert not re.search(r"(src|href)=\"?https?:", html)  # self-contained
    rc, _, err = cli("view", tmp_path / "nothing")
    assert rc == 2 and "Traceback" not in err
    # `view .` from inside the run folder writes beside it, never into it; an --out inside it is refused
    proc = subprocess.run([sys.executable, "-m", "econeval", "view", "."], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, **env})
    assert proc.returncode == 0 and (folder.parent / f"{folder.name}.view.html").is_file(), proc.stderr
    assert not (folder / ".view.html").exists()
    rc, _, err = cli("view", folder, "--out", folder / "page.html", env=env)
    assert rc == 2 and "inside the run folder" in err and not (folder / "page.html").exists()


def test_a_run_configuration_file_drives_run_and_compare(cli, tmp_path, tiny_model):
    cfg = tmp_path / "eval.toml"
    cfg.write_text(f'[run]\nmodel = "{tiny_model}"\ntasks = ["econnli-zero"]\nlimit = 4\nout = "release"\nquiet = true\n'
                   '[run.model_options]\nparallel = 2\n[gate]\nmax_drop = 0.05\n')
    rc, _, err = cli("run", "--config", cfg, "--limit", "3")  # the command line wins
    assert rc == 0, err
    meta = json.loads((tmp_path / "release" / "run.json").read_text())
    assert meta["limit"] == 3 and meta["backend"]["parallel"] == 2
    assert meta["config"]["settings"]["model_options"] == {"parallel": 2} and len(meta["config"]["sha256"]) == 64
    rc, out, _ = cli("compare", "--config", cfg, tmp_path / "release", tmp_path / "release", "--format", "json")
    assert rc == 3 and json.loads(out)["max_drop"] == 0.05  # the file's margin; 3 items cannot resolve it
    cfg.write_text('[run]\nmodle = "x"\n')
    rc, _, err = cli("run", "--config", cfg)
    assert rc == 2 and "has no key 'modle'" in err and "did you mean 'model'?" in err


def test_the_command_line_adds_to_a_configuration_files_option_tables_key_by_key(cli, tmp_path, tiny_model):
    """-T, -M and --role on the command line go over the file's tables per key; the rest of each
    table still applies (click's default_map replaced the whole table)."""
    cfg = tmp_path / "eval.toml"
    cfg.write_text(f'[run]\nmodel = "{tiny_model}"\ntasks = ["econnli-zero", "econnli-cot"]\nlimit = 2\nquiet = true\n'
                   '[run.task_options]\nprompt = "paper"\ncot_parse = "released-llama"\n'
                   '[run.model_options]\nparallel = 2\nthreads = 2\n')
    out = tmp_path / "run"
    rc, _, err = cli("run", "--config", cfg, "-T", "cot_parse=released-gpt", "-M", "threads=1", "--out", out)
    assert rc == 0, err
    meta = json.loads((out / "run.json").read_text())
    assert meta["options"]["econnli-zero"]["prompt"] == "paper" and meta["options"]["econnli-cot"]["cot_parse"] == "released-gpt"
    assert meta["backend"]["parallel"] == 2 and meta["backend"]["n_threads"] == 1


def test_a_config_files_roles_fill_roles_and_run_tables_prints_the_paper_tables(cli, tmp_path):
    cfg = tmp_path / "eval.toml"
    cfg.write_text('[run]\nmodel = "fake:writer"\ntasks = ["econnli-gen"]\nlimit = 2\nquiet = true\n'
                   '[run.roles]\njudge = "fake:critic"\n')
    out = tmp_path / "run"
    rc, text, err = cli("run", "--config", cfg, "--out", out, "--tables")
    assert rc == 0, err
    judge = json.loads((out / "run.json").read_text())["roles"]["judge"]
    assert judge["name"] == "critic" and judge["named"] is True
    assert "# econeval report" in text and "## EconNLI Table 6" in text  # --tables: the folder's paper tables
    rc, text, err = cli("run", "--config", cfg, "--out", out)
    assert rc == 0 and "# econeval report" not in text


def test_backends_list_the_roles_they_can_fill(cli):
    rc, out, err = cli("models", "options", "--json")
    assert rc == 0, err
    serves = {r["kind"]: r["serves"] for r in json.loads(out)}
    assert serves["llamacpp"] == ["model", "judge"] and serves["onnx"] == ["embedder"]


def test_the_python_api_reports_progress(tmp_path, tiny_model):
    import econeval
    from econeval.config import ModelSpec

    seen = []
    spec = ModelSpec(name="tiny", options={"path": str(tiny_model)}, n_ctx=1024, chat="off")
    econeval.evaluate(econeval.RunSpec(model=spec, progress=seen.append), ["econnli-zero", "econlogicqa-1shot"],
                      selection=econeval.Limit(20), out=tmp_path / "run")
    assert seen and seen[-1]["saved"] == seen[-1]["total"] == 40
    assert any(s["eta_s"] is not None and s["saved"] < s["total"] for s in seen)  # a run ETA once one chunk was measured
    assert {t["task"] for t in seen[-1]["tasks"]} == {"econnli-zero", "econlogicqa-1shot"}
