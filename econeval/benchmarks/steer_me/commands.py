"""`econeval steer generate | elements`: STEER-ME's own commands, added to the CLI through the
registry (the core CLI names no benchmark)."""

from __future__ import annotations

from pathlib import Path

import click

from ... import data
from ...errors import UsageError
from ...results import dumps, write_atomic
from . import BENCHMARK


@click.group()
def steer():
    """STEER-ME question generator (econeval's re-implementation of auto-STEER)."""


@steer.command("generate")
@click.option("--elements", default="all", show_default=True, help="Comma-separated element slugs, or all covered ones.")
@click.option("--per-element", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--seed", type=int, default=2025, show_default=True)
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="JSONL file to write.")
def steer_generate(elements, per_element, seed, out):
    """Write a fresh question set (same seed and version: byte-identical file)."""
    from .generator import covered, generate

    tax = {r["element"]: r for r in data.load(BENCHMARK, "taxonomy.jsonl")}
    names = covered() if elements == "all" else [e.strip() for e in elements.split(",") if e.strip()]
    unknown = [e for e in names if e not in tax]
    if unknown:
        raise UsageError(f"unknown element(s): {', '.join(unknown)}", hint="`econeval steer elements` lists them")
    missing = [e for e in names if e not in covered()]
    if missing:
        raise UsageError(f"element(s) without templates yet: {', '.join(missing)}", hint="`econeval steer elements` shows coverage")
    names = [r for r in tax if r in names]  # taxonomy order
    items = generate(names, per_element, seed, tax)
    write_atomic(out, data.jsonl_bytes(items))
    click.echo(f"wrote {len(items)} questions ({len(names)} elements × {per_element}) to {out}", err=True)


@steer.command("elements")
@click.option("--json", "as_json", is_flag=True)
def steer_elements(as_json):
    """The taxonomy, with templates, types, domains and perspectives per element, and coverage."""
    from .generator import combos, covered, templates

    rows = []
    for r in data.load(BENCHMARK, "taxonomy.jsonl"):
        el = r["element"]
        cs = combos(el) if el in covered() else []
        rows.append({**r, "covered": bool(cs), "templates": len(templates().get(el, [])),
                     "types": sorted({t["type"] for t, _, _ in cs}), "domains": len({d for _, d, _ in cs}),
                     "perspectives": len({p for _, _, p in cs})})
    if as_json:
        click.echo(dumps(rows).decode())
        return
    setting = None
    for r in rows:
        if r["setting"] != setting:
            setting = r["setting"]
            click.echo(setting)
        mark = f"{r['templates']} templates, types: {', '.join(r['types'])}; {r['domains']} domains × {r['perspectives']} perspectives" \
            if r["covered"] else "not covered yet"
        click.echo(f"  {r['element']:<34} {mark}")
    n = sum(r["covered"] for r in rows)
    click.echo(f"covered: {n} of {len(rows)} elements")
