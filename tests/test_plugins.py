"""A benchmark and a backend added from plugin modules outside econeval, with no edit to any
econeval file: the shared layers (cli, api, runner, report, compare, config) know neither by name.

The plugin files written here are exactly the ones README's "Adding a benchmark" and "Adding a
backend" name: a benchmark module (its task, metrics, paper table and registration), its published
rows (JSON), its command module (click), and a backend module.
"""

import ast
import json
import re
from pathlib import Path

import pytest

from conftest import REPO, read_lines

BENCHMARK = '''
from pathlib import Path

from econeval import registry
from econeval.tables import Metric, Table, published, published_rows, task_rows
from econeval.types import MODEL, Generate, OptionLogprobs, Prepared, Role, Task

PUBLISHED = Path(__file__).with_name("toybench.json")


@registry.task
class Parity(Task):
    name = "toy-parity"
    suite = "toybench"
    benchmark = "toybench"
    prompt_version = "toy-parity/1"
    description = "is the number even? (a plugin benchmark)"
    metrics = (Metric("accuracy", paired_exact=True), Metric("error", lower_is_better=True))

    def prepare(self, ctx):
        return Prepared(items=[{"id": f"toybench/test/{i}", "n": i} for i in range(40)])

    def requests(self, item, prep, outputs):
        return {"option_logprobs": OptionLogprobs(prompt=f"Is {item['n']} even? answer:", options=("Yes", "No"))}

    def score(self, item, outputs, prep):
        lp = outputs.get("option_logprobs") or {}
        said_even = lp.get("Yes", -99) > lp.get("No", -99) if lp else outputs.get("response", "").strip() == "Yes"
        return {"parsed": said_even, "correct": said_even == (item["n"] % 2 == 0)}

    def aggregate(self, records, prep):
        acc = sum(r["correct"] for r in records) / len(records) if records else None
        return {"paper": {"accuracy": acc, "error": None if acc is None else 1 - acc}}

    def headline(self, result):
        return dict(result["paper"])


@registry.task
class Graded(Task):
    """A task with a role of its own: the model writes, a grader model grades (no fallback)."""
    name = "toy-graded"
    suite = "toygraded"
    benchmark = "toybench"
    prompt_version = "toy-graded/1"
    description = "a parity answer graded by a grader model (a plugin role)"
    stages = 2
    roles = (MODEL, "grader")
    new_roles = (Role("grader", MODEL, None, "a grader model"),)

    def prepare(self, ctx):
        return Prepared(items=[{"id": f"toybench/graded/{i}", "n": i} for i in range(8)])

    def requests(self, item, prep, outputs):
        if "response" not in outputs:
            return {"response": Generate(prompt=f"Is {item['n']} even?", max_tokens=4)}
        return {"grade": Generate(prompt=f"Grade: {outputs['response']}", max_tokens=4, role="grader")}

    def score(self, item, outputs, prep):
        return {"parsed": outputs["grade"].strip(), "correct": outputs["grade"].strip() == "entailment"}

    def aggregate(self, records, prep):
        return {"paper": {"accuracy": sum(r["correct"] for r in records) / len(records) if records else None}}

    def headline(self, result):
        return dict(result["paper"])


def tables(runs):
    pub = published(PUBLISHED)["tables"]["table1"]
    mine = task_rows(runs, {"toy-parity": None}, lambda res: [res["paper"]["accuracy"], res["paper"]["error"]], pub["columns"])
    if not mine:
        return []
    tab = Table("toybench-table1", "Toybench Table 1: parity", pub["columns"], 3)
    tab.rows = published_rows(pub) + [row for *_, row in mine]
    tab.notes = ["Published row: the toy paper's oracle."]
    return [tab]


registry.benchmark("toybench", tables=tables, commands="econeval_toybench_cli:toybench")
'''

PUBLISHED = {"source": "toy paper", "tables": {"table1": {"columns": ["accuracy", "error"], "decimals": 3,
                                                          "rows": [{"model": "Oracle-7B", "values": [0.975, 0.025]}]}}}

COMMANDS = '''
import click


@click.group()
def toybench():
    """Toybench's own commands."""


@toybench.command("count")
def count():
    """How many items toybench has."""
    click.echo("toybench has 40 items")
'''

