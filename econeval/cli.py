"""The econeval command line: it parses arguments, calls the API (api.py) and prints. User errors
print one line and exit non-zero (no traceback unless --debug); exit codes: 0 success, 1 runtime
failure, 2 usage error.

Nothing here names a benchmark or a backend: task-option shortcuts (`--adaptation`), backend
option flags (`--parallel`, `--base-url`), `--model` prefixes and extra command groups all come
from the registry.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import click

from . import data, registry, runconfig, signals
from .version import __version__
from .run import roles
from .config import N_CTX_RANGE
from .context import MAX_BOOTSTRAP, MAX_SEED
from .sampling import MAX_SAMPLE
from .errors import (EconevalError, Interrupted, UsageError, clean, counted, hide_credentials, hide_credentials_tree,
                     saved_words)
from .types import TaskOption
from .results import check_output, dumps, write_atomic, write_output

try:  # the commands below read the registry; a broken plugin is reported by main() in one line
    registry.discover()
    _DISCOVERY_ERROR: EconevalError | None = None
except EconevalError as _exc:
    _DISCOVERY_ERROR = _exc


N_CTX_HELP = "Context length in tokens (default: the model entry's n_ctx, else the model's trained context, bounded by memory)."


def _echo_json(obj) -> None:
    click.echo(dumps(obj).decode())


STDOUT = Path("-")  # `--out -`: standard output, as Unix tools read it


def _stdout(body: bytes) -> None:
    """Bytes to standard output (a closed pipe, as `| head` leaves it, ends quietly)."""
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(body)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _apart() -> str:
    """What `all` leaves out: the suites run by name only (`Task.in_all`)."""
    apart = list(dict.fromkeys(t.suite for t in registry.tasks().values() if not t.in_all))
    return f" but {', '.join(apart)}'s: run with --suite" if apart else ""


def _help() -> str:
    suites = registry.suites()
    lines = [f"  {name} ({', '.join(tasks)})" for name, tasks in suites.items() if name != "all"]
    return ("Evaluate language models on economics and finance reasoning, offline.\n\n\b\nSuites:\n"
            + "\n".join(lines) + f"\n  all (every task{_apart()})\nRun `econeval list --verbose` for tasks and their options.\n\n\b\n"
            "Quick start, on an installed econeval: the data once, from the benchmarks' upstream\n"
            "files (or a data package: econeval data install FILE.tar), then a 10-minute run of\n"
            f"every suite on the default model, with its paper tables:\n  {QUICK_DATA}\n  {QUICK_START}\n\n\b\n"
            "Environment:\n" + "\n".join(f"  {k:<19} {v}" for k, v in ENVIRONMENT.items()))


QUICK_DATA = "econeval data build --source DIR"
QUICK_START = "econeval run --suite all --budget 10m --tables"  # the run of the README's command 1 (after tools/bootstrap.sh)
ENVIRONMENT = {  # what econeval reads from the environment (docs/using.md lists the same)
    "ECONEVAL_HOME": "runs and installed data (default: the platform's user data folder)",
    "ECONEVAL_CACHE": "the assembled default model, built embedders, hashes (default: the user cache folder)",
    "ECONEVAL_DATA_DIR": "the data package's folder (manifests and built files); set but empty is refused",
    "ECONEVAL_MODELS": "one more models.toml, read after the package's and the user's",
    "ECONEVAL_PLUGINS": "modules of plugin tasks or backends to import (comma-separated)",
    "ECONEVAL_DEBUG": "any non-empty value: as --debug, full tracebacks",
    "_ECONEVAL_COMPLETE": "shell completion: eval \"$(_ECONEVAL_COMPLETE=bash_source econeval)\"",
}


def versions() -> dict:
    """econeval, each backend's engine that reports a version, and the data package (what
    `--version` prints)."""
    states = {b: data.status(b) for b in data.benchmarks()}
    built = all(st == "ok" for s in states.values() for st in s.values())
    where = sorted({str(data.files_dir(b).parent) for b in states})
    engines = {cls.engine_name: cls.engine_version() for cls in registry.backends().values() if cls.engine_name}
    return {"econeval": __version__, **engines,
            "data package": f"{data.package_version()} ({'complete' if built else 'NOT complete: econeval data build / data install'}"
                            f"; {', '.join(where)})"}


def _print_version(ctx, _param, value):
    if not value or ctx.resilient_parsing:
        return
    for k, v in versions().items():
        click.echo(f"{k}: {v}")
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, help=_help())
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the econeval version, the engines' builds and the data package, then exit.")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
def cli(debug: bool) -> None:
    pass


# ---- options the registry declares ----------------------------------------------------------
def _task_flags() -> dict[str, TaskOption]:
    """Task options with a command-line shortcut (`TaskOption.flag`), one per option name."""
    out: dict[str, TaskOption] = {}
    for t in registry.tasks().values():
        for o in t.options:
            if o.flag and o.name not in out:
                out[o.name] = o
    return out


def _task_options(fn):
    """-T NAME=VALUE, and each task option's documented shortcut."""
    for name, o in reversed(list(_task_flags().items())):
        assert o.flag is not None  # _task_flags holds the options with one
        what = f"Shortcut for -T {name}=... ({', '.join(sorted({t.name for t in registry.tasks().values() if o in t.options}))}): {o.help}"
        if o.kind == "bool":
            fn = click.option(o.flag, f"topt_{name}", is_flag=True, default=None, help=what)(fn)
        elif o.kind == "path":
            fn = click.option(o.flag, f"topt_{name}", type=click.Path(exists=True, path_type=Path), help=what)(fn)
        else:
            fn = click.option(o.flag, f"topt_{name}", type=click.Choice(list(o.choices)) if o.choices else str, default=None,
                              help=what)(fn)
    return click.option("--task-option", "-T", "task_option", multiple=True, metavar="NAME=VALUE",
                        help="Set a task option on every selected task that declares it (repeatable); "
                             "`econeval list --verbose` shows each task's options.")(fn)


_CLICK_TYPES = {int: click.INT, float: click.FLOAT, str: click.STRING, bool: click.BOOL}


