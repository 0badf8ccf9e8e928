"""Publishing finished runs: `report` / `report_html` (the benchmarks' paper tables), `browse`
(`runs`, `view`), `gate_page` (`gate --plot`), every HTML page rendered by `pages` from the
templates/ layout (plots: `figures`), and the exports (`export`: the per-item table and lm-eval's
layout; `export_inspect`, `export_eee`; `export_read`: what they read). They read finished folders
through the store and import neither the run path nor the judges."""
