"""Bad input: one clear line on stderr, a non-zero exit code, never a traceback."""

import shutil

import pytest

from econeval import data


def assert_clean_failure(rc, out, err, code, *needles):
    assert rc == code, (rc, out, err)
    assert "Traceback" not in err
    progress = ("econeval: run folder ", "econeval: model ")  # what a run says before it fails
    lines = [l for l in err.splitlines() if l.strip() and not l.startswith(progress)]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]


def test_an_unknown_model_file_and_an_unknown_model_name_exit_alike(cli, tmp_path):
    assert_clean_failure(*cli("run", "--model", tmp_path / "nope.gguf", "--limit", "1"), 2, "model file not found")
    assert_clean_failure(*cli("run", "--model", "no-such-model", "--limit", "1"), 2, "unknown model 'no-such-model'")


def test_option_names_get_did_you_mean(cli, tmp_path, tiny_model):
    rc, _, err = cli("run", "--model", tiny_model, "--task", "econnli-zero", "-T", "cot_pars=released-llama", "--limit", "1")
    assert rc == 2 and "did you mean 'cot_parse'?" not in err  # not an option of econnli-zero: it names the task's own
    rc, _, err = cli("run", "--model", tiny_model, "--task", "econnli-cot", "-T", "cot_pars=released-llama", "--limit", "1")
    assert rc == 2 and "did you mean 'cot_parse'?" in err, err
    rc, _, err = cli("run", "--model", tiny_model, "--task", "econnli-zero", "-M", "paralel=2", "--limit", "1")
    assert rc == 2 and "did you mean 'parallel'?" in err, err


def test_a_commands_own_conflict_is_named_before_its_model_flags_are_read(cli, tmp_path):
    """run's --new with --out and gate's --replay with --model are the first thing said, even when
    the model's flags (-M, --role) are malformed too."""
    assert_clean_failure(*cli("run", "--new", "--out", tmp_path / "x", "-M", "bad", "--role", "bad"), 2, "--new and --out together")
    base = tmp_path / "base"
    assert cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "2", "--quiet", "--out", base)[0] == 0
    assert_clean_failure(*cli("gate", base, "--replay", base, "--model", "fake:m", "-M", "bad", "--role", "bad"), 2,
                         "--replay with --model, --out or --budget")
    assert_clean_failure(*cli("run", "--model", "fake:m", "-T", "bad", "-M", "bad"), 2, "-T bad: expected NAME=VALUE")