BACKEND = '''
import hashlib
import math
from dataclasses import dataclass

from econeval import registry
from econeval.backends.base import Backend, BackendOptions, option
from econeval.errors import UsageError
from econeval.types import BackendInfo, Completion, OptionLogprobs, OptionScores


@dataclass(frozen=True)
class ToyOptions(BackendOptions):
    temperature_scale: float = option(1.0, "divide the logits by this")

    def check(self, where):
        if not self.temperature_scale > 0:
            raise UsageError(f"{where}: temperature_scale must be positive")


@registry.backend("toy")
class ToyBackend(Backend):
    prefix = "toy"
    Options = ToyOptions
    description = "a deterministic toy model (a plugin backend)"

    @classmethod
    def from_prefix(cls, name):
        return {}

    def _logit(self, text):
        return (int(hashlib.sha256(f"{self.spec.name}|{text}".encode()).hexdigest()[:8], 16) % 1000) / 250.0

    def evaluate(self, requests, on_done=None):
        out = []
        for i, r in enumerate(requests):
            if isinstance(r, OptionLogprobs):
                z = {o: self._logit(r.prompt + o) / self.options.temperature_scale for o in r.options}
                total = math.log(sum(math.exp(v) for v in z.values()) + 1.0)
                out.append(OptionScores(scores={o: v - total for o, v in z.items()}, top=max(z.values()) - total))
            else:
                word = "entailment" if self._logit(r.prompt) > 2 else "contradiction"
                out.append(Completion(text=" " + word, n_prompt_tokens=len(r.prompt.split()), n_tokens=1))
            if on_done:
                on_done(i)
        return out

    def info(self):
        ident = {"name": self.spec.name, "temperature_scale": self.options.temperature_scale}
        return BackendInfo(kind=self.kind, model={"name": self.spec.name, "identity": ident}, n_ctx=None, device="cpu",
                           schedule="toy: one request at a time", chat_template_applied=False, composition_matters=False,
                           details={"temperature_scale": self.options.temperature_scale})
'''


@pytest.fixture
def plugins(tmp_path):
    mods = tmp_path / "plugin_mods"
    mods.mkdir()
    (mods / "econeval_toybench.py").write_text(BENCHMARK)
    (mods / "toybench.json").write_text(json.dumps(PUBLISHED))
    (mods / "econeval_toybench_cli.py").write_text(COMMANDS)
    (mods / "econeval_toybackend.py").write_text(BACKEND)
    reg = tmp_path / "models.toml"
    reg.write_text('default = "toy-a"\n[models.toy-a]\nkind = "toy"\ntemperature_scale = 3.0\n')
    return {"ECONEVAL_PLUGINS": "econeval_toybench,econeval_toybackend", "PYTHONPATH": str(mods),
            "ECONEVAL_MODELS": str(reg)}


