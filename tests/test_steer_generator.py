"""The STEER-ME generator: every element's stored answer re-derived by an independent numerical
route over many draws, distractors wrong, options distinct, balance, determinism."""

import collections
import math

import numpy as np
import pytest

from econeval.benchmarks.steer_me.generator import combos, covered, generate
from econeval.benchmarks.steer_me.solvers import ELEMENTS

N_DRAWS = 40


def grid_argmax(f, lo, hi, n=200001):
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


def _cd_u(a, b):
    return lambda x, y: x ** a * y ** b


def _hours(alpha, T, w, V):
    """Hours of work maximising c^α l^(1-α) with c = w·h + V, l = T − h: the first-order
    condition α·w/(w·h + V) = (1 − α)/(T − h), solved by bisection."""
    return bisect(lambda h: alpha * w / (w * h + V) - (1 - alpha) / (T - h), 1e-9, T - 1e-9)


def _input_demand(a, p, A, price):
    return grid_argmax(lambda L: p * A * np.maximum(L, 0) ** a - price * L, 0, 4 * (a * p * A / price) ** (1 / (1 - a)) + 1)


def _hicks(a, px, py, U):
    # minimise px·x + py·y on the indifference curve x^a y^(1-a) = U
    x = grid_argmax(lambda x: -(px * x + py * (U / np.maximum(x, 1e-12) ** a) ** (1 / (1 - a))), 1e-6, 50 * U)
    return x


def _exchange_x1(a1, a2, ex1, ey1, ex2, ey2, T=0.0):
    def excess(px):
        w1, w2 = px * ex1 + ey1 + T, px * ex2 + ey2 - T
        return a1 * w1 / px + a2 * w2 / px - (ex1 + ex2)
    px = bisect(excess, 1e-6, 1e6)
    return a1 * (px * ex1 + ey1 + T) / px


def _firm_supply(c, P):
    """A price-taking firm's output with C(q) = c·q²: where marginal cost (numerically) equals P."""
    return bisect(lambda q: d(lambda x: c * x ** 2, q) - P, 0.0, P / c + 1, it=80)


def _monopoly_dwl(p):
    profit = lambda Q: (p["a"] - p["b"] * Q) * Q - p["F"] - p["c"] * Q  # noqa: E731
    qm = grid_argmax(profit, 0, p["a"] / p["b"])
    qc = bisect(lambda Q: p["a"] - p["b"] * Q - p["c"], 0, p["a"] / p["b"])
    return integrate(lambda Q: p["a"] - p["b"] * Q - p["c"], qm, qc)


def _incidence(p):
    """Prices with the tax collected from the side named: buyers pay Pb, sellers keep Ps = Pb − t."""
    p0 = bisect(lambda P: p["a"] - p["b"] * P - p["d"] * P, 0, p["a"] / p["b"])
    if p["side"] == "sellers":  # sellers receive P and remit t
        pb = bisect(lambda P: p["a"] - p["b"] * P - p["d"] * (P - p["t"]), 0, p["a"] / p["b"] + p["t"])
        ps = pb - p["t"]
    else:  # buyers pay P + t to the seller and the government together
        ps = bisect(lambda P: p["a"] - p["b"] * (P + p["t"]) - p["d"] * P, 0, p["a"] / p["b"])
        pb = ps + p["t"]
    return pb - p0 if p["ask"] == "buyers" else p0 - ps


def _production(p, t):
    """Output as a function of labour at the question's capital."""
    K = p["K"]
    return {"cobb-douglas": lambda L: L ** p["a"] * K ** p["b"], "leontief": lambda L: min(p["a"] * L, p["b"] * K),
            "linear": lambda L: p["a"] * L + p["b"] * K}[t]


