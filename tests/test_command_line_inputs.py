"""Command-line, config and model inputs that used to crash, hang or surprise: one line and exit 2
each; roles named twice; the command line over the config file."""

from __future__ import annotations

import json
import os
import sys
import time

from conftest import REPO, one_line


def test_a_role_named_twice_is_refused(cli, tmp_path):
    rc, _, err = cli("run", "--model", "fake:a", "--task", "econnli-gen", "--role", "judge=fake:j1", "--role", "judge=fake:j2",
                     "--limit", "2", "--out", tmp_path / "r", "-q")
    assert rc == 2 and "given twice" in err


def test_the_command_lines_judge_wins_over_the_config_files(cli, tmp_path):
    conf = tmp_path / "c.toml"
    conf.write_text('[run.roles]\njudge = "fake:j1"\n')
    out = tmp_path / "r"
    rc, _, err = cli("run", "--model", "fake:a", "--task", "econnli-gen", "--config", conf, "--judge", "fake:j2", "--limit", "2",
                     "--out", out, "-q")
    assert rc == 0, err
    assert json.loads((out / "run.json").read_text())["roles"]["judge"]["name"] == "j2"


def test_models_and_paths_that_used_to_crash(cli, tmp_path):
    sys.path.insert(0, str(REPO / "tests"))
    from tiny_gguf import write_tiny_llama

    big = write_tiny_llama(tmp_path / "bigctx.gguf", shapes={"ctx": 2**32 - 1})
    rc, _, err = cli("run", "--model", big, "--task", "econnli-zero", "--limit", "2", "--quiet", "--out", tmp_path / "r")
    assert rc == 0, err
    for name, tpl, needle in (("badtpl", "{% for m in messages %}{{ m['content'] }", "TemplateSyntaxError"),
                              ("raises", "{{ raise_exception('no users') }}", "no users")):
        m = write_tiny_llama(tmp_path / f"{name}.gguf", chat_template=tpl)
        one_line(*cli("run", "--model", m, "--task", "steer-me", "--limit", "1", "--chat", "on", "--quiet",
                      "--out", tmp_path / name), 1, "chat template", needle)
        meta = json.loads((tmp_path / name / "run.json").read_text())
        assert meta["status"] == "failed" and "chat template" in meta["error"]


def test_a_config_or_model_file_that_never_ends_is_refused_not_read_forever(tmp_path, tiny_model):
    from conftest import run_cli

    fifo = tmp_path / "eval.toml"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    one_line(*run_cli("run", "--config", fifo, timeout=60), 2, "--config", "not a regular file")
    one_line(*run_cli("run", "--config", "/dev/zero", timeout=60), 2, "--config /dev/zero", "not a regular file")
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * (2 << 20) + "\n")
    one_line(*run_cli("run", "--config", big, timeout=60), 2, "larger than 1,048,576 bytes")
    deep = tmp_path / "deep.toml"
    deep.write_text("[run]\nlimit = " + "[" * 100_000 + "]" * 100_000 + "\n")
    one_line(*run_cli("run", "--config", deep, timeout=60), 2, "nests its tables or arrays too deeply")
    model_fifo = tmp_path / "m.gguf"
    os.mkfifo(model_fifo)
    reg = tmp_path / "models.toml"
    reg.write_text(f'[models.f]\npath = "{model_fifo}"\n')
    env = {"ECONEVAL_MODELS": str(reg)}
    one_line(*run_cli("models", "check", "f", env=env, timeout=60), 1, "not a regular file")
    one_line(*run_cli("run", "--model", "f", "--task", "econnli-zero", "--limit", "1", "--out", tmp_path / "r", env=env,
                      timeout=60), 1, "not a regular file")
    assert time.monotonic() - t0 < 55


def test_sample_budget_and_config_numbers_that_would_surprise_are_refused(cli, tmp_path):
    base = ("run", "--model", "fake:m", "--task", "econnli-zero", "--quiet")
    for value, needle in (("1.0", "a fraction below 1"), ("1e30", "from 1 to 1,000,000,000"), ("2e2", "a whole number of items"),
                          ("inf", "a whole number"), ("-3", "a whole number")):
        one_line(*cli(*base, "--sample", value, "--out", tmp_path / "s"), 2, f"--sample {value}", needle)
    assert not (tmp_path / "s").exists()
    one_line(*cli(*base, "--budget", "1e999", "--out", tmp_path / "b"), 2, "a finite duration above 0")
    one_line(*cli(*base, "--budget", "1e-9", "--out", tmp_path / "b"), 1, "nothing was evaluated", "econnli-zero")
    for line, needle in (("limit = 1.5", "limit must be a whole number, not 1.5"), ("limit = true", "limit must be a whole number"),
                         ('quiet = "yes"', "quiet must be true or false")):
        cfg = tmp_path / "eval.toml"
        cfg.write_text(f'[run]\nmodel = "fake:m"\ntasks = ["econnli-zero"]\n{line}\n')
        one_line(*cli("run", "--config", cfg, "--out", tmp_path / "c"), 2, needle)
    rc, out, err = cli(*base, "--sample", "4", "--out", tmp_path / "ok")
    assert rc == 0 and "(estimates: 4 of 1,026 items)" in out, err


def test_a_value_with_a_line_break_keeps_the_error_on_one_line(cli, tmp_path):
    line = one_line(*cli("run", "--model", "fake:m", "--task", "econnli-cot", "-T", "cot_parse=x\ny", "--out", tmp_path / "r"), 2,
                    "cot_parse")
    assert "x\\ny" in line
