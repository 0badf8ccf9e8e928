"""Reasoning models, measured: where each task's answer is read from, against fake servers that
speak the wire formats reasoning models arrive in (tests/fake_formats.py: each reasons first with
the opposite cue, then answers), in three orders (the tasks as given; STEER-ME first; a run cut
off when STEER-ME starts and resumed, so that the resumed process's first items are STEER-ME's),
and the cost of `--reasoning auto` against `off` on the default model.

    .venv/bin/python tools/bench_reasoning.py [--sample 12] [--source DIR] [--only TEXT] [--default-model 16]

For every format × order it prints the readings (EconNLI's answer and its option log-probabilities,
EconLogicQA's order, STEER-ME's letter: one each per item), how many were read from the answer,
from the reasoning (its cue: wrong, with nothing said), left unanswered, or other; EconNLI's
option readings apart (lp answer/reasoning); the requests the model was sent; and the exit code.
`--source DIR` runs the econeval of another checkout (an export of an earlier commit, for a
before/after). `--default-model N` then runs the default model on the first N items of each
task with `--reasoning auto` and `off`, and prints both times, their ratio, and whether
samples.jsonl and results.json are identical.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_formats import FORMATS, FormatServer, requests_sent, tally  # noqa: E402
from fake_http import serve  # noqa: E402

TASKS = ("econnli-zero", "econlogicqa-1shot", "steer-me")
ORDERS = {"standard": TASKS, "steer-first": ("steer-me", "econnli-zero", "econlogicqa-1shot"), "resumed": TASKS}
TIMEOUT = 90  # seconds: a run that loops is stopped here


def econeval(source: Path, *args: str, timeout: float | None = None) -> tuple[int, str, float]:
    env = {**os.environ, "PYTHONPATH": str(source)}
    t0 = time.perf_counter()
    # run outside any checkout: `-m` puts the working folder first on the path
    try:
        proc = subprocess.run([sys.executable, "-m", "econeval", *args], capture_output=True, text=True, env=env,
                              cwd=tempfile.gettempdir(), timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, f"stopped after {timeout:g} s (still running)", time.perf_counter() - t0
    lines = proc.stderr.strip().splitlines()
    last = next((ln for ln in reversed(lines) if "error" in ln or "warning" in ln), lines[-1] if lines else "")
    return proc.returncode, last, time.perf_counter() - t0


def records(folder: Path) -> list[dict]:
    path = folder / "samples.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def one(source: Path, url: str, out: Path, tasks, extra, sample: int) -> tuple[int, str]:
    return econeval(source, "run", "--base-url", url + "/v1", *[a for t in tasks for a in ("--task", t)],
                    "--sample", str(sample), "--out", str(out), "-q", "--bootstrap", "0", "-C", "4", "--max-retries", "0",
                    *extra, timeout=TIMEOUT)[:2]


def formats(source: Path, sample: int, tmp: Path, only: str | None, orders: list[str]) -> None:
    """Every format of tests/fake_formats.py in each order: readings from the answer, from the
    reasoning (the cue), unanswered, other; EconNLI's option readings (lp); requests sent."""
    srv, url = serve(FormatServer)
    print(f"{'format':<52} {'order':<11} {'reads':>5} {'answer':>6} {'reason':>6} {'unans':>5} {'other':>5} "
          f"{'lp a/r':>7} {'sent':>5} {'rc':>3}")
    try:
        for n, (label, fmt, extra) in enumerate(FORMATS):
            if only and only not in label:
                continue
            model = ("anthropic:" if fmt.server == "anthropic" else "openai:") + fmt.model
            for order in orders:
                FormatServer.fmt, FormatServer.seen, FormatServer.fail = fmt, [], None
                out = tmp / f"f{n}-{order}"
                args = ("--model", model, *extra)
                notes = []
                if order == "resumed":  # cut off when STEER-ME starts, then resumed: its items come first
                    FormatServer.fail = lambda p: p.startswith("Q: ")
                    rc, last = one(source, url, out, ORDERS[order], args, sample)
                    notes.append(f"first part exit {rc}")
                    FormatServer.fail = None
                rc, last = one(source, url, out, ORDERS[order], args, sample)
                t = tally(records(out))
                reads = t["answer"] + t["reasoning"] + t["unanswered"] + t["other"] + t["lp_answer"] + t["lp_reasoning"]
                print(f"{label[:52]:<52} {order:<11} {reads:>5} {t['answer']:>6} {t['reasoning']:>6} {t['unanswered']:>5} "
                      f"{t['other']:>5} {str(t['lp_answer']) + '/' + str(t['lp_reasoning']):>7} "
                      f"{requests_sent(FormatServer.seen):>5} {rc:>3}", flush=True)
                if rc:
                    print(f"    exit {rc}: {last[:170]}", flush=True)
    finally:
        srv.shutdown()


def default_model(source: Path, limit: int, tmp: Path) -> None:
    tasks = [a for t in ("econnli-zero", "econnli-cot", "econlogicqa-1shot", "cfbenchmark-zero", "steer-me")
             for a in ("--task", t)]
    took = {}
    for mode in ("auto", "off"):
        rc, last, took[mode] = econeval(source, "run", *tasks, "--limit", str(limit), "--reasoning", mode,
                                        "--out", str(tmp / mode), "-q", "--bootstrap", "0")
        if rc:
            sys.exit(f"bench_reasoning: the default model with --reasoning {mode} failed: {last}")
    same = {f: (tmp / "auto" / f).read_bytes() == (tmp / "off" / f).read_bytes() for f in ("samples.jsonl", "results.json")}
    print(f"default model, {limit} items of 5 tasks: auto {took['auto']:.1f} s, off {took['off']:.1f} s, "
          f"auto/off {took['auto'] / took['off']:.3f}; identical: {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sample", type=int, default=12, help="items of each task (--sample)")
    ap.add_argument("--source", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--only", help="the formats whose label holds this text")
    ap.add_argument("--orders", default="standard,steer-first,resumed")
    ap.add_argument("--default-model", type=int, default=0, metavar="N")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-reasoning-") as tmp:
        formats(args.source.resolve(), args.sample, Path(tmp), args.only, args.orders.split(","))
        if args.default_model:
            default_model(args.source.resolve(), args.default_model, Path(tmp))


if __name__ == "__main__":
    main()
