"""A served model with two chunks in flight (the runner's overlap) against the chunks in turn: the
same run's wall time each way and their ratio, from one run of this script.

The server is the stand-in of tools/served_standin.py on 127.0.0.1, shaped as a batching engine
below its knee: each request takes base·w seconds whatever else is in flight (w from the prompt,
0.5–1.5: answers of varied lengths). The run is EconNLI zero-shot and in-context (two tasks, two
requests an item) on the first --limit items of each, at a fixed --concurrency, so chunks hold
max(16, 2 × concurrency) items. In turn, each chunk's tail drains the server (fewer in flight as
its last answers come back) before the next chunk starts; overlapped, the next chunk's requests
fill the places the tail frees. Both runs must give the same samples (checked).

    .venv/bin/python tools/bench_overlap.py [--limit 96] [--concurrency 16] [--base 0.2] [--repeat 1]

Only a loopback address; every run is bounded by its item count (and --run-timeout seconds).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from served_standin import Shape, serve  # noqa: E402

# econeval's CLI with the served backends' overlap switched off or left on (their class attribute)
CHILD = ("import sys\n"
         "from econeval.backends.openai_http import OpenAIHTTPBackend\n"
         "OpenAIHTTPBackend.overlaps = sys.argv.pop(1) == 'on'\n"
         "from econeval.cli import main\n"
         "sys.argv[0] = 'econeval'\n"
         "main()\n")


def run(overlap: bool, url: str, out: Path, args) -> tuple[float, str]:
    """One `econeval run`: its seconds, and its error ('' when it finished)."""
    cmd = [sys.executable, "-c", CHILD, "on" if overlap else "off", "run", "--quiet", "--bootstrap", "0",
           "--model", "openai:standin", "--base-url", url, "--task", "econnli-zero", "--task", "econnli-icl",
           "--limit", str(args.limit), "--concurrency", str(args.concurrency), "--out", str(out)]
    t = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.run_timeout)
    except subprocess.TimeoutExpired:
        return time.monotonic() - t, f"no end within {args.run_timeout:g} s"
    return time.monotonic() - t, "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["failed"])[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=96, help="items of each task")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--base", type=float, default=0.2, help="seconds of a request of weight 1")
    ap.add_argument("--repeat", type=int, default=1, help="runs each way (alternating; the best is kept)")
    ap.add_argument("--run-timeout", type=float, default=600.0)
    args = ap.parse_args()
    # a knee far above the concurrency: a request's time does not depend on what else is in flight
    srv, url, stats = serve(Shape("batching", base=args.base, knee=100 * args.concurrency))
    chunk = max(16, 2 * args.concurrency)
    print(f"stand-in at {url}: {args.base} s x (0.5-1.5) a request at any load; 2 tasks x {args.limit} items, "
          f"2 requests an item, --concurrency {args.concurrency}, chunks of {chunk} items", flush=True)
    best: dict[bool, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeat):
            for overlap in (False, True):
                with stats.lock:
                    stats.max_in_flight = 0
                out = Path(tmp) / f"{'overlap' if overlap else 'turns'}-{k}"
                secs, err = run(overlap, url, out, args)
                if err:
                    print(f"  {'overlapped' if overlap else 'in turn   '} failed: {err[:200]}")
                    srv.shutdown()
                    sys.exit(1)
                best[overlap] = min(best.get(overlap, secs), secs)
                print(f"  {'overlapped' if overlap else 'in turn   '} {secs:6.2f} s  (server: most in flight "
                      f"{stats.max_in_flight})", flush=True)
        same = all((Path(tmp) / f"overlap-{k}" / "samples.jsonl").read_bytes()
                   == (Path(tmp) / f"turns-{k}" / "samples.jsonl").read_bytes() for k in range(args.repeat))
    srv.shutdown()
    ideal = 2 * args.limit * 2 * args.base / args.concurrency
    print(f"  samples: {'the same' if same else 'DIFFERENT'}")
    print(f"  in turn / overlapped: {best[False] / best[True]:.2f} (best of {args.repeat}); "
          f"the server's own time at a full {args.concurrency} in flight: {ideal:.2f} s")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