def _model_options(fn):
    """-M KEY=VALUE, and each backend option's documented flag (--parallel, --base-url, ...)."""
    for key, flags, typ, help_text, many in reversed(list(roles.flags().values())):
        owners = sorted(k for k, cls in registry.backends().items() if key in cls.Options.fields())
        fn = click.option(*flags, f"mopt_{key}", type=_CLICK_TYPES.get(typ, click.STRING), default=None, multiple=many,
                          help=f"Same as -M {key}=... ({', '.join(owners)}): {help_text}"
                               + (" (repeatable)." if many else "."))(fn)
    return click.option("--model-option", "-M", "model_option", multiple=True, metavar="KEY=VALUE",
                        help="Set a backend option of the model (and of the judge, where its backend declares it); "
                             "`econeval models options` lists them. Recorded in run.json.")(fn)


def _role_option(fn):
    """--role NAME=MODEL: the model for a role a task uses (its own, or the judge's, the embedder's)."""
    return click.option("--role", "role", multiple=True, metavar="NAME=MODEL",
                        help="The model for a role the tasks use besides the evaluated model (repeatable; --judge and "
                             "--embedder are shortcuts for their roles); recorded in run.json's roles.")(fn)


def _pairs(pairs, flag: str) -> dict:
    out: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise UsageError(f"{flag} {pair}: expected NAME={'MODEL' if flag == '--role' else 'VALUE'}")
        name, value = pair.split("=", 1)
        if name.strip() in out and out[name.strip()] != value:
            raise UsageError(f"{flag} {name.strip()}= is given twice ({out[name.strip()]!r} and {value!r})",
                             hint="give each name once")
        out[name.strip()] = value
    return out


def _from_file(param: str) -> list[str]:
    """A repeatable NAME=VALUE option's pairs from the --config file (the command line's go over
    them key by key: click's default_map would replace the whole table)."""
    ctx = click.get_current_context(silent=True)
    return list(((ctx.meta.get("econeval_config_pairs") or {}).get(param) or []) if ctx else [])


def _roles_given(role, *shortcuts: tuple[str, str | None]) -> dict:
    """The roles named: the --config file's, then the command line's over them (a role the command
    line names by --role or a shortcut such as --judge replaces the file's)."""
    given = _pairs(role, "--role")
    named = set(given) | {name for name, value in shortcuts if value is not None and not _from_config(name)}
    return {**{k: v for k, v in _pairs(_from_file("role"), "--role").items() if k not in named}, **given}


def _from_config(param: str) -> bool:
    """Whether a parameter's value came from the --config file (click's default_map)."""
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(param) == click.core.ParameterSource.DEFAULT_MAP


def _collect_options(task_option, kw: dict) -> dict:
    out = _pairs(_from_file("task_option"), "-T")
    for key, value in list(kw.items()):
        if key.startswith("topt_"):
            kw.pop(key)
            if value is not None and value is not False:
                out[key[5:]] = str(value) if isinstance(value, Path) else value
    return {**out, **_pairs(task_option, "-T")}


def _collect_model_options(model_option, kw: dict) -> dict:
    out = _pairs(_from_file("model_option"), "-M")
    for key, value in list(kw.items()):
        if key.startswith("mopt_"):
            kw.pop(key)
            if value is not None and value != ():
                out[key[5:]] = list(value) if isinstance(value, tuple) else value
    return {**out, **_pairs(model_option, "-M")}


def _config_option(section: str):
    """`--config FILE`: the file's [section] gives the defaults of the command's other options
    (click's default_map; the command line wins), and ctx.meta what run.json records."""

    def load(ctx: click.Context, _param, value):
        if value is None or ctx.resilient_parsing:
            return value
        values, record = runconfig.defaults(Path(value), section)
        ctx.meta["econeval_config_pairs"] = {k: values.pop(k) for k in runconfig.PAIRS if k in values}
        ctx.default_map = {**(ctx.default_map or {}), **values}
        ctx.meta["econeval_config"] = record
        return value

    return click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
                        is_eager=True, expose_value=False, callback=load,
                        help=f"A TOML file whose [{section}] table sets this command's options (the command line wins); "
                             "recorded in run.json.")


# ---- shell completion (click's: _ECONEVAL_COMPLETE=bash_source econeval) ------------------------
def _names(names, incomplete: str, described: Mapping[str, str] | None = None) -> list:
    from click.shell_completion import CompletionItem

    return [CompletionItem(n, help=(described or {}).get(n)) for n in names if n.startswith(incomplete)]


def complete_tasks(_ctx, _param, incomplete: str) -> list:
    """Task names, each with its description."""
    return _names(registry.tasks(), incomplete, {n: t.description for n, t in registry.tasks().items()})


def complete_suites(_ctx, _param, incomplete: str) -> list:
    return _names(registry.suites(), incomplete)


def complete_data_names(_ctx, _param, incomplete: str) -> list:
    """`data export`'s NAME: a benchmark, or a task (with --prompts)."""
    return _names([*data.benchmarks(), *registry.tasks()], incomplete)


def complete_benchmarks(_ctx, _param, incomplete: str) -> list:
    return _names(data.benchmarks(), incomplete)


def complete_models(_ctx, _param, incomplete: str) -> list:
    """The registry's model names, the served prefixes (`PREFIX:`), and files (a model path)."""
    from click.shell_completion import CompletionItem

    try:
        reg = roles.load_models()
        named = {n: m.description for n, m in reg.models.items()}
    except EconevalError:  # a broken models.toml: the prefixes and files still complete
        named = {}
    return (_names(named, incomplete, named) + _names([f"{p}:" for p in registry.prefixes()], incomplete)
            + [CompletionItem(incomplete, type="file")])


def complete_embedders(_ctx, _param, incomplete: str) -> list:
    from click.shell_completion import CompletionItem

    try:
        named = {n: m.description for n, m in roles.load_models().embedders.items()}
    except EconevalError:
        named = {}
    return _names(named, incomplete, named) + [CompletionItem(incomplete, type="dir")]


def _prefix_help() -> str:
    return ", ".join(f"{p}:NAME" for p in registry.prefixes())


