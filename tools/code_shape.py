"""The code's shape, as issues #40 and #48 measure it: modules per folder, string-key reads of
run.json dicts and of sample lines per module, copies of the "is this item scored" rule, the
longest functions and the widest signatures of the package.

    python tools/code_shape.py [ROOT]

A read is `X["key"]` or `X.get("key")` where X holds run.json or a part of it by this code's
naming: `meta`, `*_meta`, `old`, `first`, or anything reached through `.meta` or `.record` (click's
`ctx.meta` is not one); tests/test_record.py refuses such reads outside record.py with the same
rule. Every key of a chain counts (`meta["a"]["b"]` is two reads).

A read of a sample line is the same on a name this code gives a sample line or a task's outputs:
`rec`, `*_rec`, `recs`, `record`, `line`, `one`, `sample` (a heuristic: `record` is also a
RunRecord's name, read by attribute; a read of a line under another name is not counted). A copy
of the scored rule is a boolean expression that reads both `skipped` and `error` with `.get`.
"""

from __future__ import annotations

import ast
import collections
import re
import sys
from pathlib import Path

RUN_JSON = re.compile(r"(\w+_)?meta|old|first")
SAMPLE_LINE = re.compile(r"(\w+_)?recs?|record|line|one|sample")


def receiver(node: ast.AST) -> ast.AST | None:
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.func.value
    return None


def holds_run_json(expr: ast.AST) -> bool:
    """An expression that holds run.json or a part of it (see the module's docstring)."""
    while True:
        if isinstance(expr, ast.Name):
            return bool(RUN_JSON.fullmatch(expr.id))
        if isinstance(expr, ast.Attribute):
            if expr.attr == "record" or (expr.attr == "meta" and not (isinstance(expr.value, ast.Name) and expr.value.id == "ctx")
                                         and not isinstance(expr.value, ast.Call)):
                return True
            expr = expr.value
        elif isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        else:
            return False


def run_json_reads(tree: ast.AST) -> list[ast.AST]:
    """The string-key reads of run.json in a module."""
    return [node for node in ast.walk(tree) if (recv := receiver(node)) is not None and holds_run_json(recv)]


def sample_line_reads(tree: ast.AST) -> list[ast.AST]:
    """The string-key reads of sample lines in a module (see the module's docstring)."""
    def holds(expr: ast.AST) -> bool:
        while isinstance(expr, ast.Subscript):
            expr = expr.value
        return isinstance(expr, ast.Name) and bool(SAMPLE_LINE.fullmatch(expr.id))
    return [node for node in ast.walk(tree) if (recv := receiver(node)) is not None and holds(recv)
            and not (isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load))]


def scored_rule_copies(tree: ast.AST) -> list[ast.AST]:
    """Boolean expressions that read both `skipped` and `error` with `.get`: the scored rule again."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp):
            keys = {n.args[0].value for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "get" and n.args and isinstance(n.args[0], ast.Constant)}
            if {"skipped", "error"} <= keys:
                out.append(node)
    return out


def main(root: Path) -> None:
    reads: collections.Counter[str] = collections.Counter()
    line_reads: collections.Counter[str] = collections.Counter()
    rule: collections.Counter[str] = collections.Counter()
    folders: collections.Counter[str] = collections.Counter()
    funcs = []
    for path in sorted((root / "econeval").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        name = str(path.relative_to(root / "econeval").with_suffix("")).replace("/", ".")
        if (k := len(run_json_reads(tree))):
            reads[name] = k
        if (k := len(sample_line_reads(tree))):
            line_reads[name] = k
        if (k := len(scored_rule_copies(tree))):
            rule[name] = k
        folders[str(path.parent.relative_to(root))] += 1
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                width = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                width -= bool(a.args) and a.args[0].arg in ("self", "cls")
                funcs.append((node.end_lineno - node.lineno + 1, width, f"{name}.{node.name}"))
    print("modules per folder: " + ", ".join(f"{f}/ {k}" for f, k in sorted(folders.items())))
    print(f"string-key reads of run.json: {sum(reads.values())} in {len(reads)} modules: "
          + ", ".join(f"{m} {k}" for m, k in reads.most_common()))
    print(f"string-key reads of sample lines: {sum(line_reads.values())} in {len(line_reads)} modules: "
          + ", ".join(f"{m} {k}" for m, k in line_reads.most_common()))
    print(f"copies of the scored rule: {sum(rule.values())} in {len(rule)} modules: "
          + ", ".join(f"{m} {k}" for m, k in rule.most_common()))
    print("longest functions (lines): " + ", ".join(f"{f} {n}" for n, _, f in sorted(funcs, reverse=True)[:6]))
    print("widest signatures (parameters): " + ", ".join(f"{f} {w}" for _, w, f in sorted(funcs, key=lambda x: -x[1])[:6]))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]))