def _production2(p, t):
    if t == "cobb-douglas":
        return lambda L, K: L ** p["a"] * K ** p["b"]
    if t == "leontief":
        return lambda L, K: min(p["alpha"] * L, p["beta"] * K) ** p["g"]
    return lambda L, K: (p["alpha"] * L + p["beta"] * K) ** p["g"]


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
    "find_eq_price": lambda p, t: bisect(lambda P: (p["a"] - p["b"] * P) - p["n"] * _firm_supply(p["c"], P), 1e-9, p["a"] / p["b"], it=80),
    "aggregation_of_consumer_demand": lambda p, t: sum(
        n * _budget_demand({"px": p["p"], "py": 1.0, "m": m, "a": a, "b": 1 - a}, "cobb-douglas")
        for n, a, m in ((p["n1"], p["a1"], p["m1"]), (p["n2"], p["a2"], p["m2"]))),
    "consumer_surplus": lambda p, t: integrate(lambda P: p["a"] - p["b"] * P, p["p"], p["a"] / p["b"]),
    "producer_surplus": lambda p, t: integrate(lambda P: p["d"] * (P - p["p0"]), p["p0"], p["p"]),
    "deadweight_loss": lambda p, t: _monopoly_dwl(p),
    "tax_incidence": lambda p, t: _incidence(p),
    # ---- batch 2
    "exponents": lambda p, t: math.exp((p["m"] + p["n"] - p["k"]) * math.log(p["base"])),
    "diminishing_marginal_utility": lambda p, t: d(lambda x: x ** p["a"] * p["y"] ** p["b"], p["x0"]) - d(lambda x: x ** p["a"] * p["y"] ** p["b"], p["x1"]),
    "mrs_tangency": lambda p, t: _mrs_at_optimum(p),
    "substitutes_complements": lambda p, t: d(lambda py: p["a"] - p["b"] * p["px"] + p["c"] * py, p["py"]) * p["py"] / (p["a"] - p["b"] * p["px"] + p["c"] * p["py"]),
    "deriving_hicksian_demand": lambda p, t: _hicks(p["a"], p["px"], p["py"], p["u"]),
    "hicksian_duality": lambda p, t: _hicks(p["a"], p["px"], p["py"], p["v"]),
    "law_of_demand": lambda p, t: (_budget_demand({"a": p["a"], "b": 1 - p["a"], "px": p["p1"], "py": 1, "m": p["m"]}, "cobb-douglas")
                                   - _budget_demand({"a": p["a"], "b": 1 - p["a"], "px": p["p0"], "py": 1, "m": p["m"]}, "cobb-douglas")),
    "consumption_changes": lambda p, t: np.diff([P * (p["a"] - p["b"] * P) for P in (p["p0"], p["p1"])])[0],
    "engel_curves": lambda p, t: (_budget_demand({**p, "py": 1, "m": 1100}, "cobb-douglas") - _budget_demand({**p, "py": 1, "m": 1000}, "cobb-douglas")) / 100,
    "deriving_labor_supply": lambda p, t: _hours(p["alpha"], p["T"], p["w"], p["V"]),
    "labor_supply_elasticity": lambda p, t: (math.log(_hours(p["alpha"], p["T"], p["w"] * 1.001, p["V"])) - math.log(_hours(p["alpha"], p["T"], p["w"] / 1.001, p["V"]))) / (2 * math.log(1.001)),
    "mrs_labor_supply": lambda p, t: d(lambda l: p["c"] ** p["alpha"] * l ** (1 - p["alpha"]), p["l"]) / d(lambda c: c ** p["alpha"] * p["l"] ** (1 - p["alpha"]), p["c"]),
    "price_of_risk": lambda p, t: p["mu"] - bisect(lambda ce: ce - (p["mu"] - p["A"] / 2 * p["sigma"] ** 2), 0, 2 * p["mu"]),
    "state_based_consumption": lambda p, t: grid_argmax(lambda c1: p["pi"] * np.log(np.maximum(c1, 1e-12)) + (1 - p["pi"]) * np.log(np.maximum((p["W"] - p["q1"] * c1) / p["q2"], 1e-12)), 0, p["W"] / p["q1"]),
    "arbitrage": lambda p, t: sum(max(p["pb"] - p["pa"] - p["cost"], 0) for _ in range(p["k"])),
    "optimal_portfolio_choice": lambda p, t: grid_argmax(lambda w: w * (p["mu"] - p["s"]) + (1 - w) * p["rf"] - p["A"] / 2 * w ** 2 * p["sigma"] ** 2, -5, 20),
    "intertemporal_consumption_smoothing": lambda p, t: grid_argmax(lambda c1: np.log(np.maximum(c1, 1e-12)) + p["beta"] * np.log(np.maximum((p["y1"] - c1) * (1 + p["r"]) + p["y2"], 1e-12)), 1e-6, p["y1"] + p["y2"] / (1 + p["r"])),
    # ---- batch 3
    "marginal_production": lambda p, t: d(lambda L: p["A"] * L ** p["a"] * p["K"] ** p["b"], p["L"]),
    "output_elasticity": lambda p, t: (d(lambda L: L ** p["a"] * p["K"] ** p["b"], p["L"]) * p["L"] / (p["L"] ** p["a"] * p["K"] ** p["b"]))
    if t == "cobb-douglas" else d(lambda L: p["a"] * L + p["b"] * p["K"], p["L"]) * p["L"] / (p["a"] * p["L"] + p["b"] * p["K"]),
    "elasticity_of_substitution": lambda p, t: _ces_sigma(p["a"], p["rho"]),
    "diminishing_marginal_product": lambda p, t: (lambda f: d(f, p["L0"]) - d(f, p["L1"]))(_production(p, t)),
    "returns_to_scale": lambda p, t: (lambda f: f(5 * p["lam"], 7 * p["lam"]) / f(5, 7))(_production2(p, t)),
    "cost_minimization_problem": lambda p, t: grid_argmax(lambda L: -(p["w"] * L + p["r"] * (p["q"] / np.maximum(L, 1e-12) ** p["a"]) ** (1 / p["b"])), 1e-3, 50 * p["q"] ** (1 / (p["a"] + p["b"])) + 50),
    "factor_demand": lambda p, t: _input_demand(p["a"], p["p"], p["A"], p["w"]),
    "supply_elasticity": lambda p, t: d(lambda P: p["d"] * (P - p["p0"]), p["p"]) * p["p"] / (p["d"] * (p["p"] - p["p0"])),
    "shephards_lemma": lambda p, t: d(lambda w: 2 * p["q"] * math.sqrt(w * p["r"]), p["w"]),
    "input_price_response": lambda p, t: _input_demand(p["a"], p["p"], p["A"], p["w1"]) - _input_demand(p["a"], p["p"], p["A"], p["w0"]),
    "finding_tfp": lambda p, t: math.exp(math.log(p["Q"]) - p["a"] * math.log(p["L"]) - p["b"] * math.log(p["K"])),
    "dynamic_profit_max": lambda p, t: _input_demand(p["a"], p["p"], p["A"], p["r"] + p["delta"]),
    "entry_exit_decisions": lambda p, t: float(np.min((p["F"] + p["c"] * np.linspace(0.01, 200, 400001) ** 2) / np.linspace(0.01, 200, 400001))),
    # ---- batch 4
    "aggregation_of_offer_curve": lambda p, t: p["n"] * grid_argmax(lambda q: p["p"] * q - p["c"] * q ** 2, 0, p["p"] / p["c"]),
    "aggregation_of_labor_demand": lambda p, t: p["n1"] * _input_demand(p["a"], p["p"], p["A1"], p["w"]) + p["n2"] * _input_demand(p["a"], p["p"], p["A2"], p["w"]),
    "aggregation_of_capital_demand": lambda p, t: sum(_input_demand(p["a"], p["p"], p["A"], p["r"]) for _ in range(1)) * p["n"],
    "aggregation_of_labor_supply": lambda p, t: p["n1"] * _hours(p["alpha"], p["T"], p["w"], p["V1"]) + p["n2"] * _hours(p["alpha"], p["T"], p["w"], p["V2"]),
    "fixed_factor_aggregation": lambda p, t: sum(a for a, r in zip(p["acres"], p["reserve"]) if not r > p["rent"]),
    "factor_shares_equilibrium": lambda p, t: (lambda L, K: d(lambda l: l ** p["a"] * K ** (1 - p["a"]), L) * L / (L ** p["a"] * K ** (1 - p["a"])))(30.0, 70.0) * p["Y"],
    "tfp_shocks": lambda p, t: _tfp_price(p, p["A1"]) - _tfp_price(p, p["A0"]),
    "elastic_inelastic_supply": lambda p, t: (
        bisect(lambda P: p["a"] + p["shift"] - p["b"] * P - p["S"], 0, 1e4) - bisect(lambda P: p["a"] - p["b"] * P - p["S"], 0, 1e4)
        if t == "perfectly inelastic supply"  # vertical supply: only the price moves
        else (p["a"] + p["shift"] - p["b"] * p["c"]) - (p["a"] - p["b"] * p["c"])),  # horizontal: only the quantity
    # ---- batch 5
    "welfare_theorem_1": lambda p, t: _exchange_x1(p["a1"], p["a2"], p["ex1"], p["ey1"], p["ex2"], p["ey2"]),
    "welfare_theorem_2": lambda p, t: bisect(lambda T: _exchange_x1(p["a"], p["a"], p["ex1"], p["ey1"], p["ex2"], p["ey2"], T) - p["target"], -1e4, 1e4),
    "capital_market_distortions": lambda p, t: _input_demand(p["a"], p["p"], p["A"], p["r"]) - _input_demand(p["a"], p["p"], p["A"], p["r"] * (1 + p["tau"])),
    "efficient_surplus": lambda p, t: integrate(lambda Q: (p["a"] - Q) / p["b"] - Q / p["d"], 0, bisect(lambda Q: (p["a"] - Q) / p["b"] - Q / p["d"], 0, p["a"])),
    "labor_supply_distortions": lambda p, t: _hours(p["alpha"], p["T"], p["w"], p["V"]) - _hours(p["alpha"], p["T"], p["w"] * (1 - p["tau"]), p["V"]),
    # the lump-sum tax and the tax on land in fixed supply leave quantities unchanged: no triangle
    "non_distortionary_taxes": lambda p, t: integrate(lambda Q: (p["a"] - Q) / p["b"] - Q / p["d"],
                                                      p["a"] - p["b"] * _tax_eq(p, p["t"]), p["a"] - p["b"] * _tax_eq(p, 0)),
}


