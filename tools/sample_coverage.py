"""Coverage of `--sample` intervals on a real results population: a finished run's scored items
of one task are the population; each of --draws stratified samples (seeds 0, 1, ...) of --n items
gets the run's sampled-estimate intervals (stratified bootstrap, finite-population corrected), and
the script prints how often each headline number's interval holds the population's number.

    .venv/bin/python tools/sample_coverage.py RUN_FOLDER --task econnli-zero [--n 100] [--draws 1000]
                                              [--bootstrap 200]

Prints coverage per headline metric (the target: between 93% and 97% at the 95% level)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from econeval import registry, runner, sampling  # noqa: E402
from econeval.folder import read_samples  # noqa: E402
from econeval.intervals import headline_intervals  # noqa: E402
from econeval.results import read_json  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--task", required=True)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--bootstrap", type=int, default=200)
    args = ap.parse_args()
    meta = read_json(args.folder / "run.json")
    task = registry.get_task(args.task)
    ctx = runner.RunContext(seed=meta["seed"], per_task={task.name: meta["tasks"][task.name].get("options") or {}})
    prep = task.prepare(ctx)
    prep.options = ctx.options_for(task)
    done = read_samples(args.folder / "samples.jsonl")[0]
    items = {it["id"]: it for it in prep.items}
    records = [rec for (t, i), rec in done.items() if t == task.name and not rec.get("skipped") and not rec.get("error")]
    population = [items[r["id"]] for r in records if r["id"] in items]
    by_id = {r["id"]: r for r in records}
    truth = task.headline_of(records, prep)
    strata = {it["id"]: str(task.strata(it)) for it in population}
    hits: dict[str, int] = {}
    counted: dict[str, int] = {}
    for seed in range(args.draws):
        drawn, design = sampling.stratified(population, task.strata, args.n, seed, task.name)
        recs = [by_id[it["id"]] for it in drawn]
        # the headline numbers only (what compare and the summary show), as headline_intervals resamples them
        shim = type("Headline", (), {"name": task.name, "aggregate": lambda self, rs, p: {"h": task.headline_of(rs, p)},
                                     "headline": lambda self, res: res["h"], "table_numbers": lambda self, res: {}})()
        iv = headline_intervals(shim, recs, prep, args.bootstrap, seed, (strata, design["n"] / design["population"]))
        for key, value in truth.items():
            if value is None or not (iv or {}).get(key):
                continue
            lo, hi = iv[key]
            counted[key] = counted.get(key, 0) + 1
            hits[key] = hits.get(key, 0) + (lo - 1e-12 <= value <= hi + 1e-12)
    print(f"{task.name}: population {len(population)} scored items of {args.folder}; {args.draws} stratified samples of "
          f"{args.n}, {args.bootstrap} bootstrap resamples each")
    for key in counted:
        print(f"  {key:<14} full-set value {truth[key]:.4f}   coverage {hits[key] / counted[key]:.1%} ({counted[key]} draws)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
