"""The authors' staged STEER-ME data package, read as econeval items (`-T questions=DIR`).

Layout, as the authors' evaluation package (`steer_bench/data.py`) reads it: `DIR/elements.csv`
(one row per element: its setting and module names) and
`DIR/data/<setting>/<module>/<element>/test.parquet`, one row per question part with
`element`, `base_id`, `part`, `question_text`, `options`, `correct_index` (null for
consistency-graded parts), `grading`, `type`, `domain`, `perspective`, `template_id`.

What econeval runs of it: every answer-graded single-part question. Multi-part groups (letters
continuing across the parts) and consistency-graded groups are not run yet; their counts are
recorded in run.json. Reading parquet needs pyarrow (`pip install "econeval[steer-data]"`).
"""

from __future__ import annotations

import csv
import hashlib
import math
from pathlib import Path
from typing import Any

from ...errors import UsageError


def _clean(x: Any) -> Any:
    if isinstance(x, float) and math.isnan(x):
        return None
    return x.tolist() if hasattr(x, "tolist") and not isinstance(x, (str, bytes)) else x


def _names(pkg: Path) -> dict[str, dict[str, str]]:
    try:
        with open(pkg / "elements.csv", newline="", encoding="utf-8") as fh:
            return {r["element"]: r for r in csv.DictReader(fh) if r.get("element")}
    except (OSError, KeyError, csv.Error) as exc:
        raise UsageError(f"{pkg}/elements.csv cannot be read as the STEER-ME package's element table ({exc})") from None


def load(pkg: Path, split: str = "test") -> tuple[list[dict], dict]:
    """(items, what run.json records: the package, its files' digest, what was left out)."""
    pkg = Path(pkg)
    if not (pkg / "elements.csv").is_file():
        raise UsageError(f"{pkg} is not a STEER-ME data package (no elements.csv)",
                         hint="the layout is DIR/elements.csv and DIR/data/<setting>/<module>/<element>/test.parquet")
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError("reading the STEER-ME data package needs pyarrow", hint='pip install "econeval[steer-data]"') from None
    names = _names(pkg)
    files = sorted(pkg.glob(f"data/*/*/*/{split}.parquet"))
    if not files:
        raise UsageError(f"{pkg} holds no data/<setting>/<module>/<element>/{split}.parquet files")
    digest = hashlib.sha256()
    groups: dict[tuple[str, str], list[dict]] = {}
    for path in files:
        digest.update(path.relative_to(pkg).as_posix().encode() + b"\0" + path.read_bytes())
        element, module, setting = path.parent.name, path.parent.parent.name, path.parent.parent.parent.name
        meta = names.get(element, {})
        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:  # noqa: BLE001 - pyarrow's own errors: the user's file, one line
            raise UsageError(f"{path} cannot be read as parquet ({type(exc).__name__}: {exc})") from None
        for n, raw in enumerate(rows):
            r = {k: _clean(v) for k, v in raw.items()}
            if "question_text" not in r or "options" not in r:
                raise UsageError(f"{path}: row {n} lacks question_text or options")
            r.setdefault("element", element)
            r["_setting"] = r.get("setting") or meta.get("setting") or setting
            r["_module"] = r.get("module") or meta.get("module") or module
            groups.setdefault((str(r["element"]), str(r.get("base_id", n))), []).append(r)
    items, multi, consistency = [], 0, 0
    for (element, base), parts in groups.items():
        grading = parts[0].get("grading") or ("answer" if parts[0].get("correct_index") is not None else "consistency")
        if grading != "answer":
            consistency += 1
            continue
        if len(parts) > 1:
            multi += 1
            continue
        r = parts[0]
        options = [str(o) for o in r["options"]]
        ci = int(r["correct_index"])
        if not 0 <= ci < len(options) or len(options) < 2:
            raise UsageError(f"STEER-ME package question {element}/{base}: correct_index {ci} with {len(options)} options")
        items.append({"id": f"steer-me/{r.get('question_id') or f'{element}/{base}/0'}", "element": element,
                      "setting": r["_setting"], "module": r["_module"], "domain": r.get("domain"),
                      "perspective": r.get("perspective"), "type": r.get("type") or "default",
                      "template_id": r.get("template_id"), "question": r["question_text"], "options": options,
                      "correct_index": ci})
    source = {"package": str(pkg.resolve()), "split": split, "files": len(files), "sha256": digest.hexdigest(),
              "questions": len(items), "not_run": {"multi_part_groups": multi, "consistency_graded_groups": consistency}}
    return items, source
