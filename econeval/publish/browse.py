"""Past runs and single answers: `econeval runs` lists run folders (status, model, tasks, items
saved, date, headline numbers); `econeval view RUN` writes one self-contained HTML page of a
run's samples, filterable by task, outcome and group (a sub-task, an element), each item with
its prompts, responses, gold answer, parse and scores."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from .. import config, registry
from ..errors import UsageError, clean_tree, counted
from ..store.epochs import epochs_in
from ..store.finished import open_run
from ..store.items import UNPARSED, ItemView, item_view, line_task
from ..store.folder import iter_samples
from ..reasoning import THINKING
from ..store.record import NO_TASKS
from ..store.runfiles import LOCK, RUN_JSON, SAMPLES
from . import pages


def _running(folder: Path) -> bool:
    """Whether a process holds the folder's lock now (read-only: nothing is created)."""
    import stat

    try:  # without blocking: a FIFO in the lock's place would wait for a writer forever
        fd = os.open(folder / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # not a lock econeval made: no run holds it
            return False
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _headline(results: dict) -> dict[str, dict]:
    out = {}
    for name, res in results.items():
        try:
            out[name] = registry.get_task(name).headline(res)
        except (UsageError, KeyError, TypeError, AttributeError, ValueError):
            out[name] = {}
    return out


def describe(folder: Path) -> dict[str, Any] | None:
    """One run folder as `econeval runs` lists it (None: not a run folder); a damaged run.json is
    listed with what it holds."""
    try:
        run = open_run(folder, strict=False)
    except UsageError:
        return None
    record = run.record
    if NO_TASKS in record.problems:  # not a run's record
        return None
    status = record.status or "?"
    if status == "running" and not _running(folder):
        status = "stopped"  # the process is gone without marking it (killed): rerun to resume
    saved = None
    if (folder / SAMPLES).is_file():
        try:
            saved = sum(1 for _ in iter_samples(folder / SAMPLES))  # counted, not held in memory
        except UsageError:
            saved = None
    try:
        results = run.results
    except UsageError:  # a damaged results file: the run is still listed, without numbers
        results = {}
    return {"folder": str(folder), "status": str(status), "model": str(record.model_name or record.predictions or "?"),
            "tasks": record.task_names, "items_saved": saved, "started": record.started, "limit": record.limit,
            "headline": _headline(results)}


def list_runs(paths: list[Path]) -> list[dict]:
    """The run folders among `paths` (each a run folder or a folder of them; default: the data
    dir's runs), newest first."""
    paths = paths or [config.data_home() / "runs"]
    found = []
    for p in paths:
        p = Path(p)
        if (p / RUN_JSON).is_file():
            cands = [p]
        elif p.is_dir():
            cands = sorted(q for q in p.iterdir() if q.is_dir() and not q.is_symlink())
            cands += [s for q in list(cands) for s in sorted(q.glob("shard-*-of-*")) if s.is_dir() and not s.is_symlink()]
            cands += [s for q in list(cands) for s in epochs_in(q).values() if not s.is_symlink()]  # a run --epochs parent's
        elif len(paths) == 1 and p == config.data_home() / "runs":
            cands = []
        else:
            raise UsageError(f"{p} is not a folder")
        found += [d for d in map(describe, cands) if d]
    return clean_tree(sorted(found, key=lambda d: d.get("started") or "", reverse=True))


def render_runs(rows: list[dict]) -> str:
    if not rows:
        return "no runs found"
    out = []
    for r in rows:
        items = "-" if r["items_saved"] is None else f"{r['items_saved']:,}"
        limit = f"  --limit {r['limit']}" if r["limit"] else ""
        saved = f"{items} items saved" if r["items_saved"] != 1 else "1 item saved"
        out.append(f"{Path(r['folder']).name}  {r['status']}  {r['model']}  {counted(len(r['tasks']), 'task')}  {saved}  "
                   f"{(r['started'] or '?')[:16].replace('T', ' ')}{limit}")
        for task in r["tasks"]:
            # a finished task's numbers that could not be computed (nothing parsed) are shown as "-", not as "no results"
            nums = "  ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {'-' if v is None else v}"
                             for k, v in r["headline"].get(task, {}).items())
            out.append(f"    {task:<22} {nums or '(no results yet)'}")
        out.append(f"    {r['folder']}")
    return "\n".join(out)


# ---- view --------------------------------------------------------------------------------
_META = {"id", "task", "prompts", "rendered", "calls", "prompt_hash", "gold", "parsed", "reference", "correct",
         "skipped", "error", "unparsed_reason", THINKING}


def _outcome(view: ItemView) -> str:
    """The page's outcome: an item not scored says why (error, skipped); a scored one correct,
    unparsed, wrong or just scored."""
    if not view.scored:
        return view.outcome
    if view.correct is True:
        return "correct"
    if view.outcome == UNPARSED:
        return "unparsed"
    return "wrong" if view.correct is False else "scored"


