"""Served models: items/s at fixed --concurrency values and at the default (adaptive), per kind of
server, and the default's ratio to the best fixed value, from one run of this script.

- llama: llama-cpp-python's own OpenAI-compatible server serving the default model (it evaluates
  one request at a time), EconNLI zero-shot on the first --limit items; also in-process on the
  same GGUF file, and the agreement of the parsed answers with it.
- batching, wide, steep, serial, overload: the stand-in of tools/served_standin.py on 127.0.0.1
  (servers with 32 and 128 slots, throughput flat past them; 32 slots, falling past them; one
  request at a time; 429 past 48 in flight), on the first --standin-limit items. Their answers
  come from the prompt alone: every run of a kind must give the same samples (checked).

    .venv/bin/python tools/bench_served.py [--kinds llama,batching,wide,steep,serial,overload]
        [--limit 100] [--concurrency 1,4,8] [--standin-limit 600] [--standin-concurrency 8,16,32]

Only loopback addresses; every run is bounded by its item count (and --run-timeout seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from served_standin import Shape, serve  # noqa: E402

# the stand-ins: (shape, description, the fixed values to measure); 2 requests per EconNLI item
STANDINS = {
    "batching": (Shape("batching", base=0.5, knee=32), "32 slots, flat past them (0.5 s a request)", "8,16,32,64,128"),
    "wide": (Shape("batching", base=1.0, knee=128), "128 slots, flat past them (1 s a request)", "8,32,64,128,256"),
    "steep": (Shape("batching", base=0.5, knee=32, k=2 * 0.5 / 32), "32 slots, throughput falling past them",
              "8,16,32,64,128"),
    "serial": (Shape("serial", base=0.02), "one request at a time (0.02 s each)", "1,4,8,32"),
    "overload": (Shape("overload", base=0.5, knee=64, limit=48), "64 slots, 429 past 48 in flight", "8,16,32,48,64"),
}

def run(args: list[str], timeout: float) -> tuple[float, str]:
    """One `econeval run`: its seconds, and its error ('' when it finished)."""
    t = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "econeval", "run", "--quiet", "--bootstrap", "0", *args],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.monotonic() - t, f"no end within {timeout:g} s"
    return time.monotonic() - t, "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["failed"])[-1]


def samples(folder: Path) -> dict:
    return {s["id"]: s for s in map(json.loads, (folder / "samples.jsonl").read_text().splitlines())}


def answers(folder: Path) -> list:
    return [(s["id"], s.get("response"), s.get("option_logprobs"), s.get("parsed"))
            for s in map(json.loads, (folder / "samples.jsonl").read_text().splitlines())]


def concurrency(folder: Path) -> dict:
    return json.loads((folder / "run.json").read_text())["backend"]["concurrency"]


def settled(rec: dict) -> str:
    if rec.get("policy") != "adaptive":
        return ""
    return (f"  (adaptive: settled {rec['settled']}, range {rec['range'][0]}-{rec['range'][1]}, mean in flight "
            f"{rec['mean_in_flight']}, most {rec['max_in_flight']}, backoffs {rec['backoffs']})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(kind: str, url: str, model: str, task: str, limit: int, values: list[int], tmp: Path, timeout: float,
            stats=None, local: dict | None = None) -> float | None:
    """Each fixed value, then the default: items/s; returns the default's ratio to the best fixed."""
    rates: dict[str, float] = {}
    first: list | None = None
    for c in [*map(str, values), "default"]:
        out = tmp / f"{kind}-{c}"
        if stats is not None:
            with stats.lock:
                stats.max_in_flight, stats.refused = 0, 0
        secs, err = run(["--task", task, "--limit", str(limit), "--model", f"openai:{model}", "--base-url", url,
                         "--out", str(out), *([] if c == "default" else ["--concurrency", c])], timeout)
        label = f"fixed {c:<4}" if c != "default" else "default   "
        if err:
            print(f"  {label} failed: {err[:150]}")
            continue
        got = samples(out)
        rates[c] = len(got) / secs
        line = f"  {label} {rates[c]:7.2f} items/s"
        if stats is not None:
            line += f"  server: most in flight {stats.max_in_flight}, 429s {stats.refused}"
        if local is not None:
            agree = sum(got[k]["parsed"] == local[k]["parsed"] for k in local if k in got)
            dropped = sum(1 for s in got.values() if "skipped" in s or "error" in s or s.get("parsed") is None)
            line += f"  agreement {agree}/{len(local)}  unparsed or dropped {dropped}"
        else:
            mine = answers(out)
            first = first if first is not None else mine
            line += "  answers: " + ("the same" if mine == first else "DIFFERENT")
        print(line + settled(concurrency(out)), flush=True)
    fixed = {c: r for c, r in rates.items() if c != "default"}
    if "default" not in rates or not fixed:
        return None
    best = max(fixed, key=lambda c: fixed[c])
    ratio = rates["default"] / fixed[best]
    before = f"; default / fixed 8 (the default before): {rates['default'] / fixed['8']:.2f}" if "8" in fixed else ""
    print(f"  default / best fixed ({best}): {ratio:.2f}{before}", flush=True)
    return ratio


def llama(args, tmp: Path) -> float | None:
    from econeval.backends.llamacpp import model_path
    from econeval.run.roles import resolve

    gguf = model_path(resolve(None))
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "default",
                               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", str(args.threads)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/models", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        secs, err = run(["--task", args.task, "--limit", str(args.limit), "--threads", str(args.threads),
                         "--out", str(tmp / "local")], args.run_timeout)
        if err:
            sys.exit(f"bench_served: the in-process run failed: {err}")
        local = samples(tmp / "local")
        print(f"llama: llama-cpp-python's server, default model, {args.task}, first {args.limit} items, {args.threads} threads")
        print(f"  in-process  {len(local) / secs:7.2f} items/s (whole command, model load included)")
        return measure("llama", url, "default", args.task, args.limit, [int(c) for c in args.concurrency.split(",")], tmp,
                       args.run_timeout, local=local)
    finally:
        server.terminate()
        server.wait(timeout=30)


def standin(kind: str, args, tmp: Path) -> float | None:
    shape, what, values = STANDINS[kind]
    srv, url, stats = serve(shape)
    try:
        print(f"{kind}: stand-in, {what}, {args.task}, first {args.standin_limit} items")
        return measure(kind, url, shape.model, args.task, args.standin_limit,
                       [int(c) for c in (args.standin_concurrency or values).split(",")], tmp, args.run_timeout, stats=stats)
    finally:
        srv.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinds", default="llama," + ",".join(STANDINS))
    ap.add_argument("--limit", type=int, default=100, help="items for the llama server")
    ap.add_argument("--concurrency", default="1,4,8", help="fixed values for the llama server")
    ap.add_argument("--standin-limit", type=int, default=600, help="items for the stand-ins")
    ap.add_argument("--standin-concurrency", default=None, help="fixed values for every stand-in (default: each one's own)")
    ap.add_argument("--task", default="econnli-zero")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--run-timeout", type=float, default=900.0, help="seconds one run may take")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-served-"))
    ratios = {}
    for kind in args.kinds.split(","):
        if kind != "llama" and kind not in STANDINS:
            sys.exit(f"bench_served: no kind {kind!r} (llama, {', '.join(STANDINS)})")
        ratios[kind] = llama(args, tmp) if kind == "llama" else standin(kind, args, tmp)
    print("default / best fixed: " + ", ".join(f"{k} {'-' if r is None else f'{r:.2f}'}" for k, r in ratios.items()))


if __name__ == "__main__":
    main()
