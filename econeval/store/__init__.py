"""The store: a run folder on disk and its record. `record` (run.json typed: its one reader and
writer), `runfiles` (the folder's file names), `folder` (the lock, the identity check,
samples.jsonl), `runmeta` (a run's record as it starts), `verify` (a finished run's records
re-derived) and `finished` (`open_run`: every reader of a finished folder opens it there).
Nothing here runs a model, judges two runs or renders a report."""