# ---- run ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _RunFlags:
    """The shared flags of `run` and `gate` as given (the commands' own conflict checks read
    `model` and `new`); `spec()` parses the rest (-M pairs and the backends' flags, --role) into
    the RunSpec, with the command line and a --config file's settings as run.json records them."""

    model: str | None
    n_ctx: int | None
    chat: str | None
    model_option: tuple[str, ...]
    backend_flags: dict[str, Any]  # --parallel, --base-url, ...: -M's shortcuts, by their click names (mopt_KEY)
    embedder: str | None
    judge: str | None
    role: tuple[str, ...]
    quiet: bool
    new: bool

    def spec(self):
        from .api import program
        from .run.spec import RunSpec

        return RunSpec(model=self.model, model_options=_collect_model_options(self.model_option, dict(self.backend_flags)),
                       n_ctx=self.n_ctx, chat=self.chat, embedder=self.embedder, judge=self.judge,
                       roles=_roles_given(self.role, ("judge", self.judge), ("embedder", self.embedder)),
                       progress=not self.quiet, argv=(*program(), *sys.argv[1:]), new=self.new,
                       config_file=click.get_current_context().meta.get("econeval_config"))


def _run_spec_options(candidate: bool = False):
    """The flags `run` and `gate` share for the model and how it runs (--model, --n-ctx, --chat, -M
    and the backends' flags, --embedder, --judge, --role, --quiet), declared once here and handed
    to the command as `flags` (_RunFlags): the command checks its own conflicts first, then
    `flags.spec()` parses them into one RunSpec (run/spec.py); run's --new goes into it too.
    `candidate`: the gate's wording (the model is the candidate; the judge defaults to the
    baseline's)."""

    def decorate(fn):
        @functools.wraps(fn)
        def command(*args, model, n_ctx, chat, model_option, embedder, judge, role, quiet, **kw):
            backend_flags = {key: kw.pop(key) for key in list(kw) if key.startswith("mopt_")}
            flags = _RunFlags(model, n_ctx, chat, model_option, backend_flags, embedder, judge, role, quiet, bool(kw.pop("new", False)))
            return fn(*args, flags=flags, **kw)

        flags = [
            click.option("--model", "-m", shell_complete=complete_models,
                         help=("The candidate model (as for `run`; default: the registry's default model)." if candidate else
                               "A model file, a name from models.toml, or PREFIX:NAME for a served model (" + _prefix_help()
                               + "). Default: the registry's default model.")),
            click.option("--n-ctx", type=click.IntRange(*N_CTX_RANGE), help=N_CTX_HELP),
            click.option("--chat", type=click.Choice(["auto", "on", "off"]),
                         help="Chat template: auto (each task's default, as its paper's code did, when the model has a "
                              "template), on (every request), off (raw prompts). Default: the model's entry (auto). "
                              "Recorded in run.json."),
            _model_options,
            click.option("--embedder", "-e", shell_complete=complete_embedders,
                         help="Sentence embedder for tasks scored by similarity: a models.toml name or a folder "
                              "(default: the registry's default embedder)."),
            click.option("--judge", shell_complete=complete_models,
                         help="Judge model for the tasks that use one (a model file, a models.toml name or PREFIX:NAME; "
                              + ("default: the baseline's, where it named one)." if candidate else
                                 "default: the evaluated model).")),
            _role_option,
            click.option("--quiet", "-q", is_flag=True, help="No progress display."),
        ]
        for flag in reversed(flags):
            command = flag(command)
        return command

    return decorate


@cli.command()
@_run_spec_options()
@click.option("--suite", "-s", default=None, shell_complete=complete_suites,
              help="Suite to run: " + ", ".join(registry.suites()) + " (default: all).")
@click.option("--task", "-t", "tasks", multiple=True, shell_complete=complete_tasks,
              help="Run only this task (repeatable); instead of --suite.")
@click.option("--limit", "-n", type=click.IntRange(min=1, max=MAX_SAMPLE),
              help="Evaluate only the first N items of each task (a task may count them per sub-task or element).")
@click.option("--sample", metavar="N|F", help="Evaluate a seeded stratified sample of each task: N items, or a fraction F "
              "(0.1); numbers are estimates of the full set's, with intervals to match. A folder extends to a larger "
              "sample or the full set without re-running.")
@click.option("--budget", metavar="DURATION", help="Run what fits in this much time (300, 90s, 10m, 1h; the model's loading "
              "counts): no chunk starts that is projected to end after it, and the chunk in flight at its end is cut off "
              "and runs again on resume; the items run in a seeded order that grows a stratified sample of every task, "
              "the tasks taking turns, and the numbers are estimates of the full set's, with intervals. The same command "
              "without --budget continues the folder to the full set.")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED),
              help="Seed for few-shot draws and --sample (recorded in run.json; default 1234, and for a benchmark whose "
                   "authors' protocol names a seed, its draws use that one: the task's settings in run.json say which).")
@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path),
              help="Run folder (default: the run's own folder under the data dir, named by model, tasks, options and seed, "
                   "so the same command resumes it). A folder of the same run, or of some of its tasks, is resumed.")
@click.option("--new", is_flag=True, help="Start a new run folder (timestamped) instead of resuming the run's own.")
@click.option("--epochs", type=click.IntRange(min=1),
              help="Repeat the run N times with N seeds (epoch 1 as given, epoch k with its seeds moved by k-1: --seed S+k-1), each into its own "
                   "run folder OUT/epoch-K (resumed as any run folder); the summary and `econeval report OUT` show each "
                   "number as the mean ± std over the epochs.")
@_task_options
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0, max=MAX_BOOTSTRAP), default=1000, show_default=True,
              help="Bootstrap resamples for the 95% intervals of the headline numbers (0: none).")
@click.option("--shard", metavar="K/N|auto", help="Run only shard K of N (the chunks whose index is K-1 mod N) into "
              "OUT/shard-K-of-N; auto: from a Slurm job array or a Kubernetes Indexed Job. `econeval merge` joins them.")
@click.option("--shard-count", type=click.IntRange(min=1), help="With --shard auto in a Kubernetes Indexed Job: its completions.")
@click.option("--json", "as_json", is_flag=True, help="Print results.json, with the run folder as `run_folder`, on stdout "
              "instead of the summary table.")
