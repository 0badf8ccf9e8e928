"""One typed view of a sample line, made here alone: what report, view and the exports read of an
item (`FinishedRun.items(task)`), so that no reader guesses at a line's keys.

A line is read as its task wrote it: the task says where its gold and its answer are, how they read
(`Task.gold_field`, `answer_field`, `shown`), which of its fields label an item (`Task.labels`,
`group_field`) and whether a reply was unparsed (`Task.unparsed`); whether an item was scored at all
is `types.is_scored`. A field of another type in an edited line is read as absent, never refused:
samples.jsonl stays the one thing on disk, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..reasoning import THINKING
from ..types import Task, as_text, is_scored

SCORED, UNPARSED, SKIPPED, ERROR = "scored", "unparsed", "skipped", "error"  # an item's outcome
AS_SAVED = "(as saved)"  # the name a damaged line's prompts are shown under


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Call:
    """One request of an item, in the order it was sent: its prompt (and the prompt after the chat
    template, where one was applied), its result (`answered`: the line holds one, null included),
    the reasoning before the answer, and the backend's counts (None where it counted none)."""

    name: str
    prompt: str | None
    rendered: str | None
    result: Any
    reasoning: str | None
    kind: str | None
    finish: str | None
    n_prompt_tokens: int | None
    n_tokens: int | None
    n_reasoning_tokens: int | None
    answered: bool = False


@dataclass(frozen=True)
class ItemView:
    """One sample line as a reader reads it.

    outcome     scored, unparsed (scored, the reply not read), skipped (never sent) or error
    why         why an item is not scored or not parsed (the line's skipped, error or unparsed_reason)
    gold, answer          the gold answer and what the parse read, as a reader reads them (a label,
                          an option's letter, the text: `Task.shown`); gold_code, answer_code as stored
    correct     whether the answer is the gold one (None where the task has no such notion)
    values      the task's item metrics (`Task.item_values`), {} for an item not scored
    labels      the task's labels of the item (`Task.item_labels`); group: its group (`group_field`)
    """

    id: str
    task: str
    outcome: str
    why: str | None
    gold: str | None
    answer: str | None
    gold_code: Any
    answer_code: Any
    correct: bool | None
    values: Mapping[str, float | None]
    labels: Mapping[str, str | None]
    group: str | None
    calls: tuple[Call, ...] = ()
    line: Mapping[str, Any] = field(default_factory=dict, repr=False)  # the line as stored: a task's replay reads it

    @property
    def scored(self) -> bool:
        return self.outcome in (SCORED, UNPARSED)

    def prompts(self) -> dict[str, str]:
        """The prompts by request name, in the order they were sent."""
        return {c.name: c.prompt for c in self.calls if c.prompt is not None}

    def shown_prompts(self) -> dict[str, str]:
        """The prompts as a page shows them: a damaged line's prompts that are not an object, as
        saved (as text), under "(as saved)"."""
        saved = self.line.get("prompts")
        if saved and not isinstance(saved, dict):
            return {AS_SAVED: as_text(saved) or ""}
        return self.prompts()

    def tokens(self, key: str) -> int | None:
        """A count (`n_prompt_tokens`, `n_tokens`, `n_reasoning_tokens`) summed over the requests;
        None where the backend counted none."""
        got = [v for c in self.calls if (v := getattr(c, key)) is not None]
        return sum(got) if got else None

    def reasoning(self) -> dict[str, str]:
        """The reasoning before each answer that had one (never parsed)."""
        return {c.name: c.reasoning for c in self.calls if c.reasoning is not None}


def _shown(task: Task, value: Any, record: Mapping[str, Any]) -> str | None:
    try:
        return task.shown(value, record)
    except Exception:  # noqa: BLE001 - an edited line is shown as it is
        return as_text(value)


def _calls(record: Mapping[str, Any]) -> tuple[Call, ...]:
    prompts, rendered, meta, thinking = (_obj(record.get(k)) for k in ("prompts", "rendered", "calls", THINKING))
    names = [*prompts, *(n for n in meta if n not in prompts)]
    out = []
    for name in names:
        info = _obj(meta.get(name))
        prompt, shown, thought = prompts.get(name), rendered.get(name), thinking.get(name)
        out.append(Call(name=str(name), prompt=prompt if isinstance(prompt, str) else None,
                        rendered=shown if isinstance(shown, str) else None, result=record.get(name),
                        reasoning=thought if isinstance(thought, str) else None,
                        kind=info["kind"] if isinstance(info.get("kind"), str) else None,
                        finish=info["finish"] if isinstance(info.get("finish"), str) else None,
                        n_prompt_tokens=_count(info.get("n_prompt_tokens")), n_tokens=_count(info.get("n_tokens")),
                        n_reasoning_tokens=_count(info.get("n_reasoning_tokens")), answered=name in record))
    return tuple(out)


def outcome_of(task: Task, record: Mapping[str, Any]) -> tuple[str, str | None]:
    """A line's outcome and why."""
    if record.get("error"):
        return ERROR, str(record["error"])
    if record.get("skipped"):
        return SKIPPED, str(record["skipped"])
    why = record.get("unparsed_reason")
    if task.unparsed(record):
        return UNPARSED, None if why is None else str(why)
    return SCORED, None if why is None else str(why)


def unanswered(task: Task, record: Mapping[str, Any]) -> float:
    """1.0 for an item without a valid answer (unparsed, an error or skipped), else 0.0: its value
    of `tables.UNANSWERED`, as compare and the gate count it."""
    return 0.0 if outcome_of(task, record)[0] == SCORED else 1.0


def item_view(task: Task, record: Mapping[str, Any]) -> ItemView:
    """The view of one sample line of `task`."""
    outcome, why = outcome_of(task, record)
    ok = is_scored(record)
    try:
        values = task.item_values(dict(record)) if ok else {}
    except Exception:  # noqa: BLE001 - a line the task cannot read has no values
        values = {}
    gold, answer = task.gold_of(record), task.answer_of(record)
    correct = record.get("correct")
    group = record.get(task.group_field) if task.group_field else None
    return ItemView(id=str(record.get("id")), task=as_text(record.get("task", task.name)) or "", outcome=outcome, why=why,
                    gold=_shown(task, gold, record), answer=_shown(task, answer, record), gold_code=gold, answer_code=answer,
                    correct=correct if isinstance(correct, bool) else None, values=values, labels=task.item_labels(record),
                    group=as_text(group), calls=_calls(record), line=record)


def line_task(record: Mapping[str, Any]) -> Task:
    """The task a sample line names (a name this econeval does not know, or no name, read as any
    task): for the pages that show a folder's lines as they are, a hand-edited or damaged one
    included."""
    from .. import registry

    name = record.get("task")
    return (registry.tasks().get(name) if isinstance(name, str) else None) or Task()
