"""Running: `runner` (requests by role, chunks; a run is a `_Run` over a locked folder),
`selection` (which items run, in which order, until when), `roles` (the evaluated model and every
role a task uses, resolved and built), `shards` (`merge`), `projection` and `progress` (the
projected time, the live display). It writes through the store (`econeval.store`)."""