@click.option("--tables", is_flag=True, help="Then print the paper tables of the run folder (as `econeval report FOLDER`).")
@_config_option("run")
def run(flags, suite, tasks, limit, sample, budget, seed, out, epochs, task_option, n_boot, shard, shard_count, as_json, tables,
        **kw):
    """Evaluate a model and write run.json, samples.jsonl and results.json."""
    from .api import evaluate

    if flags.new and out:
        raise UsageError("--new and --out together: --new makes a new folder of its own", hint="pass one of them")
    options = _collect_options(task_option, kw)
    spec = flags.spec()
    from .run import shards
    from .run.selection import from_flags

    selection = from_flags(limit=limit, sample=sample, budget=budget, shard=shards.parse(shard, shard_count))
    doc = evaluate(spec, tasks, suite=suite, selection=selection, out=out, seed=seed, task_options=options, bootstrap=n_boot,
                   epochs=epochs)
    folder = doc.pop("run_folder")
    if as_json:  # results.json, and the folder it is in (a script's next command needs it)
        _echo_json({"run_folder": str(folder), **doc})
    else:
        click.echo(clean(f"model: {doc['model']}   run folder: {folder}"))
        if doc.get("epochs"):
            click.echo(f"  the means over {len(doc['epochs'])} epochs (seeds {', '.join(str(e['seed']) for e in doc['epochs'])}; "
                       "`econeval report` shows each number ± its std)")
        rows = summary_rows(doc)
        if sys.stdout.isatty():  # a terminal: rich lays the table out to its width, never breaking a number
            from rich.console import Console

            Console(highlight=False).print(summary_table(rows))
        else:  # a pipe or a log: one line per task, as scripts read it
            for r in rows:
                click.echo(f"  {r['task']:<22} n {r['n']:>5}  unparsed {r['unparsed']:>4}  skipped {r['skipped']:>3}  "
                           f"errors {r['errors']:>3}  {'  '.join(r['cells'])}{r['estimate']}")
        for name in doc.get("not_reached", []):
            click.echo(f"  {name:<22} not reached: the budget left no time for its first chunk (a larger --budget runs it)")
    if tables:
        from .publish.report import build, render

        click.echo("\n" + render(build([Path(folder)]), "md"))
    _check_outcome(doc)


def summary_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each task's line of the run's summary: its counts, and each headline number with its
    interval (a --sample or --budget run's) as one cell."""
    out = []
    for name, res in doc["tasks"].items():
        ivs = res.get("intervals") or {}
        cells = [f"{k} {_fmt(v)}" + (f" [{ivs[k][0]:.3f}, {ivs[k][1]:.3f}]" if res.get("estimate") and ivs.get(k) else
                                     " [no interval: no item parsed]" if res.get("estimate") and k in ivs and v is not None
                                     else "")
                 for k, v in registry.get_task(name).headline(res).items()]
        est = f"  (estimates: {res['estimate']['from']:,} of {res['estimate']['of']:,} items)" if res.get("estimate") else ""
        count = (lambda v: f"{v:.1f}" if isinstance(v, float) else v)  # a mean over --epochs: not a whole count
        out.append({"task": name, "n": count(res["n"]), "unparsed": count(res.get("n_unparsed", 0)), "skipped": count(res["n_skipped"]),
                    "errors": count(res["n_errors"]), "cells": cells, "estimate": est})
    return out


def summary_table(rows: list[dict[str, Any]]):
    """The summary as rich lays it out on a terminal: per task a line of its counts, then its
    numbers in columns that fit the width, each number with its interval kept whole (a line
    breaks between numbers, never inside one)."""
    from rich.columns import Columns
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text

    parts: list = []
    for r in rows:
        head = Text(f"{r['task']}", style="bold")
        head.append(f"  n {r['n']:,}  unparsed {r['unparsed']}  skipped {r['skipped']}  errors {r['errors']}", style="default")
        parts.append(head)
        cells = [*r["cells"], *([r["estimate"].strip()] if r["estimate"] else [])]
        parts.append(Padding(Columns([Text(c, no_wrap=True) for c in cells], padding=(0, 3)), (0, 0, 0, 2)))
    return Group(*parts)


def _check_outcome(doc: Mapping[str, Any]) -> None:
    """Items with errors, or a task with nothing scored, make the exit code non-zero."""
    problems = []
    for name, res in doc["tasks"].items():
        if res.get("n_errors"):
            problems.append(f"{name}: {res['n_errors']} item(s) with errors ({', '.join(res['error_reasons'])})")
        elif res["n"] and res["n_skipped"] == res["n"]:
            problems.append(f"{name}: all {res['n']} items skipped ({', '.join(res.get('skip_reasons', {}))}); no metric computed")
    if problems:
        raise EconevalError("; ".join(problems), hint="see samples.jsonl; the results are written")
    if not doc["tasks"] and doc.get("not_reached"):
        raise EconevalError(f"nothing was evaluated: the budget left no time for the first chunk of "
                            f"{', '.join(doc['not_reached'])}", hint="a larger --budget (the model's loading counts)")


# ---- score -------------------------------------------------------------------------------
@cli.command()
@click.option("--task", "-t", "task_name", required=True, shell_complete=complete_tasks,
              help="Task whose parser and metrics to use (`econeval list` names them).")
@click.option("--predictions", "-p", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help='JSON Lines: {"id": "...", "response": "raw model text"} per item, optionally "option_logprobs"; '
                   "or a run's samples.jsonl (its lines of this task).")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED),
              help="Seed the predictions were made with (few-shot draws; default as for run).")
@click.option("--embedder", "-e", shell_complete=complete_embedders,
              help="Sentence embedder for tasks scored by similarity (default: the registry's default).")
@click.option("--judge", shell_complete=complete_models,
              help="Judge model for the tasks that use one (a model file, a models.toml name or PREFIX:NAME).")
@_role_option
@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path),
              help="Also write a run folder (run.json, samples.jsonl, results.json), e.g. for `econeval compare`.")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0, max=MAX_BOOTSTRAP), default=1000, show_default=True,
              help="Bootstrap resamples for the 95% intervals of the headline numbers (0: none).")
@_task_options
def score(task_name, predictions, seed, embedder, judge, role, out, n_boot, task_option, **kw):
    """Score predictions made elsewhere; print the results JSON on stdout."""
    from .api import program, score_predictions

    doc = score_predictions(task_name, predictions, seed=seed, task_options=_collect_options(task_option, kw), judge=judge,
                            embedder=embedder, roles=_roles_given(role, ("judge", judge), ("embedder", embedder)), out=out,
                            bootstrap=n_boot,
                            argv=[*program(), *sys.argv[1:]])
    _echo_json(doc)


