"""The run record — run.json: what a run is and what happened to it — read and written here alone.

`RunRecord` is run.json typed, and frozen: what a run is (its tasks, roles, identity, seed,
selection, shard) is set when it starts (runmeta.run_record); what happened (status, timing, stops,
results files) is recorded by its operations, each returning the next record: `continuing` (a
resume), `noted` (what the selection keeps), `projected`, `stopped` (early), `as_interrupted`,
`as_failed`, `as_complete`. `RunRecord.read` is the one reader (an older layout is folded in, a
field of another type read as absent and named in `problems`); `to_json` the one serialiser. The folder's files, the family of results files among
them, are named beside it (runfiles.py).

The identity is what a resumed run must match: the run format, the model's identity, the seed,
each task's prompt version, settings, options and data fingerprint, the identity of each role the
tasks use, and (where the backend's results depend on batch composition) the chunk size.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from ..context import DEFAULT_SEED
from ..errors import UsageError
from ..results import read_json, write_json
from ..types import SELF_JUDGED
from .runfiles import RESULTS, RUN_JSON

if TYPE_CHECKING:
    from ..reasoning import ReasoningKey

RUN_FORMAT = 3  # run.json / samples.jsonl layout; folders of another format are refused, never mixed
# each run format: the econeval that writes and reads it, and what tells its layout (docs/run-folders.md)
RUN_FORMATS = {
    1: ("econeval 0.1.0 before commit cf16fc0 (2026-11-30)", "run.json has no run_format"),
    2: ("econeval 0.1.0 from commit cf16fc0 (2026-11-30) until d6cfabe (2026-12-01)",
        "its identity has no backend settings or schedule version; judge and embedder at the top of run.json"),
    3: ("econeval 0.1.0 since commit d6cfabe (2026-12-01), 0.2.0 and 0.3.0", "this layout"),
}


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _text(part: dict, key: str) -> str | None:
    got = part.get(key)
    return got if isinstance(got, str) else None


# ---- identities ------------------------------------------------------------------------------
_LEGACY_ROLES = ("judge", "embedder")  # run.json's and the identity's role keys before they had `roles`


def role_identities(identity: dict) -> dict:
    """An identity's roles: name → the identity of the model that filled it."""
    got = identity.get("roles")
    if isinstance(got, dict):
        return got
    return {k: identity[k] for k in _LEGACY_ROLES if identity.get(k) is not None}


FOLDER_SIDES = ("in the folder", "now")  # how a difference names the two identities compared


def identity_differences(old: dict, new: dict, partial: bool = False, sides: tuple[str, str] = FOLDER_SIDES) -> list[str]:
    """What differs between two identities, as the user would name it: only the tasks both have,
    and a role only where both use it (`partial`: keys `new` lacks are not compared)."""
    out: list[str] = []
    for k in sorted(set(old) | set(new), key=str):
        if k == "tasks":
            both = [t for t in new.get("tasks", {}) if t in old.get("tasks", {})]
            for t in both:
                out.extend(differences(old["tasks"][t], new["tasks"][t], f"tasks.{t}", partial, sides))
        elif k == "roles" or k in _LEGACY_ROLES:
            continue  # below: a role is compared only where both runs use it
        elif not (partial and k not in new):
            out.extend(differences(old.get(k), new.get(k), k, partial, sides))
    old_roles, new_roles = role_identities(old), role_identities(new)
    for k in sorted(set(old_roles) & set(new_roles)):
        out.extend(differences(old_roles[k], new_roles[k], k, partial, sides))
    return out


def merged_identity(old: dict | None, new: dict) -> dict:
    """The identity of a folder after a run of some or more of its tasks: every task, each role
    that any of them uses."""
    if not old:
        return new
    out = {k: v for k, v in {**old, **new}.items() if k not in _LEGACY_ROLES}
    out["tasks"] = {**old.get("tasks", {}), **new.get("tasks", {})}
    out["roles"] = {**role_identities(old), **role_identities(new)}
    return out


