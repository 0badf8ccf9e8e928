"""The shape of the code: registries instead of lists, task options, the Python API, prompts in
samples, no import cycle, heavy libraries only in their backends."""

import ast
import json
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "econeval"

PLUGIN = '''
from econeval import registry
from econeval.types import OptionLogprobs, Prepared, Task, TaskOption


@registry.task
class Parity(Task):
    name = "toy-parity"
    suite = "toy"
    benchmark = "toy"
    prompt_version = "toy-parity/1"
    description = "a throwaway task from a test module"
    options = (TaskOption("shout", False, "upper-case the question", kind="bool"),)

    def prepare(self, ctx):
        items = [{"id": f"toy/test/{i}", "n": i} for i in range(5)]
        return Prepared(items=items, settings={"shout": ctx.options_for(self)["shout"]})

    def requests(self, item, prep, outputs):
        q = f"Is {item['n']} even? answer:"
        return {"option_logprobs": OptionLogprobs(prompt=q.upper() if prep.settings["shout"] else q, options=("Yes", "No"))}

    def score(self, item, outputs, prep):
        lp = outputs["option_logprobs"]
        return {"parsed": lp["Yes"] > lp["No"], "correct": (lp["Yes"] > lp["No"]) == (item["n"] % 2 == 0)}

    def aggregate(self, records, prep):
        return {"paper": {"accuracy": sum(r["correct"] for r in records) / len(records) if records else None}}
'''


@pytest.fixture
def plugin_env(tmp_path, tiny_model):
    (tmp_path / "plugin_mod").mkdir()
    (tmp_path / "plugin_mod" / "econeval_toy.py").write_text(PLUGIN)
    reg = tmp_path / "models.toml"
    reg.write_text(f'default = "tiny"\n[models.tiny]\npath = "{tiny_model}"\nn_ctx = 1024\nchat = "off"\n')
    return {"ECONEVAL_PLUGINS": "econeval_toy", "PYTHONPATH": str(tmp_path / "plugin_mod"), "ECONEVAL_MODELS": str(reg)}


def test_a_task_in_another_module_is_listed_and_runnable(cli, tmp_path, plugin_env):
    rc, out, err = cli("list", "--json", env=plugin_env)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["suites"]["toy"] == ["toy-parity"] and "toy-parity" in doc["suites"]["all"]
    assert doc["tasks"]["toy-parity"]["options"][0]["name"] == "shout"
    rc, out, _ = cli("--help", env=plugin_env)
    assert "toy (toy-parity)" in out
    rc, out, err = cli("list", "--verbose", env=plugin_env)
    assert "-T shout=" in out
    run = tmp_path / "run"
    rc, out, err = cli("run", "--task", "toy-parity", "-T", "shout=true", "--quiet", "--out", run, env=plugin_env)
    assert rc == 0, err
    res = json.loads((run / "results.json").read_text())["tasks"]["toy-parity"]
    assert res["n"] == 5 and res["n_scored"] == 5 and res["paper"]["accuracy"] is not None
    meta = json.loads((run / "run.json").read_text())
    assert meta["tasks"]["toy-parity"]["options"] == {"shout": True}
    assert meta["tasks"]["toy-parity"]["dataset"]["items_sha256"]  # no data package: the items are hashed
    samples = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    assert samples[0]["prompts"]["option_logprobs"] == "IS 0 EVEN? ANSWER:"


def test_task_options_are_generic_and_checked(cli, tmp_path, plugin_env):
    rc, _, err = cli("run", "--task", "toy-parity", "-T", "loud=1", "--out", tmp_path / "a", env=plugin_env)
    assert rc == 2 and "no selected task has the option 'loud'" in err and "shout (toy-parity)" in err
    rc, _, err = cli("run", "--task", "toy-parity", "-T", "shout=maybe", "--out", tmp_path / "b", env=plugin_env)
    assert rc == 2 and "shout" in err and "not true or false" in err
    rc, _, err = cli("run", "--task", "econnli-zero", "--car", "--out", tmp_path / "c", env=plugin_env)
    assert rc == 2 and "no selected task has the option 'car'" in err  # a shortcut is an option like any other
    rc, _, err = cli("run", "--task", "steer-me", "-T", "adaptation=sideways", "--out", tmp_path / "d", env=plugin_env)
    assert rc == 2 and "not one of direct, cot-shown, cot-hidden, free-text" in err
    for folder in "abcd":
        assert not (tmp_path / folder / "run.json").exists()