# ---- merge -------------------------------------------------------------------------------
@cli.command("merge")
@click.argument("shard_dirs", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False, path_type=Path), help="The merged run folder (new).")
def merge_cmd(shard_dirs, out):
    """Join the N shard folders of one `run --shard` command into the folder one process would
    have written (the same samples.jsonl and results.json)."""
    from .run.shards import merge

    doc = merge(list(shard_dirs), out)
    click.echo(clean(f"econeval: merged {len(shard_dirs)} shards into {out} ({', '.join(doc['tasks'])})"), err=True)


# ---- report ------------------------------------------------------------------------------
@cli.command("report")
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["md", "csv", "json", "html"]), default="md", show_default=True)
@click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=Path, allow_dash=True),
              help="Write the report to this file (default, or -: stdout).")
def report_cmd(runs, fmt, out):
    """Each benchmark's paper tables: the runs' rows (with 95% intervals and item counts) beside
    the papers' published rows, deviations under each table. With several runs, each later run is
    also compared with the first. html: one self-contained file with plots (plots need the
    `report` extra: matplotlib)."""
    from .judge.compare import render_entry, report_entry
    from .publish.report import build, render

    if out == STDOUT:
        out = None
    if out:
        check_output(out)
    text = render(build(list(runs), compare=report_entry), fmt, compare_md=render_entry)
    if out:
        write_output(out, text.encode("utf-8"))
        click.echo(f"econeval: report written to {out}", err=True)
    else:
        click.echo(text)


# ---- runs / view -------------------------------------------------------------------------
@cli.command("runs")
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
def runs_cmd(paths, as_json):
    """List past runs (newest first): folder, status, model, tasks, items saved, date, headline
    numbers. PATHS: run folders or folders of them (default: the data dir's runs)."""
    from .publish.browse import list_runs, render_runs

    rows = list_runs(list(paths))
    if as_json:
        _echo_json(rows)
    else:
        click.echo(clean(render_runs(rows)))


@cli.command("view")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--task", "-t", "tasks", multiple=True, shell_complete=complete_tasks, help="Only this task's items (repeatable).")
@click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="The page to write (default: RUN_DIR.view.html beside the run folder; nothing is written inside it).")
def view_cmd(run_dir, tasks, out):
    """Write one self-contained HTML page of a run's answers: filter by task, outcome (correct,
    wrong, unparsed, ...) and group (sub-task, element); each item's prompt, response, gold,
    parse and scores."""
    from .publish.browse import write_view

    folder = run_dir.resolve()
    out = out or folder.parent / f"{folder.name}.view.html"
    if out.resolve().parent == folder or folder in out.resolve().parents:
        raise UsageError(f"--out {out} is inside the run folder: nothing but the run's own files may be written there",
                         hint="name a page outside it (the default is RUN_DIR.view.html beside the folder)")
    check_output(out)
    write_view(run_dir, out, tasks)
    click.echo(clean(f"econeval: view written to {out}"), err=True)


# ---- compare -----------------------------------------------------------------------------
@cli.command("export")
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--format", "fmt", required=True, type=click.Choice(["table", "lm-eval", "inspect", "every-eval-ever"]),
              help="table: one row per item (FILE.csv, or FILE.parquet with pyarrow); lm-eval: lm-evaluation-harness's "
                   "results.json layout (one run); inspect: a folder of Inspect eval logs, one per task (one run; inspect_ai); "
                   "every-eval-ever: the run's aggregate Every Eval Ever record (one run).")
@click.option("--out", "-o", required=True, type=click.Path(path_type=Path, allow_dash=True),
              help="The file (a folder for inspect) to write; an earlier export there is replaced, anything else left alone. "
                   "-: standard output (a table as CSV).")
@click.option("--developer", help="every-eval-ever and lm-eval: who made the model (e.g. google), where the run does not say "
                                  "(models.toml's `developer`, the model file's own metadata); otherwise \"unknown\" "
                                  "(lm-eval: the bare model name in model_args).")
@click.option("--log-format", type=click.Choice(["eval", "json"]),
              help="inspect: the logs' format, Inspect's own: eval (the default: `inspect view` lists each log's samples, "
                   "tokens, duration and task arguments) or json (plain JSON; written faster for a task of thousands of items).")
def export_cmd(runs, fmt, out, developer, log_format):
    """Write finished runs in a shape other tools open: a tidy per-item table for pandas and R,
    lm-eval's results.json, Inspect eval logs, or an Every Eval Ever record (docs/exports.md)."""
    from .publish.export import export

    n = export(list(runs), fmt, out, developer=developer, log_format=log_format)
    what = {"table": "row", "lm-eval": "task", "inspect": "task log", "every-eval-ever": "evaluation result"}[fmt]
    click.echo(clean(f"econeval: {counted(n, what)} written to {'standard output' if out == STDOUT else out}"), err=True)


@cli.command("compare")
@click.argument("baseline", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.argument("candidate", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--max-drop", type=click.FloatRange(min=0), default=0.02, show_default=True,
              help="A metric regresses when it gets worse by more than this and the 95% interval excludes zero.")
@click.option("--metric", "metrics", multiple=True, help="Only these headline metrics (repeatable; default: all).")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=100), default=1000, show_default=True,
              help="Paired bootstrap resamples for the intervals (the report's comparison uses the same).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@click.option("--allow-missing", is_flag=True, help="Compare what both runs have when the candidate lacks tasks or items the "
              "baseline scored (default: refused, exit 2); the output says how many were dropped.")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), help="Also write JUnit XML (one test case per task and metric).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md"]), default="text", show_default=True)