def _label(path: str) -> str:
    """An identity path in the user's terms: `model.settings.parallel` is `parallel`,
    `tasks.T.options.X` is `task option X of T`."""
    parts = path.split(".")
    if parts[:2] == ["model", "settings"] and len(parts) > 2:
        return ".".join(parts[2:])
    if parts[0] == "tasks" and len(parts) > 3 and parts[2] == "options":
        return f"task option {'.'.join(parts[3:])} of {parts[1]}"
    return {"model.model": "the model's weights", "model.model.lora": "the LoRA adapters", "model.n_ctx": "n_ctx", "model.chat_mode": "chat",
            "seed": "seed"}.get(path, path)


def _short(v) -> str:
    s = v if isinstance(v, str) else orjson.dumps(v).decode()
    return s if len(s) <= 72 else s[:69] + "…"


def differences(old: Any, new: Any, where: str = "", partial: bool = False,
                sides: tuple[str, str] = FOLDER_SIDES) -> list[str]:
    """Readable paths where two identity documents differ (`partial`: keys `new` lacks are not
    compared; `sides`: how the two are named)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            path = f"{where}.{k}" if where else str(k)
            if k not in old:
                out.append(f"{_label(path)}: {_short(new[k])} {sides[1]}, not set {sides[0]}")
            elif k not in new:
                if not partial:
                    out.append(f"{_label(path)}: {_short(old[k])} {sides[0]}, not set {sides[1]}")
            else:
                out.extend(differences(old[k], new[k], path, partial, sides))
        return out
    if old != new:
        return [f"{_label(where)}: {_short(old)} {sides[0]}, {_short(new)} {sides[1]}"]
    return []


def plain_json(value: Any) -> Any:
    """A value as run.json holds it (tuples as lists, other objects as text), for comparing."""
    return orjson.loads(orjson.dumps(value, default=str))


# ---- the record ------------------------------------------------------------------------------
TASK_IDENTITY = ("dataset", "prompt_version", "settings", "options")  # what makes two runs' task the same


def comparable(entry: dict) -> dict[str, Any]:
    """What makes a task's numbers comparable, of its entry (data, prompt version, settings,
    options), as plain JSON."""
    return {k: plain_json(entry.get(k)) for k in TASK_IDENTITY}


@dataclass
class Notes:
    """What a selection records of the folder beyond its run (selection.py makes it from the folder's
    record; `RunRecord.noted` keeps it): the results file it writes and, where that is not
    results.json, the --limit of the folder's largest run, the results files besides results.json, a
    sample's designs; a gate's order."""

    results: str = RESULTS
    folder_limit: bool = False  # the record's --limit stays `old_limit`, the folder's largest run's
    old_limit: int | None = None
    partial_results: dict | None = None  # replaces the record's
    samples: dict | None = None  # replaces the record's
    gate: dict | None = None


NO_TASKS = "(no tasks)"  # a problem: the document names no tasks (not a run's record)
_OBJECTS = ("tasks", "identity", "backend", "roles", "data_package", "shard", "schedule", "options", "environment", "timing",
            "partial_results", "samples", "gate", "stopped_early", "projection", "config", "not_run", "over_context")
_TEXTS = ("econeval_version", "started", "status", "finished", "interrupted", "failed", "error")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_SCALES = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12, "Q": 10**15}


def size_label_count(label: str | None) -> int | None:
    """A GGUF size label as a parameter count: `1.5B`, `270M`, `8x7B` (experts × each), as the
    GGUF naming convention writes it (`<experts>x<count><scale>`); None for anything else."""
    m = re.fullmatch(r"\s*(?:(\d+)x)?(\d+(?:\.\d+)?)([KMBTQ])\s*", label or "", re.IGNORECASE)
    if not m:
        return None
    return round(int(m.group(1) or 1) * float(m.group(2)) * _SCALES[m.group(3).upper()])


@dataclass(frozen=True)
class RoleEntry:
    """What run.json's `roles` keeps of the model that filled a role: its name, its backend's kind,
    whether it was named for the role (else it fell back to the evaluated model or a default)."""

    name: str | None = None
    kind: str | None = None
    named: bool = False

    @classmethod
    def of(cls, entry: Any) -> "RoleEntry":
        e = _obj(entry)
        return cls(name=_text(e, "name"), kind=_text(e, "kind"), named=bool(e.get("named")))


@dataclass(frozen=True)
class TaskEntry:
    """What run.json keeps of one task it ran (`tasks`, and its seconds from `timing`): the prompt
    version, the settings its benchmark recorded, its option values, the data fingerprint, the
    description; `recorded` False: the run has no such task (every field empty)."""

    name: str
    recorded: bool = False
    prompt_version: str | None = None
    description: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    dataset: Any = None
    seconds: float | None = None  # measured over its items (summed over resumes); None: not measured

    def option(self, name: str) -> Any:
        """The value the run gave one of the task's options (None: not recorded)."""
        return self.options.get(name)

    def data_upstream(self) -> str | None:
        """The release of its benchmark the task's data was built from, where it was not the
        manifest's own (`econeval data build --upstream NAME`; data.fingerprint)."""
        got = self.dataset.get("upstream") if isinstance(self.dataset, dict) else None
        return got if isinstance(got, str) else None

    def identity(self) -> dict[str, Any] | None:
        """What makes the task's numbers comparable (data, prompt version, settings, options), as
        plain JSON; None when the run has no such task."""
        if not self.recorded:
            return None
        return comparable({k: getattr(self, k) for k in TASK_IDENTITY})


