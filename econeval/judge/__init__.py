"""Judging runs: `compare` (the paired comparison of two finished runs and its one verdict rule),
`gate` (the sequential release gate, its betting e-processes in `sequential`) and `junit` (the
JUnit XML both write)."""