@_config_option("gate")
def compare_cmd(baseline, candidate, max_drop, metrics, n_boot, seed, allow_missing, junit, fmt):
    """Compare two runs item by item (a release gate): exit 0 pass, 1 when a metric regresses,
    3 inconclusive (too few items to rule out a drop of --max-drop), 2 when the runs cannot be
    compared (or the candidate lacks what the baseline has)."""
    from .judge.compare import compare, junit as junit_xml, render, terminal
    from .judge.junit import check_target, write as write_junit
    from .judge.terminal import show

    if junit:
        check_target(junit)
    result = compare(baseline, candidate, max_drop=max_drop, metrics=metrics, n_boot=n_boot, seed=seed,
                     allow_missing=allow_missing)
    if junit:
        write_junit(junit, junit_xml(result))
    if fmt == "json":
        _echo_json({"baseline": str(baseline), "candidate": str(candidate), **result.as_dict()})
    elif fmt == "md":
        click.echo(clean(render(result)))
    else:
        show(terminal(result))
    if result.verdict == "regression":
        bad = [f"{r.task} {r.metric}" for r in result.rows if r.verdict == "regression"]
        click.echo(f"econeval: regression: {', '.join(bad)}", err=True)
        sys.exit(1)
    if result.verdict == "inconclusive":
        sys.exit(3)


@cli.command("gate")
@_run_spec_options(candidate=True)
@click.argument("baseline", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--max-drop", type=click.FloatRange(min=0), default=0.02, show_default=True,
              help="Pass when every gated metric's interval lies above -max-drop; regression when one lies below.")
@click.option("--alpha", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True), default=0.05, show_default=True,
              help="The chance that the verdict is wrong, however early the gate stops (pass: each metric at alpha; "
                   "regression: alpha split over the gated metrics).")
@click.option("--budget", metavar="DURATION", help="Run what fits in this much time (300, 90s, 10m, 1h; as run's --budget): "
              "metrics still open are inconclusive.")
@click.option("--metric", "metrics", multiple=True, help="Gate only these item metrics (repeatable; default: every task's).")
@click.option("--replay", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="A finished candidate run folder instead of --model: its items in the gate's order until the gate "
                   "decides (what a gate would have used).")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), help="Also write JUnit XML (one test case per task and metric).")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the gate's progress as an HTML page: each gated metric's e-processes against their "
                   "thresholds, by items spent (needs matplotlib: econeval[report]).")
@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path),
              help="The candidate's run folder (default: the run's own folder under the data dir; resumable).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def gate_cmd(baseline, flags, max_drop, alpha, budget, metrics, replay, junit, plot, out, fmt):
    """Sequential release gate: run the candidate on BASELINE's items in a seeded random order and
    stop as soon as every gated metric is decided. Exit 0 pass, 1 regression, 3 inconclusive (at
    the budget or the end of the items), 2 usage."""
    from .judge.gate import gate, junit as junit_xml, terminal
    from .judge.junit import check_target, write as write_junit
    from .judge.terminal import show

    if replay and (flags.model or out or budget):
        raise UsageError("--replay with --model, --out or --budget: a replay runs no model", hint="pass one of them")
    if junit:
        check_target(junit)  # before the model runs
    if plot:
        from .publish import figures, gate_page

        check_output(plot, "--plot")
        if not figures.available():
            raise UsageError("--plot needs matplotlib", hint='pip install "econeval[report]"')
    result = gate(baseline, flags.spec(), max_drop=max_drop, alpha=alpha, budget=budget, metrics=metrics, replay=replay, out=out)
    if junit:
        write_junit(junit, junit_xml(result.rows, result.max_drop))
    if plot:
        write_atomic(plot, gate_page.render(result.progress, result.verdict, result.verdict_line).encode())
    if fmt == "json":
        _echo_json(result.as_dict())
    else:
        show(terminal(result))
        click.echo(clean(f"candidate run folder: {result.candidate}"))
    sys.exit({"pass": 0, "regression": 1, "inconclusive": 3}[result.verdict])


# ---- list / models -----------------------------------------------------------------------
@cli.command("list")
@click.option("--verbose", "-v", is_flag=True, help="Also show each task's options (set with -T NAME=VALUE).")
@click.option("--json", "as_json", is_flag=True)
def list_cmd(verbose, as_json):
    """Show suites, their tasks and the tasks' options."""
    s = registry.suites()
    tasks = registry.tasks()
    if as_json:
        _echo_json({"suites": s, "tasks": {n: {"suite": t.suite, "prompt_version": t.prompt_version, "description": t.description,
                                               "options": [{"name": o.name, "default": o.default, "choices": o.choices,
                                                            "kind": o.kind, "help": o.help, "flag": o.flag} for o in t.options],
                                               "metrics": [{"name": m.name, "direction": m.direction, "paired_exact": m.paired_exact}
                                                           for m in t.metrics]}
                                           for n, t in tasks.items()}})
        return
    width = max([22, *map(len, tasks)])
    for suite, names in s.items():
        if suite == "all":
            continue
        click.echo(f"{suite}")
        for n in names:
            click.echo(f"  {n:<{width}} {tasks[n].description}")
            for o in tasks[n].options if verbose else ():
                choices = f" [{'|'.join(o.choices)}]" if o.choices else ""
                flag = f" (shortcut {o.flag})" if o.flag else ""
                click.echo(f"      -T {o.name}=...{choices} (default {o.default}){flag}: {o.help}")
    click.echo(f"all: every task above{_apart()}")


@cli.group()
def models():
    """The model registry (models.toml) and the backends."""


@models.command("list")
@click.option("--json", "as_json", is_flag=True)
def models_list(as_json):
    """Show registered models and embedders."""
    from . import config

    reg = roles.load_models()
    if as_json:
        from dataclasses import asdict

        _echo_json(hide_credentials_tree({"default": reg.default_model, "default_embedder": reg.default_embedder,
                                          "models": {k: asdict(v) for k, v in reg.models.items()},
                                          "embedders": {k: asdict(v) for k, v in reg.embedders.items()}}))
        return
    for section, default in (("models", reg.default_model), ("embedders", reg.default_embedder)):
        entries = getattr(reg, section)
        if entries:
            click.echo(f"{section}:")
        for name, m in entries.items():
            mark = "*" if name == default else " "
            click.echo(hide_credentials(f" {mark} {name:<20} {registry.backend_class(m.kind).describe_spec(m)}"))
            for extra in (f"licence: {m.options['licence']}" if m.options.get("licence") else "", m.description):
                if extra:
                    click.echo(f"      {extra}")
    click.echo("registry files: " + (", ".join(map(str, config.registry_paths())) or "none"))


