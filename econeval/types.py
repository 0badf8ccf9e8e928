"""The contracts between tasks, the runner and backends. No heavy imports here.

A task turns each item into named *requests* (Generate, OptionLogprobs, Similarity); the runner
sends them to the *role* that serves them (the evaluated model, the judge model, the sentence
embedder), stores each result in the item's outputs under the request's name, and hands the
outputs back to the task to score. Backends answer with Completion and OptionScores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, TypedDict, Union

from .tables import UNANSWERED, CellView, Metric

# ---- requests --------------------------------------------------------------------------------
MODEL, JUDGE, EMBEDDER = "model", "judge", "embedder"  # the roles a request can be sent to (the shared ones)
CHUNK = 16  # items whose requests go to the backend together and are written together (a run's samples.jsonl, a writer's folder)


@dataclass(frozen=True)
class Role:
    """A role beside the evaluated model that a task's requests can be sent to (as inspect's model
    roles), named on the command line with `--role NAME=MODEL` (the judge and the embedder also by
    `--judge` / `--embedder`) and recorded in run.json's `roles`.

    `serves`: what kind of model fills it, MODEL (a text model: any backend the evaluated model
    can have) or EMBEDDER (a sentence embedder; models.toml's `embedders`). `fallback`: who fills it
    when none is named: "model" (the evaluated model; `score` has none), "registry" (models.toml's
    default of its kind) or None (the task asks for one). `what`: how a message names it."""

    name: str
    serves: str = MODEL
    fallback: str | None = "model"
    what: str = ""

    @property
    def flag(self) -> str:
        """How the command line names it."""
        return role_flag(self.name) + (" MODEL" if self.name in SHORTCUTS else "=MODEL")


SHORTCUTS = (JUDGE, EMBEDDER)  # the roles with a flag of their own (`--judge`, `--embedder`)


def role_flag(name: str) -> str:
    """How the command line names a role's model: `--model`, `--judge`, `--embedder`, `--role NAME`
    (followed by `=MODEL` or ` MODEL`: Role.flag)."""
    return f"--{name}" if name in (MODEL, *SHORTCUTS) else f"--role {name}"


def parse_bool(value: Any) -> bool:
    """A yes/no from the command line, models.toml or Python: a bool, or 1/true/yes/on,
    0/false/no/off in any case; raises ValueError. The one reader of a boolean setting (task
    options, backend options)."""
    if isinstance(value, bool):
        return value
    low = str(value).strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"'{value}' is not true or false")
SHARED_ROLES = (Role(JUDGE, MODEL, "model", "a judge model"), Role(EMBEDDER, EMBEDDER, "registry", "a sentence embedder"))
SELF_JUDGED = "self-judged"  # how tables and exports name a judge that was the evaluated model (RunRecord.judged_by)


def chat_messages(prompt: str, turns: tuple[str, ...] = ()) -> list[dict[str, str]]:
    """The chat messages of a request: its turns (user, assistant, user, ...; a conversation
    the task built from earlier replies) or its prompt as one user message."""
    if not turns:
        return [{"role": "user", "content": prompt}]
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]


@dataclass(frozen=True)
class Generate:
    """Greedy generation. `prefix` is a leading part of `prompt` that many items share: a backend
    may evaluate it once and reuse it (a fixed schedule: prefix, then the rest, so scores do not
    depend on item order)."""

    prompt: str
    max_tokens: int
    stop: tuple[str, ...] = ()
    prefix: str = ""
    repeat_penalty: float = 1.0  # HF-style, over the whole context
    stop_after_text: bool = True  # stop strings apply only once non-blank text was generated
    chat: bool = False  # the task's default (what its paper's code did): the chat template, when the model has one
    role: str = MODEL
    # stop as soon as the text so far matches (re.search): the task's parse is settled then
    stop_regex: str | None = None
    # a conversation (user, assistant, ..., user) sent as chat messages when the chat template
    # applies; `prompt` is then its text without a template (what a raw model is sent)
    turns: tuple[str, ...] = ()
    reasoning_tokens: int | None = None  # its task's own reasoning budget (--task-reasoning-tokens); None: the model's


@dataclass(frozen=True)
class OptionLogprobs:
    """Log-probability of each option as the next text after `prompt` (one forward pass).
    Each option is scored as written and with a leading space; the larger counts."""

    prompt: str
    options: tuple[str, ...]
    prefix: str = ""
    chat: bool = False
    role: str = MODEL
    turns: tuple[str, ...] = ()  # as Generate.turns
    # a backend without log-probabilities generates the answer as text (the option is read from it):
    # at most this many tokens, None for the server's own limit
    text_tokens: int | None = 8
    reasoning_tokens: int | None = None  # as Generate.reasoning_tokens


@dataclass(frozen=True)
class Similarity:
    """Cosine similarity of the sentence embeddings of `a` and `b` (served by the embedder)."""

    a: str
    b: str
    role: str = EMBEDDER

    @property
    def prompt(self) -> str:  # what the sample records as "asked"
        return self.a


Request = Union[Generate, OptionLogprobs, Similarity]


# ---- results ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Completion:
    text: str
    n_prompt_tokens: int = 0
    n_tokens: int = 0
    finish: str = "stop"  # stop | length | context (the context filled up) | error
    rendered: str | None = None  # the prompt as sent, when a chat template was applied
    error: str | None = None  # why this request has no usable result (the item is an error)
    # a reasoning model's reasoning (never parsed: `text` is the answer after it); None: it did not reason
    reasoning: str | None = None
    n_reasoning_tokens: int | None = 0  # None: the server did not say
    reasoning_ended: bool = True  # False: the reasoning budget ran out before it ended


@dataclass(frozen=True)
class OptionScores:
    """Scores of one OptionLogprobs request.

    `scores` maps options to log-probabilities; an option the backend could not score (outside a
    server's top-k list) is absent, i.e. probability 0. `top` is the most likely token's
    log-probability when known. A backend without log-probabilities returns the text it generated
    in `text` (scorers then read the answer from it). `fits` is False when the prompt did not fit
    the model's context; `error` says why a result is unusable (a non-finite value, ...)."""

    scores: dict[str, float] = field(default_factory=dict)
    top: float | None = None
    text: str | None = None
    fits: bool = True
    n_prompt_tokens: int = 0
    rendered: str | None = None
    error: str | None = None
    reasoning: str | None = None  # as Completion's: the reasoning before the answer (text or scores)
    n_reasoning_tokens: int | None = 0
    reasoning_ended: bool = True


# ---- backends --------------------------------------------------------------------------------
@dataclass
class BackendInfo:
    """What run.json records about a backend; `identity()` is what a resumed run must match."""

    kind: str  # the registry kind: llamacpp, openai, ...
    model: dict[str, Any]  # name, and what identifies the weights (sha256, or a served model's URL and name)
    n_ctx: int | None
    device: str
    schedule: str  # how prompts are evaluated (scores depend on it)
    chat_template_applied: bool
    parallel: int = 1  # requests the backend evaluates together (the runner's chunks hold at least 2x as many items)
    parallel_note: str = ""  # how `parallel` is decided, where it is no fixed number ("adaptive, from 32 up to 256")
    device_note: str = ""  # where the model runs, in words ("CUDA0 NVIDIA H200, 33/33 layers offloaded"), where `device` says too little
    # whether results depend on which requests are evaluated together (in-process batching): then
    # the chunk size is part of the run's identity
    composition_matters: bool = True
    details: dict[str, Any] = field(default_factory=dict)
    fixed_identity: Any = None  # a backend whose identity is one value (an embedder: its weights' sha256)
    # what the results depend on, in the user's terms: the options that shape them ({"parallel": 8})
    # and the schedule's version (the description above says what it is); part of the identity
    settings: dict[str, Any] = field(default_factory=dict)
    schedule_version: str | None = None

    def identity(self) -> Any:
        if self.fixed_identity is not None:
            return self.fixed_identity
        ident = self.model.get("identity") or {k: self.model.get(k) for k in ("sha256",)}
        return {"kind": self.kind, "model": ident, "n_ctx": self.n_ctx, "schedule": self.schedule_version or self.schedule,
                "settings": self.settings, "chat_template_applied": self.chat_template_applied,
                "chat_mode": self.details.get("chat_mode")}

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, "n_ctx": self.n_ctx, "device": self.device,
                "schedule": self.schedule, "chat_template_applied": self.chat_template_applied, **self.details}


# The backend base class (validate, evaluate, info, counters, close) is econeval.backends.base.Backend.


# ---- results ---------------------------------------------------------------------------------
class TaskResult(TypedDict, total=False):
    """One task's entry in results.json, as a task's `aggregate` returns it and the runner
    completes it. report, compare and the CLI read it through these keys only.

    table          the paper table the numbers belong to (a title)
    paper          the paper's numbers, in the paper's layout (the task's own shape)
    extras         what econeval adds, each labelled with a description
    intervals      {number name: [low, high]} plus "method" and "seed"
    n              items in the run; n_scored, n_unparsed, n_skipped, n_errors: how they fared
    skip_reasons, error_reasons   {why: how many}
    """

    table: str
    paper: dict[str, Any]
    extras: dict[str, Any]
    intervals: dict[str, Any]
    n: int
    n_scored: int
    n_unparsed: int
    n_skipped: int
    n_errors: int
    skip_reasons: dict[str, int]
    error_reasons: dict[str, int]
    reasoning: dict[str, Any]  # items that reasoned, hit the reasoning budget, their mean reasoning tokens (reasoning.summary)
    estimate: dict[str, Any]  # a sample's or a --budget run's numbers: estimates of the full set's (from, of, scheme, note)


class ResultsDoc(TypedDict, total=False):
    """results.json (and what `econeval.evaluate` / `econeval score` return)."""

    econeval_version: str
    model: str | None
    limit: int | None
    predictions: str
    tasks: dict[str, TaskResult]
    not_reached: list[str]  # a --budget run: tasks the budget never reached
    not_run: dict[str, str]  # tasks whose protocol does not apply to the model (a reasoning model's), and why
    sample: float | int  # a --sample run's sample
    epochs: list[dict[str, Any]]  # a run --epochs N: each epoch's number, seed and run folder (`tasks`: the means over them)
    run_folder: str  # what evaluate() adds: the folder written (not in results.json)


# ---- samples ---------------------------------------------------------------------------------
class Sample(TypedDict, total=False):
    """One line of samples.jsonl (one per task and item). Fields:

    id, task          the item id (public interface) and task name
    prompts           {request name: prompt text sent} (Similarity: the first text)
    rendered          {request name: prompt after the chat template}, only where one was applied
    prompt_hash       sha256 (16 hex digits) of the first request's prompt
    <request name>    each request's result: generated text, {option: log-probability}, or a similarity
    calls             {request name: {"kind", "finish", "n_prompt_tokens", "n_tokens", "top_logprob", ...,
                      and for a reply that reasoned "n_reasoning_tokens", "reasoning_ended"}}
    thinking          {request name: the reasoning before the answer}, only for replies that reasoned (never parsed)
    skipped           why the item was not scored (a prompt longer than the context); counted as n_skipped
    error             why the item has no valid score (a non-finite log-probability); counted as n_errors
    parsed, gold, correct, ...   what the task's `score` adds
    """

    id: str
    task: str
    prompts: dict[str, str]
    rendered: dict[str, str]
    prompt_hash: str
    calls: dict[str, dict]
    skipped: str
    error: str


def is_scored(record: Mapping[str, Any]) -> bool:
    """Whether an item's outputs or sample line were scored: every item is, but one marked skipped
    (never sent) or an error (no valid answer). The one copy of this rule: the runner, scoring,
    verify, compare, the gate, the sampling watcher and every reader ask here."""
    return not record.get("skipped") and not record.get("error")


def as_text(value: Any) -> str | None:
    """A stored value of varying type (a gold label, an order, an option index, a label) as text:
    text as it is, anything else as JSON; None stays None."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def call_info(outputs: dict, name: str) -> dict:
    """The metadata the runner recorded for request `name` (finish reason, token counts, the
    top log-probability, a text-only fallback)."""
    return (outputs.get("calls") or {}).get(name) or {}


# ---- tasks -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskOption:
    """An option a task declares (`-T name=value` on the command line, `task_options` in the API)."""

    name: str
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    kind: str = "str"  # str | bool | path | choice
    flag: str | None = None  # a documented command-line shortcut for `-T name=...`, e.g. "--adaptation"
    # False for an option added after runs were recorded whose default does what the task did
    # before it: at its default it is left out of the recorded options (run.json, the identity),
    # so a folder recorded before it is the same run (resumed, compared); read it with .get
    recorded_at_default: bool = True

    def parse(self, value: Any) -> Any:
        """A value from the command line (a string) or from Python; raises ValueError."""
        if self.kind == "bool":
            return parse_bool(value)
        if value is None:
            return None
        value = str(value)
        if self.choices and value not in self.choices:
            raise ValueError(f"'{value}' is not one of {', '.join(self.choices)}")
        if self.kind == "path":
            from pathlib import Path

            p = Path(value).expanduser()
            if not p.exists():
                raise ValueError(f"not found: {value}")
            return str(p.resolve())
        return value


@dataclass
class Prepared:
    """What a task settles before running: its items (in order) and run-level settings
    recorded in run.json (few-shot example ids, decoding settings, conventions)."""

    items: list[dict]
    settings: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)  # not recorded (prompt prefixes, ...)
    options: dict[str, Any] = field(default_factory=dict)  # the task's option values
    dataset: dict[str, Any] | None = None  # the data fingerprint (version, hashes); default: the benchmark's manifest
    stages: int | None = None  # the stages this run of the task needs when its data decides (multi-part questions); default: Task.stages
    roles: tuple[str, ...] | None = None  # the roles this run of the task uses when its options decide; default: Task.roles


def task_roles(task: "Task", prep: Prepared) -> tuple[str, ...]:
    """The roles a run of the task uses, as its preparation settled them."""
    return prep.roles if prep.roles is not None else task.roles


class Task:
    """One task name of the public interface (e.g. `econnli-zero`).

    The runner calls `requests(item, prep, outputs)` once per stage (`stages` > 1 for multi-call
    prompting: CoT reasoning then the answer, a generation then its judge); each named request's
    result is stored in `outputs` under its name. `score(item, outputs, prep)` turns outputs into
    the sample's scored fields; `aggregate(records, prep)` builds the paper's table from the
    scored records (never skipped or errored ones).

    Register a task with `@econeval.registry.task` in any module of `econeval/benchmarks/` (or a
    plugin module, see the README): the registry, `econeval list` and the CLI pick it up.
    """

    name: str = ""
    suite: str = ""
    in_all: bool = True  # part of `all`, the default selection (False: a suite run by name, e.g. STEER-ME's paper matrix)
    benchmark: str = ""
    prompt_version: str = ""
    description: str = ""
    stages: int = 1
    in_suites: bool = True  # False: a tool's task (auto-STEER's writer and checker), run by its commands: in no suite, not in `all`
    protocol_seed: int | None = None  # the seed its authors' released protocol uses: its draws' seed when no --seed is given
    roles: tuple[str, ...] = (MODEL,)  # the roles its requests use (model, judge, embedder, or one of `new_roles`)
    new_roles: tuple[Role, ...] = ()  # roles of its own beyond the shared ones (types.SHARED_ROLES)
    options: tuple[TaskOption, ...] = ()
    metrics: tuple[Metric, ...] = ()  # its headline metrics: direction, paired test, count (compare reads them)
    lead: str = ""  # the number its paper leads with (an Inspect log's headline); "": the first of `metrics`
    # the item-level metrics `econeval gate` decides on: each the mean over the task's items of a
    # value per item (`item_values`), within the metric's `bounds`
    item_metrics: tuple[Metric, ...] = (Metric("accuracy", paired_exact=True),)
    # a sample's intervals for ratio metrics: the fields that make an item's confusion cell within
    # its stratum (intervals.py: a finite-population Bayesian interval); () keeps the bootstrap
    sample_cells: tuple[CellView, ...] = ()
    # `data export --prompts` may stand in "<reply to NAME>" for an option choice too (the task's
    # later turns quote the chosen letter): it reads a string there as the reply
    stands_in_for_choices: bool = False
    shots: int | None = None  # solved examples in each prompt (n_shot); None: not said
    group_field: str | None = None  # the sample field that names an item's group (a sub-task, an element): `econeval view` filters by it
    # the sample fields that label an item (STEER-ME's element, setting, module, ...; CFBenchmark's
    # sub-task): the exports' label columns and metadata, `item_labels` reads them
    labels: tuple[str, ...] = ()
    gold_field: str = "gold"  # the sample field that holds the gold answer, as `score` stores it
    answer_field: str = "parsed"  # the sample field that holds what the parse read from the reply
    # fields `score` came to add after runs were recorded (STEER-ME's perspective): a sample line
    # written before lacks them, which is no contradiction (verify.py); one that has them must match
    later_fields: tuple[str, ...] = ()

    def metric(self, name: str) -> Metric:
        """The declared metric of that name (every task's `unanswered` share included); an
        undeclared headline number counts as larger-is-better."""
        return next((m for m in (*self.metrics, UNANSWERED) if m.name == name), Metric(name))

    def lead_metric(self) -> str | None:
        """The headline metric a reader sees first (the paper's main number): `lead`, else the first declared."""
        return self.lead or (self.metrics[0].name if self.metrics else None)

    def shown(self, value: Any, record: Mapping[str, Any]) -> str | None:
        """A record's gold answer or parse as a reader reads it (a label, an option's letter, the
        text) rather than the code it is stored as; None stays None. Default: text as it is, any
        other value as JSON."""
        return as_text(value)

    def gold_of(self, record: Mapping[str, Any]) -> Any:
        """A sample line's gold answer as stored (a code: an index, a label's number, an order)."""
        return record.get(self.gold_field)

    def answer_of(self, record: Mapping[str, Any]) -> Any:
        """What the parse read from a sample line's reply, as stored; None: nothing."""
        return record.get(self.answer_field)

    def unparsed(self, record: Mapping[str, Any]) -> bool:
        """Whether a scored sample line's reply could not be read (it counts in `n_unparsed`).
        Default: its answer field is there and empty."""
        return self.answer_field in record and record[self.answer_field] is None

    def item_labels(self, record: Mapping[str, Any]) -> dict[str, str | None]:
        """A sample line's labels (`labels`) that it has, as text."""
        return {k: as_text(record[k]) for k in self.labels if k in record}

    def prepare(self, ctx: Any) -> Prepared:
        raise NotImplementedError

    def not_for(self, prep: Prepared, reasoning: Mapping[str, Any]) -> str | None:
        """Why this run of the task does not apply to the evaluated model, given run.json's record of
        its reasoning (`backend.reasoning`: whether it reasons, whether its reasoning is hidden), as
        its authors' protocol for such models says; None: it runs."""
        return None

    def limit_items(self, items: list[dict], limit: int) -> list[dict]:
        """What `--limit N` keeps: the first N items."""
        return items[:limit]

    def strata(self, item: dict) -> str:
        """The stratum of an item for `--sample` (sampling.py): one for all by default."""
        return "all"

    def finalize_items(self, items: list[dict], prep: Prepared) -> list[dict]:
        """The items that run, after `--limit`: a task whose items depend on which others run
        (STEER-ME's CAR balance per element) settles them here. Default: unchanged."""
        return items

    def requests(self, item: dict, prep: Prepared, outputs: dict) -> dict[str, Request]:
        raise NotImplementedError

    def score(self, item: dict, outputs: dict, prep: Prepared) -> dict:
        raise NotImplementedError

    def aggregate(self, records: list[dict], prep: Prepared) -> dict:
        raise NotImplementedError

    def headline(self, result: Mapping[str, Any]) -> dict[str, float | None]:
        """A few numbers of `result` for the summary table printed after a run."""
        return {}

    def headline_of(self, records: list[dict], prep: Prepared) -> dict[str, float | None]:
        """The headline of these records (what `compare` resamples); a task whose aggregate
        computes much more than its headline may compute just that."""
        return self.headline(self.aggregate(records, prep))

    def numbers_of(self, records: list[dict], prep: Prepared) -> dict[str, float | None]:
        """The headline and table numbers of these records (what the intervals resample, a
        thousand times); a task whose aggregate computes much more may compute just these."""
        result = self.aggregate(records, prep)
        return {**self.headline(result), **self.table_numbers(result)}

    def resampler(self, records: list[dict], prep: Prepared) -> Callable[[Sequence[int]], dict[str, float | None]]:
        """`numbers_of` a resample of `records`, given by index (the intervals and compare call it
        a thousand times); a task may compute each record's terms once, in the same order."""
        return lambda idx: self.numbers_of([records[i] for i in idx], prep)

    def table_numbers(self, result: dict) -> dict[str, float | None]:
        """Every number of the paper's table in `result`, keyed by the table's column names
        (what `intervals` covers and `econeval report` prints); default: the headline."""
        return self.headline(result)

    def item_values(self, record: dict) -> dict[str, float | None]:
        """Each item metric's value for one scored record (None: the item has none). Default:
        accuracy, an unparsed answer counting as wrong (the mean over all items, unlike a
        paper's number over the parsed ones)."""
        return {"accuracy": 1.0 if record.get("correct") is True else 0.0}

    def n_shot(self, prep: Prepared) -> int | None:
        """How many solved examples each prompt shows (lm-eval's n-shot); None: not said."""
        return self.shots

    def answer_options(self, item: dict, prep: Prepared) -> tuple[str, ...] | None:
        """The options whose log-probabilities a prediction may give for `item` (`econeval
        score` validates against them): those of the first stage's `option_logprobs` request."""
        req = self.requests(item, prep, {}).get("option_logprobs")
        return req.options if isinstance(req, OptionLogprobs) else None
