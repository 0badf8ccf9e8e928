"""The authors' STEER-ME data package, read as econeval items (`-T questions=DIR`).

Layouts, as the authors' evaluation package (`steer_bench/data.py`) reads them: `DIR/elements.csv`
(one row per element: its setting and module names) and either the release layout,
`DIR/data/<element>/test.parquet` (setting and module as columns, else from elements.csv), or the
staging layout, `DIR/data/<setting>/<module>/<element>/test.parquet`; DIR may also be a folder
holding the package as `steer-me/` or `steer_me/` (any case). One row per question part with
`element`, `base_id`, `part`, `question_text`, `options`, `correct_index` (null for
consistency-graded parts), `grading`, `type`, `domain`, `perspective`, `template_id`.

One item per question group (element, base_id): a single question, or the parts of a multi-part
group (asked in one conversation, letters continuing across the parts) with its grading, answer
(every part right) or consistency (the choices satisfy the group's `consistency_rule`,
`<rule_id>:<allowed>`, one digit per part). Reading parquet needs pyarrow (`pip install
"econeval[steer-data]"`).
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
import re
from pathlib import Path
from typing import Any

from ...errors import UsageError

READER = 2  # 2: multi-part and consistency-graded groups run (1: single questions only); in the run's identity
GRADINGS = ("answer", "consistency")  # how the package grades a question: by its correct option, or by a rule over parts
MAX_OPTIONS = 26  # the letters a question's options are named by
RULE = re.compile(r"[^:]+:\s*\d+(?:\s*,\s*\d+)*\s*")  # `<rule_id>:<allowed>[,<allowed>...]`, one digit per part


def _clean(x: Any) -> Any:
    if isinstance(x, float) and math.isnan(x):
        return None
    return x.tolist() if hasattr(x, "tolist") and not isinstance(x, (str, bytes)) else x


def _names(pkg: Path) -> dict[str, dict[str, str]]:
    try:
        with open(pkg / "elements.csv", newline="", encoding="utf-8") as fh:
            return {r["element"]: r for r in csv.DictReader(fh) if r.get("element")}
    except (OSError, KeyError, csv.Error, ValueError) as exc:  # ValueError: not UTF-8
        raise UsageError(f"{pkg}/elements.csv cannot be read as the STEER-ME package's element table "
                         f"({type(exc).__name__}: {str(exc)[:120]})") from None


def _hash_file(digest, path: Path) -> None:
    """Add a parquet file's bytes to the package digest, streamed, refusing what is not a regular
    file (a FIFO would hang the read, a link to /dev/zero never end)."""
    from ...results import open_regular

    try:
        fd = open_regular(path, follow=True)
    except OSError as exc:
        raise UsageError(f"{path} is not a regular file ({exc.strerror or exc})", hint=f"the layout is {LAYOUTS}") from None
    try:
        while block := os.read(fd, 1 << 22):
            digest.update(block)
    finally:
        os.close(fd)


def _whole(value: Any, what: str, where: str) -> int | None:
    """An integer field of a row (a whole float counts; null is None), or a one-line refusal."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not value.is_integer()):
        raise UsageError(f"{where}: {what} must be a whole number, not {value!r}")
    return int(value)


def _row_checked(r: dict, where: str) -> None:
    """The fields econeval reads have their types: question_text a string, options a list of at
    most 26 texts, part and correct_index whole numbers (or null)."""
    if not isinstance(r.get("question_text"), str):
        raise UsageError(f"{where}: question_text must be a string, not {type(r.get('question_text')).__name__}")
    options = r.get("options")
    if not isinstance(options, list) or not all(isinstance(o, (str, int, float)) and not isinstance(o, bool) for o in options):
        raise UsageError(f"{where}: options must be a list of texts, not {type(options).__name__}")
    if len(options) > MAX_OPTIONS:
        raise UsageError(f"{where}: {len(options):,} options: a question has at most {MAX_OPTIONS} (one letter each)")
    if r.get("grading") not in (None, "", *GRADINGS):
        raise UsageError(f"{where}: grading must be one of {', '.join(GRADINGS)} (or empty), not {r.get('grading')!r}")
    r["part"] = _whole(r.get("part"), "part", where)
    r["correct_index"] = _whole(r.get("correct_index"), "correct_index", where)


LAYOUTS = "DIR/elements.csv and DIR/data/<element>/test.parquet (or data/<setting>/<module>/<element>/test.parquet)"