@models.command("options")
@click.option("--json", "as_json", is_flag=True)
def models_options(as_json):
    """Each backend kind, its --model prefix and its options (set in models.toml or with -M KEY=VALUE)."""
    rows: list[dict[str, Any]] = []
    for kind, cls in registry.backends().items():
        types = cls.Options.option_types()
        rows.append({"kind": kind, "prefix": cls.prefix,
                     "serves": [r for r in ("model", *registry.roles()) if registry.role(r).serves in cls.serves], "description": cls.description,
                     "options": [{"name": n, "type": types[n].__name__,
                                  "multiple": bool(f.metadata.get("multiple")),
                                  "default": f.default, "flags": list(f.metadata.get("flags", ())), "help": f.metadata.get("help", "")}
                                 for n, f in cls.Options.fields().items()]})
    if as_json:
        _echo_json(rows)
        return
    for r in rows:
        click.echo(f"{r['kind']}{' (--model ' + r['prefix'] + ':NAME)' if r['prefix'] else ''}: {r['description']}")
        for o in r["options"]:
            flags = f" ({', '.join(o['flags'])})" if o["flags"] else ""
            click.echo(f"    {o['name']}{flags}: {o['help']} [default {o['default']}]")


@models.command("check")
@click.argument("name", shell_complete=complete_models)
@_model_options
def models_check(name, model_option, **kw):
    """Check that a model can be used (its backend's own check: a served model's server answers
    and serves it; a model file is readable). Prints what identifies it."""
    from .backends.base import Settings

    options = _collect_model_options(model_option, kw)
    spec = roles.resolve(name)
    spec = roles.with_options(spec, roles.split_options(options, {"model": spec})["model"])
    click.echo(roles.check_line(spec, Settings()))


def _add_registered_commands() -> None:
    """The command groups benchmarks and plugins register (`commands="module:attribute"`); a
    plugin's group of the same name as a benchmark's adds its subcommands to it (a tool's commands
    beside the benchmark's own)."""
    import importlib

    for ext in registry.extensions():
        if not ext.commands:
            continue
        mod, _, attr = ext.commands.partition(":")
        try:
            cmd = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as exc:
            raise UsageError(f"{ext.name} names commands '{ext.commands}', which cannot be loaded ({exc})") from None
        have = cli.commands.get(cmd.name or "")
        if have is None:
            cli.add_command(cmd)
            continue
        if have is cmd:
            continue
        if not (isinstance(have, click.Group) and isinstance(cmd, click.Group)):
            raise UsageError(f"{ext.name} registers the command '{cmd.name}', which another benchmark or plugin has")
        for name, sub in cmd.commands.items():
            if name in have.commands and have.commands[name] is not sub:
                raise UsageError(f"{ext.name} registers '{cmd.name} {name}', which another benchmark or plugin has")
            have.add_command(sub, name)


# ---- data --------------------------------------------------------------------------------
@cli.group("data")
def data_group():
    """The bundled, versioned benchmark data."""


@data_group.command("build")
@click.argument("names", nargs=-1, shell_complete=complete_benchmarks)
@click.option("--source", type=click.Path(file_okay=False, path_type=Path),
              help="Folder with the upstream benchmark folders (default: ../shared/datasets beside the repository).")
@click.option("--upstream", metavar="NAME", help="Build from another release the benchmark's manifest names (`data list` "
              "shows them), its files accepted by the manifest's hashes; run.json's data fingerprint then names it. "
              "Without it: the manifest's own upstream.")
def data_build(names, source, upstream):
    """Build the normalised JSONL files from the upstream files."""
    source = source or data.default_source()
    if not source.is_dir():
        raise UsageError(f"source folder not found: {source}", hint="pass --source DIR")
    if upstream is not None and not names:
        raise UsageError("--upstream names one benchmark's release: name the benchmark", hint="econeval data build BENCHMARK --upstream NAME")
    for name in names or data.benchmarks():
        counts = data.build(name, source, (lambda src, name=name: registry.builder(name, upstream)(src)), upstream=upstream)
        click.echo(f"{name}{f' (upstream {upstream})' if upstream else ''}: " + ", ".join(f"{f} {n} rows" for f, n in counts.items()))


@data_group.command("list")
@click.option("--json", "as_json", is_flag=True)
def data_list(as_json):
    """Show benchmarks, versions, row counts, licences and build state."""
    rows = []
    for name in data.benchmarks():
        m = data.manifest(name)
        st = data.status(name)
        built = data.built_upstream(name)
        rows.append({"benchmark": name, "version": m["version"], "licence": m["licence"], "location": str(data.files_dir(name)),
                     "files": {f: {"rows": i["rows"], "state": st[f]} for f, i in data.expected_files(name, built).items()},
                     "known_defects": m.get("known_defects", []), "built_from": built,
                     "upstreams": {k: {"description": u.get("description"), "provenance": u.get("provenance"),
                                       "pinned": bool(u.get("upstream")) and all(v is not None for v in u["upstream"].values())}
                                   for k, u in (m.get("upstreams") or {}).items()}})
    if as_json:
        _echo_json(rows)
        return
    for r in rows:
        built = "built" if all(f["state"] == "ok" for f in r["files"].values()) else "NOT BUILT (econeval data build)"
        click.echo(f"{r['benchmark']} {r['version']}  [{built}]  licence: {r['licence']}"
                   + (f"  built from upstream {r['built_from']}" if r["built_from"] else ""))
        click.echo(f"    location: {r['location']}")
        for k, u in r["upstreams"].items():
            click.echo(f"    upstream {k} ({'its hashes pinned' if u['pinned'] else 'NOT buildable: the manifest pins no hashes yet'}): "
                       f"{u['description']}")
        for f, i in r["files"].items():
            click.echo(f"    {f:<28} {i['rows']:>6} rows  {i['state']}")
        for d in r["known_defects"]:
            click.echo(f"    note: {d}")


@data_group.command("pack")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="The archive to write (.tar).")
def data_pack(out):
    """Write the built data of all benchmarks as one checksummed archive (for machines without the upstream files)."""
    check_output(out)
    check_output(out.with_name(out.name + ".sha256"))
    index = data.pack(out)
    digest = data.sha256_file(out)
    write_atomic(out.with_name(out.name + ".sha256"), f"{digest}  {out.name}\n".encode())
    click.echo(f"wrote data package {index['package_version']} ({', '.join(f'{b} {v}' for b, v in index['benchmarks'].items())}) "
               f"to {out}, sha256 {digest}", err=True)


