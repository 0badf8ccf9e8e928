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
    that ends it, and what stands between the end and the answer (harmony's final channel).
    `anchored`: the markers are phrases, recognised only where a reply starts with the opener (a
    reply may quote them); `special`: they are special tokens, which servers drop from the text
    unless asked not to (`skip_special_tokens`)."""

    family: str
    open: str
    close: str
    answer: str = ""  # the header of the answer after `close` (appended when the reasoning is closed for the model)
    after_close: str = ""  # what the family writes after `close` before the answer (Qwen's blank line)
    anchored: bool = False
    special: bool = False


THINK = Markers("think", "<think>", "</think>", after_close="\n\n")  # Qwen3, QwQ, DeepSeek-R1 and its distills, Phi-4, Kimi K2
HARMONY = Markers("harmony", "<|channel|>analysis<|message|>", "<|end|>", answer="<|start|>assistant<|channel|>final<|message|>",
                  special=True)
GEMMA = Markers("gemma", "<|channel>thought\n", "<channel|>")  # Gemma 4
MISTRAL = Markers("mistral", "[THINK]", "[/THINK]", special=True)  # Magistral, Ministral reasoning
SEED = Markers("seed", "<seed:think>", "</seed:think>")  # Seed-OSS
KIMI = Markers("kimi", "◁think▷", "◁/think▷")  # Kimi-VL thinking, Kimi k1.5
GRANITE = Markers("granite", "Here is my thought process:", "Here is my response:", after_close="\n", anchored=True)  # Granite 3.2
FAMILIES = (THINK, HARMONY, GEMMA, MISTRAL, SEED, KIMI, GRANITE)
HARMONY_FINAL = "<|channel|>final<|message|>"
HARMONY_ENDS = ("<|return|>", "<|end|>", "<|call|>")
# harmony with its special tokens dropped by the server (vLLM's /v1/completions): "analysis…assistantfinal…"
STRIPPED_ANALYSIS, STRIPPED_FINAL = "analysis", "assistantfinal"


def vanishes(m: Markers | None) -> bool:
    """Whether a family's reasoning cannot be told from its answer once a server drops special
    tokens: its markers are special tokens (Magistral's `[THINK]`), and nothing else marks the end
    (harmony's channel names stay, `analysis…assistantfinal…`, and are read)."""
    return m is not None and m.special and m is not HARMONY


def custom(end: str, start: str = "") -> Markers:
    """The markers a user names (`-M think_end=…`, `-M think_start=…`), as lm-eval's
    `think_end_token` and lighteval's reasoning tags."""
    return Markers("custom", start, end)


def families(extra: Markers | None = None) -> tuple[Markers, ...]:
    return FAMILIES if extra is None else (extra, *FAMILIES)


@dataclass(frozen=True)
class Split:
    """A reply as reasoning and answer. `reasoning` None: the reply did not reason; `ended`
    False: the reasoning never ended (then `answer` is empty: the item is unanswered).
    `family`: the markers it was read by; `opened`: only the end marker was seen (the prompt
    opened the reasoning, as a template that ends in `<think>` does)."""

    answer: str
    reasoning: str | None = None
    ended: bool = True
    family: str | None = None
    opened: bool = False


def split(text: str, opened: Markers | None = None, extra: Markers | None = None) -> Split:
    """The reasoning and the answer of a reply. `opened`: the prompt already opened the reasoning
    (a template that ends in `<think>`), so the reply starts inside it. `extra`: markers the user
    named, tried first."""
    if opened is not None:
        return _inside(text, opened)
    head = text.lstrip()
    if HARMONY_FINAL in text or head.startswith(("<|channel|>", "<|start|>")):
        return _harmony(text)
    if head.startswith(STRIPPED_ANALYSIS) and STRIPPED_FINAL in head:
        reasoning, _, answer = head[len(STRIPPED_ANALYSIS):].partition(STRIPPED_FINAL)
        return Split(answer.strip(), reasoning.strip(), True, "harmony")
    fams = families(extra)
    for m in fams:
        if m.open.strip() and head.startswith(m.open.strip()):
            return _inside(head[len(m.open.strip()):], m)
    for m in fams:  # only the end marker: the template opened the reasoning in the prompt
        if m.close in text and m is not HARMONY and not m.anchored:
            reasoning, _, answer = text.partition(m.close)
            return Split(_answer(answer), reasoning.strip("\n"), True, m.family, opened=True)
    return Split(text)


def _answer(text: str) -> str:
    """The answer after a closed reasoning: Granite 3.3 wraps it in <response>…</response>."""
    out = text.lstrip()
    if out.startswith("<response>"):
        out = out[len("<response>"):].split("</response>", 1)[0]
    return out


def _inside(text: str, m: Markers) -> Split:
    if m is HARMONY:
        return _harmony(m.open + text)
    reasoning, found, answer = text.partition(m.close)
    if not found:
        return Split("", reasoning.strip("\n"), False, m.family)
    return Split(_answer(answer), reasoning.strip("\n"), True, m.family)


def _harmony(text: str) -> Split:
    """gpt-oss's channels: the analysis channel is the reasoning, the final channel the answer."""
    before, found, answer = text.partition(HARMONY_FINAL)
    reasoning = before
    for piece in ("<|start|>assistant", "<|channel|>analysis<|message|>", *HARMONY_ENDS):
        reasoning = reasoning.replace(piece, "")
    if not found:
        return Split("", reasoning.strip(), False, "harmony")
    for end in HARMONY_ENDS:
        answer = answer.split(end, 1)[0]
    return Split(answer.strip(), reasoning.strip() or None, True, "harmony")


MARKER_PIECES = tuple(dict.fromkeys(p for m in FAMILIES if not m.anchored for p in (m.open.strip(), m.close.strip()) if p)) \
    + ("<|channel|>", "<|start|>", "<|message|>", "<|channel>")


def marker_token(token: str, extra: Markers | None = None) -> bool:
    """Whether a generated token is (the start of) a reasoning marker: an option's log-probabilities
    at that position would be read at the reasoning's first token, never at the answer's."""
    t = token.strip()
    if len(t) < 2 or t[0] not in "<[◁":
        return False
    pieces = MARKER_PIECES + tuple(p for p in ((extra.open.strip(), extra.close.strip()) if extra else ()) if p)
    return any(p.startswith(t) or t.startswith(p) for p in pieces)


# ---- models known by name (served) -------------------------------------------------------------
# name patterns of model families that reason by default, and how: the markers they write, whether
# their chat template opens the reasoning in the prompt (the reply then holds only the end marker)
BY_NAME: tuple[tuple[str, Markers, bool], ...] = (
    (r"r1[-_.]?distill|deepseek[-_.]?r1|qwq|thinking[-_.]?2507|qwen3[.-]5|phi-?4[-_.]?(mini[-_.]?)?reasoning", THINK, True),
    (r"qwen3(?!.*(instruct|coder|2507))", THINK, False),
    (r"magistral|ministral.*reasoning", MISTRAL, False),
    (r"gpt[-_]?oss", HARMONY, False),
    (r"seed[-_]?oss", SEED, False),
    (r"kimi.*thinking", KIMI, False),
)


def by_name(name: str) -> tuple[Markers, bool] | None:
    """(markers, whether the template opens the reasoning) of a model that reasons by default, by its name."""
    import re

    low = (name or "").lower()
    for pattern, m, opens in BY_NAME:
        if re.search(pattern, low):
            return m, opens
    return None


def estimate_tokens(total: int | None, reasoning: str, answer: str) -> int | None:
    """A reasoning's tokens where the server counts only the completion's: the completion's tokens in
    the reasoning's share of the characters (an estimate, labelled so where it is recorded); a
    reasoning the server hid gets the completion's tokens but the answer's (4 characters a token)."""
    if not isinstance(total, int) or isinstance(total, bool) or total < 0:
        return None
    if reasoning:
        return round(total * len(reasoning) / max(1, len(reasoning) + len(answer.strip())))
    return max(0, total - (max(1, round(len(answer.strip()) / 4)) if answer.strip() else 0))


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
    off_turn: str = ""  # a system turn's text that switches it off, where no variable does (Nemotron Nano v2's /no_think)


OFF_VARS = {"enable_thinking": False, "thinking": False, "thinking_budget": 0}  # thinking_budget: Seed-OSS
ON_VARS = {"enable_thinking": True, "thinking": True}
# words a template reads in a system turn to switch reasoning off, where no variable does (Nemotron Nano v2);
# used only where the template takes the word out of the text it renders, so that the prompt is the task's own
OFF_TURNS = ("/no_think",)


def prompt_state(tail: str, m: Markers) -> str:
    """"open" (the prompt opened the reasoning), "closed" (an empty block: no reasoning) or "none"."""
    t = tail.rstrip()
    if m.open.strip() and t.endswith(m.open.strip()):
        return "open"
    if t.endswith(m.close.strip()) and m.close.strip():
        return "closed"
    return "none"


def _uses(template: str, name: str) -> bool:
    """Whether a template reads the variable `name`: in its Jinja code, outside string literals
    (Ministral's 'thinking' chunks and its system prompt's "thinking process" are not switches)."""
    import re

    code = " ".join(a or b for a, b in re.findall(r"\{%-?(.*?)-?%\}|\{\{-?(.*?)-?\}\}", template, re.S))
    code = re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", "''", code)
    return re.search(rf"(?<![\w.]){name}(?!\w)", code) is not None


def read_template(template: str, render, extra: Markers | None = None, render_system=None) -> TemplateReading:
    """`render(variables)` renders a one-message conversation's generation prompt;
    `render_system(text)`, where given, the same after a system turn holding `text` (a template
    switched by a word in it). `extra`: the markers the user named (`-M think_end=…`): read first;
    where the template shows no markers at all, the user's word that the model reasons with them
    (always: no switch is known)."""
    marks = [m for m in families(extra) if ("<|channel|>" in template if m is HARMONY else
                                            m.close.strip() in template or (m.open.strip() and m.open.strip() in template))]
    effort = "reasoning_effort" in template
    if not marks:
        return TemplateReading(extra, extra is not None, False, extra is not None)
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
        return not any(_uses(template, v) for v in OFF_VARS)

    default = reasons("plain", plain)
    r_off, r_on = reasons("off", off), reasons("on", on)
    if r_off and render_system is not None:  # no variable stops it: a word in a system turn may
        for word in OFF_TURNS:
            text = render_system(word) if word in template else ""
            if text and word not in text and prompt_state(text, m) == "closed":
                return TemplateReading(m, default, can_off=True, can_on=r_on, on_vars=dict(ON_VARS), effort=effort, off_turn=word)
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
@dataclass(frozen=True)
class ReasoningKey:
    """What makes two runs' reasoning the same (compare and gate refuse to pair runs that differ):
    the mode, and the budget and effort where the model reasoned."""

    mode: str = "auto"
    reasons: bool = False
    tokens: Any = None
    effort: Any = None

    @property
    def plain(self) -> bool:
        """No reasoning asked for or done: a report labels no run by it."""
        return self.mode == "auto" and not self.reasons

    def describe(self) -> str:
        out = f"reasoning {self.mode}" + (" (not honoured: the model reasoned)" if self.mode == "off" and self.reasons else "")
        if self.reasons:
            out += f", {self.tokens} reasoning tokens" + (f", effort {self.effort}" if self.effort else "")
        elif self.mode == "auto":
            out += " (the model did not reason)"
        return out


def record_key(backend: dict | None) -> ReasoningKey:
    """A run's ReasoningKey from run.json's backend section; a run.json of before reasoning modes
    counts as auto without reasoning."""
    r = (backend or {}).get("reasoning") if isinstance(backend, dict) else None
    r = r if isinstance(r, dict) else {}
    reasons = bool(r.get("reasons"))
    return ReasoningKey(mode=r.get("mode", "auto"), reasons=reasons, tokens=r.get("tokens") if reasons else None,
                        effort=r.get("effort"))