def _predictions(path: Path, wrong_every: int) -> Path:
    rows = [{"id": f"toybench/test/{i}", "response": ("No" if i % 2 else "Yes") if not wrong_every or i % wrong_every
             else ("Yes" if i % 2 else "No")} for i in range(40)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_fifth_benchmark_from_a_plugin_lists_runs_reports_and_compares(cli, tmp_path, plugins):
    rc, out, err = cli("list", "--json", env=plugins)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["suites"]["toybench"] == ["toy-parity"]
    assert {m["name"]: m["direction"] for m in doc["tasks"]["toy-parity"]["metrics"]} == {"accuracy": 1, "error": -1}
    rc, out, err = cli("toybench", "count", env=plugins)  # its own subcommand
    assert rc == 0 and out.strip() == "toybench has 40 items", err
    run = tmp_path / "run"
    rc, out, err = cli("run", "--task", "toy-parity", "--quiet", "--out", run, env=plugins)
    assert rc == 0, err
    res = json.loads((run / "results.json").read_text())["tasks"]["toy-parity"]
    assert res["n"] == 40 and res["n_scored"] == 40 and res["paper"]["accuracy"] is not None
    assert "error" in res["intervals"]
    # report: its table, its published row beside the run's, in md and html
    rc, md, err = cli("report", run, env=plugins)
    assert rc == 0, err
    block = md[md.index("## Toybench Table 1: parity"):]
    assert "| paper | Oracle-7B | 0.975 | 0.025 |" in block and "| run | toy-a |" in block
    page = tmp_path / "r.html"
    rc, _, err = cli("report", run, "--format", "html", "--out", page, env=plugins)
    assert rc == 0, err
    html = page.read_text()
    table = html[html.index('id="toybench-table1"'):]
    table = table[:table.index("</table>")]
    assert "Oracle-7B" in table and "toy-a" in table and "0.975" in table
    # compare: more errors is worse for a lower-is-better metric
    base = tmp_path / "base"
    cand = tmp_path / "cand"
    for folder, wrong in ((base, 0), (cand, 2)):
        rc, _, err = cli("score", "--task", "toy-parity", "--predictions", _predictions(tmp_path / f"{folder.name}.jsonl", wrong),
                         "--out", folder, env=plugins)
        assert rc == 0, err
    rc, out, err = cli("compare", base, cand, "--format", "json", "--bootstrap", "200", env=plugins)
    assert rc == 1, err
    rows = {r["metric"]: r for r in json.loads(out)["rows"]}
    assert rows["error"]["diff"] == pytest.approx(0.5) and rows["error"]["verdict"] == "regression"
    assert rows["accuracy"]["verdict"] == "regression" and rows["accuracy"]["p_mcnemar"] is not None
    # the other way round, at a margin 40 items can resolve for the unanswered share (3.7/40 of it not ruled out)
    rc, out, err = cli("compare", cand, base, "--format", "json", "--bootstrap", "200", "--max-drop", "0.1", env=plugins)
    assert rc == 0 and {r["metric"]: r["verdict"] for r in json.loads(out)["rows"]}["error"] == "improvement"


def test_a_plugin_task_without_paper_tables_still_has_a_report(cli, tmp_path, plugins):
    """A benchmark that registers no tables: its task ran, and `econeval report` printed nothing
    of it (exit 0). Now the report has a table of the task's headline metrics from results.json."""
    mods = Path(plugins["PYTHONPATH"])
    (mods / "econeval_toybare.py").write_text(BENCHMARK[:BENCHMARK.index("def tables(runs):")])  # no registry.benchmark
    env = {**plugins, "ECONEVAL_PLUGINS": "econeval_toybare,econeval_toybackend"}
    run = tmp_path / "run"
    rc, _, err = cli("run", "--task", "toy-parity", "--quiet", "--out", run, env=env)
    assert rc == 0, err
    res = json.loads((run / "results.json").read_text())["tasks"]["toy-parity"]
    acc, (lo, hi) = res["paper"]["accuracy"], res["intervals"]["accuracy"]
    rc, md, err = cli("report", run, env=env)
    assert rc == 0, err
    block = md[md.index("## toy-parity: headline metrics"):]
    assert "| source | model | accuracy | error | n |" in block
    assert f"| run | toy-a | {acc:.3f} [{lo:.3f}, {hi:.3f}] | {1 - acc:.3f} " in block and "registers no paper table" in block
    rc, out, err = cli("report", run, "--format", "json", env=env)
    [table] = json.loads(out)["tables"]
    assert rc == 0 and table["id"] == "toy-parity-headline" and table["rows"][0]["values"] == [acc, res["paper"]["error"]]


def test_a_backend_kind_from_a_plugin_with_its_own_option(cli, tmp_path, plugins):
    # the registry entry's option, and the prefix with -M
    a = tmp_path / "a"
    rc, _, err = cli("run", "--task", "toy-parity", "--quiet", "--out", a, env=plugins)
    assert rc == 0, err
    meta = json.loads((a / "run.json").read_text())
    assert meta["backend"]["kind"] == "toy" and meta["backend"]["temperature_scale"] == 3.0
    b = tmp_path / "b"
    rc, _, err = cli("run", "--model", "toy:b", "-M", "temperature_scale=2", "--task", "toy-parity", "--quiet", "--out", b,
                     env=plugins)
    assert rc == 0, err
    meta = json.loads((b / "run.json").read_text())
    assert meta["identity"]["model"]["kind"] == "toy"
    assert meta["identity"]["model"]["model"] == {"name": "b", "temperature_scale": 2.0}
    # the option changes the scores, so it changes the run's identity
    rc, _, err = cli("run", "--model", "toy:b", "-M", "temperature_scale=4", "--task", "toy-parity", "--quiet", "--out", b,
                     env=plugins)
    assert rc == 2 and "temperature_scale" in err
    # as the evaluated model and as the judge (econnli-gen asks a judge)
    g = tmp_path / "g"
    rc, _, err = cli("run", "--model", "toy:writer", "--judge", "toy:critic", "-M", "temperature_scale=2",
                     "--task", "econnli-gen", "--limit", "3", "--quiet", "--out", g, env=plugins)
    assert rc == 0, err
    meta = json.loads((g / "run.json").read_text())
    assert meta["roles"]["judge"]["name"] == "critic" and meta["roles"]["judge"]["identity"]["model"] == {"name": "critic", "temperature_scale": 2.0}
    samples = read_lines(g / "samples.jsonl")
    assert len(samples) == 3 and all(s["judge_response"].strip() in ("entailment", "contradiction") for s in samples)
    # an option the backend does not declare: one line naming it
    for args in (["-M", "nope=1"], ["--parallel", "2"]):
        rc, out, err = cli("run", "--model", "toy:b", *args, "--task", "toy-parity", "--out", tmp_path / "x", env=plugins)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "backend toy has no option" in err, err
    rc, _, err = cli("run", "--model", "toy:b", "-M", "temperature_scale=-1", "--task", "toy-parity", "--out", tmp_path / "x",
                     env=plugins)
    assert rc == 2 and "temperature_scale must be positive" in err
    assert not (tmp_path / "x").exists()
    rc, out, _ = cli("models", "options", env=plugins)
    assert "toy (--model toy:NAME)" in out and "temperature_scale" in out


def test_a_broken_plugin_is_one_line_even_for_version(cli, tmp_path):
    mods = tmp_path / "m"
    mods.mkdir()
    (mods / "econeval_broken.py").write_text("def oops(:\n")
    (mods / "econeval_raises.py").write_text("raise RuntimeError('no config')\n")
    for name, needle in (("econeval_broken", "SyntaxError"), ("econeval_raises", "no config"), ("econeval_absent", "econeval_absent")):
        rc, out, err = cli("--version", env={"ECONEVAL_PLUGINS": name, "PYTHONPATH": str(mods)})
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert name in err and needle in err, err


# ---- the shape of the shared layers -----------------------------------------------------------------
SHARED = ("cli.py", "api.py", "run/runner.py", "publish/report.py", "judge/compare.py", "config.py")


def _names() -> set[str]:
    """Every benchmark and backend name the registry knows: tasks, suites, benchmarks, their
    commands, backend kinds, prefixes, engines and the modules that hold them."""
    from econeval import registry

    names: set[str] = set()
    for t in registry.tasks().values():
        names |= {t.name, t.suite, t.benchmark, type(t).__module__.rsplit(".", 1)[-1]}
    for b in registry.benchmarks().values():
        names.add(b.name)
        if b.commands:
            names.add(b.commands.rsplit(":", 1)[1])
    for kind, cls in registry.backends().items():
        names |= {kind, cls.__module__.rsplit(".", 1)[-1], cls.prefix or kind, getattr(cls, "engine", None) or kind}
    names |= {"gguf", "llama", "onnx", "steer"}
    return {n for n in names if n and n != "__init__"}


def test_no_benchmark_or_backend_name_in_the_shared_layers():
    names = _names()
    assert {"econnli", "steer-me", "llamacpp", "openai", "anthropic"} <= names
    found = []
    for rel in SHARED:
        text = (REPO / "econeval" / rel).read_text().lower()
        for n in names:
            if re.search(rf"(?<![\w-]){re.escape(n.lower())}(?![\w])", text):
                found.append((rel, n))
    assert not found, found


# where shared code still says a backend's word, and why: the Every Eval Ever record's `developer_from`
# names the GGUF field it read (docs/exports.md), and a run config's `model = "x.gguf"` is a path
NAMED = {("publish/export_eee.py", "gguf"), ("runconfig.py", "gguf")}


def _code(path: Path) -> str:
    """A module's code without its comments and docstrings, lower-cased."""
    import io
    import tokenize

    src = path.read_text()
    docs = {n.body[0].lineno for n in ast.walk(ast.parse(src))
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant) and isinstance(n.body[0].value.value, str)}
    toks = [t.string for t in tokenize.generate_tokens(io.StringIO(src).readline)
            if t.type != tokenize.COMMENT and not (t.type == tokenize.STRING and t.start[0] in docs)]
    return " ".join(toks).lower()


