"""Hostile and broken inputs (the audit of issue #20): each one gets one clear line and the right
exit code, writes nothing where it should not, and never scores nonsense."""

import gzip
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import REPO, read_lines
from fake_http import JSONHandler, serve


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


# ---- 1. links and special files in a run folder ------------------------------------------------------
@pytest.mark.parametrize("member", [".lock", "samples.jsonl", "run.json"])
def test_a_symlinked_run_file_is_refused_and_its_target_untouched(cli, tmp_path, tiny_registry, member):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / member).symlink_to(victim)
    one_line(*cli("run", "--task", "econnli-zero", "--limit", "1", "--quiet", "--out", run, env=tiny_registry), 2,
             "symbolic link")
    assert victim.read_text() == "precious\n"


def test_fifos_are_refused_not_waited_on(cli, tmp_path, tiny_registry):
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "run.json")
    t0 = time.monotonic()
    one_line(*cli("run", "--task", "econnli-zero", "--limit", "1", "--out", run, env=tiny_registry, timeout=60), 2,
             "not a regular file")
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    one_line(*cli("models", "list", env={"ECONEVAL_MODELS": str(fifo)}, timeout=60), 2, "not a")
    assert time.monotonic() - t0 < 50


def test_a_folder_that_is_not_a_run_folder_is_refused(cli, tmp_path, tiny_registry):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    one_line(*cli("run", "--task", "econnli-zero", "--limit", "1", "--out", mine, env=tiny_registry), 2, "is not a run folder")
    assert sorted(os.listdir(mine)) == ["notes.txt"]


# ---- 2. what a report shows -------------------------------------------------------------------------------
class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def test_report_escapes_everything_from_a_run_folder(cli, tmp_path, tiny_model):
    reg = tmp_path / "models.toml"
    name = "tiny \x1b]0;owned\x07\x1b[31m$\\x$\u202eevil"
    reg.write_text(f'[models.{json.dumps(name)}]\npath = "{tiny_model}"\nchat = "off"\n')
    run = tmp_path / "run"
    rc, out, err = cli("run", "--model", name, "--task", "econnli-zero", "--limit", "3", "--quiet", "--out", run,
                       env={"ECONEVAL_MODELS": str(reg)})
    assert rc == 0, err
    assert "\x1b" not in out and "\u202e" not in out
    meta = json.loads((run / "run.json").read_text())
    meta["econeval_version"], meta["data_package"]["version"] = "<script>alert(1)</script>", "<img src=x onerror=alert(1)>"
    (run / "run.json").write_text(json.dumps(meta))
    page = tmp_path / "r.html"
    rc, _, err = cli("report", run, "--format", "html", "--out", page)
    assert rc == 0, err
    html = page.read_text()
    tags = _Tags()
    tags.feed(html)
    assert "script" not in tags.tags and "img" not in tags.tags and "&lt;script&gt;" in html
    assert "\x1b" not in html and "\u202e" not in html
    rc, md, _ = cli("report", run)
    assert rc == 0 and "\x1b" not in md and "\u202e" not in md and "tiny ?" in md


