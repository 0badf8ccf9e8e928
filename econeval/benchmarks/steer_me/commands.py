"""`econeval steer elements`: STEER-ME's own command, added to the CLI through the registry (the
core CLI names no benchmark); auto-STEER (econeval.plugins.auto_steer) adds write, check, review,
generate and contamination to the same group."""

from __future__ import annotations


import click

from ... import data
from ...results import dumps
from . import BENCHMARK


@click.group()
def steer():
    """STEER-ME question generator (econeval's re-implementation of auto-STEER)."""


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