def test_options_change_the_run_identity(cli, tmp_path, plugin_env):
    run = tmp_path / "run"
    assert cli("run", "--task", "toy-parity", "--quiet", "--out", run, env=plugin_env)[0] == 0
    rc, _, err = cli("run", "--task", "toy-parity", "-T", "shout=1", "--quiet", "--out", run, env=plugin_env)
    assert rc == 2 and "task option shout of toy-parity: false in the folder, true now" in err


def test_python_api(tmp_path, tiny_model):
    import econeval
    from econeval.config import ModelSpec

    spec = ModelSpec(name="tiny", options={"path": str(tiny_model)}, n_ctx=1024, chat="off")
    doc = econeval.evaluate(model=spec, tasks=["econnli-zero", "steer-me"], selection=econeval.Limit(2), out=tmp_path / "run",
                            task_options={"adaptation": "direct"})
    assert Path(doc["run_folder"]) == tmp_path / "run"
    assert doc["tasks"]["econnli-zero"]["n"] == 2 and doc["tasks"]["steer-me"]["n"] == 128
    on_disk = json.loads((tmp_path / "run" / "results.json").read_text())
    assert on_disk["tasks"] == doc["tasks"]


def test_evaluate_takes_task_objects_as_well_as_names(tmp_path):
    """A Task object runs as a named one does (inspect_ai's `eval()` takes tasks so), beside
    registered tasks; anything else is one clear error before a folder is made."""
    import econeval
    from econeval.errors import UsageError

    ns: dict = {}
    exec(PLUGIN.replace("@registry.task\n", ""), ns)  # the toy task, not registered
    task = ns["Parity"]()
    doc = econeval.evaluate("fake:a", [task, "econnli-zero"], selection=econeval.Limit(3), out=tmp_path / "run", seed=1,
                            task_options={"shout": "true"})
    assert doc["tasks"]["toy-parity"]["n"] == 3 and doc["tasks"]["econnli-zero"]["n"] == 3
    lines = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert {x["task"] for x in lines} == {"toy-parity", "econnli-zero"} and "IS 0 EVEN? ANSWER:" in json.dumps(lines)
    with pytest.raises(UsageError, match="not int"):
        econeval.evaluate("fake:a", [3], out=tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_evaluate_takes_the_run_spec_that_run_builds_from_its_flags(cli, tmp_path):
    """`econeval run`'s model flags (-M, its shortcut flags, --chat, --quiet) make the RunSpec a
    Python caller writes: the same run; its settings reach run.json; the keyword settings it
    replaced are refused."""
    import econeval

    common = {"tasks": ["econnli-zero"], "selection": econeval.Limit(4), "seed": 3}
    rc, _, err = cli("run", "--model", "fake:m", "-M", "answers=No", "--chat", "off", "--task", "econnli-zero", "--limit", "4",
                     "--seed", "3", "--quiet", "--out", tmp_path / "cli")
    assert rc == 0, err
    econeval.evaluate(econeval.RunSpec(model="fake:m", model_options={"answers": "No"}, chat="off", progress=False),
                      out=tmp_path / "spec", **common)
    econeval.evaluate("fake:m", out=tmp_path / "name", **common)
    for name in ("samples.jsonl", "results.json"):
        assert (tmp_path / "cli" / name).read_bytes() == (tmp_path / "spec" / name).read_bytes()
    meta = {d: json.loads((tmp_path / d / "run.json").read_text()) for d in ("cli", "spec", "name")}
    assert meta["cli"]["identity"] == meta["spec"]["identity"] != meta["name"]["identity"]
    assert meta["spec"]["identity"]["model"]["settings"]["answers"] == "No"

    asked = econeval.RunSpec(model="fake:m", argv=["econeval", "run"], config_file={"path": "run.toml", "sha256": "0" * 64})
    econeval.evaluate(asked, out=tmp_path / "asked", **common)
    recorded = json.loads((tmp_path / "asked" / "run.json").read_text())
    assert recorded["command"] == ["econeval", "run"] and recorded["config"]["path"] == "run.toml"
    with pytest.raises(TypeError):
        econeval.RunSpec(model="fake:m", argv="econeval run")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        econeval.evaluate(model="fake:m", model_options={"answers": "No"}, out=tmp_path / "old", **common)


def test_samples_keep_the_prompts_and_score_reads_a_run(cli, tmp_path, tiny_model, tiny_chat_model):
    reg = tmp_path / "models.toml"
    reg.write_text(f'[models.chatty]\npath = "{tiny_chat_model}"\nn_ctx = 2048\nchat = "on"\n')
    env = {"ECONEVAL_MODELS": str(reg)}
    run = tmp_path / "run"
    rc, _, err = cli("run", "--model", "chatty", "--task", "econnli-icl", "--task", "econlogicqa-1shot", "--limit", "3",
                     "--quiet", "--out", run, env=env)
    assert rc == 0, err
    samples = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    icl = [s for s in samples if s["task"] == "econnli-icl"]
    assert icl[0]["prompts"]["response"].startswith("Conduct inference on economic events.")
    qa = [s for s in samples if s["task"] == "econlogicqa-1shot"]
    assert qa[0]["prompts"]["response"].endswith("\nAnswer:") and qa[0]["rendered"]["response"].startswith("<|user|>")
    # the exported prompts are the ones the run sent
    exp = tmp_path / "prompts.jsonl"
    rc, _, err = cli("data", "export", "econlogicqa-1shot", "--prompts", "--limit", "3", "--out", exp, env=env)
    assert rc == 0, err
    rows = [json.loads(l) for l in exp.read_text().splitlines()]
    assert [r["prompts"]["response"] for r in rows] == [s["prompts"]["response"] for s in qa]
    # a run's own multi-task samples.jsonl scores like predictions, to the same table
    rc, out, err = cli("score", "--task", "econlogicqa-1shot", "--predictions", run / "samples.jsonl", env=env)
    assert rc == 0, err
    scored = json.loads(out)["tasks"]["econlogicqa-1shot"]
    ran = json.loads((run / "results.json").read_text())["tasks"]["econlogicqa-1shot"]
    assert scored["paper"] == ran["paper"] and scored["n"] == 3


def test_each_task_defaults_to_its_papers_chat_convention_and_chat_overrides(cli, tmp_path, tiny_chat_model):
    """EconNLI, EconLogicQA and CFBenchmark sent raw prompts in their authors' code; STEER-ME's
    authors used chat APIs. --chat on|off overrides, and is part of the run's identity."""
    reg = tmp_path / "models.toml"
    reg.write_text(f'[models.chatty]\npath = "{tiny_chat_model}"\nn_ctx = 2048\n')  # chat = "auto"
    env = {"ECONEVAL_MODELS": str(reg)}
    run = tmp_path / "run"
    tasks = ["econnli-zero", "econnli-icl", "econnli-gen", "econlogicqa-1shot", "steer-me"]
    rc, _, err = cli("run", "--model", "chatty", *[a for t in tasks for a in ("--task", t)], "--limit", "1",
                     "--quiet", "--out", run, env=env)
    assert rc == 0, err
    samples = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    templated = {(s["task"], name) for s in samples for name in s.get("rendered", {})}
    # only STEER-ME's requests and econnli-gen's judge (GPT-4 through its chat API in the released code)
    assert {t for t, _ in templated} == {"steer-me", "econnli-gen"}
    assert {n for t, n in templated if t == "econnli-gen"} == {"judge_response", "judge_option_logprobs"}
    rc, _, err = cli("run", "--model", "chatty", *[a for t in tasks for a in ("--task", t)], "--limit", "1", "--chat", "on",
                     "--quiet", "--out", run, env=env)
    assert rc == 2 and "chat: auto in the folder, on now" in err  # another chat mode is another run
    on = tmp_path / "on"
    rc, _, err = cli("run", "--model", "chatty", "--task", "econlogicqa-1shot", "--limit", "1", "--chat", "on",
                     "--quiet", "--out", on, env=env)
    assert rc == 0, err
    assert json.loads((on / "samples.jsonl").read_text().splitlines()[0])["rendered"]["response"].startswith("<|user|>")
    assert json.loads((on / "run.json").read_text())["backend"]["chat_mode"] == "on"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.add(base)
            names |= {f"{base}.{a.name}" if node.level and not node.module else base for a in node.names}
    return names


def test_layering_click_and_heavy_libraries():
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).as_posix()
        mods = _imports(path)
        if rel != "cli.py" and not rel.endswith("commands.py"):  # a benchmark's, plugin's or backend's registered commands may use click
            assert not any(m == "click" or m.startswith("click.") for m in mods), rel
        for heavy, home in (("llama_cpp", "backends/llamacpp.py"), ("onnxruntime", "backends/onnx_embed.py"),
                            ("tokenizers", "backends/onnx_embed.py")):
            if rel != home:
                assert not any(m == heavy or m.startswith(heavy + ".") for m in mods), (rel, heavy)
    # the core never imports the layers above it
    for core in ("data.py", "types.py", "config.py", "results.py", "metrics.py", "store/folder.py", "errors.py", "tables.py"):
        mods = _imports(PKG / core)
        assert not any("benchmarks" in m or "registry" in m or "runner" in m for m in mods), core