def test_file_that_is_not_gguf(cli, tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_text("this is not a model")
    assert_clean_failure(*cli("run", "--model", bad, "--limit", "1"), 1, "is not a GGUF file")


def test_truncated_gguf(cli, tmp_path, tiny_model):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_model.read_bytes()[: tiny_model.stat().st_size // 2])
    assert_clean_failure(*cli("run", "--model", cut, "--task", "econnli-zero", "--limit", "1", "--out", tmp_path / "r"), 1, "could not load")


def test_unknown_task_and_suite_and_model(cli):
    assert_clean_failure(*cli("run", "--task", "econnli-fivehundred"), 2, "unknown task 'econnli-fivehundred'")
    assert_clean_failure(*cli("run", "--suite", "astrology"), 2, "unknown suite 'astrology'")
    assert_clean_failure(*cli("run", "--model", "gpt-17"), 2, "unknown model 'gpt-17'")
    assert_clean_failure(*cli("score", "--task", "nope", "--predictions", "x.jsonl"), 2, "unknown task")


def _copy_data(tmp_path):
    dst = tmp_path / "data"
    shutil.copytree(data.data_dir(), dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def test_dataset_not_built(cli, tmp_path, tiny_model):
    dst = _copy_data(tmp_path)
    (dst / "econnli" / "test.jsonl").unlink()
    rc, out, err = cli("run", "--model", tiny_model, "--task", "econnli-zero", "--limit", "1",
                       env={"ECONEVAL_DATA_DIR": str(dst)})
    assert_clean_failure(rc, out, err, 1, "not built", "econeval data build econnli")


def test_dataset_failing_its_hash(cli, tmp_path, tiny_model):
    dst = _copy_data(tmp_path)
    p = dst / "econnli" / "test.jsonl"
    p.write_bytes(p.read_bytes().replace(b'"label":1', b'"label":0', 1))
    env = {"ECONEVAL_DATA_DIR": str(dst)}
    assert_clean_failure(*cli("run", "--model", tiny_model, "--task", "econnli-zero", "--limit", "1", env=env),
                         1, "does not match its manifest")
    rc, out, err = cli("data", "verify", env=env)
    assert rc == 1 and "econnli/test.jsonl: mismatch" in err


@pytest.mark.parametrize("content,needle", [
    ('{"id": "econnli/test/0", "response": "Yes"}\n{not json\n', "pred.jsonl:2: not valid JSON"),
    ('{"id": "econnli/test/999999", "response": "Yes"}\n', "unknown id 'econnli/test/999999'"),
    ('{"id": "econnli/test/0"}\n', "needs a string field 'response'"),
    ('[1, 2]\n', "each line must be a JSON object"),
    ('{"id": "econnli/test/0", "response": "Yes"}\n{"id": "econnli/test/0", "response": "No"}\n', "appears twice"),
    ('', "holds no predictions"),
])
def test_malformed_predictions(cli, tmp_path, content, needle):
    p = tmp_path / "pred.jsonl"
    p.write_text(content)
    assert_clean_failure(*cli("score", "--task", "econnli-zero", "--predictions", p), 2, needle)


def test_missing_predictions_file(cli, tmp_path):
    assert_clean_failure(*cli("score", "--task", "econnli-zero", "--predictions", tmp_path / "none.jsonl"), 2, "cannot read")


def test_unknown_key_in_registry(cli, tmp_path):
    reg = tmp_path / "models.toml"
    reg.write_text('[models.x]\npath = "x.gguf"\ncolour = "blue"\n')
    assert_clean_failure(*cli("models", "list", env={"ECONEVAL_MODELS": str(reg)}), 2, "backend llamacpp has no option 'colour'")


def test_debug_shows_the_traceback(cli, tmp_path):
    rc, out, err = cli("--debug", "run", "--model", tmp_path / "nope.gguf")
    assert rc != 0 and "Traceback" in err


def test_usage_error_exit_code(cli):
    rc, out, err = cli("run", "--limit", "zero")
    assert rc == 2 and "Traceback" not in err


def test_a_near_miss_name_gets_a_did_you_mean(cli, tmp_path):
    assert_clean_failure(*cli("run", "--task", "econnli-zer0", "--out", tmp_path / "a"), 2, "did you mean 'econnli-zero'")
    assert_clean_failure(*cli("run", "--suite", "econlogic", "--out", tmp_path / "b"), 2, "did you mean 'econlogicqa'")
    assert_clean_failure(*cli("run", "--model", "gemma3-207m", "--out", tmp_path / "c"), 2, "did you mean 'gemma3-270m'")


def test_debug_after_the_subcommand_shows_the_traceback_of_the_error_itself(cli, tmp_path):
    rc, out, err = cli("run", "--model", tmp_path / "nope.gguf", "--debug")
    assert rc != 0 and "Traceback" in err and "model file not found" in err and "No such option" not in err
    rc, out, err = cli("run", "--model", tmp_path / "nope.gguf")  # without it: one line
    assert_clean_failure(rc, out, err, 2, "model file not found")


def test_bare_econeval_prints_its_help_laid_out(cli):
    rc, out, err = cli()
    assert rc == 2 and "Traceback" not in err
    lines = err.splitlines()
    assert lines[0].startswith("Usage: econeval") and len(lines) > 20 and "econeval: error" not in err
    assert any(line.strip().startswith("run ") for line in lines)  # the commands, one a line


def test_the_help_quick_start_runs_on_an_installed_econeval_and_names_the_environment():
    """The help's quick start is what a user who installed the wheel types (the data step and the
    README's command 1's run, each a command this econeval accepts), and it does not call itself
    the README's command 1, which is `tools/bootstrap.sh && .venv/bin/econeval run ...` in a checkout."""
    import re

    import click

    from conftest import REPO
    from econeval.cli import ENVIRONMENT, QUICK_DATA, QUICK_START, cli as group

    readme = (REPO / "README.md").read_text()
    command_1 = re.search(r"# 1\..*?\n(?:#.*\n)*(.*econeval run[^\n]*)", readme).group(1)
    run_args = QUICK_START.split("econeval run", 1)[1].split()
    assert run_args == command_1.split("econeval run", 1)[1].split(), (QUICK_START, command_1)
    assert "--limit 2" not in group.help and QUICK_START in group.help and QUICK_DATA in group.help
    assert "README" not in group.help or command_1 in group.help  # no claim to be a text it is not
    for line in (QUICK_DATA, QUICK_START):
        words = line.split()[1:]
        cmd: click.Command = group
        while isinstance(cmd, click.Group):
            cmd = cmd.commands[words.pop(0)]
        cmd.make_context(line, words)  # parses: a command and options this econeval has
    # every variable econeval reads is in the help and in docs/using.md
    source = "".join(p.read_text() for p in (REPO / "econeval").rglob("*.py"))
    read = set(re.findall(r'environ(?:\.get)?\(\s*"(ECONEVAL_[A-Z_]+)"', source))
    assert read >= {"ECONEVAL_HOME", "ECONEVAL_CACHE", "ECONEVAL_DATA_DIR", "ECONEVAL_DEBUG", "ECONEVAL_MODELS", "ECONEVAL_PLUGINS"}
    using = (REPO / "docs" / "using.md").read_text()
    for name in read:
        assert name in ENVIRONMENT and f"`{name}`" in using, name


def test_an_empty_data_dir_is_refused_in_one_line(cli):
    for args in (("--version",), ("data", "build"), ("list",)):
        rc, out, err = cli(*args, env={"ECONEVAL_DATA_DIR": ""})
        if args == ("list",):  # reads no data: it still works
            assert rc == 0, err
            continue
        assert_clean_failure(rc, out, err, 2, "ECONEVAL_DATA_DIR is set but empty")
        assert "complete" not in out


def test_out_dash_writes_standard_output_and_no_file_named_dash(cli, tmp_path, monkeypatch):
    import json

    run = tmp_path / "run"
    rc, out, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "3", "-q", "--json", "--out", run)
    assert rc == 0, err
    assert json.loads(out)["run_folder"] == str(run)  # a script's next command needs the folder
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli("export", run, "--format", "lm-eval", "--out", "-")
    assert rc == 0 and json.loads(out)["results"]["econnli-zero"]["sample_len"] == 3, err
    rc, out, err = cli("export", run, "--format", "table", "--out", "-")
    assert rc == 0 and out.startswith("run,model,") and len(out.splitlines()) == 1 + 3, err
    rc, out, err = cli("report", run, "--format", "json", "--out", "-")
    assert rc == 0 and json.loads(out), err
    rc, out, err = cli("data", "export", "econnli-zero", "--prompts", "--limit", "2")  # no --out: standard output
    assert rc == 0 and [json.loads(line)["id"] for line in out.splitlines()] == ["econnli/test/0", "econnli/test/1"], err
    rc, out, err = cli("data", "export", "econnli", "--out", "-")
    assert rc == 0 and len(out.splitlines()) == 1026, err
    assert_clean_failure(*cli("export", run, "--format", "inspect", "--out", "-"), 2, "folder of logs")
    assert not (tmp_path / "-").exists() and not any(p.name == "-" for p in (tmp_path / "run").iterdir())


def test_shell_completion_offers_task_suite_and_model_names(cli_process):
    def complete(*words):
        env = {"_ECONEVAL_COMPLETE": "bash_complete", "COMP_WORDS": " ".join(("econeval", *words)), "COMP_CWORD": str(len(words))}
        rc, out, err = cli_process(env=env)
        assert rc == 0, err
        return [line.split(",", 1) for line in out.splitlines()]

    assert ["plain", "econnli-zero"] in complete("run", "--task", "econnli-") and \
        all(v.startswith("econnli-") for _, v in complete("run", "--task", "econnli-"))
    assert {v for _, v in complete("run", "--suite", "")} >= {"econnli", "econlogicqa", "cfbenchmark", "steer-me", "all"}
    models = complete("run", "--model", "gem")
    assert ["plain", "gemma3-270m"] in models and ["file", "gem"] in models  # a registry name, and files
    assert ["plain", "openai:"] in complete("gate", "base", "--model", "open")
    assert {v for _, v in complete("data", "export", "econlogicqa")} == {"econlogicqa", "econlogicqa-1shot", "econlogicqa-5shot"}


def test_the_public_api_is_listed():
    import econeval

    assert set(econeval.__all__) >= {"evaluate", "score_predictions", "export_prompts", "Full", "Limit", "StratifiedSample",
                                     "Shard", "from_flags", "__version__"}
    assert set(econeval.__all__) <= set(dir(econeval))
    for name in econeval.__all__:
        assert getattr(econeval, name) is not None


def test_a_signal_while_an_error_is_being_said_exits_as_the_signal_without_a_traceback(cli, tmp_path, monkeypatch):
    """Three processes racing for one folder, each sent a signal at random (test_run_folder's
    stress test): a loser's SIGINT came while it was saying its own error, and the Interrupted it
    raised inside the error handler escaped main: a traceback and exit 1. It now exits 130 in one line."""
    import signal

    import click

    from econeval.errors import Interrupted

    real = click.echo

    def echo(message=None, *args, **kwargs):
        if isinstance(message, str) and message.startswith("econeval: error"):
            raise Interrupted(signal.SIGINT)  # the signal arrives as the error is being written
        return real(message, *args, **kwargs)

    monkeypatch.setattr(click, "echo", echo)
    rc, out, err = cli("run", "--model", str(tmp_path / "missing.gguf"), "--task", "econnli-zero", "--limit", "1")
    assert rc == 130 and "Traceback" not in err and err.strip() == "econeval: interrupted by SIGINT", (rc, err)


def test_a_signal_a_library_wrapped_in_its_own_error_exits_as_the_signal(cli, monkeypatch):
    """The same stress test: a SIGINT while llama-cpp-python loaded its library became its
    RuntimeError("Failed to load shared library ...: interrupted by SIGINT"), said as an internal
    error with exit 1. The Interrupted under a library's error is the exit: 130, one line."""
    import signal

    from econeval import registry
    from econeval.errors import Interrupted

    def load(*args, **kwargs):
        try:
            raise Interrupted(signal.SIGINT)
        except Exception as exc:  # what llama_cpp._ctypes_extensions.load_shared_library does
            raise RuntimeError(f"Failed to load shared library 'libllama.so': {exc}")

    monkeypatch.setattr(registry, "tasks", load)
    rc, out, err = cli("list")
    assert rc == 130 and err.strip() == "econeval: interrupted by SIGINT", (rc, err)