@data_group.command("install")
@click.argument("archive", type=click.Path(dir_okay=False, exists=True, path_type=Path))
def data_install(archive):
    """Install a data package from `econeval data pack`, verifying every file's hash."""
    index = data.install(archive)
    click.echo(f"installed data package {index['package_version']} into {data.installed_dir()}", err=True)


@data_group.command("verify")
def data_verify():
    """Re-hash every built file; name any that does not match its manifest."""
    if not data.benchmarks():
        raise EconevalError(f"no benchmark manifests found in {data.data_dir()}", hint="the installation is incomplete")
    bad = []
    for name in data.benchmarks():
        for f, state in data.status(name).items():
            if state != "ok":
                bad.append(f"{name}/{f}: {state}")
    if bad:
        for b in bad:
            click.echo(b, err=True)
        raise EconevalError(f"{len(bad)} data file(s) missing or not matching the manifest", hint="run: econeval data build")
    click.echo("all data files match their manifests")


@data_group.command("export")
@click.argument("name", shell_complete=complete_data_names)
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path, allow_dash=True),
              help="JSONL file to write (default, or -: standard output).")
@click.option("--file", "file_name", help="Which file of the benchmark (default: its evaluation items).")
@click.option("--prompts", is_flag=True, help="NAME is a task: write each item's prompt(s) as econeval sends them "
              "(seeded few-shot demonstrations included; a model's chat template is applied by the backend on top).")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED),
              help="With --prompts: the seed of the few-shot draws (default as for run).")
@click.option("--limit", "-n", type=click.IntRange(min=1, max=MAX_SAMPLE), help="With --prompts: the items `run --limit N` would run.")
@_task_options
def data_export(name, out, file_name, prompts, seed, limit, task_option, **kw):
    """Write a benchmark's normalised items (ids included), or with --prompts a task's prompts, as JSON Lines."""
    if out == STDOUT:
        out = None
    if out:
        check_output(out)
    if prompts:
        from .api import export_prompts

        rows = export_prompts(name, seed=seed, limit=limit, task_options=_collect_options(task_option, kw))
        if registry.get_task(name).stages > 1:
            click.echo(f"note: {name} has {registry.get_task(name).stages} stages; later stages are shown with a placeholder "
                       "for the model's earlier reply (<reply to NAME>)", err=True)
    else:
        m = data.manifest(name)
        names = [file_name] if file_name else m.get("export", next(iter(m["files"])))
        rows = [row for f in ([names] if isinstance(names, str) else names) for row in data.load(name, f)]
    body = data.jsonl_bytes(rows)
    if out:
        write_output(out, body)
    else:
        _stdout(body)
    click.echo(f"wrote {len(rows)} {'prompts' if prompts else 'items'} to {out or 'standard output'}", err=True)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if _DISCOVERY_ERROR is not None:
            raise _DISCOVERY_ERROR
        _add_registered_commands()
    except EconevalError as exc:
        click.echo(f"econeval: error: {exc.one_line()}", err=True)
        sys.exit(exc.exit_code)
    # --debug anywhere before a `--` (after the subcommand too: `econeval report X --debug`), as the group's option
    end = argv.index("--") if "--" in argv else len(argv)
    debug = "--debug" in argv[:end] or bool(os.environ.get("ECONEVAL_DEBUG"))
    if "--debug" in argv[:end]:
        argv = ["--debug", *(a for a in argv[:end] if a != "--debug"), *argv[end:]]
    signals.install()  # a run refines this: writes in progress finish first
    try:
        _dispatch(argv, debug)
    except Interrupted as exc:  # the signal came while another error was being said: the signal's exit, no traceback
        try:
            click.echo(f"econeval: {exc}", err=True)
        except OSError:
            pass
        sys.exit(exc.exit_code)


def _interrupt_within(exc: BaseException) -> Interrupted | None:
    """The Interrupted a signal raised that a library caught and wrapped in an error of its own
    (an engine's loader that turns any exception while it loads its library into a RuntimeError):
    found on the error's causes and contexts."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        if isinstance(at, Interrupted):
            return at
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return None


def _dispatch(argv: list[str], debug: bool) -> None:
    """The command, and each way it can end said in one line with its exit code."""
    try:
        cli.main(args=argv, prog_name="econeval", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `econeval` (or a bare group): its help, as laid out
        click.echo(exc.ctx.get_help(), err=True)
        sys.exit(2)
    except click.Abort:  # click turned an interrupt at a prompt into Abort
        click.echo("econeval: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        if debug:
            raise
        msg = hide_credentials(" ".join(exc.format_message().split()))
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            msg += f" (see: {exc.ctx.command_path} --help)"
        click.echo(f"econeval: error: {msg}", err=True)
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
    except Interrupted as exc:
        marked = "; run.json is marked interrupted" if getattr(exc, "marked", False) else ""
        if exc.saved:
            marked += f"; {saved_words(*exc.saved)}"
        try:
            click.echo(f"econeval: {exc}{marked}" + (f"; {exc.hint}" if exc.hint else ""), err=True)
        except OSError:  # the terminal is gone (SIGHUP): the folder is marked all the same
            pass
        sys.exit(exc.exit_code)
    except EconevalError as exc:
        if debug:
            raise
        click.echo(clean(f"econeval: error: {exc.one_line()}"), err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("\neconeval: interrupted; rerun the same command with the same --out to resume", err=True)
        sys.exit(130)
    except OSError as exc:  # a full disk, a read-only folder, an unwritable --junit: one line
        if debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(clean(f"econeval: error: {where}{exc.strerror or exc} (finished work is kept; free the space or fix the "
                         "path and rerun the same command)"), err=True)
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001 - the last line of defence for a clean CLI
        if (signalled := _interrupt_within(exc)) is not None:  # a library wrapped our Interrupted in its own error
            raise signalled from None
        if debug:
            raise
        click.echo(hide_credentials(f"econeval: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the "
                                    "traceback)"), err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
