"""The run record (record.py): run.json read and written by its owner alone, the folder's files and
the results-file family named in one place (runfiles.py), an older layout folded in, and a live gate that prepares each task once and
reads none of its candidate's samples back."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from econeval import registry
from econeval.store.record import RoleEntry, RunRecord

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from code_shape import run_json_reads  # noqa: E402  (the rule the measurement uses, one copy)

PACKAGE = Path(__file__).resolve().parent.parent / "econeval"
OWNER = PACKAGE / "store" / "record.py"
FILES = PACKAGE / "store" / "runfiles.py"


def _modules(owner: Path) -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if p != owner]


def test_run_json_is_read_by_key_only_by_the_record():
    """No module but record.py reads run.json, or a part of it, by string key: the others read
    the typed record's fields and methods."""
    found = []
    for path in _modules(OWNER):
        found += [f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', '?')}: {ast.unparse(node)}"
                  for node in run_json_reads(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, found


def test_the_check_sees_a_read_by_key():
    """The check above is not blind: it finds the reads it is meant to refuse."""
    for code in ('meta["seed"]', 'run.record.backend.get("kind")', 'base_meta.get("tasks", {})', 'self.meta["x"]["y"]'):
        node = ast.parse(code).body[0].value  # type: ignore[attr-defined]
        assert run_json_reads(node), code
    for code in ('rec["correct"]', 'ctx.meta.get("x")', 'record.get("gold")'):
        node = ast.parse(code).body[0].value  # type: ignore[attr-defined]
        assert not run_json_reads(node), code


def test_the_folders_file_names_have_one_owner():
    """run.json, samples.jsonl and the results-file family (results.json, results-partial.json,
    results-limit-N.json, results-sample-SPEC.json) are named in runfiles.py alone."""
    names = re.compile(r"^(run\.json|samples\.jsonl|results\.json|results-partial\.json)$|^results-(limit|sample)-")
    found = []
    for path in _modules(FILES):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree)  # type: ignore[attr-defined]
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                    and names.search(node.value):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}")
    assert not found, found


def test_a_record_reads_back_as_written_and_folds_the_older_layout(cli, tmp_path):
    run = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "4", "--quiet", "--out", run)
    assert rc == 0, err
    doc = json.loads((run / "run.json").read_text())
    record = RunRecord.read(run)
    assert record.to_json() == doc and not record.problems
    assert record.status == "complete" and record.model_name == "m" and record.task_names == ["econnli-zero"]
    older = {k: v for k, v in doc.items() if k != "roles"} | {"judge": {"name": "j", "kind": "fake"}, "what": 1}
    (run / "run.json").write_text(json.dumps(older))
    folded = RunRecord.read(run)
    assert folded.role("judge").name == "j" and folded.role("judge").kind == "fake" and folded.named_roles == frozenset({"judge"})
    assert folded.role("embedder") == RoleEntry()  # no such role: an empty entry
    assert folded.to_json()["what"] == 1 and "judge" not in folded.to_json()  # unknown keys kept; the old role key folded
    (run / "run.json").write_text(json.dumps({**doc, "seed": "x"}))
    assert RunRecord.read(run, strict=False).seed is None
    with pytest.raises(Exception, match="its seed is not as econeval writes it"):
        RunRecord.read(run)


def test_a_task_entry_reads_what_the_run_recorded_of_the_task(cli, tmp_path):
    run = tmp_path / "run"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econlogicqa-1shot", "-T", "shots=fixed", "--limit", "4", "--quiet",
                     "--out", run)
    assert rc == 0, err
    doc = json.loads((run / "run.json").read_text())
    stored = doc["tasks"]["econlogicqa-1shot"]
    entry = RunRecord.read(run).task("econlogicqa-1shot")
    assert entry.recorded and entry.options["shots"] == "fixed" and entry.prompt_version == stored["prompt_version"]
    assert entry.settings == stored["settings"] and entry.dataset == stored["dataset"] and entry.description == stored["description"]
    assert entry.seconds == doc["timing"]["econlogicqa-1shot"]["seconds"]
    assert entry.identity() == {k: stored[k] for k in ("dataset", "prompt_version", "settings", "options")}
    assert [e.name for e in RunRecord.read(run).task_entries()] == ["econlogicqa-1shot"]
    absent = RunRecord.read(run).task("steer-me")
    assert not absent.recorded and absent.identity() is None and absent.options == {} and absent.seconds is None
    # an earlier layout kept the options beside the tasks, not in their entries
    older = {**doc, "tasks": {"econlogicqa-1shot": {k: v for k, v in stored.items() if k != "options"}},
             "options": {"econlogicqa-1shot": {"shots": "fixed"}}}
    (run / "run.json").write_text(json.dumps(older))
    assert RunRecord.read(run).task("econlogicqa-1shot").options == {"shots": "fixed"}
    assert RunRecord.read(run).task("econlogicqa-1shot").identity()["options"] == {"shots": "fixed"}  # compared as read