def test_importing_the_package_and_registry_loads_no_heavy_library():
    import subprocess
    import sys

    code = ("import sys, econeval.registry as r; r.discover(); "
            "print(sorted(m for m in ('llama_cpp', 'onnxruntime', 'tokenizers', 'click', 'httpx', 'httpcore') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_folder_of_the_previous_run_format_is_refused_clearly(cli, tmp_path, tiny_model):
    run = tmp_path / "old"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"econeval_version": "0.1.0", "status": "complete", "seed": 1234}))
    (run / "samples.jsonl").write_text(json.dumps({"id": "econnli/test/0", "task": "econnli-zero", "response": "Yes"}) + "\n")
    before = (run / "samples.jsonl").read_bytes()
    rc, _, err = cli("run", "--model", tiny_model, "--task", "econnli-zero", "--limit", "2", "--out", run)
    assert rc == 2 and "written by another version of econeval (run format 1" in err
    assert (run / "samples.jsonl").read_bytes() == before


def test_every_package_ships_in_the_wheel():
    """pyproject.toml lists the packages by hand (its two data-only packages are mapped from the top
    level, which automatic discovery cannot combine with; the layout has no setup.py): a package
    under econeval/ missing from the list fails here instead of being missing from the wheel."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    listed = set(tomllib.loads((PKG.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(PKG.parent).parts) for p in PKG.rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)


def _econeval_imports(path: Path) -> set[str]:
    """The econeval modules a file imports (lazy imports included), as dotted names from the
    package root: `from ..store.record import X` in econeval/run/runner.py is `econeval.store.record`."""
    rel = path.relative_to(PKG.parent).with_suffix("").parts
    package = list(rel[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            out |= {".".join(base + [a.name]) for a in node.names} | {".".join(base)}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("econeval"):
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("econeval")}
    return out


def _wing(module: str) -> str | None:
    """The wing (store, run, judge, publish) a dotted econeval name lies in, if any."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "econeval" and parts[1] in WINGS else None


