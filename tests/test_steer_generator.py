"""The STEER-ME generator: every element's stored answer re-derived by an independent numerical
route over many draws, distractors wrong, options distinct, balance, determinism."""

import collections
import math

import numpy as np
import pytest

from econeval.steer.generator import combos, covered, fmt, generate
from econeval.steer.solvers import ELEMENTS

N_DRAWS = 60


def grid_argmax(f, lo, hi, n=400001):
    xs = np.linspace(lo, hi, n)
    return xs[int(np.argmax(f(xs)))]


def bisect(f, lo, hi, it=200):
    flo = f(lo)
    for _ in range(it):
        mid = (lo + hi) / 2
        if (f(mid) > 0) == (flo > 0):
            lo, flo = mid, f(mid)
        else:
            hi = mid
    return (lo + hi) / 2


def integrate(f, lo, hi, n=200001):
    xs = np.linspace(lo, hi, n)
    return float(np.trapezoid(f(xs), xs))


def d(f, x, h=1e-5):
    return (f(x + h) - f(x - h)) / (2 * h)


def _budget_demand(p, typ):
    px, py, m, a, b = p["px"], p["py"], p["m"], p["a"], p["b"]
    y = lambda x: (m - px * x) / py  # noqa: E731
    u = {"cobb-douglas": lambda x: np.where((x > 0) & (y(x) > 0), np.abs(x) ** a * np.abs(y(x)) ** b, -1),
         "leontief": lambda x: np.minimum(a * x, b * y(x)),
         "perfect substitutes": lambda x: a * x + b * y(x)}[typ]
    return grid_argmax(u, 0, m / px)


def _tax_eq(p, t):
    """Buyers' price with a per-unit tax t on sellers: a − bP = d(P − t)."""
    return bisect(lambda P: (p["a"] - p["b"] * P) - p["d"] * (P - t), 0, p["a"] / p["b"])


VERIFY = {
    "add_sub": lambda p, t: sum([p["start"], -p["sold"], p["received"]]),
    "mult_div": lambda p, t: np.divide(p["budget"], p["packs"]),
    "compute_expectations": lambda p, t: float(np.average(p["outcomes"], weights=p["probs"])),
    "linear_system_eq": lambda p, t: np.linalg.solve([[p["a1"], p["b1"]], [p["a2"], p["b2"]]], [p["c1"], p["c2"]])[0],
    "derivatives": lambda p, t: d(lambda q: p["a"] * q ** p["n"] + p["b"] * q, p["x0"]),
    "marginal_utility": lambda p, t: d(lambda x: x ** p["a"] * p["y"] ** p["b"], p["x"]) if t == "cobb-douglas"
    else d(lambda x: p["c"] * math.sqrt(x) + p["y"], p["x"]),
    "mrs_utility": lambda p, t: (d(lambda x: x ** p["a"] * p["y"] ** p["b"], p["x"]) / d(lambda y: p["x"] ** p["a"] * y ** p["b"], p["y"]))
    if t == "cobb-douglas" else d(lambda x: p["a"] * x, p["x"]) / d(lambda y: p["b"] * y, p["y"]),
    "deriving_demand": lambda p, t: _budget_demand(p, t),
    "price_elasticity": lambda p, t: d(lambda P: p["a"] - p["b"] * P, p["p"]) * p["p"] / (p["a"] - p["b"] * p["p"]),
    "income_elasticity": lambda p, t: (p["q1"] - p["q0"]) / (p["m1"] - p["m0"]) * (p["m0"] + p["m1"]) / (p["q0"] + p["q1"]),
    "present_value": lambda p, t: float(np.sum(p["c"] * np.cumprod(np.full(p["t"], 1 / (1 + p["r"]))))),
    "marginal_cost": lambda p, t: d(lambda q: p["f"] + p["c1"] * q + p["c2"] * q ** 2 + p["c3"] * q ** 3, p["q"]),
    "average_cost": lambda p, t: np.polyval([p["c2"], p["c1"], p["f"]], p["q"]) / p["q"],
    "profit_maximization": lambda p, t: grid_argmax(lambda q: p["p"] * q - p["c"] * q ** 2, 0, 4 * p["p"] / p["c"]),
    "find_eq_price": lambda p, t: bisect(lambda P: (p["a"] - p["b"] * P) - (p["c"] + p["d"] * P), 0, p["a"] / p["b"]),
    "aggregation_of_consumer_demand": lambda p, t: sum(p["a"] - p["b"] * p["p"] for _ in range(p["n"])),
    "consumer_surplus": lambda p, t: integrate(lambda P: p["a"] - p["b"] * P, p["p"], p["a"] / p["b"]),
    "producer_surplus": lambda p, t: integrate(lambda P: p["d"] * (P - p["p0"]), p["p0"], p["p"]),
    "deadweight_loss": lambda p, t: integrate(
        lambda Q: (p["a"] - Q) / p["b"] - Q / p["d"],
        p["a"] - p["b"] * _tax_eq(p, p["t"]), p["a"] - p["b"] * _tax_eq(p, 0)),
    "tax_incidence": lambda p, t: _tax_eq(p, p["t"]) - _tax_eq(p, 0),
}


@pytest.mark.parametrize("element", covered())
def test_answers_verified_independently_and_distractors_wrong(element):
    assert element in VERIFY, f"{element} has no independent check: it must not ship"
    spec = ELEMENTS[element]
    tax = {element: {"setting": "s", "module": "m"}}
    items = generate([element], N_DRAWS, seed=99, taxonomy=tax)
    for it in items:
        got = float(VERIFY[element](it["params"], it["type"]))
        stored = it["solution"]["value"]
        assert stored == pytest.approx(got, rel=2e-3, abs=2e-3), (it["id"], it["question"])
        right = fmt(got, spec.decimals)
        assert it["options"][it["correct_index"]] == right or abs(float(it["options"][it["correct_index"]].replace(",", "")) - got) <= 10 ** -spec.decimals
        assert len(set(it["options"])) == 4
        for i, o in enumerate(it["options"]):
            if i != it["correct_index"]:
                assert abs(float(o.replace(",", "")) - got) > 0.5 * 10 ** -spec.decimals, (it["id"], o, got)


@pytest.mark.parametrize("element", covered())
def test_balance_of_positions_domains_and_perspectives(element):
    items = generate([element], 100, seed=3, taxonomy={element: {"setting": "s", "module": "m"}})
    assert collections.Counter(it["correct_index"] for it in items) == {0: 25, 1: 25, 2: 25, 3: 25}
    n_combos = len(combos(element))
    per_combo = collections.Counter((it["template_id"], it["domain"], it["perspective"]) for it in items)
    assert max(per_combo.values()) - min(per_combo.values()) <= 1 or len(per_combo) == min(100, n_combos)
    assert len({it["question"] for it in items}) > 90


def test_generation_is_deterministic_and_seed_dependent():
    tax = {e: {"setting": "s", "module": "m"} for e in covered()}
    a = generate(covered(), 5, 1, tax)
    assert a == generate(covered(), 5, 1, tax)
    assert a != generate(covered(), 5, 2, tax)


def test_perspectives_are_grammatical():
    items = generate(["deriving_demand"], 50, 4, {"deriving_demand": {"setting": "s", "module": "m"}})
    for it in items:
        q = it["question"]
        if it["perspective"] == "first person":
            assert q.startswith("I ") and " has " not in q.split(",")[0]
        if it["perspective"] == "second person":
            assert q.startswith("You ")
        if it["perspective"] in ("third person female", "third person male"):
            assert q.split()[0][0].isupper() and (" her " in q or " his " in q or " she " in q or " he " in q)
