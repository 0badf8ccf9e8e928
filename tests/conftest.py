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


@pytest.fixture
def cli():
    return run_cli
