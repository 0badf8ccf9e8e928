"""`econeval steer write | check | review | generate | contamination`: auto-STEER with the user's
models, added to STEER-ME's `steer` group. The writer and the checker are tasks the API runs
into ordinary run folders inside the writer folder (written.py lays it out); these commands only
parse, run and print."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import click

from ... import data
from ...api import evaluate
from ...benchmarks.steer_me.generator import covered, generate, lexicon
from ...errors import UsageError
from ...results import check_output, dumps, write_atomic, write_output
from ...run.spec import RunSpec
from ...store.runfiles import RUN_JSON
from ...store.finished import open_run
from . import written
from .check_task import TASK as CHECK_TASK
from .check_task import taxonomy
from .contamination import report, table
from .review_page import pct, render
from .write_task import TASK as WRITE_TASK
from .write_task import choose

@click.group()
def steer():
    """STEER-ME question generator (econeval's re-implementation of auto-STEER)."""  # merged into STEER-ME's `steer` group


def _pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise UsageError(f"-M {pair}: expected KEY=VALUE")
        k, v = pair.split("=", 1)
        out[k.strip()] = v
    return out


def _listed(values: tuple[str, ...]) -> str:
    """Repeatable or comma-separated values as one option value ("all" when none)."""
    got = [v.strip() for x in values for v in x.split(",") if v.strip()]
    return ",".join(got) or "all"


def _spec(model: str, options: tuple[str, ...], quiet: bool) -> RunSpec:
    return RunSpec(model=model, model_options=_pairs(options), progress=False if quiet else None, argv=tuple(sys.argv[1:]))


def _new_layout(out: Path) -> None:
    """A writer folder written by econeval 0.2.0 is read (its templates/) but not continued."""
    if out.is_dir() and not (out / written.WRITE_RUN).exists() and any((out / f).exists() for f in written.EARLIER_LAYOUT):
        raise UsageError(f"{out} was written by an earlier econeval (writer.json, written.jsonl): it is not continued",
                         hint="write into a new --out; check, review and generate still read its templates/")


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
    writer model; every written template is validated before it is kept (auto-STEER, re-implemented).
    The same command continues the folder."""
    lex = lexicon()
    options = {"elements": _listed(elements), "domains": _listed(domains), "perspectives": _listed(perspectives),
               "per_template": str(per_template), "style": style}
    choose(options["elements"], covered(), "element", "--element")  # the values checked before anything is made
    choose(options["domains"], list(lex["domains"]), "domain", "--domain")
    choose(options["perspectives"], list(lex["perspectives"]), "perspective", "--perspective")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder")
    _new_layout(out)
    out.mkdir(parents=True, exist_ok=True)
    doc = evaluate(_spec(writer, model_option, quiet), [WRITE_TASK], out=out / written.WRITE_RUN, seed=seed,
                   task_options=options, bootstrap=0)
    run = open_run(out / written.WRITE_RUN).checked()
    written.write_templates(out, written.kept_from_run(run))
    res: dict = dict(doc["tasks"][WRITE_TASK])
    t = res["written"]
    seconds = run.record.task(WRITE_TASK).seconds
    rules = ", ".join(f"{k} {v}" for k, v in t["rejected_by_rule"].items()) or "none"
    per = f"{seconds / t['kept']:.1f} s of writing per kept template" if t["kept"] and seconds else "none kept, so no time per kept template"
    errors = f"; {res['n_errors']} requests failed ({', '.join(res.get('error_reasons') or {})})" if res.get("n_errors") else ""
    click.echo(f"{out}: {t['written']} {'template' if t['written'] == 1 else 'templates'} written, {t['kept']} kept, "
               f"{t['rejected']} rejected (by rule: {rules}); {per}{errors}", err=True)
    if t["written"] and not t["kept"] and style == "chat":
        click.echo("hint: nothing was kept in the chat style; small local models follow --style completion far better "
                   "(write it into a new --out)", err=True)


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
    with the closed forms; writes check.json and review.html in the folder. The same command
    continues the check; another threshold flags again from the saved answers."""
    ws = written.load(folder, with_check=False)
    if not ws.templates:
        raise UsageError(f"{folder} holds no kept template to check")
    snapshot = dumps({"about": "the templates this check ran on (`econeval steer check`)", "templates": ws.templates})
    spec = _spec(checker, model_option, quiet)
    key = hashlib.sha256(dumps({"set": hashlib.sha256(snapshot).hexdigest(), "checker": checker, "options": spec.model_options,
                                "questions": n_questions, "tokens": tokens, "seed": seed})).hexdigest()[:12]
    where = f"{written.CHECKS_DIR}/{key}"
    run_dir, checked = Path(folder) / where, Path(folder) / f"{where}.json"
    run_dir.parent.mkdir(exist_ok=True)
    if not checked.exists():
        write_atomic(checked, snapshot)
    evaluate(spec, [CHECK_TASK], out=run_dir, seed=seed, bootstrap=0,
             task_options={"templates": str(checked), "questions": str(n_questions), "tokens": str(tokens)})
    check = written.check_of(open_run(run_dir).checked(), threshold, where)
    written.write_check_file(Path(folder), check)
    ws.check = check
    write_atomic(Path(folder) / written.REVIEW_PAGE, render(ws, sources(Path(folder))).encode())
    s = check.summary
    flagged = sum(ws.state(t["id"]) == "flagged" for t in ws.all())
    click.echo(f"{folder}: {flagged} of {len(ws.all())} templates flagged (agreement < {threshold}); checker agreement with the "
               f"closed forms: written {pct(s['written']['agreement'])}, gold {pct(s['gold']['agreement'])}; review page "
               f"{Path(folder) / written.REVIEW_PAGE}", err=True)


def sources(folder: Path) -> dict[str, str]:
    """Template id → the text the writer rewrote into it (from the writer run, where the folder has one)."""
    if not (folder / written.WRITE_RUN / RUN_JSON).exists():
        return {}
    from .write_task import jobs

    run = open_run(folder / written.WRITE_RUN)
    prep = run.preps[WRITE_TASK]
    items = {it["id"]: it for it in prep.items}
    out = {}
    for item_id, rec in run.samples.get(WRITE_TASK, {}).items():
        if item_id in items:
            for _, job, verdict in jobs(items[item_id], rec, prep.state["variants"]):
                if verdict is not None:
                    out[verdict["template_id"]] = job.source
    return out


@steer.command("review")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--accept", multiple=True, metavar="ID", help="Accept a template (used even if flagged); repeatable.")
@click.option("--reject", multiple=True, metavar="ID", help="Reject a template (never used); repeatable.")
@click.option("--note", default=None, help="A note saved with the decisions.")
def steer_review(folder, accept, reject, note):
    """Record decisions on written templates (review.json), or list the templates and their state."""
    ws = written.load(folder)
    if accept or reject:
        written.decide(ws, list(accept), list(reject), note)
        write_atomic(Path(folder) / written.REVIEW_PAGE, render(ws, sources(Path(folder))).encode())
    else:
        for t in ws.all():
            click.echo(f"{ws.state(t['id']):<9} {t['id']}")
    states = ws.states()
    usable = sum(len(ts) for ts in ws.usable().values())
    click.echo(f"{folder}: " + (", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "no kept template")
               + f"; {usable} usable", err=True)


@steer.command("generate")
@click.option("--elements", default="all", show_default=True, help="Comma-separated element slugs, or all covered ones.")
@click.option("--per-element", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--seed", type=int, default=2025, show_default=True)
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="JSONL file to write.")
@click.option("--templates", "templates_dir", type=click.Path(path_type=Path), default=None,
              help="A writer folder (`econeval steer write`): fill its usable templates instead of the bundled ones.")
def steer_generate(elements, per_element, seed, out, templates_dir):
    """Write a fresh question set (same seed and version: byte-identical file)."""
    check_output(out)
    tax = taxonomy()
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
    write_output(out, data.jsonl_bytes(items))
    click.echo(f"wrote {len(items)} questions ({len(names)} elements × {per_element}) to {out}", err=True)


def _generate_written(folder: Path, elements: str, per_element: int, seed: int, out: Path, tax: dict) -> None:
    ws = written.load(folder)
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
    write_output(out, data.jsonl_bytes(items))
    click.echo(f"wrote {len(items)} questions ({len(names)} elements × {per_element}) from {ident['templates']} written "
               f"templates (set {ident['sha256'][:12]}) to {out}", err=True)


@steer.command("contamination")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write the numbers as JSON.")
def steer_contamination(run_a, run_b, out):
    """One model on the bundled set and on a written set (two finished run folders, either order):
    accuracy per element and overall, and the difference with its 95% interval."""
    if out is not None:
        check_output(out)
    doc = report(run_a, run_b)
    click.echo(table(doc))
    if out is not None:
        write_output(out, dumps(doc))

