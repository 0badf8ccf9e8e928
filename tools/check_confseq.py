"""Compare econeval's confidence sequence (econeval/sequential.py) with the `confseq` package's
predmix_empbern_twosided_cs, where that package is installed (it needs NumPy < 2).

    python tools/check_confseq.py [--sequences 200]

Prints the largest absolute difference of the bounds over random sequences (with and without a
finite population) and exits 1 if it exceeds 1e-9."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from econeval.sequential import bounds  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, default=200)
    args = ap.parse_args()
    try:
        from confseq.predmix import predmix_empbern_twosided_cs
    except Exception as exc:  # noqa: BLE001 - absent, or broken under this NumPy
        print(f"confseq is not importable here ({type(exc).__name__}: {exc})")
        return 2
    rng = np.random.default_rng(0)
    worst = 0.0
    for k in range(args.sequences):
        n = int(rng.integers(1, 3000))
        population = None if k % 2 else int(n + rng.integers(0, 3000))
        kind = k % 3
        x = rng.random(n) if kind == 0 else rng.integers(0, 2, n).astype(float) if kind == 1 else rng.choice([0, 0.5, 1], n)
        ours = bounds(x, 0.05, population, running_intersection=True)
        theirs = predmix_empbern_twosided_cs(x, alpha=0.05, N=population, running_intersection=True)
        worst = max(worst, float(np.max(np.abs(ours[0] - theirs[0]))), float(np.max(np.abs(ours[1] - theirs[1]))))
    print(f"{args.sequences} sequences: largest difference of the bounds {worst:.3g}")
    return 0 if worst <= 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