def _mrs_at_optimum(p):
    x = _budget_demand(p, "cobb-douglas")
    y = (p["m"] - p["px"] * x) / p["py"]
    return d(lambda z: z ** p["a"] * y ** p["b"], x) / d(lambda z: x ** p["a"] * z ** p["b"], y)


def _ces_sigma(a, rho):
    """σ = d ln(K/L) / d ln(MRTS), from numerical marginal products along two input ratios."""
    f = lambda L, K: (a * L ** rho + (1 - a) * K ** rho) ** (1 / rho)  # noqa: E731
    mrts = lambda L, K: d(lambda l: f(l, K), L) / d(lambda k: f(L, k), K)  # noqa: E731
    r1, r2 = 1.0, 1.2
    return (math.log(r2) - math.log(r1)) / (math.log(mrts(1.0, r2)) - math.log(mrts(1.0, r1)))


def _tfp_price(p, A):
    firm_q = lambda P: grid_argmax(lambda L: P * A * np.sqrt(np.maximum(L, 0)) - p["w"] * L, 0, (P * A / p["w"]) ** 2 + 1) ** 0.5 * A  # noqa: E731
    return bisect(lambda P: p["a"] - p["b"] * P - p["n"] * firm_q(P), 1e-6, p["a"] / p["b"], it=60)


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
        tol = max(10 ** -spec.decimals, 2e-3 * abs(got))  # the numerical route's own precision
        values = [float(o.replace(",", "")) for o in it["options"]]
        assert len(set(it["options"])) == 4
        assert abs(values[it["correct_index"]] - got) <= tol, (it["id"], values, got)
        for i, v in enumerate(values):
            if i != it["correct_index"]:
                assert abs(v - got) > tol, (it["id"], it["options"], got)  # every distractor is wrong


