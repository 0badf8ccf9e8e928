"""Maintainer step: rebuild the data package and record the built files' sha256 and row
counts in the committed manifests. Bump a manifest's version when its files change.

`refresh_manifests.py SOURCE BENCHMARK --upstream NAME`: a maintainer holding another release a
manifest names (its `upstreams` entry) records the sha256 of the release's files and of what its
build writes; from then on `econeval data build BENCHMARK --upstream NAME` accepts exactly those
files."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from econeval import data, registry  # noqa: E402

args = sys.argv[1:]
upstream = None
if "--upstream" in args:  # another release a manifest names (`upstreams`): its files' and its build's hashes recorded
    at = args.index("--upstream")
    upstream = args[at + 1]
    del args[at:at + 2]
source = Path(args[0]) if args else data.default_source()
for bench in args[1:] or data.benchmarks():
    print(bench, data.build(bench, source, registry.builder(bench, upstream), update_manifest=True, upstream=upstream))