# ---- 3, 5, 6, 7. served answers ---------------------------------------------------------------------------
class Bad(JSONHandler):
    mode = ""

    def do_GET(self):
        self._send(200, {"object": "list", "data": [{"id": "m", "owned_by": "me"}]})

    def do_POST(self):
        body = self.read_json()
        mode = type(self).mode
        text = " Yes"
        if mode == "drip":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            for ch in json.dumps({"choices": [{"text": text}]}):
                self.wfile.write(ch.encode())
                self.wfile.flush()
                time.sleep(0.3)
            return
        if mode == "huge":
            return self._send_raw(200, b'{"choices": [{"text": "' + b"x" * (20 << 20) + b'"}]}')
        if mode == "bomb":
            data = gzip.compress(b'{"choices": [{"text": "' + b"x" * (64 << 20) + b'"}]}')
            return self._send_raw(200, data, {"Content-Encoding": "gzip"})
        if mode == "longtext":
            return self._send(200, {"choices": [{"text": "y" * 200_000, "finish_reason": "length"}]})
        if mode == "wrongtype":
            return self._send(200, {"choices": [{"text": 42}], "usage": []})
        lp = {"above": {" A": 0.5, " B": -1.0}, "sum": {" A": -0.1, " B": -0.2}, "bignum": {" A": 1e308}}.get(mode)
        choice = {"text": text, "finish_reason": "stop"}
        if "logprobs" in body and lp is not None:
            choice["logprobs"] = {"top_logprobs": [lp], "tokens": [" Yes"]}
        self._send(200, {"choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 1}})


@pytest.fixture
def bad_server():
    srv, url = serve(Bad)
    yield url
    srv.shutdown()


def _served(cli, tmp_path, url, mode, *extra, task="econnli-zero"):
    Bad.mode = mode
    return cli("run", "--model", "openai:m", "--base-url", url, "--task", task, "--limit", "2", "--quiet",
               "--max-retries", "0", "--out", tmp_path / f"run-{mode}", *extra, timeout=120)


@pytest.mark.parametrize("mode,needle", [("above", "above 0"), ("sum", "more than 1"), ("bignum", "above 0")])
def test_impossible_log_probabilities_are_item_errors(cli, tmp_path, bad_server, mode, needle):
    rc, out, err = _served(cli, tmp_path, bad_server, mode, task="steer-me")
    assert rc == 1 and "item(s) with errors" in err and needle in err and "internal error" not in err, err
    res = json.loads((tmp_path / f"run-{mode}" / "results.json").read_text())["tasks"]["steer-me"]
    assert res["n_errors"] == res["n"] and res["paper"]["overall"]["accuracy"] is None


def test_a_dripping_server_is_cut_off_at_the_timeout(cli, tmp_path, bad_server):
    t0 = time.monotonic()
    rc, out, err = _served(cli, tmp_path, bad_server, "drip", "--timeout", "1")
    assert time.monotonic() - t0 < 30
    one_line(rc, out, err, 1, "no answer within 1 s")


@pytest.mark.parametrize("mode", ["huge", "bomb"])
def test_oversized_answers_are_refused_with_bounded_memory(cli, tmp_path, bad_server, mode):
    one_line(*_served(cli, tmp_path, bad_server, mode), 1, "more than 16 MiB")
    Bad.mode = mode
    peak, err = peak_rss_mib(["run", "--model", "openai:m", "--base-url", bad_server, "--task", "econnli-zero", "--limit", "1",
                              "--quiet", "--max-retries", "0", "--out", tmp_path / "peak"], {})
    assert "more than 16 MiB" in err and peak < 300, (peak, err)  # the audit saw 447 MB for a 100 MB body


def test_a_stored_answer_is_at_most_what_the_request_could_produce(cli, tmp_path, bad_server):
    rc, _, err = _served(cli, tmp_path, bad_server, "longtext", task="econlogicqa-1shot")
    assert rc == 0, err
    samples = read_lines(tmp_path / "run-longtext" / "samples.jsonl")
    assert all(len(s["response"]) <= 64 * 128 for s in samples)
    assert json.loads((tmp_path / "run-longtext" / "run.json").read_text())["timing"]["econlogicqa-1shot"]["oversized_answers"] == 2


def test_answers_of_the_wrong_type_are_malformed_not_internal_errors(cli, tmp_path, bad_server):
    one_line(*_served(cli, tmp_path, bad_server, "wrongtype"), 1, "not a completion", bad_server)


# ---- 4. compare ---------------------------------------------------------------------------------------
def _scored(cli, tmp_path, name):
    from econeval import data

    rows = data.load("econlogicqa", "test.jsonl")[:20]
    pred = tmp_path / f"{name}.jsonl"
    pred.write_text("".join(json.dumps({"id": r["id"], "response": " " + r["answer"]}) + "\n" for r in rows))
    out = tmp_path / name
    assert cli("score", "--task", "econlogicqa-1shot", "--predictions", pred, "--out", out)[0] == 0
    return out


def test_compare_refuses_a_margin_that_is_no_number_and_tampered_folders(cli, tmp_path):
    a, b = _scored(cli, tmp_path, "a"), _scored(cli, tmp_path, "b")
    for margin in ("nan", "inf", "-0.1"):
        rc, _, err = cli("compare", a, b, "--max-drop", margin)
        assert rc == 2 and "Traceback" not in err, (margin, err)
    one_line(*cli("compare", a, b, "--metric", "nosuch"), 2, "no task of these runs has the metric 'nosuch'")
    meta = json.loads((b / "run.json").read_text())
    meta["tasks"] = ["econlogicqa-1shot"]
    (b / "run.json").write_text(json.dumps(meta))
    one_line(*cli("compare", a, b), 2)
    meta["tasks"], meta["backend"] = {}, "a string"
    (b / "run.json").write_text(json.dumps(meta))
    rc, _, err = cli("report", a, b)
    assert rc in (0, 2) and "Traceback" not in err and "internal error" not in err


# ---- 8. a full disk ------------------------------------------------------------------------------------
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_keeps_whole_chunks_and_the_resumed_run_equals_a_fresh_one(cli, tmp_path, tiny_registry):
    import shutil

    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(small)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        run = small / "run"
        args = ("run", "--task", "econnli-zero", "--limit", "200", "--quiet", "--bootstrap", "0")
        rc, out, err = cli(*args, "--out", run, env=tiny_registry)
        assert rc == 1 and "No space left on device" in err and "Traceback" not in err, err
        lines = (run / "samples.jsonl").read_bytes()
        assert lines == b"" or lines.endswith(b"\n")
        n = len(read_lines(run / "samples.jsonl"))
        assert n % 16 == 0 and n < 200  # whole chunks only
        meta = json.loads((run / "run.json").read_text())
        assert meta["status"] in ("failed", "running")  # "failed" with the reason, when the disk let run.json be written
        moved = tmp_path / "moved"
        shutil.copytree(run, moved)
    finally:
        subprocess.run(["umount", str(small)])
    assert cli(*args, "--out", moved, env=tiny_registry)[0] == 0
    fresh = tmp_path / "fresh"
    assert cli(*args, "--out", fresh, env=tiny_registry)[0] == 0
    key = lambda s: s["id"]  # noqa: E731
    assert sorted(read_lines(moved / "samples.jsonl"), key=key) == sorted(read_lines(fresh / "samples.jsonl"), key=key)


# ---- 9, 10. data packages --------------------------------------------------------------------------------
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


# ---- 12. more malformed inputs -----------------------------------------------------------------------------
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


def test_an_unwritable_junit_path_is_one_line(cli, tmp_path):
    a = _scored(cli, tmp_path, "a")
    (tmp_path / "a-file").write_text("x")
    one_line(*cli("compare", a, a, "--bootstrap", "100", "--junit", tmp_path / "a-file" / "gate.xml"), 1, "a-file")


# ---- 13. interrupts outside a run -------------------------------------------------------------------------
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


# ---- the third audit (#33): unbounded and blocking reads of configuration and model files --------------
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


def test_a_model_name_with_a_newline_and_html_stays_plain_text_in_the_markdown_report(cli, tmp_path):
    run = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econlogicqa-1shot", "--limit", "4", "--quiet", "--out", run)
    assert rc == 0, err
    meta = json.loads((run / "run.json").read_text())
    meta["backend"]["model"]["name"] = "evil\n# heading <img src=x onerror=alert(1)> | cell"
    (run / "run.json").write_text(json.dumps(meta))
    rc, md, err = cli("report", run)
    assert rc == 0, err
    assert "<img" not in md and not any(line.startswith("# heading") for line in md.splitlines())
    assert "evil # heading &lt;img src=x onerror=alert(1)&gt; \\| cell" in md


def test_a_value_with_a_line_break_keeps_the_error_on_one_line(cli, tmp_path):
    line = one_line(*cli("run", "--model", "fake:m", "--task", "econnli-cot", "-T", "cot_parse=x\ny", "--out", tmp_path / "r"), 2,
                    "cot_parse")
    assert "x\\ny" in line


def test_a_merge_that_fails_part_way_leaves_nothing_and_the_same_merge_then_succeeds(cli, tmp_path, monkeypatch):
    base = tmp_path / "sharded"
    for k in (1, 2, 3):
        rc, _, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "40", "--shard", f"{k}/3", "--quiet",
                         "--out", base)
        assert rc == 0, err
    shards = [base / f"shard-{k}-of-3" for k in (1, 2, 3)]
    out = tmp_path / "merged"
    from econeval.store.folder import RunFolder

    def full_disk(self, name, doc):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(RunFolder, "write_results", full_disk)
        rc, _, err = cli("merge", *shards, "--out", out)
    assert rc == 1 and "No space left" in err, err
    assert not out.exists() and not list(tmp_path.glob(".merged*"))  # no half-written folder to block the retry
    (tmp_path / ".merged.merging").mkdir()  # what a merge killed with -9 leaves
    (tmp_path / ".merged.merging" / "samples.jsonl").write_text("{}\n")
    rc, _, err = cli("merge", *shards, "--out", out)
    assert rc == 0, err
    assert {p.name for p in out.iterdir()} >= {"run.json", "samples.jsonl", "results.json"}
    assert len(read_lines(out / "samples.jsonl")) == 40 and not (tmp_path / ".merged.merging").exists()


def test_damaged_run_files_are_listed_or_refused_in_one_line_not_crashed_on(cli, tmp_path):
    runs = tmp_path / "runs"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "4", "--quiet", "--out", runs / "good")
    assert rc == 0, err
    good = json.loads((runs / "good" / "run.json").read_text())
    for name, change in (("num", {"started": 5}), ("list", {"started": [1]}), ("model", {"backend": {"model": "x"}}),
                         ("tasks", {"tasks": "econnli-zero"})):
        (runs / name).mkdir()
        (runs / name / "run.json").write_text(json.dumps({**good, **change}))
    os.symlink(".", runs / "good" / "shard-1-of-2")  # a loop: the run is listed once
    rc, out, err = cli("runs", runs, "--json")
    assert rc == 0, err
    listed = json.loads(out)
    assert sorted(Path(r["folder"]).name for r in listed) == ["good", "list", "model", "num", "tasks"]
    # merge: a shard run.json with the wrong types is one line, exit 2, nothing written
    base = tmp_path / "sharded"
    for k in (1, 2):
        assert cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "32", "--shard", f"{k}/2", "--quiet",
                   "--out", base)[0] == 0
    shard1 = base / "shard-1-of-2" / "run.json"
    meta = json.loads(shard1.read_text())
    for change, needle in (({"shard": {**meta["shard"], "count": "2"}}, "shard.count"), ({"shard": {**meta["shard"], "count": 0}}, "shard.count"),
                           ({"shard": {**meta["shard"], "count": None}}, "shard.count"), ({"schedule": None}, "no schedule"),
                           ({"schedule": {**meta["schedule"], "chunk_items": 0}}, "chunk_items"), ({"bootstrap": "x"}, "bootstrap")):
        shard1.write_text(json.dumps({**meta, **change}))
        one_line(*cli("merge", base / "shard-1-of-2", base / "shard-2-of-2", "--out", tmp_path / "m"), 2, needle)
        assert not (tmp_path / "m").exists()