@pytest.mark.parametrize("element", covered())
def test_balance_of_positions_domains_and_perspectives(element):
    items = generate([element], 100, seed=3, taxonomy={element: {"setting": "s", "module": "m"}})
    assert collections.Counter(it["correct_index"] for it in items) == {0: 25, 1: 25, 2: 25, 3: 25}
    n_combos = len(combos(element))
    per_combo = collections.Counter((it["template_id"], it["domain"], it["perspective"]) for it in items)
    assert max(per_combo.values()) - min(per_combo.values()) <= 1 or len(per_combo) == min(100, n_combos)
    assert len({it["question"] for it in items}) > 90


def test_labour_supply_stays_interior_after_the_tax():
    items = generate(["labor_supply_distortions"], 300, 8, {"labor_supply_distortions": {"setting": "s", "module": "m"}})
    for it in items:
        p = it["params"]
        assert p["alpha"] * p["T"] - (1 - p["alpha"]) * p["V"] / (p["w"] * (1 - p["tau"])) > 1


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


def test_no_do_does_agreement_errors_or_a_before_vowels():
    elements = ["entry_exit_decisions", "deadweight_loss", "find_eq_price", "returns_to_scale"]
    items = generate(elements, 60, 5, {e: {"setting": "s", "module": "m"} for e in elements})
    for it in items:
        q = it["question"]
        assert "does you" not in q and "does I " not in q and "do she" not in q and "do the " not in q, q
        assert not any(f"A {v}" in q[:3] for v in "aeiou"), q  # "An athlete", not "A athlete"
    exits = [it["question"] for it in items if it["element"] == "entry_exit_decisions"]
    assert any("price do you exit" in q for q in exits) and any("price do I exit" in q for q in exits)


