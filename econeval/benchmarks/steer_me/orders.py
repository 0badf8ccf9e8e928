"""The options' order (`-T permute=K`): each question asked again under K seeded permutations of
its options, and what the answers across the orders say — accuracy in the original order and
over all orders, the circular accuracy (right in every order: OpenCompass's CircularEval, HELM's
worst case over perturbations) and the rate each letter is chosen against the rate it is right
(a position bias). inspect_ai's `shuffle_choices` asks each question once, in one shuffled order:
K = 1 with the original kept is its comparison.

A permuted question is an item of its own (`ID~J`, `order` J, `variant_of` ID): its options in
the permuted order, the correct index and the options' mistake labels moved with them. Under
--car it is its question after CAR, permuted: the same option says "No other option is correct",
so a question's orders differ in their order only.
"""

from __future__ import annotations

import math
import random
from typing import Callable

from . import prompts as P

MAX_PERMUTE = 23  # 4! - 1: every other order of four options


def permutations(item: dict, k: int, seed: int) -> list[list[int]]:
    """Up to K distinct orders other than the original, seeded by the question's id: each a list
    whose position i holds the original index of the option shown there."""
    n = len(item["options"])
    want = min(k, math.factorial(n) - 1)
    rng = random.Random(P.stable_hash(seed, "permute", item["id"]))
    seen: set[tuple[int, ...]] = {tuple(range(n))}
    out: list[list[int]] = []
    while len(out) < want:
        p = tuple(rng.sample(range(n), n))
        if p not in seen:
            seen.add(p)
            out.append(list(p))
    return out


def permuted(item: dict, order: int, perm: list[int]) -> dict:
    """The question with its options in `perm`'s order (`order`: its number, 1 up)."""
    out = {**item, "id": f"{item['id']}~{order}", "variant_of": item["id"], "order": order, "permutation": perm,
           "options": [item["options"][i] for i in perm]}
    if item.get("correct_index") is not None:
        out["correct_index"] = perm.index(item["correct_index"])
    if isinstance(item.get("distractor_reasons"), list):
        out["distractor_reasons"] = [item["distractor_reasons"][i] for i in perm]
    if item.get("car_replaced") is not None:
        out["car_replaced"] = perm.index(item["car_replaced"])
    return out


def with_orders(items: list[dict], k: int, seed: int) -> list[dict]:
    """Each single answer-graded question (order 0) followed by its K permuted orders; a group of
    parts or a consistency-graded one is asked in its own order only (its rule names positions)."""
    out = []
    for it in items:
        if it.get("parts") or it.get("grading", "answer") != "answer":
            out.append(it)
            continue
        out.append({**it, "order": 0})
        out += [permuted(it, j, p) for j, p in enumerate(permutations(it, k, seed), 1)]
    return out


def limited(items: list[dict], limit: int) -> list[dict]:
    """--limit N with orders: the first N questions of each element, each with all its orders."""
    seen: dict[str, int] = {}
    kept: set[str] = set()
    out = []
    for it in items:
        base = it.get("variant_of")
        if base is None:
            seen[it["element"]] = seen.get(it["element"], 0) + 1
            if seen[it["element"]] <= limit:
                kept.add(it["id"])
                out.append(it)
        elif base in kept:
            out.append(it)
    return out


def car_over_orders(items: list[dict], car: Callable[[list[dict]], list[dict]]) -> list[dict]:
    """CAR on the questions as first asked (its 1/K balance counts questions, not orders), each
    permuted order then made from its question after CAR."""
    done = {it["id"]: it for it in car([it for it in items if "variant_of" not in it])}
    return [done[it["id"]] if "variant_of" not in it else permuted(done[it["variant_of"]], it["order"], it["permutation"])
            for it in items]


def across_orders(records: list[dict]) -> dict | None:
    """The numbers across the orders of a run with `-T permute` (None without): accuracy over the
    answered questions in the original order and over all orders (the paper's convention), the
    circular accuracy over the questions whose every order was scored (right in each; an
    unanswered order is not right), each with a 95% Wilson interval but the all-orders one (its
    answers are not independent); per letter, the rate it was chosen (of the answered) against
    the rate it was right (of all); and per element the three accuracies."""
    from ...intervals import wilson

    mine = [r for r in records if "order" in r]
    if not mine:
        return None

    def numbers(recs: list[dict]) -> dict:
        first = [r for r in recs if r["order"] == 0 and r["answered"]]
        answered = [r for r in recs if r["answered"]]
        by: dict[str, list[dict]] = {}
        for r in recs:
            by.setdefault(r.get("variant_of") or r["id"], []).append(r)
        whole = [rs for rs in by.values() if {r["order"] for r in rs} == set(range(len(rs)))]
        circular = sum(all(r["correct"] for r in rs) for rs in whole)
        k0 = sum(bool(r["correct"]) for r in first)
        return {"n_questions": len(by), "orders": max(len(rs) for rs in by.values()),
                "original": {"n": len(first), "accuracy": k0 / len(first) if first else None,
                             "interval": list(iv) if (iv := wilson(k0, len(first))) else None},
                "all_orders": {"n": len(answered),
                               "accuracy": sum(bool(r["correct"]) for r in answered) / len(answered) if answered else None},
                "circular": {"n": len(whole), "n_incomplete": len(by) - len(whole),
                             "accuracy": circular / len(whole) if whole else None,
                             "interval": list(iv) if (iv := wilson(circular, len(whole))) else None}}

    out = numbers(mine)
    answered = [r for r in mine if r["answered"] and isinstance(r["parsed"], int)]
    k = max(r["k"] for r in mine)
    out["letters"] = {}
    for i in range(k):
        chose = sum(r["parsed"] == i for r in answered)
        right = sum(r["gold"] == i for r in mine)
        out["letters"][P.LETTERS[i]] = {
            "chosen": chose / len(answered) if answered else None,
            "chosen_interval": list(iv) if (iv := wilson(chose, len(answered))) else None,
            "correct": right / len(mine), "bias": chose / len(answered) - right / len(mine) if answered else None}
    by_element: dict[str, list[dict]] = {}
    for r in mine:
        by_element.setdefault(r["element"], []).append(r)
    out["element"] = {e: numbers(rs) for e, rs in by_element.items()}
    out["description"] = ("each question asked in its original order and in seeded permutations of its options (-T permute): "
                          "accuracy over the answered questions in the original order and over all orders; circular: right "
                          "in every order, over the questions whose every order was scored (an unanswered order is not "
                          "right); letters: the rate each letter was chosen (of the answered, every order) against the rate "
                          "it was the right one, and their difference (bias); 95% Wilson intervals (none over all orders: "
                          "a question's orders are not independent answers)")
    return out
