"""A writer folder (`econeval steer write --out DIR`) as a template set, and the files in it.

    DIR/write/          the writer's run folder (run.json, samples.jsonl, results.json)
    DIR/templates/E.json the kept templates of element E, in the bundled templates' format
                        (derived from the writer's verified run; a person may edit them)
    DIR/checks/KEY/     a double-check's run folder; DIR/checks/KEY.json the set it checked
    DIR/check.json      which check is current and its threshold (`econeval steer check`)
    DIR/review.json     a person's decisions (`econeval steer review`, or edited by hand)
    DIR/review.html     the review page

Every file here is read as untrusted input: a FIFO, a device or a folder in a file's place, a
file over FILE_LIMIT, a field of another type, an element that is no element, a slot no solver
fills, doubled braces: one line naming the file, the template and the field. The run folders are
read through the verified reader (store.finished), as the gate reads a baseline.

Which templates a question set is made from: every kept template, less those a person rejected
and those the checker flagged that no person accepted.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ...benchmarks.steer_me.generator import covered, lexicon, templates
from ...benchmarks.steer_me.solvers import ELEMENTS
from ...errors import UsageError
from ...results import dumps, read_regular, write_atomic
from ...store.runfiles import RUN_JSON
from ...store.finished import FinishedRun, open_run
from .check_task import TASK as CHECK_TASK
from .validate import LEXICON_SLOTS, labeled_fields
from .write_task import TASK as WRITE_TASK

WRITE_RUN, TEMPLATES_DIR, CHECKS_DIR = "write", "templates", "checks"
CHECK_FILE, REVIEW_FILE, REVIEW_PAGE = "check.json", "review.json", "review.html"
EARLIER_LAYOUT = ("writer.json", "written.jsonl")  # econeval 0.2.0's writer folder
DECISIONS = ("accept", "reject")
FILE_LIMIT = 16 << 20  # bytes of one file read here
_ID = re.compile(r"[A-Za-z0-9_./\-]{1,200}")
_BRACE = re.compile(r"\{[^{}]*\}")
_FIELD = re.compile(r"\{([A-Za-z0-9_]+)\}")


def read_doc(path: Path, what: str) -> Any:
    """A JSON file of the folder: a regular file (a FIFO, a device, a folder refused at once) of
    at most FILE_LIMIT bytes."""
    try:
        raw = read_regular(path, FILE_LIMIT, follow=True)
    except OSError as exc:
        raise UsageError(f"{path} cannot be read as {what} ({exc.strerror or exc})") from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc})", hint=f"it should be {what}") from None


def template_problem(element: str, t: Any, ids: set[str]) -> str | None:
    """What is wrong with one template of a set (None: nothing): the field and why."""
    if not isinstance(t, dict):
        return "is not an object"
    tid = t.get("id")
    if not isinstance(tid, str) or not _ID.fullmatch(tid):
        return f"field 'id' must be a string of letters, digits and ._/- (at most 200), not {tid!r}"[:300]
    if tid in ids:
        return "field 'id' is used by another template"
    types = ELEMENTS[element].types
    if t.get("type") not in types:
        return f"field 'type' must be one of {', '.join(types)}, not {t.get('type')!r}"[:300]
    text = t.get("text")
    if not isinstance(text, str) or not text.strip():
        return f"field 'text' must be a non-empty string, not {text!r}"[:300]
    if "{{" in text or "}}" in text:
        return "field 'text' has doubled braces ({{ or }}): a labeled field is written {field}"
    if text.count("{") != text.count("}") or any(not _FIELD.fullmatch(b) for b in _BRACE.findall(text)):
        return "field 'text' has a brace that is no {field}"
    fillable = LEXICON_SLOTS | {f for g in templates()[element] if g["type"] == t["type"] for f in labeled_fields(g["text"])}
    unknown = sorted(set(_FIELD.findall(text)) - fillable)
    if unknown:
        return (f"field 'text' has {', '.join('{' + u + '}' for u in unknown)}, which nothing fills "
                f"({element}'s {t['type']} questions fill {', '.join('{' + f + '}' for f in sorted(fillable - LEXICON_SLOTS))})")
    lex = lexicon()
    for key, known in (("domains", lex["domains"]), ("perspectives", lex["perspectives"])):
        v = t.get(key)
        if not (isinstance(v, list) and len(v) == 1 and isinstance(v[0], str) and v[0] in known):
            return f"field '{key}' must name one known {key[:-1]}, not {v!r}"[:300]
    for key in ("gold", "stage", "name"):
        if key in t and t[key] is not None and not isinstance(t[key], str):
            return f"field '{key}' must be a string"
    return None


@dataclass
class Check:
    """The current double-check: its threshold and, per template id, what it checked (the
    template's text, its questions with the checker's replies and verdicts, the agreement)."""

    threshold: float
    run: str  # the check's run folder, relative to the writer folder
    checker: str | None
    complete: bool
    written: dict[str, dict]  # template id → entry
    gold: dict[str, dict]  # element → entry
    summary: dict


@dataclass
class WrittenSet:
    folder: Path
    templates: dict[str, list[dict]]  # element → kept templates
    writer: dict | None = None  # the writer run's model and prompt version (None: no writer run in the folder)
    check: Check | None = None
    decisions: dict[str, dict] = field(default_factory=dict)

    def all(self) -> list[dict]:
        return [t for ts in self.templates.values() for t in ts]

    def by_id(self) -> dict[str, dict]:
        return {t["id"]: t for t in self.all()}

    def verdict(self, tid: str) -> dict | None:
        """The current check's entry for a template, if it checked the template as it reads now."""
        entry = self.check.written.get(tid) if self.check else None
        t = self.by_id().get(tid)
        return entry if entry is not None and t is not None and entry["text"] == t["text"] else None

    def state(self, tid: str) -> str:
        """unchecked | passed | flagged (by the checker, no decision) | accepted | rejected (by a person)."""
        d = (self.decisions.get(tid) or {}).get("decision")
        if d in DECISIONS:
            return "accepted" if d == "accept" else "rejected"
        entry = self.verdict(tid)
        if entry is None or self.check is None:
            return "unchecked"
        return "flagged" if entry["agreement"] < self.check.threshold else "passed"

    def states(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.all():
            s = self.state(t["id"])
            out[s] = out.get(s, 0) + 1
        return out

    def usable(self) -> dict[str, list[dict]]:
        out = {}
        for el, ts in self.templates.items():
            keep = [t for t in ts if self.state(t["id"]) in ("unchecked", "passed", "accepted")]
            if keep:
                out[el] = keep
        return out

    def identity(self, used: dict[str, list[dict]]) -> dict:
        """What run.json names the set by: the hash of the templates used, the writer, the checker,
        the review state."""
        return {"sha256": set_sha256(used), "folder": str(self.folder.resolve()),
                "templates": sum(len(ts) for ts in used.values()), "elements": len(used),
                "writer": self.writer or {"name": None, "kind": None, "prompt_version": None, "seed": None},
                "checker": {"name": self.check.checker, "version": "steer-check/2", "threshold": self.check.threshold}
                if self.check else None,
                "review": self.states(),
                "what": "auto-STEER's protocol re-implemented with the user's writer model: not the authors' data"}


def set_sha256(used: dict[str, list[dict]]) -> str:
    canon = dumps({el: sorted(ts, key=lambda t: t["id"]) for el, ts in sorted(used.items())}, pretty=False)
    return hashlib.sha256(canon).hexdigest()


def check_dir(folder: Path) -> Path:
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder", hint="give the writer folder of `econeval steer write --out DIR`")
    return folder


def read_templates(folder: Path) -> dict[str, list[dict]]:
    """The folder's templates/E.json files, each template checked (template_problem)."""
    tdir = folder / TEMPLATES_DIR
    if not tdir.is_dir():
        raise UsageError(f"{folder} is not a writer folder (no {TEMPLATES_DIR}/)", hint="`econeval steer write --out DIR` makes one")
    out: dict[str, list[dict]] = {}
    ids: set[str] = set()
    for p in sorted(tdir.glob("*.json")):
        doc = read_doc(p, "a written template file")
        if not isinstance(doc, dict):
            raise UsageError(f"{p} is not a written template file (not a JSON object)")
        element = doc.get("element", p.stem)
        if not isinstance(element, str) or element not in covered():
            raise UsageError(f"{p}: field 'element' {str(element)[:80]!r} is not a STEER-ME element with templates",
                             hint="`econeval steer elements` lists them")
        ts = doc.get("templates")
        if not isinstance(ts, list):
            raise UsageError(f"{p}: field 'templates' must be a list of templates")
        for i, t in enumerate(ts):
            why = template_problem(element, t, ids)
            if why:
                name = t.get("id") if isinstance(t, dict) and isinstance(t.get("id"), str) else f"#{i + 1}"
                raise UsageError(f"{p}: template {str(name)[:80]}: {why}")
            ids.add(t["id"])
        if element in out:
            raise UsageError(f"{p}: element {element} has another file in {tdir}")
        out[element] = ts
    return out


def load(folder: Path, with_check: bool = True) -> WrittenSet:
    folder = check_dir(folder)
    ws = WrittenSet(folder, read_templates(folder), writer=writer_of(folder))
    if with_check and (folder / CHECK_FILE).exists():
        ws.check = read_check(folder)
    if (folder / REVIEW_FILE).exists():
        ws.decisions = read_decisions(folder / REVIEW_FILE)
    return ws


def writer_of(folder: Path) -> dict | None:
    """The writer run's model, prompt version and seed (from its run.json), if the folder has one."""
    if not (folder / WRITE_RUN / RUN_JSON).exists():
        return None
    rec = open_run(folder / WRITE_RUN).record
    if WRITE_TASK not in rec.tasks:
        raise UsageError(f"{folder / WRITE_RUN} is not a run of {WRITE_TASK}")
    return {"name": rec.model_name, "kind": rec.backend_kind, "prompt_version": rec.task(WRITE_TASK).prompt_version,
            "seed": rec.run_seed}


def read_decisions(path: Path) -> dict[str, dict]:
    doc = read_doc(path, "a review file")
    raw = doc.get("decisions", {}) if isinstance(doc, dict) else None
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: field 'decisions' must be an object (template id → decision)")
    out: dict[str, dict] = {}
    for tid, d in raw.items():
        d = {"decision": d} if isinstance(d, str) else d
        if not isinstance(d, dict) or d.get("decision") not in DECISIONS or not isinstance(d.get("note", ""), str):
            raise UsageError(f"{path}: {tid[:80]}: decision must be accept or reject (with an optional note), not {str(d)[:80]}")
        out[tid] = d
    return out


def read_check(folder: Path) -> Check:
    """check.json (which check run is current, its threshold), and that run read verified."""
    path = folder / CHECK_FILE
    doc = read_doc(path, "a check file")
    if isinstance(doc, dict) and "templates" in doc and "run" not in doc:
        raise UsageError(f"{path} is from an earlier econeval (0.2.0)", hint="run `econeval steer check` again")
    run = doc.get("run") if isinstance(doc, dict) else None
    if not isinstance(run, str) or not re.fullmatch(CHECKS_DIR + r"/[0-9a-f]{12}", run):
        raise UsageError(f"{path}: field 'run' must name a check of this folder ({CHECKS_DIR}/KEY), not {str(run)[:80]!r}")
    threshold = doc.get("threshold")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
        raise UsageError(f"{path}: field 'threshold' must be a number from 0 to 1, not {str(threshold)[:80]!r}")
    if not (folder / run).is_dir():
        raise UsageError(f"{path}: its check {folder / run} is missing", hint="run `econeval steer check` again")
    return check_of(open_run(folder / run).checked(), float(threshold), run)


def check_of(run: FinishedRun, threshold: float, where: str) -> Check:
    """A verified check run as the review reads it."""
    if CHECK_TASK not in run.record.tasks:
        raise UsageError(f"{run.path} is not a run of {CHECK_TASK}")
    items = {it["id"]: it for it in run.preps[CHECK_TASK].items}
    written: dict[str, dict] = {}
    gold: dict[str, dict] = {}
    for item_id, rec in run.samples.get(CHECK_TASK, {}).items():
        item = items[item_id]
        if "agreement" not in rec:  # an error (a served checker that failed): nothing checked
            continue
        qs = [{**q, **v, "mc_reply": rec.get(f"mc/{i}"), "ft_reply": rec.get(f"ft/{i}")}
              for i, (q, v) in enumerate(zip(item["questions"], rec["verdicts"]), 1)]
        entry = {"element": item["element"], "agreement": rec["agreement"], "questions": qs, "text": item.get("text")}
        if item["kind"] == "written":
            written[item["template_id"]] = entry
        else:
            gold[item["element"]] = entry
    from .check_task import summary

    done = [r for r in run.samples.get(CHECK_TASK, {}).values() if "agreement" in r]
    return Check(threshold=threshold, run=where, checker=run.record.model_name, complete=run.record.status == "complete",
                 written=written, gold=gold,
                 summary={"written": summary([r for r in done if r["kind"] == "written"]),
                          "gold": summary([r for r in done if r["kind"] == "gold"])})


def write_check_file(folder: Path, check: Check) -> None:
    write_atomic(folder / CHECK_FILE, dumps({
        "about": "the current double-check of this folder's templates (`econeval steer check`): its run folder and the "
                 "threshold below which a template's agreement with the closed forms flags it",
        "run": check.run, "threshold": check.threshold, "checker": check.checker, "summary": check.summary}))


def decide(ws: WrittenSet, accept: list[str], reject: list[str], note: str | None) -> None:
    known = ws.by_id()
    unknown = [t for t in accept + reject if t not in known]
    if unknown:
        raise UsageError(f"no kept template {', '.join(unknown)[:200]} in {ws.folder}", hint="`econeval steer review DIR` lists them")
    both = set(accept) & set(reject)
    if both:
        raise UsageError(f"accepted and rejected at once: {', '.join(sorted(both))}")
    for tid, d in [(t, "accept") for t in accept] + [(t, "reject") for t in reject]:
        ws.decisions[tid] = {"decision": d, **({"note": note} if note else {})}
    write_atomic(ws.folder / REVIEW_FILE, dumps({
        "about": "a person's decisions on written templates: accept (used even if the checker flagged it) or reject "
                 "(never used); edit by hand or with `econeval steer review DIR --accept ID --reject ID`",
        "decisions": dict(sorted(ws.decisions.items()))}))


def combos_of(used: dict[str, list[dict]]):
    """The generator's combinations of a written set: each template in its one domain and perspective."""
    def combos(element: str) -> list[tuple[dict, str, str]]:
        return [(t, t["domains"][0], t["perspectives"][0]) for t in used[element]]
    return combos


def kept_from_run(run: FinishedRun) -> dict[str, list[dict]]:
    """The kept templates of a verified writer run, per element in taxonomy order, in the bundled
    templates' format (one domain and one perspective each)."""
    out: dict[str, list[dict]] = {}
    for rec in run.samples.get(WRITE_TASK, {}).values():
        for t in rec.get("templates") or []:
            if t["kept"]:
                out.setdefault(rec["element"], []).append({
                    "id": t["template_id"], "type": rec["type"], "text": t["template"], "domains": [rec["domain"]],
                    "perspectives": [t["perspective"]], "gold": rec["gold"], "stage": t["stage"],
                    **({"name": t["person"]} if t.get("person") else {})})
    return {el: out[el] for el in covered() if el in out}


def write_templates(folder: Path, kept: dict[str, list[dict]]) -> None:
    """templates/E.json for each element with a kept template (elements are the taxonomy's own
    names: no path of the folder comes from a file); stale files removed."""
    tdir = folder / TEMPLATES_DIR
    tdir.mkdir(exist_ok=True)
    for el, ts in kept.items():
        assert el in covered()
        write_atomic(tdir / f"{el}.json", dumps({"element": el, "written": True, "templates": ts}))
    for stale in tdir.glob("*.json"):
        if stale.stem not in kept and stale.is_file() and not stale.is_symlink():
            stale.unlink()
