"""STEER-ME prompt sets: the strings the model sees besides the questions, and the user turns
built from them.

`open2025` (the default) is the authors' released evaluation package's default set, "the one
used by every canonical open-weight STEER-ME run" (their `steer_bench/prompts.py`): questions as
`Q: …`, options as `\\nA. …` lines, the reasoning turn and the answer turn as separate user
messages (shown, hidden), a few-shot prefix of solved examples before the first turn.
`econeval1` is econeval's wording before prompt version 2 (`Question: …`, "Let's think step by
step.", one turn with the reasoning inside). The set's name and the sha256 of its strings are
part of the run's settings (run.json, identity).
"""

from __future__ import annotations

import hashlib
import json
import random
from string import ascii_uppercase as LETTERS

PROMPT_SETS: dict[str, dict] = {
    "open2025": {
        "reasoning": "\nPlease reason step by step, and put your final answer within \\boxed{}.",
        "answer": ("\nAnswer by writing the option letter corresponding to the correct option. "
                   "RESPOND WITH ONLY A SINGLE LETTER.\nA:"),
        "free_answer": "",
        "hidden_options_newline": False,
        "few_shot_answer_sep": " ",
        "reasoning_tokens": 4096,
    },
    "econeval1": {  # econeval's own wording (prompt version 1)
        "reasoning_tokens": 256,
    },
}
DEFAULT = "open2025"
FORMATS = {"direct": "mc", "cot-shown": "shown", "cot-hidden": "hidden", "free-text": "free"}


def strings_hash(name: str) -> str:
    return hashlib.sha256(json.dumps(PROMPT_SETS[name], sort_keys=True).encode()).hexdigest()[:16]


def option_block(options: list[str], offset: int = 0) -> str:
    """`\\nA. opt` lines; the letters of a multi-part question's later parts continue from the
    earlier parts' (`part_offsets`)."""
    return "".join(f"\n{LETTERS[offset + i]}. {o}" for i, o in enumerate(options))


def part_offsets(sizes: list[int]) -> list[int]:
    """The first letter of each part of a question group: letters continue across the parts
    (A-B, then C-E, ...); a part that would run past Z starts again at A."""
    offsets, at = [], 0
    for n in sizes:
        if at + n > len(LETTERS):
            at = 0
        offsets.append(at)
        at += n
    return offsets


def parts_of(item: dict) -> list[dict]:
    """A question's parts (question, options, correct_index); a single question is one part."""
    return item.get("parts") or [{"question": item.get("question"), "options": item["options"],
                                  "correct_index": item.get("correct_index")}]


def lettered_parts(item: dict) -> list[tuple[dict, int, tuple[str, ...]]]:
    """Each part of a question with its first letter's offset and its letters."""
    parts = parts_of(item)
    return [(p, off, tuple(LETTERS[off:off + len(p["options"])]))
            for p, off in zip(parts, part_offsets([len(p["options"]) for p in parts]))]


def turns(fmt: str, question: str, options: list[str], s: dict, offset: int = 0) -> list[str]:
    """The user turns of one question (the model replies after each; the last reply is the answer):
    mc [question + options + answer]; shown [question + options + reasoning, answer];
    hidden [question + reasoning, options + answer]; free [question + reasoning]."""
    q, opts = "Q: " + question, option_block(options, offset)
    if fmt == "mc":
        return [q + opts + "\n" + s["answer"]]
    if fmt == "shown":
        return [q + opts + "\n" + s["reasoning"], s["answer"]]
    if fmt == "hidden":
        return [q + "\n" + s["reasoning"], (opts if s["hidden_options_newline"] else opts.lstrip("\n")) + "\n" + s["answer"]]
    if fmt == "free":
        return [q + "\n" + s["reasoning"] + s["free_answer"]]
    raise ValueError(f"unknown format {fmt!r}")


def few_shot_prefix(examples: list[dict], s: dict) -> str:
    """Solved examples in the multiple-choice format, each part followed by its letter (the parts
    of a multi-part example on lines of their own); the prefix ends with a blank line (never
    altered by "No other option is correct")."""
    if not examples:
        return ""
    out = ""
    for e in examples:
        out += "\n".join("Q: " + p["question"] + option_block(p["options"], off) + "\n" + s["answer"] + s["few_shot_answer_sep"]
                         + letters[p["correct_index"]] + "\n" for p, off, letters in lettered_parts(e))
    return out + "\n\n"


def stable_hash(*parts: object) -> int:
    return int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:16], 16)


def select_shots(pool: list[dict], element: str, type_: str | None, domain: str | None, shots: int, seed: int) -> list[dict]:
    """`shots` examples for an (element, type, domain) cell from a pool that holds no evaluated
    question: candidates of the same element, type and domain; if fewer than `shots`, the same
    element and type; then the same element; sorted by id and shuffled with a hash of (seed, cell)."""
    if shots <= 0:
        return []
    cands = [e for e in pool if e["element"] == element and e.get("grading", "answer") == "answer"]
    tiers = [[e for e in cands if e.get("type") == type_ and e.get("domain") == domain],
             [e for e in cands if e.get("type") == type_], cands]
    chosen = sorted(next((t for t in tiers if len(t) >= shots), cands), key=lambda e: e["id"])
    random.Random(stable_hash(seed, "shots", element, type_, domain)).shuffle(chosen)
    return chosen[:shots]