def test_nothing_outside_backends_and_benchmarks_names_one():
    """The folder rule: no module outside backends/, benchmarks/ and plugins/ (a plugin builds on a
    benchmark: auto-STEER on STEER-ME) names a backend or a benchmark in its code (its words for
    them in comments and docstrings aside): a fifth benchmark or a backend reaches the shared code
    through what it declares (labels, gold and answer fields, runs_elsewhere, engine_label), not
    through edits to shared lists."""
    names = _names()
    pkg = REPO / "econeval"
    found = set()
    for path in pkg.rglob("*.py"):
        rel = path.relative_to(pkg).as_posix()
        if rel.startswith(("backends/", "benchmarks/", "plugins/")):
            continue
        text = _code(path)
        found |= {(rel, n) for n in names if re.search(rf"(?<![\w-]){re.escape(n.lower())}(?![\w])", text)}
    assert found <= NAMED, sorted(found - NAMED)


def _module_imports(path: Path, pkg_root: Path) -> set[str]:
    rel = path.relative_to(pkg_root.parent).with_suffix("")
    parts = list(rel.parts)
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            mod = base + (node.module.split(".") if node.module else [])
            for alias in node.names:
                target = mod + [alias.name]
                if (pkg_root.parent.joinpath(*target).with_suffix(".py")).is_file() or pkg_root.parent.joinpath(*target).is_dir():
                    out.add(".".join(target))
                else:
                    out.add(".".join(mod))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("econeval"):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("econeval")}
    # the root package's __init__ only holds __version__ and forwards attribute access to the API:
    # `from econeval import __version__` is no edge into any module
    return {m for m in out if m != ".".join(parts) and m != "econeval"}