def test_a_served_answer_names_the_model_asked_for_or_a_dated_or_tagged_version_of_it():
    from econeval.backends.http_client import same_model

    assert same_model("gpt-4o-2024-08-06", "gpt-4o") and same_model("llama3:latest", "llama3") and same_model("m", "m")
    assert same_model("llama3", "llama3:latest")
    assert not same_model("other-model", "m") and not same_model("gpt-4", "gpt-4o") and not same_model("m2", "m")


def test_view_caps_what_a_page_shows_of_each_item_and_shows_damaged_lines_as_they_are(cli, tmp_path):
    """Issue #33 items 7-8: 48 MiB of samples made a 144 MiB page (no per-item cap); samples with
    `prompts` a list or a string, `task` a list or `id` an object were internal errors."""
    run = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econlogicqa-1shot", "--limit", "3", "--quiet", "--out", run)
    assert rc == 0, err
    recs = read_lines(run / "samples.jsonl")
    recs[0]["response"] = "B, D, A, C. " * 10_000  # 120,000 characters
    recs[1]["prompts"] = ["a list", "of prompts"]
    recs[2]["prompts"] = "a string prompt"
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    page = tmp_path / "page.html"
    rc, _, err = cli("view", run, "--out", page)
    assert rc == 0, err
    text = page.read_text()
    assert "100,000 more characters not shown" in text and len(text) < 60_000
    assert "a string prompt" in text and "of prompts" in text
    for field, value in (("task", ["econlogicqa-1shot"]), ("id", {"x": 1})):
        bad = [dict(recs[0], **{field: value})] + recs[1:]
        (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bad))
        one_line(*cli("view", run, "--out", tmp_path / "p2.html"), 2, "samples.jsonl:1 is not a sample line")
        assert not (tmp_path / "p2.html").exists()