def package_dir(pkg: Path) -> Path:
    """The package: DIR itself, or its subfolder named steer-me / steer_me (case, - and _ aside)."""
    if (pkg / "elements.csv").is_file():
        return pkg
    for child in sorted(pkg.iterdir()) if pkg.is_dir() else []:
        if child.is_dir() and child.name.lower().replace("-", "_") == "steer_me" and (child / "elements.csv").is_file():
            return child
    raise UsageError(f"{pkg} is not a STEER-ME data package (no elements.csv)", hint=f"the layout is {LAYOUTS}")


def split_files(pkg: Path, split: str) -> list[Path]:
    """The split's parquet files, in both layouts (the release layout's first)."""
    return sorted(pkg.glob(f"data/*/{split}.parquet")) + sorted(pkg.glob(f"data/*/*/*/{split}.parquet"))


def load(pkg: Path, split: str = "test") -> tuple[list[dict], dict]:
    """(items, what run.json records: the package, its files' digest, what was left out)."""
    pkg = package_dir(Path(pkg))
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError("reading the STEER-ME data package needs pyarrow", hint='pip install "econeval[steer-data]"') from None
    names = _names(pkg)
    files = split_files(pkg, split)
    if not files:
        raise UsageError(f"{pkg} holds no {split}.parquet files", hint=f"the layout is {LAYOUTS}")
    digest = hashlib.sha256()
    groups: dict[tuple[str, str], list[dict]] = {}
    for path in files:
        digest.update(path.relative_to(pkg).as_posix().encode() + b"\0")
        _hash_file(digest, path)
        staged = path.parent.parent.name != "data"
        element = path.parent.name
        module, setting = (path.parent.parent.name, path.parent.parent.parent.name) if staged else (None, None)
        named = names.get(element, {})
        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:  # noqa: BLE001 - pyarrow's own errors: the user's file, one line
            raise UsageError(f"{path} cannot be read as parquet ({type(exc).__name__}: {exc})") from None
        for n, raw in enumerate(rows):
            r = {k: _clean(v) for k, v in raw.items()}
            if "question_text" not in r or "options" not in r:
                raise UsageError(f"{path}: row {n} lacks question_text or options")
            _row_checked(r, f"{path}: row {n}")
            r.setdefault("element", element)
            r["_setting"] = r.get("setting") or named.get("setting") or setting or "?"
            r["_module"] = r.get("module") or named.get("module") or module or "?"
            groups.setdefault((str(r["element"]), str(r.get("base_id", n))), []).append(r)
    items = []
    for (element, base), parts in groups.items():
        parts.sort(key=lambda r: int(r.get("part") or 0))
        gradings = {p.get("grading") or ("answer" if p.get("correct_index") is not None else "consistency") for p in parts}
        if len(gradings) != 1:
            raise UsageError(f"STEER-ME package question {element}/{base}: its parts mix gradings ({', '.join(sorted(gradings))})")
        grading = gradings.pop()
        shaped = []
        for r in parts:
            options = [str(o) for o in r["options"]]
            ci = None if r.get("correct_index") is None else int(r["correct_index"])
            if len(options) < 2 or (grading == "answer" and not (ci is not None and 0 <= ci < len(options))):
                raise UsageError(f"STEER-ME package question {element}/{base}: correct_index {ci} with {len(options)} options")
            shaped.append({"question": r["question_text"], "options": options, "correct_index": ci,
                           "question_id": r.get("question_id") or f"{element}/{base}/{int(r.get('part') or 0)}"})
        rule = parts[0].get("consistency_rule")
        if grading == "consistency" and not (isinstance(rule, str) and RULE.fullmatch(rule)):
            raise UsageError(f"STEER-ME package question {element}/{base}: consistency-graded without a consistency_rule "
                             "('<rule_id>:<allowed>', one digit per part)")
        r = parts[0]
        one = len(shaped) == 1 and grading == "answer"
        items.append({"id": f"steer-me/{shaped[0]['question_id']}" if one else f"steer-me/{element}/{base}",
                      "question_id": shaped[0]["question_id"], "base_id": base, "element": element,
                      "setting": r["_setting"], "module": r["_module"], "domain": r.get("domain"),
                      "perspective": r.get("perspective"), "type": r.get("type") or "default",
                      "template_id": r.get("template_id"), "question": shaped[0]["question"], "options": shaped[0]["options"],
                      "correct_index": shaped[0]["correct_index"], "grading": grading,
                      **({} if one else {"parts": shaped}), **({"consistency_rule": rule} if grading == "consistency" else {})})
    multi = sum(1 for it in items if len(it.get("parts") or ()) > 1)
    consistency = sum(1 for it in items if it["grading"] == "consistency")
    source = {"package": str(pkg.resolve()), "reader": READER, "split": split, "files": len(files), "sha256": digest.hexdigest(),
              "questions": len(items), "multi_part_groups": multi, "consistency_graded_groups": consistency}
    return items, source