def test_no_import_circle():
    """No cycle among econeval's modules, counting every import (lazy ones included)."""
    pkg = REPO / "econeval"
    graph = {}
    for path in pkg.rglob("*.py"):
        rel = path.relative_to(pkg.parent).with_suffix("").parts
        name = ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
        graph[name] = _module_imports(path, pkg)
    # a package's __init__ runs before its modules: an edge into a package's module implies one into the package
    state: dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif not state.get(nxt):
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if not state.get(node):
            visit(node, [node])
    assert not cycles, cycles


def test_cli_is_argument_parsing_only():
    """cli.py calls the API; it writes no run folder and builds no backend itself."""
    text = (REPO / "econeval" / "cli.py").read_text()
    for needle in ("RunFolder", "write_meta", "runner.", "check_identity", "RunContext", "roles.build(", "prepare("):
        assert needle not in text, needle


def test_a_plugin_task_with_a_role_of_its_own(cli, tmp_path, plugins):
    """Open roles: a task declares a role no shared file names; `--role NAME=MODEL` fills it and
    run.json records it under roles; without one, one line names the flag."""
    rc, _, err = cli("run", "--model", "toy:writer", "--task", "toy-graded", "--quiet", "--out", tmp_path / "none", env=plugins)
    assert rc == 2 and "this task needs a grader model" in err and "--role grader=MODEL" in err, err
    rc, _, err = cli("run", "--model", "toy:writer", "--role", "graderr=toy:x", "--task", "toy-graded", "--out", tmp_path / "typo",
                     env=plugins)
    assert rc == 2 and "no task uses a role 'graderr'" in err and "grader" in err, err
    out = tmp_path / "g"
    rc, _, err = cli("run", "--model", "toy:writer", "--role", "grader=toy:critic", "--task", "toy-graded", "--quiet", "--out", out,
                     env=plugins)
    assert rc == 0, err
    meta = json.loads((out / "run.json").read_text())
    assert meta["roles"]["grader"]["name"] == "critic" and meta["roles"]["grader"]["named"] is True
    assert meta["identity"]["roles"]["grader"]["model"] == {"name": "critic", "temperature_scale": 1.0}
    assert len(read_lines(out / "samples.jsonl")) == 8
    # another grader is another run: the folder refuses it
    rc, _, err = cli("run", "--model", "toy:writer", "--role", "grader=toy:other", "--task", "toy-graded", "--quiet", "--out", out,
                     env=plugins)
    assert rc == 2 and "grader" in err, err
    # score: the grader stage runs on answers made elsewhere, with the grader named (none: refused)
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": s["id"], "response": s["response"]}) + "\n" for s in read_lines(out / "samples.jsonl")))
    rc, doc, err = cli("score", "--task", "toy-graded", "--predictions", preds, "--role", "grader=toy:critic", env=plugins)
    assert rc == 0, err
    ran = json.loads((out / "results.json").read_text())["tasks"]["toy-graded"]["paper"]
    assert json.loads(doc)["tasks"]["toy-graded"]["paper"] == ran
    rc, _, err = cli("score", "--task", "toy-graded", "--predictions", preds, env=plugins)
    assert rc == 2 and "--role grader=MODEL" in err, err