@pytest.mark.parametrize("element,types", [("diminishing_marginal_product", {"cobb-douglas", "leontief", "linear"}),
                                           ("returns_to_scale", {"cobb-douglas", "leontief", "linear"}),
                                           ("tax_incidence", {"tax on sellers", "tax on buyers"}),
                                           ("elastic_inelastic_supply", {"perfectly inelastic supply", "perfectly elastic supply"})])
def test_elements_cover_the_types_the_paper_compares(element, types):
    items = generate([element], 100, 2025, {element: {"setting": "s", "module": "m"}})
    assert {it["type"] for it in items} == types
    counts = collections.Counter(it["type"] for it in items)
    assert max(counts.values()) - min(counts.values()) <= 2  # balanced across types


def test_tax_incidence_asks_about_both_legal_sides():
    items = generate(["tax_incidence"], 100, 2025, {"tax_incidence": {"setting": "s", "module": "m"}})
    pairs = {(it["params"]["side"], it["params"]["ask"]) for it in items}
    assert pairs == {("sellers", "buyers"), ("sellers", "sellers"), ("buyers", "buyers"), ("buyers", "sellers")}


def test_the_bundled_questions_have_no_unintroduced_person_no_earned_from_purchases_and_no_negated_answer():
    import re

    from econeval import data

    qs = data.load("steer-me", "questions.jsonl")
    assert len(qs) == 6400
    names = re.compile(r"\b[A-Z][a-z]+(?:'s)?\b")
    unintroduced, earned, negated = [], [], []
    for q in qs:
        text = q["question"]
        pron = re.search(r"\b(he|his|him|she|her)\b", text, re.I)
        if pron and q["perspective"] in ("third person male", "third person female"):
            before = text[:pron.start()]
            if not any(m.group(0).rstrip("'s") not in ("When", "While", "If", "A", "An", "The", "In", "At", "After", "Using")
                       for m in names.finditer(before)):
                unintroduced.append(q["id"])
        if re.search(r"\bnext year from\b", text):
            earned.append(q["id"])
        right = q["options"][q["correct_index"]]
        if any(o != right and o.lstrip("-−") == right.lstrip("-−") for o in q["options"]):
            negated.append(q["id"])
    assert unintroduced == [] and earned == [] and negated == []


def test_the_bundled_questions_agree_in_number_keep_days_to_24_hours_and_the_manifest_names_the_generator():
    """Issue #32 item 3: "What do one pack cost?" (40 of 100 mult_div questions), "80 hours a day"
    (45 of 100 deriving_labor_supply questions), and a manifest naming generator version 2."""
    import re

    from econeval import data
    from econeval.benchmarks.steer_me.generator import GENERATOR_VERSION

    qs = data.load("steer-me", "questions.jsonl")
    assert len(qs) == 6400
    disagree = [q["id"] for q in qs if re.search(r"\b(do|have|are|were) (one|a|an|each) [a-z]+ [a-z]+\?", q["question"])]
    long_days = [q["id"] for q in qs for h in re.findall(r"\b(\d+(?:\.\d+)?) hours a day\b", q["question"]) if float(h) > 24]
    assert disagree == [] and long_days == []
    assert {q["generator_version"] for q in qs} == {GENERATOR_VERSION}
    assert f"generator version {GENERATOR_VERSION})" in data.manifest("steer-me")["source"]["questions"]
    days = [q for q in qs if q["element"] == "deriving_labor_supply"]
    assert any("hours a week" in q["question"] and "a week in non-labour income" in q["question"] for q in days)
    assert any("hours a day" in q["question"] and "a day in non-labour income" in q["question"] for q in days)
