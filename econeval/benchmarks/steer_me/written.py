"""A writer folder (`econeval steer write`) as a template set: its kept templates, the checker's
verdicts (check.json, `econeval steer check`), a person's decisions (review.json, `econeval steer
review` or edited by hand), and the identity a question set generated from it carries into
run.json (the set's hash, writer, checker and review state).

Which templates a question set is made from: every kept template, less those a person rejected
and those the checker flagged that no person accepted."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import UsageError
from ...results import dumps, write_atomic
from .generator import lexicon
from .writer import TEMPLATES_DIR, WRITER_FILE

CHECK_FILE, REVIEW_FILE, REVIEW_PAGE = "check.json", "review.json", "review.html"
DECISIONS = ("accept", "reject")


def _read(path: Path, what: str) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} cannot be read as {what} ({type(exc).__name__})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} is not {what} (not a JSON object)")
    return doc


@dataclass
class WrittenSet:
    folder: Path
    writer: dict
    templates: dict[str, list[dict]]  # element → kept templates
    check: dict | None = None
    decisions: dict[str, dict] = field(default_factory=dict)

    def all(self) -> list[dict]:
        return [t for ts in self.templates.values() for t in ts]

    def by_id(self) -> dict[str, dict]:
        return {t["id"]: t for t in self.all()}

    def state(self, tid: str) -> str:
        """unchecked | passed | flagged (by the checker, no decision) | accepted | rejected (by a person)."""
        d = (self.decisions.get(tid) or {}).get("decision")
        if d in DECISIONS:
            return "accepted" if d == "accept" else "rejected"
        verdict = ((self.check or {}).get("templates") or {}).get(tid)
        if verdict is None:
            return "unchecked"
        return "flagged" if verdict.get("flagged") else "passed"

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
        canon = dumps({el: sorted(ts, key=lambda t: t["id"]) for el, ts in sorted(used.items())}, pretty=False)
        states: dict[str, int] = {}
        for t in self.all():
            s = self.state(t["id"])
            states[s] = states.get(s, 0) + 1
        ident = self.writer.get("identity") or {}
        w = self.writer.get("writer_info") or {}
        check = (self.check or {}).get("identity") or {}
        return {"sha256": hashlib.sha256(canon).hexdigest(), "folder": str(self.folder.resolve()),
                "templates": sum(len(ts) for ts in used.values()), "elements": len(used),
                "writer": {"name": w.get("name"), "kind": w.get("kind"), "prompt_version": ident.get("prompt_version"),
                           "seed": ident.get("seed")},
                "checker": {"name": ((self.check or {}).get("checker") or {}).get("name"), "version": check.get("version"),
                            "threshold": (self.check or {}).get("threshold")} if self.check else None,
                "review": states,
                "what": "auto-STEER's protocol re-implemented with the user's writer model: not the authors' data"}


def load(folder: Path) -> WrittenSet:
    folder = Path(folder)
    if not (folder / WRITER_FILE).is_file():
        raise UsageError(f"{folder} is not a writer folder (no {WRITER_FILE})", hint="`econeval steer write --out DIR` makes one")
    writer = _read(folder / WRITER_FILE, "a writer folder's writer.json")
    templates: dict[str, list[dict]] = {}
    for p in sorted((folder / TEMPLATES_DIR).glob("*.json")):
        doc = _read(p, "a written template file")
        ts = doc.get("templates")
        if not isinstance(ts, list) or not all(isinstance(t, dict) and {"id", "type", "text"} <= set(t) for t in ts):
            raise UsageError(f"{p}: templates must be a list of objects with id, type and text")
        lex = lexicon()
        for t in ts:
            if not (isinstance(t.get("domains"), list) and len(t["domains"]) == 1 and t["domains"][0] in lex["domains"]
                    and isinstance(t.get("perspectives"), list) and len(t["perspectives"]) == 1
                    and t["perspectives"][0] in lex["perspectives"]):
                raise UsageError(f"{p}: template {t['id']} must name one known domain and one known perspective")
        templates[str(doc.get("element", p.stem))] = ts
    check = _read(folder / CHECK_FILE, "a check file") if (folder / CHECK_FILE).is_file() else None
    decisions: dict[str, dict] = {}
    if (folder / REVIEW_FILE).is_file():
        doc = _read(folder / REVIEW_FILE, "a review file")
        raw = doc.get("decisions", {})
        if not isinstance(raw, dict):
            raise UsageError(f"{folder / REVIEW_FILE}: decisions must be an object (template id → decision)")
        for tid, d in raw.items():
            d = {"decision": d} if isinstance(d, str) else d
            if not isinstance(d, dict) or d.get("decision") not in DECISIONS:
                raise UsageError(f"{folder / REVIEW_FILE}: {tid}: decision must be accept or reject, not {d!r}")
            decisions[tid] = d
    return WrittenSet(folder, writer, templates, check, decisions)


def decide(ws: WrittenSet, accept: list[str], reject: list[str], note: str | None) -> None:
    known = ws.by_id()
    unknown = [t for t in accept + reject if t not in known]
    if unknown:
        raise UsageError(f"no kept template {', '.join(unknown)} in {ws.folder}", hint="`econeval steer review DIR` lists them")
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
