"""Coverage of `--sample` intervals on a real results population: a finished run's scored items
of one task are the population; each of --draws stratified samples (seeds 0, 1, ...) of --n items
gets the run's sampled-estimate intervals, and the script prints how often each headline and
table number's interval holds the population's number: with the task's own method (the Pólya
interval where the task declares confusion cells, else the stratified bootstrap) beside the
stratified bootstrap, from the same samples.

    .venv/bin/python tools/sample_coverage.py RUN_FOLDER --task econnli-zero [--n 100] [--draws 1000]
                                              [--bootstrap 200]

The target: between 93% and 97% at the 95% level."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from econeval import registry, sampling  # noqa: E402
from econeval.intervals import finite_numbers, headline_intervals  # noqa: E402
from econeval.store.finished import open_checked


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--task", required=True)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--bootstrap", type=int, default=200)
    args = ap.parse_args()
    run = open_checked(args.folder)
    task = registry.get_task(args.task)
    prep = run.preps[task.name]
    items = {it["id"]: it for it in prep.items}
    records = [r for r in run.samples.get(task.name, {}).values() if not r.get("skipped") and not r.get("error")]
    population = [items[r["id"]] for r in records if r["id"] in items]
    by_id = {r["id"]: r for r in records}
    truth = finite_numbers(task, records, prep)
    strata = {it["id"]: str(task.strata(it)) for it in population}
    methods = {"task's method": task}
    if task.sample_cells:
        methods["stratified bootstrap"] = type("Bootstrap", (type(task),), {"sample_cells": ()})()
    hits: dict[tuple[str, str], int] = {}
    counted: dict[tuple[str, str], int] = {}
    for seed in range(args.draws):
        drawn, design = sampling.stratified(population, task.strata, args.n, seed, task.name)
        recs = [by_id[it["id"]] for it in drawn]
        for label, t in methods.items():
            iv = headline_intervals(t, recs, prep, args.bootstrap, seed, (strata, design["n"] / design["population"]))
            for key, value in truth.items():
                if not (iv or {}).get(key):
                    continue
                lo, hi = iv[key]
                counted[label, key] = counted.get((label, key), 0) + 1
                hits[label, key] = hits.get((label, key), 0) + (lo - 1e-12 <= value <= hi + 1e-12)
    print(f"{task.name}: population {len(population)} scored items of {args.folder}; {args.draws} stratified samples of "
          f"{args.n}, {args.bootstrap} draws each")
    labels = list(methods)
    print(f"  {'number':<20} {'full-set value':>14}  " + "  ".join(f"{lab:>22}" for lab in labels))
    for key in truth:
        cells = [f"{hits[lab, key] / counted[lab, key]:.1%} ({counted[lab, key]})" if counted.get((lab, key)) else "-"
                 for lab in labels]
        print(f"  {key:<20} {truth[key]:>14.4f}  " + "  ".join(f"{c:>22}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
