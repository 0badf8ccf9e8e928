"""`compare` and `gate` as a terminal shows them (judge/terminal.py, rich): at 80 and at 150
columns no line is longer than the width and every row's cells stay whole on one line in their
columns (the hand-padded table wrapped mid-column at 80); colour on a terminal only, none with
NO_COLOR, none in a pipe."""

import json
import os
import pty
import re
import subprocess
import sys

import pytest

from conftest import REPO

TASKS = ("--task", "econnli-zero", "--task", "econlogicqa-1shot", "--limit", "24")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two fake models' runs of two tasks (the longer name makes the widest task column)."""
    from conftest import run_cli_inprocess as cli

    root = tmp_path_factory.mktemp("terminal")
    env = {"ECONEVAL_HOME": str(root / "home")}
    for name in ("a", "b"):
        rc, _, err = cli("run", "--model", f"fake:{name}", *TASKS, "--quiet", "--out", root / name, env=env)
        assert rc == 0, err
    return root / "a", root / "b", env


def _row_on_one_line(text: str, cells: list[str]) -> bool:
    """Whether some line holds these cells in this order, each whole, apart by spaces only."""
    pattern = re.compile(r"(^|\s)" + r"\s+".join(re.escape(c) for c in cells) + r"(\s|$)")
    return any(pattern.search(line) for line in text.splitlines())


def _shown(rows: list[dict], keys: list[str], text: str) -> list[list[str]]:
    """Each row's cells as the text shows them: the columns not named as left out at this width."""
    left = re.search(r"not shown at this width: ([^;]+);", text)
    gone = {h.strip() for h in left.group(1).split(",")} if left else set()
    fmt = (lambda v: "-" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v))  # noqa: E731
    return [[fmt(r[k]) if not (k == "detectable" and r[k] is None and r["diff"] is not None and r["verdict"] in ("inconclusive", "ok"))
             else "none" for k in keys if k not in gone and (k != "task" or "task" in text.splitlines()[0].split())]
            for r in rows]


@pytest.mark.parametrize("width", [80, 150])
def test_compare_and_gate_tables_fit_the_width_and_never_cut_a_row(cli, runs, width):
    a, b, env = runs
    rc, out, _ = cli("compare", a, b, "--format", "json", env=env)
    rows = json.loads(out)["rows"]
    rc, text, err = cli("compare", a, b, env={**env, "COLUMNS": str(width)})
    assert rc in (0, 1, 3) and "Traceback" not in err, err
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width, text
    keys = ["task", "metric", "n", "baseline", "candidate", "diff", "low", "high", "p_mcnemar", "detectable", "verdict"]
    shown = _shown(rows, keys, text)
    assert all(_row_on_one_line(text, cells) for cells in shown), (text, shown)
    if width == 150:  # everything fits: the task on every row, every column
        assert "not shown" not in text and all(len(cells) == len(keys) for cells in shown)
    else:  # the task a heading over its rows, the least needed columns left out and named
        assert "econlogicqa-1shot" in text.splitlines() and "not shown at this width: p_mcnemar, detectable" in text
    rc, out, _ = cli("gate", a, "--replay", b, "--format", "json", env=env)
    rows = json.loads(out)["rows"]
    rc, text, err = cli("gate", a, "--replay", b, env={**env, "COLUMNS": str(width)})
    assert rc in (0, 1, 3) and "Traceback" not in err, err
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width, text
    shown = _shown(rows, ["task", "metric", "n", "of", "failed", "baseline", "candidate", "diff", "low", "high", "verdict"], text)
    assert all(_row_on_one_line(text, cells) for cells in shown), (text, shown)
    assert ("not shown" in text) == (width == 80), text


def _on_a_terminal(args, env) -> str:
    """The CLI's standard output when it is a terminal (a pseudo-terminal of 100 columns)."""
    leader, follower = pty.openpty()
    import fcntl
    import struct
    import termios

    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "econeval", *map(str, args)], stdout=follower, stderr=subprocess.PIPE,
                            env={**{k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "TERM")},
                                 "TERM": "xterm-256color", **env}, cwd=REPO)
    os.close(follower)
    chunks = []
    while True:
        try:
            got = os.read(leader, 65536)
        except OSError:  # the follower side closed: all is read
            break
        if not got:
            break
        chunks.append(got)
    proc.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode()


def _colours(text: str) -> set[int]:
    """The colours the text's escape sequences set (SGR 30-38, 40-48, 90-97, 100-107)."""
    params = [int(p) for seq in re.findall(r"\x1b\[([0-9;]*)m", text) for p in seq.split(";") if p]
    return {p for p in params if 30 <= p <= 48 or 90 <= p <= 107}


def test_colour_on_a_terminal_only_and_never_with_no_color(cli_process, runs):
    a, b, env = runs
    env = {**env, "PYTHONPATH": str(REPO)}
    rc, piped, _ = cli_process("compare", a, b, env=env)
    assert "\x1b[" not in piped and "verdict:" in piped
    shown = _on_a_terminal(["compare", a, b], env)
    assert "verdict:" in shown and _colours(shown)  # the verdict in its colour
    plain = _on_a_terminal(["compare", a, b], {**env, "NO_COLOR": "1"})
    assert "verdict:" in plain and not _colours(plain), plain  # bold, but no colour
    rc, piped, _ = cli_process("gate", a, "--replay", b, env=env)
    assert "\x1b[" not in piped and "gate:" in piped