SHOWN_CHARS = 20_000  # of each prompt or response on the page: a page of a large run stays one a browser opens
SHOWN_ITEMS = 20_000  # items on one page (the full --suite all is 18,091): a million would make a page no browser opens


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _task_and_group(rec: dict) -> tuple[str, str | None]:
    """A sample line's task and group (CFBenchmark's sub-task, STEER-ME's element) as text."""
    item = _item(rec)
    return item["task"], item["group"]


def _item(rec: dict) -> dict:
    """What the page shows of a sample line, whatever its fields hold (a hand-edited or damaged
    line is shown as it is, not refused; a task this econeval does not know read as any task)."""
    task = line_task(rec)
    view = item_view(task, rec)
    prompts = view.shown_prompts()
    responses = {c.name: c.result for c in view.calls if c.prompt is not None and c.answered}
    thinking = view.reasoning()
    own = {task.group_field, task.gold_field, task.answer_field}
    scores = {k: v for k, v in rec.items() if k not in _META and k not in responses and k not in own
              and isinstance(v, (int, float, bool, str)) and len(str(v)) < 200}
    shown: dict[str, Any] = {}  # a prompt sent to several requests (an answer and its log-probabilities) shown once
    for name, text in prompts.items():
        same = next((k for k, v in shown.items() if v == text), None)
        if same is None:
            shown[name] = text
        else:
            shown[f"{same}, {name}"] = shown.pop(same)
    return {"id": view.id, "task": view.task, "group": view.group,
            "outcome": _outcome(view), "prompts": shown, "responses": responses, "thinking": thinking,
            "gold": view.gold, "parsed": view.answer, "why": view.why, "scores": scores}


def _capped(text: str, limit: int = SHOWN_CHARS) -> str:
    """The text as the page shows it: at most `limit` characters, then a note of what is left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… {len(text) - limit:,} more characters not shown (samples.jsonl holds the whole text)"


OUTCOMES = ("correct", "wrong", "unparsed", "scored", "skipped", "error")


def _shown(it: dict) -> dict:
    """An item as the page places it (templates/view.html): every text capped, the filters' keys
    (task, group) cut as the filter lists cut them."""
    def capped(mapping: dict) -> dict:
        return {str(k): _capped(_text(v)) for k, v in mapping.items()}

    return {"id": _capped(it["id"], 200), "task": _capped(it["task"], 200), "task_key": it["task"][:200],
            "group": _capped(it["group"], 200) if it["group"] else None, "group_key": (it["group"] or "")[:200],
            "outcome": it["outcome"], "gold": None if it["gold"] is None else _text(it["gold"])[:80],
            "parsed": None if it["parsed"] is None else _text(it["parsed"])[:40],
            "why": _capped(_text(it["why"]), 2000) if it["why"] else None, "prompts": capped(it["prompts"]),
            "thinking": capped(it["thinking"]), "responses": capped(it["responses"]), "scores": {str(k): str(v) for k, v in it["scores"].items()}}


def write_view(folder: Path, out: Path, tasks: tuple[str, ...] = ()) -> int:
    """Write the page of a run's samples to `out` (self-contained: its script and styles are
    inline), reading samples.jsonl twice as a stream (the filters first, then the items), so a
    large run is never all in memory; each prompt and response shows at most SHOWN_CHARS
    characters, and the page at most SHOWN_ITEMS items (the first; the header says how many are
    left out). Returns the number of items on the page."""
    from ..results import atomic_writer

    folder = Path(folder)
    path = folder / SAMPLES
    if not path.is_file():
        raise UsageError(f"{folder} has no samples.jsonl (not a run folder, or nothing saved yet)")
    total, chosen = 0, list[tuple[str, str | None]]()  # every chosen line counted; the task and group of those shown kept
    for t, g in map(_task_and_group, iter_samples(path)):
        if not tasks or t[:200] in tasks:
            total += 1
            if len(chosen) < SHOWN_ITEMS:
                chosen.append((t[:200], (g or "")[:200] or None))
    if not chosen:
        raise UsageError(f"{folder} holds no samples" + (f" of {', '.join(tasks)}" if tasks else ""))
    listed = describe(folder) or {"model": "?", "status": "?"}

    def items():
        shown = 0
        for rec in iter_samples(path):
            if shown == len(chosen):
                break
            it = _item(rec)
            if not tasks or it["task"][:200] in tasks:
                yield _shown(it)
                shown += 1

    page = pages.stream("view.html", title=f"econeval view: {folder.name}", model=str(listed["model"]), status=str(listed["status"]),
                        total=total, shown=len(chosen), folder_name=pages.shown_path(folder, Path(out).parent),
                        tasks=sorted({t for t, _ in chosen}), outcomes=OUTCOMES, groups=sorted({g for _, g in chosen if g}),
                        items=items())
    with atomic_writer(out) as fh:
        for piece in page:
            fh.write(piece.encode("utf-8", "replace"))
    return len(chosen)
