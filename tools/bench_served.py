"""Served model against in-process: EconNLI zero-shot on the first N items through
llama-cpp-python's own OpenAI-compatible server serving the default model, at several
--concurrency values, and in-process on the same GGUF file. Prints items/s, the agreement of the
parsed answers with the in-process run, and items dropped.

    .venv/bin/python tools/bench_served.py [--limit 100] [--concurrency 1,4,8] [--task econnli-zero]

Needs llama-cpp-python's server extra (installed with econeval's test extra). The server and the
in-process run use the same number of threads; the server evaluates one request at a time (its
own design), so concurrency there only overlaps HTTP, tokenisation and queueing.
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


def run(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "econeval", "run", "--quiet", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench_served: econeval run failed: {proc.stderr.strip()}")


def samples(folder: Path) -> dict:
    return {s["id"]: s for s in map(json.loads, (folder / "samples.jsonl").read_text().splitlines())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--concurrency", default="1,4,8")
    ap.add_argument("--task", default="econnli-zero")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    from econeval.backends.llamacpp import model_path
    from econeval.roles import resolve

    gguf = model_path(resolve(None))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = Path(tempfile.mkdtemp(prefix="bench-served-"))
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
        common = ["--task", args.task, "--limit", str(args.limit)]
        t = time.monotonic()
        run(*common, "--threads", str(args.threads), "--out", str(tmp / "local"))
        local_s = time.monotonic() - t
        local = samples(tmp / "local")
        print(f"{args.task}, first {args.limit} items, default model, {args.threads} threads")
        print(f"  in-process            {len(local) / local_s:6.2f} items/s (whole command, model load included)")
        for c in map(int, args.concurrency.split(",")):
            out = tmp / f"served-{c}"
            t = time.monotonic()
            run(*common, "--model", "openai:default", "--base-url", url, "--concurrency", str(c), "--out", str(out))
            secs = time.monotonic() - t
            got = samples(out)
            dropped = sum(1 for s in got.values() if "skipped" in s or "error" in s or s.get("parsed") is None)
            agree = sum(got[k]["parsed"] == local[k]["parsed"] for k in local if k in got)
            retries = json.loads((out / "run.json").read_text())["timing"][args.task].get("retries")
            print(f"  served, concurrency {c:<2} {len(got) / secs:6.2f} items/s  agreement {agree}/{len(local)} "
                  f"({agree / len(local):.0%})  unparsed or dropped {dropped}  retries {retries}")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