@dataclass(frozen=True)
class RunRecord:
    """run.json, a value: what the run is is fixed when it starts (runmeta.run_record), what
    happened is recorded by the operations below, each of which returns the next record. Fields in
    the order they are written; None is not written (but `limit`, which a run always records).
    Nested parts (the backend, the identity, each task's entry) are the documents their owners make
    (BackendInfo.to_json, runmeta); read them through the methods."""

    shard: dict | None = None  # {"index", "count"} of a run --shard K/N
    run_format: int | None = RUN_FORMAT
    econeval_version: str | None = None
    command: list[str] = field(default_factory=list)
    started: str | None = None
    finished: str | None = None  # written here by `score --out` (a folder finished as it starts)
    status: str | None = None  # running | complete | interrupted | failed
    seed: int | None = None
    seed_given: bool | None = None  # False: a task whose authors' protocol names a seed drew with it
    limit: int | None = None
    bootstrap: int | None = None
    options: dict | None = None  # task → its option values (also in each task's entry)
    tasks: dict[str, dict] = field(default_factory=dict)  # task → prompt version, settings, options, dataset, description
    backend: dict = field(default_factory=dict)
    roles: dict[str, dict] = field(default_factory=dict)  # role → the model that filled it (runmeta.role_entry)
    environment: dict | None = None
    data_package: dict | None = None
    identity: dict = field(default_factory=dict)
    schedule: dict | None = None
    config: dict | None = None  # a --config file
    not_run: dict | None = None  # task → why its protocol does not apply to this model
    # what happened
    resumed: int | None = None
    gate: dict | None = None
    partial_results: dict | None = None  # results file → what it holds besides results.json's run
    samples: dict | None = None  # a --sample's results file → its designs
    projection: dict | None = None
    over_context: dict | None = None  # task → items refused before they ran: longer than the model context
    stopped_early: dict | None = None
    interrupted: str | None = None
    failed: str | None = None
    error: str | None = None
    timing: dict | None = None
    peak_rss_mb: float | None = None
    merged_from: list | None = None
    extra: dict = field(default_factory=dict)  # keys this econeval does not know, kept as they are
    problems: list[str] = field(default_factory=list, repr=False)  # fields read as absent (not written)

    # ---- reading and writing --------------------------------------------------------------------
    @classmethod
    def from_json(cls, doc: dict) -> "RunRecord":
        """The record of a run.json document; a field of another type is read as absent and named
        in `problems`; the earlier layout's `judge` / `embedder` entries become `roles`."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        problems: list[str] = []
        extra = {}
        for key, value in doc.items():
            f = known.get(key)
            if f is None or key in ("extra", "problems"):
                if key not in _LEGACY_ROLES:
                    extra[key] = value
                continue
            if not _fits(key, value):
                problems.append(key)
                continue
            if value is not None or f.default is None:  # a null where econeval writes an object: absent
                values[key] = value
        if "roles" not in doc:  # the layout before roles were open
            values["roles"] = {k: {**doc[k], "named": k == "judge"} for k in _LEGACY_ROLES if isinstance(doc.get(k), dict)}
        if "tasks" not in doc:
            problems.append(NO_TASKS)
        elif doc["tasks"] is None or not all(isinstance(v, dict) for v in _obj(values.get("tasks")).values()):
            problems.append("tasks")
            values.pop("tasks", None)
        if not isinstance(_obj(values.get("identity")).get("roles", {}), dict):
            problems.append("identity.roles")
        if "run_format" not in doc:
            values["run_format"] = None
        return cls(**values, extra=extra, problems=problems)

    @classmethod
    def read(cls, folder: Path, strict: bool = True, hint: str | None = None) -> "RunRecord":
        """A folder's run.json, or one clear line (with `hint`): none, unreadable, not an object, or
        (`strict`) a field of another type than econeval writes."""
        path = Path(folder) / RUN_JSON
        try:
            doc = read_json(path)
        except FileNotFoundError:
            raise UsageError(f"{folder} is not a run folder (it has no run.json)", hint=hint) from None
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path} cannot be read ({exc})", hint=hint) from None
        if not isinstance(doc, dict):
            raise UsageError(f"{path} is not a run description written by econeval (not a JSON object)",
                             hint=hint) from None
        record = cls.from_json(doc)
        if strict and record.problems:
            what = "it names no tasks" if record.problems[0] == NO_TASKS else f"its {record.problems[0]} is not as econeval writes it"
            raise UsageError(f"{path} is not a run description written by econeval ({what})",
                             hint=hint or "the folder was edited or written by another tool")
        return record

    def check_format(self, folder: Path) -> None:
        """Refuse, in one line naming its layout and the econeval that reads it, a folder of another
        run format: its records are that econeval's to re-derive (prompts and scorers changed)."""
        fmt = self.run_format if _whole(self.run_format) else 1
        if fmt == RUN_FORMAT:
            return
        from ..version import __version__

        readers, layout = RUN_FORMATS.get(fmt, ("another econeval", "a layout this econeval does not know"))  # type: ignore[arg-type]
        raise UsageError(f"{folder} is in run format {fmt} ({layout}), written by econeval {self.econeval_version or '?'}: "
                         f"{readers} reads it; this econeval ({__version__}) reads run format {RUN_FORMAT}",
                         hint="read it with that econeval, or rerun its tasks into a new folder")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in ("extra", "problems"):
                continue
            value = getattr(self, f.name)
            if value is not None or f.name == "limit":
                out[f.name] = value
        return {**out, **self.extra}

    def write(self, folder: Path) -> None:
        write_json(Path(folder) / RUN_JSON, self.to_json())

    # ---- what the run is ------------------------------------------------------------------------
    @property
    def task_names(self) -> list[str]:
        return list(self.tasks)

    @property
    def run_seed(self) -> int:
        return self.seed if _whole(self.seed) else DEFAULT_SEED  # type: ignore[return-value]

    @property
    def n_boot(self) -> int:
        return self.bootstrap if _whole(self.bootstrap) else 1000  # type: ignore[return-value]

    @property
    def seed_was_given(self) -> bool:
        return self.seed_given is not False

    def task(self, name: str) -> TaskEntry:
        """The task's entry (an empty one, `recorded` False, when the run has no such task); the
        options from the record's `options` where the entry has none (an earlier layout)."""
        entry = self.tasks.get(name)
        if not isinstance(entry, dict):
            return TaskEntry(name)
        options = entry.get("options")
        if options is None:
            options = _obj(self.options).get(name)
        seconds = _obj(_obj(self.timing).get(name)).get("seconds")
        return TaskEntry(name, True, prompt_version=_text(entry, "prompt_version"), description=_text(entry, "description"),
                         settings=dict(_obj(entry.get("settings"))), options=dict(_obj(options)), dataset=entry.get("dataset"),
                         seconds=float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else None)

    def task_entries(self) -> list[TaskEntry]:
        """Each task's entry, in the run's order."""
        return [self.task(name) for name in self.tasks]

    def identity_tasks(self) -> dict:
        return _obj(self.identity.get("tasks"))

    @property
    def model(self) -> dict:
        """The evaluated model as its backend described it."""
        return _obj(self.backend.get("model"))

    @property
    def model_name(self) -> str | None:
        name = self.backend.get("model")
        name = name.get("name") if isinstance(name, dict) else name
        return name if isinstance(name, str) and name else None

    @property
    def model_sha256(self) -> str | None:
        """The evaluated model's weights' sha256 (a served model has none)."""
        return _text(self.model, "sha256")

    @property
    def predictions(self) -> str | None:
        """The predictions file a `score --out` folder scored."""
        return _text(self.model, "predictions")

    @property
    def model_developer(self) -> str | None:
        """Who made the model, as its models.toml entry says (`developer`); None: not said."""
        return _text(self.model, "developer")

    def file_metadata(self, key: str) -> str | None:
        """A text value of the model file's own metadata as the run recorded it (`general.organization`)."""
        return _text(_obj(self.model.get("gguf_metadata")), key)

    @property
    def parameters(self) -> int | None:
        """The evaluated model's parameter count: llama.cpp's count where the run recorded it
        (`n_params`), else its GGUF's `general.size_label` read as a number ("270M", "8x7B": 56
        billion); None where neither says (a served model, a fake one). The file's size is no
        count: it depends on the quantization."""
        n = self.model.get("n_params")
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return n
        return size_label_count(self.file_metadata("general.size_label"))

    @property
    def engine_version(self) -> str | None:
        """The llama.cpp build that ran the model (llama-cpp-python's version); None for another backend."""
        return _text(self.backend, "llama_cpp_python")

    @property
    def backend_kind(self) -> str | None:
        return _text(self.backend, "kind")

    @property
    def device(self) -> str | None:
        return _text(self.backend, "device")

    @property
    def n_ctx(self) -> int | None:
        """The context one item may use (None: a served model's, not known)."""
        n = self.backend.get("n_ctx")
        return n if _whole(n) else None

    @property
    def trained_context(self) -> int | None:
        """The model's trained context, where the backend read it (the llama.cpp backend)."""
        n = _obj(self.backend.get("context")).get("trained")
        return n if _whole(n) else None

    @property
    def backend_schedule(self) -> Any:
        return self.backend.get("schedule")

    @property
    def reasoning(self) -> dict:
        """What the backend recorded of the model's reasoning (mode, budget, whether it reasoned)."""
        return _obj(self.backend.get("reasoning"))

    def reasoning_key(self) -> ReasoningKey:
        """The run's ReasoningKey (reasoning.py)."""
        from ..reasoning import record_key

        return record_key(self.backend)

    @property
    def model_identity(self) -> dict:
        """What the identity records of the model: its settings, context length and chat mode."""
        return _obj(self.identity.get("model"))

    @property
    def data_version(self) -> Any:
        return _obj(self.data_package).get("version")

    @property
    def chunk_items(self) -> Any:
        return _obj(self.schedule).get("chunk_items")

    @property
    def shard_index(self) -> Any:
        return _obj(self.shard).get("index")

    @property
    def shard_count(self) -> Any:
        return _obj(self.shard).get("count")

    def role(self, name: str) -> RoleEntry:
        """The model that filled a role (the judge, the embedder); an empty entry if none."""
        return RoleEntry.of(self.roles.get(name))

    @property
    def role_entries(self) -> dict[str, dict]:
        return {k: v for k, v in self.roles.items() if isinstance(v, dict)}

    @property
    def named_roles(self) -> frozenset[str]:
        """The roles a model was named for."""
        return frozenset(k for k in self.role_entries if self.role(k).named)

    def role_identities(self) -> dict:
        return role_identities(self.identity)

    def judged_by(self, role: str = "judge") -> str | None:
        """Who judged the run's answers, as every table and export says it: SELF_JUDGED where the
        evaluated model judged its own (no --judge: the judge fell back to it; or the judge named is
        the same model: the same identity), else the judge's name; None where no task used the role."""
        if role not in self.role_entries:
            return None
        ident = self.role_identities().get(role)
        if not self.role(role).named or (ident is not None and ident == self.identity.get("model")):
            return SELF_JUDGED
        return self.role(role).name or "a named judge"

    @property
    def lora(self) -> list[dict]:
        """The LoRA adapters the evaluated model ran with (the llama.cpp backend's record): path,
        sha256, scale."""
        got = self.model.get("lora")
        return [a for a in got if isinstance(a, dict)] if isinstance(got, list) else []

    @property
    def scored(self) -> bool:
        """A folder `score --out` wrote: its items are the predicted ones."""
        return self.backend_kind == "predictions"

    @property
    def whole(self) -> bool:
        """A complete run over every item (no --limit, no early stop, no shard, not a gate's)."""
        return self.status == "complete" and self.limit is None and not self.gate and not self.stopped_early \
            and not self.shard and not self.scored

    @property
    def tasks_not_reached(self) -> list[str]:
        got = _obj(self.stopped_early).get("tasks_not_reached")
        return list(got) if isinstance(got, list) else []

    def sample_specs(self) -> set:
        """The --sample specs of the folder's sample results."""
        return {v.get("sample") for v in _obj(self.samples).values() if isinstance(v, dict)}

    # ---- what happened: the operations, each returning the next record ---------------------------
    def continuing(self, old: "RunRecord") -> "RunRecord":
        """This run continuing the folder's (the same run, or some or more of its tasks): the folder
        describes all of them."""
        return replace(self, started=old.started or self.started, resumed=(old.resumed or 0) + 1,
                       identity=merged_identity(old.identity, self.identity), tasks={**old.tasks, **self.tasks},
                       options={**(old.options or {}), **(self.options or {})}, roles={**old.role_entries, **self.roles},
                       over_context=old.over_context)

    def noted(self, notes: Notes) -> "RunRecord":
        """What the selection records of the folder (its results file, a gate's order)."""
        return replace(self, limit=notes.old_limit if notes.folder_limit else self.limit,
                       partial_results=self.partial_results if notes.partial_results is None else notes.partial_results,
                       samples=self.samples if notes.samples is None else notes.samples,
                       gate=self.gate if notes.gate is None else notes.gate)

    def projected(self, projection: dict) -> "RunRecord":
        return replace(self, projection=projection)

    def refusing(self, found: dict[str, dict]) -> "RunRecord":
        """Items refused before they ran, their prompt and generation budget longer than the model
        context (task → {items, longest, n_ctx}), added to what the folder's earlier runs refused."""
        merged = dict(_obj(self.over_context))
        for task, new in found.items():
            old = _obj(merged.get(task))
            merged[task] = {"items": (old.get("items") or 0) + new["items"], "longest": max(old.get("longest") or 0, new["longest"]),
                            "n_ctx": new["n_ctx"]}
        return replace(self, over_context=merged or None)

    def stopped(self, why: str, decided: list[str], not_reached: list[str], partial: tuple[str, dict] | None) -> "RunRecord":
        """Stopped early (`why`: a budget spent, or every task decided; `decided`: the tasks the
        watcher stopped); `partial`: the results file its estimates go to, and what it holds."""
        return replace(self, stopped_early={"why": why, "at": now(), "tasks_stopped": decided, "tasks_not_reached": not_reached},
                       partial_results={**(self.partial_results or {}), partial[0]: partial[1]} if partial else self.partial_results)

    def as_interrupted(self, timing: dict) -> "RunRecord":
        return replace(self, status="interrupted", interrupted=now(), timing=timing)

    def as_failed(self, error: str, timing: dict) -> "RunRecord":
        return replace(self, status="failed", failed=now(), error=error[:500], timing=timing)

    def as_complete(self, timing: dict, backend: dict, peak_rss_mb: float) -> "RunRecord":
        return replace(self, status="complete", finished=now(), timing=timing, backend=backend, peak_rss_mb=peak_rss_mb)


def merged_timing(old: RunRecord | None, now_: dict[str, dict]) -> dict[str, dict]:
    """The timing after a run: its tasks that ran items, the folder's earlier entries (`old`) for
    the rest (a run of some of a folder's tasks, or one with nothing left to run, keeps what was
    measured)."""
    out = dict((old.timing if old else None) or {})
    for task, entry in now_.items():
        if entry.get("items_run") or task not in out:
            out[task] = entry
    return out


def _fits(key: str, value: Any) -> bool:
    """Whether a run.json field holds what econeval writes there (None: not written)."""
    if value is None:
        return True
    if key in _OBJECTS:
        return isinstance(value, dict)
    if key in _TEXTS:
        return isinstance(value, str)
    if key in ("seed", "limit", "bootstrap", "resumed", "run_format"):
        return _whole(value)
    if key == "seed_given":
        return isinstance(value, bool)
    if key in ("command", "merged_from"):
        return isinstance(value, list)
    if key == "peak_rss_mb":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True
