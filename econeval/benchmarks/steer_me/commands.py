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
@click.option("--templates", "templates_dir", type=click.Path(path_type=Path), default=None,
              help="A writer folder (`econeval steer write`): fill its kept templates instead of the bundled ones.")
def steer_generate(elements, per_element, seed, out, templates_dir):
    """Write a fresh question set (same seed and version: byte-identical file)."""
    from .generator import covered, generate

    tax = {r["element"]: r for r in data.load(BENCHMARK, "taxonomy.jsonl")}
    if templates_dir is not None:
        return _generate_written(templates_dir, elements, per_element, seed, out, tax)
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


def _generate_written(folder: Path, elements: str, per_element: int, seed: int, out: Path, tax: dict) -> None:
    from . import written
    from .checker import check_dir
    from .generator import generate

    ws = written.load(check_dir(folder))
    used = ws.usable()
    if elements != "all":
        names = [e.strip() for e in elements.split(",") if e.strip()]
        missing = [e for e in names if e not in used]
        if missing:
            raise UsageError(f"{folder} has no usable template for {', '.join(missing)}",
                             hint="`econeval steer review DIR` lists the templates and their state")
        used = {e: used[e] for e in names}
    if not used:
        raise UsageError(f"{folder} has no usable template (none kept, or all rejected or flagged)",
                         hint="`econeval steer review DIR` lists the templates and their state")
    names = [e for e in tax if e in used]  # taxonomy order
    ident = ws.identity(used)
    items = [{**it, "template_set": ident} for it in generate(names, per_element, seed, tax, combos_of=written.combos_of(used))]
    write_atomic(out, data.jsonl_bytes(items))
    click.echo(f"wrote {len(items)} questions ({len(names)} elements × {per_element}) from {ident['templates']} written "
               f"templates (set {ident['sha256'][:12]}) to {out}", err=True)


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


# ---- auto-STEER with a model: write, check, review (writer.py, checker.py) -----------------------
def _list(values: tuple[str, ...], known: list[str], what: str) -> list[str] | None:
    """Repeatable or comma-separated values, checked against the known ones; None: all."""
    got = [v.strip() for x in values for v in x.split(",") if v.strip()]
    if not got or got == ["all"]:
        return None
    unknown = [v for v in got if v not in known]
    if unknown:
        raise UsageError(f"unknown {what}: {', '.join(unknown)}", hint=f"{what}s: {', '.join(known)}")
    return list(dict.fromkeys(got))


def _pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise UsageError(f"-M {pair}: expected KEY=VALUE")
        k, v = pair.split("=", 1)
        out[k.strip()] = v
    return out


def open_model(name: str, options: dict[str, str], seed: int, flag: str):
    """A backend for a model named as --model names one, through the public API
    (`econeval.api.open_model`), and what the folder records."""
    from ... import api

    backend, spec = api.open_model(name, options, seed, flag)
    info = backend.info()
    options = {k: str(v) for k, v in spec.options.items()}
    # what must match to continue a folder: the kind, the model's own identity (a GGUF's hash, a served
    # model's name) and the options given, not where the file lies or what this machine's memory allows
    same = {"kind": info.kind, "model": (info.model or {}).get("identity") or {"name": spec.name},
            "options": {k: v for k, v in options.items() if k != "path"}}
    return backend, {"name": spec.name, "kind": info.kind, "options": options, "model": info.model, "settings": info.settings,
                     "identity": same}


@steer.command("write")
@click.option("--writer", required=True, help="The writer model: a .gguf path, a models.toml name, PREFIX:NAME (served), fake:NAME.")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path), help="The writer folder (continued if it exists).")
@click.option("--element", "elements", multiple=True, help="Element slug(s), repeatable or comma-separated (default: all covered).")
@click.option("--domain", "domains", multiple=True, help="Domain(s) to write into (default: each template's all).")
@click.option("--perspective", "perspectives", multiple=True, help="Perspective(s) to write into (default: all).")
@click.option("--per-template", type=click.IntRange(min=0, max=100), default=1, show_default=True,
              help="Rewordings of each (domain, perspective) template.")
@click.option("--seed", type=int, default=2025, show_default=True, help="Names, rewording hints (decoding is greedy).")
@click.option("--style", type=click.Choice(["chat", "completion"]), default="chat", show_default=True,
              help="chat: the prompt as a user turn; completion: the prompt ends where the rewritten template begins and "
                   "the model continues the line (far better for small local models; a served chat-only model needs chat).")