class _BasicAuthServer(JSONHandler):
    """Answers every completion 'Yes' when the request carries basic auth alice:s3cret."""

    seen: list = []

    def do_GET(self):
        self._send(404, {})

    def do_POST(self):
        self.read_json()
        _BasicAuthServer.seen.append(self.headers.get("Authorization"))
        if self.headers.get("Authorization") != "Basic YWxpY2U6czNjcmV0":  # alice:s3cret
            return self._send(401, {"error": "no"})
        self._send(200, {"choices": [{"text": " Yes", "finish_reason": "stop"}]})


def test_a_password_in_a_url_is_sent_as_basic_auth_and_never_stored_or_shown(cli, tmp_path):
    """Issue #33 item 10: user:password@ in a URL was stored four times in run.json and printed in errors."""
    srv, url = serve(_BasicAuthServer)
    try:
        secret = url.replace("http://", "http://alice:s3cret@")
        out = tmp_path / "run"
        rc, _, err = cli("run", "--model", "openai:m", "--base-url", secret, "--task", "econnli-zero", "--limit", "2",
                         "--quiet", "--out", out)
        assert rc == 0, err
        assert set(_BasicAuthServer.seen) == {"Basic YWxpY2U6czNjcmV0"}
        assert not any("s3cret" in p.read_text() for p in out.iterdir() if p.is_file()) and "s3cret" not in err
        meta = json.loads((out / "run.json").read_text())
        assert "http://[redacted]@" in " ".join(meta["command"])
    finally:
        srv.shutdown()
    line = one_line(*cli("run", "--model", "openai:m", "--base-url", "http://bob:hunter2@127.0.0.1:9/v1", "--task",
                         "econnli-zero", "--limit", "1", "--out", tmp_path / "r2"), 1, "cannot reach")
    assert "hunter2" not in line