WINGS = ("store", "run", "judge", "publish")
# each wing may import the wings on its list (and the shared modules of econeval/, backends/, benchmarks/)
MAY_IMPORT = {"store": (), "run": ("store",), "judge": ("store", "run"), "publish": ("store",)}


def test_the_wings_are_folders_and_import_only_downwards():
    """The four wings are packages: store/ (the run folder and its record), run/ (the runner,
    selections, roles, merge), judge/ (compare, gate) and publish/ (report, browse, exports).
    The store imports no wing; nothing in publish/ imports run/ or judge/ (a report's comparison is
    handed in by the command); the shared modules of econeval/ and the backends and benchmarks
    import no wing at all, and only the top (cli.py, api.py, the package's lazy names) ties the
    wings together."""
    assert all((PKG / w / "__init__.py").is_file() for w in WINGS)
    top = {"cli.py", "api.py", "__init__.py", "__main__.py"}
    found = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        if rel.parts[0] == "plugins":  # the built-in plugins sit above the API, as any plugin does
            continue
        here = rel.parts[0] if len(rel.parts) > 1 and rel.parts[0] in WINGS else None
        for mod in _econeval_imports(path):
            there = _wing(mod)
            if there is None or there == here:
                continue
            if here is None and rel.as_posix() not in top:
                found.append((rel.as_posix(), mod))
            elif here is not None and there not in MAY_IMPORT[here]:
                found.append((rel.as_posix(), mod))
    assert not found, found


