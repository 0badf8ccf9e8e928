"""Benchmarks, one module (or package) each. A module registers its data builder with
`registry.benchmark(NAME, build)` and its tasks with `@registry.task`; `registry.discover()`
imports every module here, so nothing lists them by hand."""
