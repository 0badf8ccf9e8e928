"""Maintainer step: rebuild the data package and record the built files' sha256 and row
counts in the committed manifests. Bump a manifest's version when its files change."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from econeval import data, registry  # noqa: E402

source = Path(sys.argv[1]) if len(sys.argv) > 1 else data.default_source()
for bench in sys.argv[2:] or data.benchmarks():
    print(bench, data.build(bench, source, registry.builder(bench), update_manifest=True))
