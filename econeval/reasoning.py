"""Reasoning models: a run's reasoning mode, how a reply's reasoning is told from its answer, and
what a task's results say about it. No heavy imports; backends and scoring share this.

- The mode (`--reasoning auto|on|off`, a backend option of every text backend): `auto` runs the
  model as it is served by default; `off` switches reasoning off where the model has a switch
  and refuses a model that cannot stop; `on` switches it on and refuses a model that has none.
  `--reasoning-tokens N` is the reasoning budget, on top of each task's own answer budget.
- A reply is split into its reasoning and its answer (`split`): the text after the reasoning's
  end marker (`</think>`, harmony's final channel, ...) is the answer that the papers' parse
  reads; a reasoning that never ends leaves no answer, so nothing is ever read from inside it.
- `summary(records)`: how many items reasoned, how many hit the budget, the mean reasoning
  tokens (a task's results carry it only when some item reasoned).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

MODES = ("auto", "on", "off")
DEFAULT_TOKENS = 4096  # the reasoning budget when none is given
THINKING = "thinking"  # the sample field holding each request's reasoning ({request name: text})


@dataclass(frozen=True)
class Markers:
    """How one family of models writes its reasoning inline: the text that opens it, the text
    that ends it, and what stands between the end and the answer (harmony's final channel)."""

    family: str
    open: str
    close: str
    answer: str = ""  # the header of the answer after `close` (appended when the reasoning is closed for the model)
    after_close: str = ""  # what the family writes after `close` before the answer (Qwen's blank line)


THINK = Markers("think", "<think>", "</think>", after_close="\n\n")  # Qwen3, QwQ, DeepSeek-R1 and its distills, Phi-4, Granite
HARMONY = Markers("harmony", "<|channel|>analysis<|message|>", "<|end|>", answer="<|start|>assistant<|channel|>final<|message|>")
GEMMA = Markers("gemma", "<|channel>thought\n", "<channel|>")  # Gemma 4
MISTRAL = Markers("mistral", "[THINK]", "[/THINK]")  # Magistral
FAMILIES = (THINK, HARMONY, GEMMA, MISTRAL)
HARMONY_FINAL = "<|channel|>final<|message|>"
HARMONY_ENDS = ("<|return|>", "<|end|>", "<|call|>")


@dataclass(frozen=True)
class Split:
    """A reply as reasoning and answer. `reasoning` None: the reply did not reason; `ended`
    False: the reasoning never ended (then `answer` is empty: the item is unanswered)."""

    answer: str
    reasoning: str | None = None
    ended: bool = True


def split(text: str, opened: Markers | None = None) -> Split:
    """The reasoning and the answer of a reply. `opened`: the prompt already opened the reasoning
    (a template that ends in `<think>`), so the reply starts inside it."""
    if opened is not None:
        return _inside(text, opened)
    head = text.lstrip()
    if HARMONY_FINAL in text or head.startswith(("<|channel|>", "<|start|>")):
        return _harmony(text)
    for m in FAMILIES:
        if head.startswith(m.open.strip()):
            return _inside(head[len(m.open.strip()):], m)
    for m in FAMILIES:  # only the end marker: the template opened the reasoning in the prompt
        if m.close in text and m is not HARMONY:
            reasoning, _, answer = text.partition(m.close)
            return Split(answer.lstrip(), reasoning.strip("\n"), True)
    return Split(text)


def _inside(text: str, m: Markers) -> Split:
    if m is HARMONY:
        return _harmony(m.open + text)
    reasoning, found, answer = text.partition(m.close)
    if not found:
        return Split("", reasoning.strip("\n"), False)
    return Split(answer.lstrip(), reasoning.strip("\n"), True)


def _harmony(text: str) -> Split:
    """gpt-oss's channels: the analysis channel is the reasoning, the final channel the answer."""
    before, found, answer = text.partition(HARMONY_FINAL)
    reasoning = before
    for piece in ("<|start|>assistant", "<|channel|>analysis<|message|>", *HARMONY_ENDS):
        reasoning = reasoning.replace(piece, "")
    if not found:
        return Split("", reasoning.strip(), False)
    for end in HARMONY_ENDS:
        answer = answer.split(end, 1)[0]
    return Split(answer.strip(), reasoning.strip() or None, True)


# ---- templates (in-process models) -------------------------------------------------------------
@dataclass(frozen=True)
class TemplateReading:
    """What a chat template says about reasoning, read from its generation prompt rendered three
    ways (as it is, with the switch off, with it on): the markers, whether it reasons by default,
    whether it can be switched off / on, and the template variables that do it."""

    markers: Markers | None
    default: bool  # reasons when nothing is switched
    can_off: bool
    can_on: bool
    off_vars: dict[str, Any] = field(default_factory=dict)
    on_vars: dict[str, Any] = field(default_factory=dict)
    effort: bool = False  # the template takes `reasoning_effort` (gpt-oss)


OFF_VARS = {"enable_thinking": False, "thinking": False}
ON_VARS = {"enable_thinking": True, "thinking": True}


def prompt_state(tail: str, m: Markers) -> str:
    """"open" (the prompt opened the reasoning), "closed" (an empty block: no reasoning) or "none"."""
    t = tail.rstrip()
    if t.endswith(m.open.strip()):
        return "open"
    if t.endswith(m.close.strip()) and m.close.strip():
        return "closed"
    return "none"


def read_template(template: str, render) -> TemplateReading:
    """`render(variables)` renders a one-message conversation's generation prompt."""
    marks = [m for m in FAMILIES if ("<|channel|>" in template if m is HARMONY else
                                     m.close.strip() in template or m.open.strip() in template)]
    effort = "reasoning_effort" in template
    if not marks:
        return TemplateReading(None, False, False, False)
    m = marks[0]
    plain, off, on = render({}), render(OFF_VARS), render(ON_VARS)
    states = {k: prompt_state(v, m) for k, v in (("plain", plain), ("off", off), ("on", on))}
    if m is HARMONY:  # the model opens its analysis channel itself, always
        return TemplateReading(m, True, can_off=False, can_on=True, effort=effort)

    def reasons(which: str, text: str) -> bool:
        if states[which] != "none":
            return states[which] == "open"
        if which != "off" and text != off:  # rendering it off changes the prompt: this one reasons
            return True
        # the prompt says nothing: the model opens its reasoning itself when the template has no switch at all
        return not any(v in template for v in OFF_VARS)

    default = reasons("plain", plain)
    r_off, r_on = reasons("off", off), reasons("on", on)
    return TemplateReading(m, default, can_off=not r_off, can_on=r_on, off_vars=dict(OFF_VARS), on_vars=dict(ON_VARS),
                           effort=effort)


# ---- results ------------------------------------------------------------------------------------
def summary(records: Iterable[dict]) -> dict | None:
    """Reasoning counts over a task's records, or None when no item reasoned."""
    n = reasoned = hit = counted = tokens = 0
    for rec in records:
        n += 1
        calls = [c for c in (rec.get("calls") or {}).values() if isinstance(c, dict) and "n_reasoning_tokens" in c]
        if not calls:
            continue
        reasoned += 1
        hit += any(c.get("reasoning_ended") is False for c in calls)
        known = [c["n_reasoning_tokens"] for c in calls if isinstance(c.get("n_reasoning_tokens"), int)]
        if len(known) == len(calls):
            counted += 1
            tokens += sum(known)
    if not reasoned:
        return None
    return {"n_items_reasoned": reasoned, "n_budget_hit": hit,
            "mean_reasoning_tokens": round(tokens / counted, 1) if counted else None, "n_items_counted": counted, "of": n,
            "note": "items whose reply reasoned; n_budget_hit: items whose reasoning did not end within the reasoning "
                    "budget (served: unanswered; in-process: closed at the budget and answered); the mean is over the "
                    "n_items_counted items whose reasoning tokens the backend counted"}


# ---- run records --------------------------------------------------------------------------------
def record_key(backend: dict | None) -> dict:
    """What makes two runs' reasoning the same (compare and gate refuse to pair runs that differ):
    the mode, and the budget and effort where the model reasoned. A run.json of before reasoning
    modes counts as auto without reasoning."""
    r = (backend or {}).get("reasoning") if isinstance(backend, dict) else None
    r = r if isinstance(r, dict) else {}
    reasons = bool(r.get("reasons"))
    return {"mode": r.get("mode", "auto"), "reasons": reasons, "tokens": r.get("tokens") if reasons else None,
            "effort": r.get("effort")}


def describe_key(key: dict) -> str:
    out = f"reasoning {key['mode']}"
    if key["reasons"]:
        out += f", {key['tokens']} reasoning tokens" + (f", effort {key['effort']}" if key.get("effort") else "")
    elif key["mode"] == "auto":
        out += " (the model did not reason)"
    return out