def test_benchmarks_and_the_api_import_nothing_above_them():
    """The benchmarks import neither the API, the runner (run/), the command line nor a plugin
    (auto-STEER, which drives models, lives in plugins/ above the API); the API imports neither
    the command line, a plugin, a benchmark nor the judges and publishers above it. Lazy imports
    count: a loop kept out of the graph only by a function-level import is a loop."""
    above = ("econeval.api", "econeval.run", "econeval.cli", "econeval.plugins", "econeval.judge", "econeval.publish")
    for path in (PKG / "benchmarks").rglob("*.py"):
        bad = sorted(m for m in _econeval_imports(path) if m.startswith(above))
        assert not bad, (path.relative_to(PKG).as_posix(), bad)
    bad = sorted(m for m in _econeval_imports(PKG / "api.py")
                 if m.startswith(("econeval.cli", "econeval.plugins", "econeval.benchmarks", "econeval.judge", "econeval.publish")))
    assert not bad, bad
    for path in (PKG / "plugins").rglob("*.py"):  # a plugin is no benchmark's business either way
        assert not any(m.startswith("econeval.cli") for m in _econeval_imports(path)), path


def test_readers_of_finished_folders_never_import_the_runner_or_private_names():
    """compare, merge, report, view and the shared record readers work on what a run wrote: they
    never import the run path (the runner, the API), and no module imports another's private
    (underscored) names."""
    readers = [*(PKG / "publish").glob("*.py"), *(PKG / "store").glob("*.py"), PKG / "judge" / "compare.py", PKG / "run" / "shards.py",
               PKG / "scoring.py", PKG / "context.py"]
    for path in readers:
        mods = _econeval_imports(path)
        assert not mods & {"econeval.run.runner", "econeval.api"}, (path.relative_to(PKG).as_posix(), mods)
    for path in PKG.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:  # econeval's own modules
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                assert not private, (path.relative_to(PKG).as_posix(), node.module, private)


def test_small_facts_have_one_owner():
    """The bool parser (types.parse_bool), the role flag (types.role_flag), the folder's lock
    (runfiles.LOCK), the --max-drop check (compare.check_max_drop) and the chunk a replay steps by
    (types.CHUNK) are each written once."""
    texts = {path.relative_to(PKG).as_posix(): path.read_text() for path in PKG.rglob("*.py")}
    for needle, owner in (('"1", "true", "yes", "on"', "types.py"), ('f"--role ', "types.py"), ('".lock"', "store/runfiles.py"),
                          ("--max-drop must be", "judge/compare.py"), ("CHUNK = 16", "types.py")):
        holders = sorted(rel for rel, text in texts.items() if needle in text)
        assert holders == [owner], (needle, holders)
    from econeval.judge import gate
    from econeval.store import runmeta
    from econeval.types import Role, parse_bool, role_flag

    assert gate.REPLAY_CHUNK == runmeta.CHUNK
    assert [parse_bool(v) for v in (True, "Yes", " on ", "0", "off")] == [True, True, True, False, False]
    assert role_flag("judge") == "--judge" and role_flag("grader") == "--role grader"
    assert Role("judge").flag == "--judge MODEL" and Role("grader").flag == "--role grader=MODEL"