@click.option("--model-option", "-M", "model_option", multiple=True, metavar="KEY=VALUE", help="A backend option of the writer.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def steer_write(writer, out, elements, domains, perspectives, per_template, seed, style, model_option, quiet):
    """Style-transfer the gold templates into domains, then perspectives, then reword them, with a
    writer model; every written template is validated before it is kept (auto-STEER, re-implemented)."""
    import sys

    from .generator import covered, lexicon
    from .writer import run

    els = _list(elements, covered(), "element") or covered()
    doms = _list(domains, list(lexicon()["domains"]), "domain")
    pers = _list(perspectives, list(lexicon()["perspectives"]), "perspective")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder")
    backend, ident = open_model(writer, _pairs(model_option), seed, "--writer")
    try:
        man = run(backend, ident, out, els, doms, pers, per_template, seed,
                  say=(lambda m: None) if quiet else (lambda m: print(m, file=sys.stderr, flush=True)), argv=sys.argv[1:],
                  style=style)
    finally:
        backend.close()
    t = man["total"]
    rules = ", ".join(f"{k} {v}" for k, v in t["rejected_by_rule"].items()) or "none"
    per = man["seconds_per_kept_template"]
    click.echo(f"{out}: {t['written']} templates written, {t['kept']} kept, {t['rejected']} rejected (by rule: {rules}); "
               + (f"{per} s per kept template" if per is not None else "none kept, so no time per kept template"), err=True)


@steer.command("check")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--checker", required=True, help="The checker model (as --model names one).")
@click.option("--questions", "n_questions", type=click.IntRange(min=1, max=50), default=2, show_default=True,
              help="Questions filled per template (each solved as multiple choice and as free text).")
@click.option("--threshold", type=click.FloatRange(min=0.0, max=1.0), default=0.5, show_default=True,
              help="A template whose agreement with the closed forms is below this is flagged.")
@click.option("--tokens", type=click.IntRange(min=8, max=8192), default=256, show_default=True, help="The checker's token budget per answer.")
@click.option("--seed", type=int, default=2025, show_default=True, help="The values filled in.")
@click.option("--model-option", "-M", "model_option", multiple=True, metavar="KEY=VALUE", help="A backend option of the checker.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def steer_check(folder, checker, n_questions, threshold, tokens, seed, model_option, quiet):
    """Fill each kept template, have the checker solve it, flag templates whose answers disagree
    with the closed forms; writes check.json and review.html in the folder."""
    import sys

    from . import checker as C
    from . import written

    ws = written.load(C.check_dir(folder))
    if not ws.templates:
        raise UsageError(f"{folder} holds no kept template to check")
    backend, ident = open_model(checker, _pairs(model_option), seed, "--checker")
    try:
        doc = C.run(backend, ident, ws, n_questions, threshold, tokens, seed,
                    say=(lambda m: None) if quiet else (lambda m: print(m, file=sys.stderr, flush=True)))
    finally:
        backend.close()
    s = doc["summary"]

    def pct(x):
        return "n/a" if x is None else f"{100 * x:.0f}%"
    click.echo(f"{folder}: {s['flagged']} of {s['written']['templates']} templates flagged (agreement < {threshold}); "
               f"checker agreement with the closed forms: written {pct(s['written']['agreement'])}, gold {pct(s['gold']['agreement'])}; "
               f"review page {Path(folder) / written.REVIEW_PAGE}", err=True)


@steer.command("review")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--accept", multiple=True, metavar="ID", help="Accept a template (used even if flagged); repeatable.")
@click.option("--reject", multiple=True, metavar="ID", help="Reject a template (never used); repeatable.")
@click.option("--note", default=None, help="A note saved with the decisions.")
def steer_review(folder, accept, reject, note):
    """Record decisions on written templates (review.json), or list the templates and their state."""
    from . import written
    from .checker import check_dir, review_page

    ws = written.load(check_dir(folder))
    if accept or reject:
        written.decide(ws, list(accept), list(reject), note)
        if ws.check is not None:
            write_atomic(Path(folder) / written.REVIEW_PAGE, review_page(ws).encode())
    states: dict[str, int] = {}
    for t in ws.all():
        s = ws.state(t["id"])
        states[s] = states.get(s, 0) + 1
        if not (accept or reject):
            click.echo(f"{s:<9} {t['id']}")
    click.echo(f"{folder}: " + (", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "no template written") +
               f"; {sum(len(ts) for ts in ws.usable().values())} usable", err=True)


@steer.command("contamination")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write the numbers as JSON.")
def steer_contamination(run_a, run_b, out):
    """One model on the bundled set and on a written set (two run folders, either order): accuracy
    per element and overall, and the difference with its 95% interval."""
    from .contamination import report, table

    doc = report(run_a, run_b)
    click.echo(table(doc))
    if out is not None:
        write_atomic(out, dumps(doc))