@pytest.mark.parametrize("url,needle", [("http://127.0.0.1:8000/v1\r\nX-Evil: 1", "control character"),
                                        ("http://127.0.0.1:8000/v1 http://evil.invalid", "a space"),
                                        ("http://127.0.0.1:99999/v1", "out of range"), ("ftp://127.0.0.1/v1", "http://"),
                                        ("http://:8000/v1", "host")])
def test_a_base_url_is_checked_whole_not_by_its_start(cli, tmp_path, url, needle):
    """Issue #33 items 8 and 10: CR/LF gave an internal InvalidURL; a second URL after a space was accepted."""
    one_line(*cli("run", "--model", "openai:m", "--base-url", url, "--task", "econnli-zero", "--limit", "1",
                  "--out", tmp_path / "r"), 2, "base_url must be one http:// or https:// URL", needle)
    assert not (tmp_path / "r").exists()



def test_junit_replaces_an_earlier_report_and_leaves_any_other_file(cli, tmp_path):
    """Issue #33 item 10: `--junit` (and `[gate] junit`) overwrote any existing file."""
    for name in ("a", "b"):
        assert cli("run", "--model", f"fake:{name}", "--task", "econlogicqa-1shot", "--limit", "4", "--quiet",
                   "--out", tmp_path / name)[0] == 0
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    for command in (("compare", tmp_path / "a", tmp_path / "b"), ("gate", tmp_path / "a", "--model", "fake:b", "--quiet")):
        one_line(*cli(*command, "--junit", notes), 2, "is not a JUnit report")
        assert notes.read_text() == "my notes\n"
    report = tmp_path / "report.xml"
    rc, _, _ = cli("compare", tmp_path / "a", tmp_path / "b", "--junit", report)
    first = report.read_text()
    assert first.startswith("<?xml") and "<testsuite" in first
    cli("compare", tmp_path / "a", tmp_path / "b", "--junit", report)
    assert report.read_text() == first  # an earlier report is replaced


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
