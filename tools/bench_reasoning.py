"""Reasoning models, measured: where each task's answer is read from, against fake servers that
reason first and then answer (tests/fake_reasoning.py: the reasoning carries the opposite cue), in
each wire format, and the cost of `--reasoning auto` against `off` on the default model.

    .venv/bin/python tools/bench_reasoning.py [--limit 24] [--source DIR] [--default-model 16]

For every wire format × task it prints the items, how many were read as the answer, how many as
the reasoning's cue (read from inside the reasoning: wrong, with nothing said), how many were
unparsed, and the run's exit code. `--source DIR` runs the econeval of another checkout (a git
worktree of an earlier commit, for a before/after). `--default-model N` then runs the default
model on the first N items of each task with `--reasoning auto` and `off`, and prints both times,
their ratio, and whether samples.jsonl and results.json are identical.
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

from fake_http import serve  # noqa: E402
from fake_reasoning import ANSWERS, CUES, ReasoningServer, parsed_answer  # noqa: E402

# (label, --model, --chat, the server's wire format)
CASES = [("inline <think>, raw prompts", "openai:thinker", "off", "inline"),
         ("inline <think>, chat", "openai:thinker", "on", "inline"),
         ("reasoning_content field", "openai:thinker", "on", "reasoning_content"),
         ("reasoning field", "openai:thinker", "on", "reasoning"),
         ("OpenAI's contract, by refusals", "openai:thinker", "on", "openai"),
         ("OpenAI's contract, o4-mini by name", "openai:o4-mini", "auto", "openai"),
         ("a reasoning that never ends", "openai:thinker", "on", "endless")]


def econeval(source: Path, *args: str) -> tuple[int, str, float]:
    env = {**os.environ, "PYTHONPATH": str(source)}
    t0 = time.perf_counter()
    # run outside any checkout: `-m` puts the working folder first on the path
    proc = subprocess.run([sys.executable, "-m", "econeval", *args], capture_output=True, text=True, env=env,
                          cwd=tempfile.gettempdir())
    return proc.returncode, proc.stderr.strip().splitlines()[-1:] and proc.stderr.strip().splitlines()[-1] or "", \
        time.perf_counter() - t0


def records(folder: Path) -> list[dict]:
    path = folder / "samples.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def served(source: Path, limit: int, tmp: Path) -> None:
    srv, url = serve(ReasoningServer)
    print(f"{'case':<36} {'task':<18} {'items':>5} {'answer':>6} {'cue':>4} {'unparsed':>8} {'rc':>3}")
    try:
        for n, (label, model, chat, fmt) in enumerate(CASES):
            ReasoningServer.fmt, ReasoningServer.seen = fmt, []
            out = tmp / f"served-{n}"
            chat_args = () if chat == "auto" else ("--chat", chat)
            extra = ("--reasoning-tokens", "40") if fmt == "endless" else ()
            rc, last, _ = econeval(source, "run", "--model", model, "--base-url", url + "/v1", *chat_args, "-C", "1",
                                   *[a for t in ANSWERS for a in ("--task", t)], "--limit", str(limit), "--out", str(out),
                                   "-q", "--bootstrap", "0", *extra)
            if fmt == "endless" and rc == 2 and "reasoning" in last:  # a version without the option: its own budget
                rc, last, _ = econeval(source, "run", "--model", model, "--base-url", url + "/v1", *chat_args, "-C", "1",
                                       *[a for t in ANSWERS for a in ("--task", t)], "--limit", str(limit), "--out", str(out),
                                       "-q", "--bootstrap", "0")
            recs = records(out)
            for task in ANSWERS:
                got = [parsed_answer(r) for r in recs if r["task"] == task]
                print(f"{label:<36} {task:<18} {len(got):>5} {got.count(ANSWERS[task]):>6} {got.count(CUES[task]):>4} "
                      f"{sum(1 for g in got if g is None):>8} {rc:>3}")
            if rc:
                print(f"    exit {rc}: {last[:160]}")
            sent = [b for _, b in ReasoningServer.seen]
            if fmt == "openai":
                print(f"    requests {len(sent)}, max_tokens sent {sum('max_tokens' in b for b in sent)} times")
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
    ap.add_argument("--limit", type=int, default=24)
    ap.add_argument("--source", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--default-model", type=int, default=0, metavar="N")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-reasoning-") as tmp:
        served(args.source.resolve(), args.limit, Path(tmp))
        if args.default_model:
            default_model(args.source.resolve(), args.default_model, Path(tmp))


if __name__ == "__main__":
    main()
