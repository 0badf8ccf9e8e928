"""One typed view of a sample line (econeval/store/items.py): made in one place, fed by what each
task says of its own lines, and the one owner of "is this item scored" (types.is_scored)."""

import ast
from pathlib import Path

from econeval import registry
from econeval.store.items import ERROR, SCORED, SKIPPED, UNPARSED, item_view
from econeval.types import is_scored

PKG = Path(__file__).resolve().parent.parent / "econeval"


def test_the_outcome_and_why_of_a_line():
    task = registry.get_task("econnli-zero")
    line = {"id": "econnli/test/0", "task": "econnli-zero", "prompts": {"response": "P"}, "response": "yes",
            "calls": {"response": {"kind": "generate", "finish": "stop", "n_prompt_tokens": 7, "n_tokens": 2}},
            "parsed": 1, "gold": 0, "correct": False}
    view = item_view(task, line)
    assert (view.outcome, view.why, view.scored, view.correct) == (SCORED, None, True, False)
    assert (view.gold, view.answer, view.gold_code, view.answer_code) == ("No", "Yes", 0, 1)
    assert view.prompts() == {"response": "P"} and view.tokens("n_prompt_tokens") == 7 and view.tokens("n_reasoning_tokens") is None
    assert view.values == {"accuracy": 0.0}
    unparsed = item_view(task, {**line, "parsed": None, "correct": False, "unparsed_reason": "no yes or no"})
    assert (unparsed.outcome, unparsed.why, unparsed.answer) == (UNPARSED, "no yes or no", None)
    skipped = item_view(task, {"id": "econnli/test/1", "task": "econnli-zero", "skipped": "longer than the context"})
    assert (skipped.outcome, skipped.why, skipped.scored, skipped.values) == (SKIPPED, "longer than the context", False, {})
    error = item_view(task, {"id": "econnli/test/2", "task": "econnli-zero", "error": "non-finite log-probability"})
    assert (error.outcome, error.scored) == (ERROR, False)


def test_each_benchmark_says_where_its_gold_answer_and_labels_are():
    cf = item_view(registry.get_task("cfbenchmark-zero"),
                   {"id": "cfbenchmark/company/0", "task": "cfbenchmark-zero", "subtask": "company", "answer": "ACME", "gold": "ACME Ltd"})
    assert (cf.answer, cf.gold, cf.labels, cf.group, cf.outcome) == ("ACME", "ACME Ltd", {"subtask": "company"}, "company", SCORED)
    empty = item_view(registry.get_task("cfbenchmark-zero"), {"id": "x", "task": "cfbenchmark-zero", "subtask": "company", "answer": ""})
    assert empty.outcome == UNPARSED  # what its n_unparsed counts
    gen = item_view(registry.get_task("econnli-gen"), {"id": "y", "task": "econnli-gen", "reference": "rates rise", "parsed": None})
    assert (gen.gold, gen.outcome) == ("rates rise", UNPARSED)
    steer = item_view(registry.get_task("steer-me"), {"id": "steer-me/x/0", "task": "steer-me", "element": "x", "setting": None,
                                                      "gold": 2, "parsed": 1, "correct": False, "k": 4})
    assert (steer.gold, steer.answer, steer.labels) == ("C", "B", {"element": "x", "setting": None})


def test_an_edited_line_is_read_not_refused():
    view = item_view(registry.get_task("econnli-zero"), {"id": 3, "prompts": "not an object", "calls": [1], "parsed": "??"})
    assert view.calls == () and view.prompts() == {} and view.tokens("n_tokens") is None and view.id == "3"
    assert view.shown_prompts() == {"(as saved)": "not an object"}  # what a page shows of a damaged line
    null = item_view(registry.get_task("econnli-zero"), {"id": 4, "prompts": {"response": "p", "other": "q"}, "response": None})
    assert [(c.name, c.answered, c.result) for c in null.calls] == [("response", True, None), ("other", False, None)]


def _scored_rule(tree: ast.AST) -> list[int]:
    """Lines that test a record's `skipped` and `error` fields together: a copy of the scored rule."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.BoolOp, ast.UnaryOp, ast.Compare, ast.IfExp)):
            keys = {n.args[0].value for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "get" and n.args and isinstance(n.args[0], ast.Constant)}
            if {"skipped", "error"} <= keys and isinstance(node, ast.BoolOp):
                found.append(node.lineno)
    return found


def test_the_scored_rule_has_one_owner():
    assert is_scored({"parsed": 1}) and not is_scored({"skipped": "x"}) and not is_scored({"error": "y"})
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path.relative_to(PKG).as_posix() == "types.py":
            continue
        found += [f"{path.relative_to(PKG)}:{n}" for n in _scored_rule(ast.parse(path.read_text()))]
    assert not found, found