def test_a_live_gate_prepares_each_task_once_and_reads_no_candidate_sample(cli, tmp_path, monkeypatch):
    """Each task is prepared once in a live gate (the baseline's preparation serves the candidate's
    run, the comparability check and the not-gated numbers), and the candidate's samples are not
    read back after its run: the gate keeps what the run fed it."""
    from econeval.store import finished

    base = tmp_path / "base"
    tasks = ("econnli-zero", "econlogicqa-1shot")
    rc, _, err = cli("run", "--model", "fake:m", *[a for t in tasks for a in ("--task", t)], "--limit", "40", "--quiet",
                     "--out", base)
    assert rc == 0, err
    prepared: list[str] = []
    for name in tasks:
        task = registry.get_task(name)
        original = type(task).prepare

        def counting(self, ctx, _original=original):
            prepared.append(self.name)
            return _original(self, ctx)
        monkeypatch.setattr(type(task), "prepare", counting)
    read: list[Path] = []
    original_read = finished.read_samples
    monkeypatch.setattr(finished, "read_samples", lambda path: (read.append(Path(path).parent), original_read(path))[1])
    cand = tmp_path / "cand"
    rc, out, err = cli("gate", base, "--model", "fake:m2", "--max-drop", "0.5", "--quiet", "--out", cand, "--format", "json")
    assert rc in (0, 1, 3), err
    assert sorted(prepared) == sorted(tasks), prepared  # once each
    assert read == [base], read  # the baseline's samples, once; never the candidate's
    result = json.loads(out)
    assert result["items_used"] > 0 and {r["task"] for r in result["rows"]} == set(tasks)
    assert (cand / "samples.jsonl").is_file()


def test_gate_and_compare_share_the_row_and_the_verdict_rule(cli, tmp_path):
    """The gate's result is typed: its rows (gated and not) are compare's Rows, and its verdict is
    compare's one rule over them."""
    from econeval.judge import compare, gate

    base = tmp_path / "base"
    rc, _, err = cli("run", "--model", "fake:m", "--task", "econnli-zero", "--limit", "40", "--quiet", "--out", base)
    assert rc == 0, err
    result = gate.gate(base, replay=base, max_drop=0.3)
    assert result.rows and all(isinstance(r, compare.Row) for r in result.rows + result.not_gated)
    assert result.verdict == compare.verdict_of(r.verdict for r in result.rows) == "pass"
    assert not hasattr(gate.Gate, "verdict_of")  # one rule, compare's
    assert [set(r) for r in result.as_dict()["rows"]] == [set(compare.GATE_COLUMNS)] * len(result.rows)


def test_a_size_label_is_read_as_a_parameter_count_where_no_count_is_recorded():
    from econeval.store.record import size_label_count

    assert [size_label_count(x) for x in ("270M", "8x7B", "1.5B", "7b", "2K", "big", "", None)] == \
        [270_000_000, 56_000_000_000, 1_500_000_000, 7_000_000_000, 2000, None, None, None]

    def record(model: dict) -> RunRecord:
        return RunRecord.from_json({"run_format": 3, "backend": {"kind": "llamacpp", "model": model}})

    assert record({"gguf_metadata": {"general.size_label": "270M"}}).parameters == 270_000_000
    assert record({"n_params": 268_098_176, "gguf_metadata": {"general.size_label": "270M"}}).parameters == 268_098_176
    assert record({"bytes": 253_000_000}).parameters is None  # a file's size is no parameter count
