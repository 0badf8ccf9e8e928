"""Data packages: an altered package is refused and changes nothing, large members stream, installs
and readers run side by side, a killed install is cleaned up, Ctrl-C outside a run."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from conftest import REPO, one_line, peak_rss_mib


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    from conftest import run_cli

    out = tmp_path_factory.mktemp("pkg") / "data.tar"
    rc, _, err = run_cli("data", "pack", "--out", out)
    assert rc == 0, err
    return out


def _altered(package: Path, dest: Path, extra: dict[str, bytes] | None = None, index_edit=None, drop=()) -> Path:
    with tarfile.open(package) as src, tarfile.open(dest, "w") as out:
        for m in src.getmembers():
            if m.name in drop:
                continue
            blob = src.extractfile(m).read()
            if m.name == "econeval-data.json" and index_edit:
                blob = json.dumps(index_edit(json.loads(blob))).encode()
            info = tarfile.TarInfo(m.name)
            info.size = len(blob)
            out.addfile(info, io.BytesIO(blob))
        for name, blob in (extra or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            out.addfile(info, io.BytesIO(blob))
    return dest


@pytest.mark.parametrize("case,needle", [
    ("shadow", "is not a file of this data package"), ("evil", "is not a file of this data package"),
    ("newline", "is not a file of this data package"), ("version", "this econeval reads"),
    ("empty", "members missing"), ("index-list", "not a data package index"), ("members-list", "not a data package index")])
def test_an_altered_data_package_is_refused_and_nothing_changes(cli, tmp_path, package, case, needle):
    home = {"ECONEVAL_HOME": str(tmp_path / "home")}
    assert cli("data", "install", package, env=home)[0] == 0
    target = tmp_path / "home" / "data"
    before = {p.relative_to(target): p.read_bytes() for p in target.rglob("*") if p.is_file()}
    with tarfile.open(package) as t:
        good = t.extractfile("econnli/test.jsonl").read()
    edits = {
        "shadow": dict(extra={"econnli/sub/test.jsonl": good}),
        "evil": dict(extra={"evil.py": b"import os\n"}),
        "newline": dict(extra={"econnli/te\nst\u202e.jsonl": b"x"}),
        "version": dict(index_edit=lambda i: {**i, "package_version": "000000000000"}),
        "empty": dict(drop=[n for n in tarfile.open(package).getnames() if n != "econeval-data.json"]),
        "index-list": dict(index_edit=lambda i: list(i)),
        "members-list": dict(index_edit=lambda i: {**i, "members": list(i["members"])}),
    }
    bad = _altered(package, tmp_path / f"{case}.tar", **edits[case])
    line = one_line(*cli("data", "install", bad, env=home), 1, needle)
    assert "\n" not in line and "\u202e" not in line
    after = {p.relative_to(target): p.read_bytes() for p in target.rglob("*") if p.is_file()}
    assert after == before and not list(target.glob(".staging-*"))


def test_install_streams_large_members(cli, tmp_path, package):
    big = tmp_path / "big.tar"
    with tarfile.open(package) as src:
        index = json.loads(src.extractfile("econeval-data.json").read())
    size = 300 << 20
    with tarfile.open(big, "w") as out:
        blob = json.dumps(index).encode()
        info = tarfile.TarInfo("econeval-data.json")
        info.size = len(blob)
        out.addfile(info, io.BytesIO(blob))
        info = tarfile.TarInfo("econnli/test.jsonl")
        info.size = size

        class Zeros(io.RawIOBase):
            left = size

            def readable(self):
                return True

            def readinto(self, b):
                n = min(len(b), self.left)
                b[:n] = bytes(n)
                self.left -= n
                return n

        out.addfile(info, io.BufferedReader(Zeros()))
    peak, err = peak_rss_mib(["data", "install", big], {"ECONEVAL_HOME": str(tmp_path / "home")})
    assert "does not match" in err and peak < 150, (peak, err)  # the member is 300 MiB


def test_concurrent_installs_and_readers(tmp_path, package):
    env = {**os.environ, "ECONEVAL_HOME": str(tmp_path / "home")}
    cmd = [sys.executable, "-m", "econeval", "data", "install", str(package)]
    assert subprocess.run(cmd, env=env, cwd=REPO, capture_output=True).returncode == 0
    reader = ("import sys, econeval.data as d\nbad = 0\nfor _ in range(400):\n"
              "    bad += any(st != 'ok' for st in d.status('econnli').values())\nprint(bad)")
    env_read = {**env, "ECONEVAL_DATA_DIR": ""}
    env_read.pop("ECONEVAL_DATA_DIR")
    procs = [subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    code = f"import os; os.environ['ECONEVAL_HOME'] = {str(tmp_path / 'home')!r}\n" + reader
    read = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    outs = [p.communicate() for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert read.returncode == 0 and read.stdout.strip() == "0", read.stdout + read.stderr


@pytest.mark.parametrize("content", [b"", b"\x00\xff\xfe binary"])
def test_a_broken_checksum_file_is_one_line(cli, tmp_path, package, content):
    copy = tmp_path / "data.tar"
    copy.write_bytes(package.read_bytes())
    (tmp_path / "data.tar.sha256").write_bytes(content)
    one_line(*cli("data", "install", copy, env={"ECONEVAL_HOME": str(tmp_path / "home")}), 1, "does not hold a sha256")


def test_ctrl_c_outside_a_run_says_nothing_about_run_json(tmp_path, package):
    env = {**os.environ, "ECONEVAL_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen([sys.executable, "-m", "econeval", "report", str(tmp_path)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc2 = subprocess.Popen([sys.executable, "-m", "econeval", "data", "install", str(package)], cwd=REPO, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.4)
    for p in (proc, proc2):
        p.send_signal(signal.SIGINT)
    for p in (proc, proc2):
        _, err = p.communicate(timeout=60)
        assert "run.json is marked interrupted" not in err and "Traceback" not in err, err


def test_an_install_removes_what_a_killed_install_left(cli, tmp_path, package):
    """Issue #33 item 10: kill -9 during `data install` left a 22 MB .staging-* folder that no
    later install removed."""
    home = {"ECONEVAL_HOME": str(tmp_path / "home")}
    left = tmp_path / "home" / "data" / ".staging-k9x2"
    (left / "econnli").mkdir(parents=True)
    (left / "econnli" / "test.jsonl").write_bytes(b"x" * (1 << 20))
    rc, _, err = cli("data", "install", package, env=home)
    assert rc == 0, err
    assert not list((tmp_path / "home" / "data").glob(".staging-*"))
