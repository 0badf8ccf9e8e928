"""The papers' published result tables, as data (see econeval/report.py)."""
