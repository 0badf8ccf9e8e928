import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from econeval.config import cache_home
from tiny_gguf import CHAT_TEMPLATE, write_tiny_llama

REPO = Path(__file__).resolve().parent.parent
REAL_CACHE = cache_home()  # before the fixtures below point the cache at a temporary folder


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, cache_dir, monkeypatch):
    """Runs, caches and user config never touch the real user folders."""
    monkeypatch.setenv("ECONEVAL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ECONEVAL_CACHE", str(cache_dir))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("ECONEVAL_MODELS", raising=False)
    monkeypatch.delenv("ECONEVAL_DATA_DIR", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)  # text output at a pipe's width (no limit), whatever the shell exports


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("models") / "tiny.gguf")


@pytest.fixture(scope="session")
def tiny_chat_model(tmp_path_factory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("models") / "tiny-chat.gguf", chat_template=CHAT_TEMPLATE)


@pytest.fixture
def tiny_registry(tmp_path, tiny_model):
    """Environment with ECONEVAL_MODELS naming a registry whose default is the tiny model."""
    reg = tmp_path / "models.toml"
    reg.write_text(f'default = "tiny"\n[models.tiny]\npath = "{tiny_model}"\nn_ctx = 2048\nchat = "off"\n')
    return {"ECONEVAL_MODELS": str(reg)}


def read_lines(path):
    """The JSON objects of a JSON Lines file."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def run_cli(*args, env=None, timeout=600):
    """The real CLI in a subprocess: exit code, stdout, stderr."""
    proc = subprocess.run([sys.executable, "-m", "econeval", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout, cwd=REPO)
    return proc.returncode, proc.stdout, proc.stderr


def run_cli_inprocess(*args, env=None, timeout=None):
    """The real CLI (`econeval.cli.main`, as `python -m econeval` runs it) in this process:
    exit code, stdout, stderr; sys.argv, the working folder, the environment and the signal
    handlers as a subprocess would have them, and restored after. An environment naming plugins
    (ECONEVAL_PLUGINS) needs a fresh process: the registry discovers once per process."""
    import signal

    from click.testing import CliRunner

    from econeval.cli import main

    if env and "ECONEVAL_PLUGINS" in env:
        return run_cli(*args, env=env, timeout=timeout or 600)
    argv = [str(a) for a in args]
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    old_argv, old_cwd = sys.argv, os.getcwd()
    with CliRunner().isolation(env=env) as (out, err, _):
        sys.argv = [str(REPO / "econeval" / "__main__.py"), *argv]  # the program as `python -m econeval` names it
        os.chdir(REPO)
        try:
            main(argv)
            rc = 0
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # what the interpreter does with an exception main lets through (--debug)
            import traceback

            traceback.print_exc()
            rc = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.argv = old_argv
            os.chdir(old_cwd)
            for s, h in handlers.items():
                signal.signal(s, h)
        return rc, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace")


@pytest.fixture
def cli():
    """The CLI in-process (most tests: orchestration, errors, files); `cli_process` for what
    needs a process of its own (signals, a crash, plugins)."""
    return run_cli_inprocess


@pytest.fixture
def cli_process():
    return run_cli


# ---- runs and folders the audit tests make ----
def one_line(rc, out, err, code, *needles):
    assert rc == code, (rc, out, err)
    lines = [l for l in err.splitlines() if l.strip() and not l.startswith(("econeval: run folder ", "econeval: model "))]
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def peak_rss_mib(args, env) -> tuple[float, str]:
    """Run `econeval ARGS` in a fresh wrapper process; its peak memory (MiB) and stderr."""
    code = ("import resource, subprocess, sys\n"
            "p = subprocess.run([sys.executable, '-m', 'econeval', *sys.argv[1:]], capture_output=True, text=True)\n"
            "sys.stderr.write(p.stderr)\nprint(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)")
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **env}, timeout=300)
    return float(proc.stdout.strip()), proc.stderr


def fake_run(cli, out, model="fake:a", n=50, extra=()):
    rc, _, err = cli("run", "--model", model, "--task", "econnli-zero", "--limit", str(n), "--out", out, "-q",
                     "--bootstrap", "0", *extra)
    assert rc == 0, err
    return out


def edit_samples(folder: Path, change) -> None:
    rows = read_lines(folder / "samples.jsonl")
    kept = [r for r in (change(r) for r in rows) if r is not None]
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))


def scored_folder(cli, tmp_path, name):
    from econeval import data

    rows = data.load("econlogicqa", "test.jsonl")[:20]
    pred = tmp_path / f"{name}.jsonl"
    pred.write_text("".join(json.dumps({"id": r["id"], "response": " " + r["answer"]}) + "\n" for r in rows))
    out = tmp_path / name
    assert cli("score", "--task", "econlogicqa-1shot", "--predictions", pred, "--out", out)[0] == 0
    return out
