"""Per-element question solvers: draw the numbers (rounded as a person would state them),
compute the answer from the rounded numbers, and name the typical mistakes as distractors.

Each solver takes a random.Random and a type and returns a Draw. Answers are verified by an
independent numerical route in tests/test_steer_generator.py.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Draw:
    params: dict
    slots: dict
    answer: float
    formula: str
    mistakes: dict[str, float] = field(default_factory=dict)  # name → wrong value


@dataclass(frozen=True)
class Element:
    name: str
    types: tuple[str, ...]
    solve: Callable[[random.Random, str], Draw]
    decimals: int = 2


ELEMENTS: dict[str, Element] = {}


def element(name: str, types: tuple[str, ...] = ("standard",), decimals: int = 2):
    def wrap(fn):
        if name in ELEMENTS:
            raise ValueError(f"element {name} defined twice")
        ELEMENTS[name] = Element(name, types, fn, decimals)
        return fn
    return wrap


def r2(x: float) -> float:
    return round(x, 2)


def money(x: float) -> str:
    return f"${x:,.2f}" if x != int(x) else f"${int(x):,}"


def num(x: float) -> str:
    return f"{x:g}"


def term(coef: float, var: str) -> str:
    """`3q`, `q` (not `1q`), `0.5q`."""
    return var if coef == 1 else f"{coef:g}{var}"


# ---- 1 Foundations ------------------------------------------------------------------------
@element("add_sub", decimals=0)
def add_sub(rng, typ):
    start, sold, received = rng.randint(120, 900), rng.randint(20, 110), rng.randint(15, 150)
    ans = start - sold + received
    return Draw({"start": start, "sold": sold, "received": received},
                {"start": num(start), "sold": num(sold), "received": num(received)}, ans,
                f"{start} - {sold} + {received} = {ans}",
                {"added the units sold": start + sold + received, "subtracted the delivery": start - sold - received,
                 "ignored the delivery": start - sold})


@element("mult_div")
def mult_div(rng, typ):
    packs, per_pack, budget = rng.randint(3, 12), rng.randint(4, 24), rng.choice([60, 90, 120, 150, 240, 360, 480])
    return Draw({"packs": packs, "per_pack": per_pack, "budget": budget},
                {"packs": num(packs), "per_pack": num(per_pack), "budget": money(budget)}, budget / packs,
                f"{budget} / {packs} = {budget / packs:.2f} per pack",
                {"price per unit": budget / (packs * per_pack), "multiplied instead of dividing": budget * packs / per_pack,
                 "divided by units per pack": budget / per_pack})


@element("compute_expectations")
def compute_expectations(rng, typ):
    outcomes = sorted(rng.sample(range(10, 400, 10), 3))
    weights = [rng.randint(1, 6) for _ in outcomes]
    probs = [r2(w / sum(weights)) for w in weights]
    probs[-1] = r2(1 - sum(probs[:-1]))
    ans = sum(p * x for p, x in zip(probs, outcomes))
    desc = ", ".join(f"{money(x)} with probability {p:g}" for x, p in zip(outcomes, probs))
    return Draw({"outcomes": outcomes, "probs": probs}, {"lottery": desc}, ans,
                " + ".join(f"{p:g}*{x}" for p, x in zip(probs, outcomes)) + f" = {ans:.2f}",
                {"simple average": sum(outcomes) / 3, "most likely outcome": outcomes[probs.index(max(probs))],
                 "sum of outcomes": sum(outcomes)})


@element("linear_system_eq")
def linear_system_eq(rng, typ):
    x, y = rng.randint(2, 30), rng.randint(2, 30)
    a1, b1, a2, b2 = rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 9)
    if a1 * b2 == a2 * b1:
        a2 += 1
    c1, c2 = a1 * x + b1 * y, a2 * x + b2 * y
    return Draw({"a1": a1, "b1": b1, "c1": c1, "a2": a2, "b2": b2, "c2": c2},
                {"eq1": f"{a1}x + {b1}y = {c1}", "eq2": f"{a2}x + {b2}y = {c2}"}, x,
                f"x = ({c1}*{b2} - {b1}*{c2}) / ({a1}*{b2} - {b1}*{a2}) = {x}",
                {"solved for y": y, "first equation alone": c1 / (a1 + b1), "sign slip": (c1 * b2 + b1 * c2) / (a1 * b2 + b1 * a2)})


@element("derivatives")
def derivatives(rng, typ):
    a, n, b, x0 = rng.randint(2, 9), rng.randint(2, 4), rng.randint(1, 20), rng.randint(2, 6)
    ans = n * a * x0 ** (n - 1) + b
    return Draw({"a": a, "n": n, "b": b, "x0": x0}, {"f": f"f(q) = {term(a, 'q')}^{n} + {term(b, 'q')}", "x0": num(x0)}, ans,
                f"f'(q) = {n*a}q^{n-1} + {b}; f'({x0}) = {ans}",
                {"value instead of slope": a * x0 ** n + b * x0, "forgot the exponent factor": a * x0 ** (n - 1) + b,
                 "did not lower the power": n * a * x0 ** n + b})


# ---- 2 Consumption ------------------------------------------------------------------------
def _cd_exponents(rng):
    a = rng.choice([0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8])
    return a, r2(1 - a) if rng.random() < 0.5 else rng.choice([0.2, 0.3, 0.5, 0.6])


@element("marginal_utility", types=("cobb-douglas", "quasilinear"))
def marginal_utility(rng, typ):
    x, y = rng.randint(2, 40), rng.randint(2, 40)
    if typ == "cobb-douglas":
        a, b = _cd_exponents(rng)
        ans = a * x ** (a - 1) * y ** b
        return Draw({"a": a, "b": b, "x": x, "y": y}, {"u": f"U(x, y) = x^{a:g} y^{b:g}", "x": num(x), "y": num(y)}, ans,
                    f"MU_x = {a:g} x^{a - 1:g} y^{b:g} = {ans:.4f}",
                    {"forgot y^b": a * x ** (a - 1), "did not lower the power": a * x ** a * y ** b,
                     "utility level": x ** a * y ** b, "marginal utility of y": b * x ** a * y ** (b - 1)})
    c = rng.choice([2, 3, 4, 5, 10])
    ans = c / (2 * x ** 0.5)
    return Draw({"c": c, "x": x, "y": y}, {"u": f"U(x, y) = {c}√x + y", "x": num(x), "y": num(y)}, ans,
                f"MU_x = {c} / (2√{x}) = {ans:.4f}",
                {"forgot the 1/2": c / x ** 0.5, "utility level": c * x ** 0.5 + y, "marginal utility of y": 1.0,
                 "wrong power": c * 0.5 * x ** 0.5})


@element("mrs_utility", types=("cobb-douglas", "linear"))
def mrs_utility(rng, typ):
    x, y = rng.randint(2, 40), rng.randint(2, 40)
    if typ == "cobb-douglas":
        a, b = _cd_exponents(rng)
        ans = a * y / (b * x)
        return Draw({"a": a, "b": b, "x": x, "y": y}, {"u": f"U(x, y) = x^{a:g} y^{b:g}", "x": num(x), "y": num(y)}, ans,
                    f"MRS = MU_x / MU_y = ({a:g} y) / ({b:g} x) = {ans:.4f}",
                    {"inverted": b * x / (a * y), "exponent ratio only": a / b, "swapped bundle": a * x / (b * y)})
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    if a == b:
        b += 1
    return Draw({"a": a, "b": b, "x": x, "y": y}, {"u": f"U(x, y) = {term(a, 'x')} + {term(b, 'y')}", "x": num(x), "y": num(y)}, a / b,
                f"MRS = {a}/{b} = {a / b:.4f}", {"inverted": b / a, "bundle ratio": y / x, "difference": a - b})


@element("deriving_demand", types=("cobb-douglas", "leontief", "perfect substitutes"))
def deriving_demand(rng, typ):
    px, py, m = rng.choice([1, 2, 2.5, 4, 5, 8, 10]), rng.choice([1, 2, 3, 4, 5, 6, 12]), rng.choice([120, 200, 240, 300, 480, 600, 900, 1200])
    slots = {"px": money(px), "py": money(py), "m": money(m)}
    if typ == "cobb-douglas":
        a, b = _cd_exponents(rng)
        ans = a / (a + b) * m / px
        return Draw({"a": a, "b": b, "px": px, "py": py, "m": m}, {**slots, "u": f"U(x, y) = x^{a:g} y^{b:g}"}, ans,
                    f"x* = a/(a+b) · m/p_x = {a:g}/{a + b:g} · {m}/{px:g} = {ans:.2f}",
                    {"did not normalise the exponents": a * m / px, "used y's exponent": b / (a + b) * m / px,
                     "equal split": m / (2 * px), "demand for y": b / (a + b) * m / py})
    if typ == "leontief":
        a, b = rng.randint(1, 4), rng.randint(1, 4)
        ans = m / (px + py * a / b)
        return Draw({"a": a, "b": b, "px": px, "py": py, "m": m}, {**slots, "u": f"U(x, y) = min({term(a, 'x')}, {term(b, 'y')})"}, ans,
                    f"{a}x = {b}y, so x* = m / (p_x + p_y·{a}/{b}) = {ans:.2f}",
                    {"ignored y": m / px, "one-for-one bundle": m / (px + py), "inverted proportions": m / (px + py * b / a)})
    a, b = rng.randint(1, 6), rng.randint(1, 6)
    if a / px == b / py:
        a += 1
    ans = m / px if a / px > b / py else 0.0
    return Draw({"a": a, "b": b, "px": px, "py": py, "m": m}, {**slots, "u": f"U(x, y) = {term(a, 'x')} + {term(b, 'y')}"}, ans,
                f"MU_x/p_x = {a / px:.3f} vs MU_y/p_y = {b / py:.3f}: x* = {ans:.2f}",
                {"split the budget": m / (px + py), "weighted split": a / (a + b) * m / px,
                 "wrong corner": 0.0 if ans else m / px, "half the budget": m / (2 * px)})


@element("price_elasticity", types=("linear",))
def price_elasticity(rng, typ):
    b = rng.choice([0.5, 1, 1.5, 2, 3, 4, 5])
    p = rng.randint(2, 40)
    a = int(b * p + rng.randint(10, 200))
    q = a - b * p
    ans = -b * p / q
    return Draw({"a": a, "b": b, "p": p}, {"demand": f"Q = {a} - {term(b, 'P')}", "p": money(p)}, ans,
                f"ε = (dQ/dP)·P/Q = -{b:g}·{p}/{q:g} = {ans:.4f}",
                {"off-sign": -ans, "inverted ratio": -b * q / p, "slope only": -b, "reciprocal slope": -(1 / b) * p / q})


@element("income_elasticity", types=("midpoint",))
def income_elasticity(rng, typ):
    m0 = rng.choice([200, 400, 500, 800, 1000])
    m1 = m0 + rng.choice([50, 100, 200, 250])
    q0 = rng.randint(10, 60)
    q1 = q0 + rng.randint(1, 30)
    ans = ((q1 - q0) / ((q1 + q0) / 2)) / ((m1 - m0) / ((m1 + m0) / 2))
    return Draw({"m0": m0, "m1": m1, "q0": q0, "q1": q1},
                {"m0": money(m0), "m1": money(m1), "q0": num(q0), "q1": num(q1)}, ans,
                f"midpoint: ({q1}-{q0})/{(q1 + q0) / 2:g} ÷ ({m1}-{m0})/{(m1 + m0) / 2:g} = {ans:.4f}",
                {"inverted": 1 / ans, "base-year percentages": ((q1 - q0) / q0) / ((m1 - m0) / m0),
                 "slope only": (q1 - q0) / (m1 - m0)})


@element("present_value", types=("annuity",))
def present_value(rng, typ):
    c, t, rate = rng.choice([100, 200, 250, 500, 1000, 1500]), rng.randint(2, 6), rng.choice([0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1])
    ans = sum(c / (1 + rate) ** k for k in range(1, t + 1))
    return Draw({"c": c, "t": t, "r": rate}, {"c": money(c), "t": num(t), "r": f"{rate * 100:g}%"}, ans,
                f"PV = Σ_(k=1..{t}) {c}/(1+{rate:g})^k = {ans:.2f}",
                {"discounted once": c * t / (1 + rate), "no discounting": c * t,
                 "discounted from period 0": sum(c / (1 + rate) ** k for k in range(t)), "simple interest": c * t / (1 + rate * t)})


# ---- 3 Production -------------------------------------------------------------------------
@element("marginal_cost", types=("cubic",))
def marginal_cost(rng, typ):
    f, c1, c2, c3, q = rng.choice([50, 100, 200, 500]), rng.randint(2, 20), rng.randint(0, 6), rng.choice([0.1, 0.2, 0.5, 1]), rng.randint(2, 20)
    ans = c1 + 2 * c2 * q + 3 * c3 * q ** 2
    total = f + c1 * q + c2 * q ** 2 + c3 * q ** 3
    return Draw({"f": f, "c1": c1, "c2": c2, "c3": c3, "q": q},
                {"cost": f"C(q) = {f} + {term(c1, 'q')} + {term(c2, 'q')}^2 + {term(c3, 'q')}^3".replace(" + 0q^2", ""), "q": num(q)}, ans,
                f"MC = {c1} + {2 * c2}q + {3 * c3:g}q^2 at q = {q}: {ans:.2f}",
                {"average cost": total / q, "forgot the exponent factors": c1 + c2 * q + c3 * q ** 2,
                 "total cost": total, "average variable cost": (total - f) / q})


@element("average_cost", types=("quadratic",))
def average_cost(rng, typ):
    f, c1, c2, q = rng.choice([100, 200, 400, 600, 900]), rng.randint(2, 30), rng.choice([0.5, 1, 2, 3]), rng.randint(5, 40)
    total = f + c1 * q + c2 * q ** 2
    return Draw({"f": f, "c1": c1, "c2": c2, "q": q}, {"cost": f"C(q) = {f} + {term(c1, 'q')} + {term(c2, 'q')}^2", "q": num(q)}, total / q,
                f"AC = C({q})/{q} = {total:g}/{q} = {total / q:.2f}",
                {"average variable cost": (total - f) / q, "marginal cost": c1 + 2 * c2 * q, "total cost": total})


@element("profit_maximization", types=("quadratic cost",))
def profit_maximization(rng, typ):
    c, p = rng.choice([0.5, 1, 1.5, 2, 2.5, 4, 5]), rng.randint(10, 120)
    ans = p / (2 * c)
    return Draw({"c": c, "p": p}, {"cost": f"C(q) = {term(c, 'q')}^2", "p": money(p)}, ans,
                f"P = MC: {p} = {2 * c:g}q, so q* = {ans:.2f}",
                {"set price equal to average cost": p / c, "doubled the slope twice": p / (4 * c),
                 "revenue-maximising misread": p / c / 2 + p / (4 * c)})


# ---- 4 Markets ----------------------------------------------------------------------------
@element("find_eq_price", types=("linear",))
def find_eq_price(rng, typ):
    b, d = rng.choice([1, 2, 3, 4, 5]), rng.choice([1, 2, 3, 4])
    p = rng.randint(5, 60)
    cs = rng.randint(0, 40)
    a = cs + (b + d) * p
    ans = (a - cs) / (b + d)
    return Draw({"a": a, "b": b, "c": cs, "d": d}, {"demand": f"Q_d = {a} - {term(b, 'P')}", "supply": f"Q_s = {cs} + {term(d, 'P')}"}, ans,
                f"{a} - {b}P = {cs} + {d}P → P* = {a - cs}/{b + d} = {ans:.2f}",
                {"subtracted the slopes": (a - cs) / (b - d) if b != d else (a - cs) / b + 1,
                 "added the intercepts": (a + cs) / (b + d), "demand slope only": (a - cs) / b,
                 "equilibrium quantity": a - b * ans})


@element("aggregation_of_consumer_demand", types=("linear",))
def aggregation_of_consumer_demand(rng, typ):
    n, b, p = rng.choice([20, 50, 100, 150, 250, 400]), rng.choice([1, 2, 3, 4]), rng.randint(2, 20)
    a = b * p + rng.randint(5, 60)
    ans = n * (a - b * p)
    return Draw({"n": n, "a": a, "b": b, "p": p}, {"n": num(n), "demand": f"q = {a} - {term(b, 'P')}", "p": money(p)}, ans,
                f"Q = {n}·({a} - {b}·{p}) = {ans:g}",
                {"forgot the number of consumers": a - b * p, "scaled only the intercept": n * a - b * p,
                 "one consumer too few": (n - 1) * (a - b * p)})


# ---- 5 Welfare ----------------------------------------------------------------------------
@element("consumer_surplus", types=("linear",))
def consumer_surplus(rng, typ):
    b, p = rng.choice([0.5, 1, 2, 4, 5]), rng.randint(2, 40)
    a = b * p + rng.randint(10, 200)
    q = a - b * p
    choke = a / b
    ans = 0.5 * q * (choke - p)
    return Draw({"a": a, "b": b, "p": p}, {"demand": f"Q = {a:g} - {term(b, 'P')}", "p": money(p)}, ans,
                f"CS = ½·{q:g}·({choke:g} - {p}) = {ans:.2f}",
                {"rectangle instead of triangle": q * (choke - p), "spending": q * p, "half the spending": 0.5 * q * p})


@element("producer_surplus", types=("linear",))
def producer_surplus(rng, typ):
    d, p0 = rng.choice([1, 2, 3, 4, 5]), rng.randint(1, 20)
    p = p0 + rng.randint(3, 40)
    q = d * (p - p0)
    ans = 0.5 * q * (p - p0)
    return Draw({"d": d, "p0": p0, "p": p}, {"supply": f"Q = {d}(P - {p0})" if d != 1 else f"Q = P - {p0}", "p": money(p)}, ans,
                f"PS = ½·{q}·({p} - {p0}) = {ans:.2f}",
                {"rectangle instead of triangle": q * (p - p0), "half the revenue": 0.5 * q * p, "revenue": q * p})


def _tax_market(rng):
    b, d = rng.choice([1, 2, 3, 4]), rng.choice([1, 2, 3, 4])
    p = rng.randint(10, 60)
    a = (b + d) * p  # equilibrium at P = p, supply through the origin
    t = rng.choice([1, 2, 3, 4, 5, 6])
    return a, b, d, p, t


@element("deadweight_loss", types=("per-unit tax",))
def deadweight_loss(rng, typ):
    a, b, d, p, t = _tax_market(rng)
    dq = t * b * d / (b + d)
    q1 = d * p - dq
    ans = 0.5 * t * dq
    return Draw({"a": a, "b": b, "d": d, "t": t}, {"demand": f"Q_d = {a} - {term(b, 'P')}", "supply": f"Q_s = {term(d, 'P')}", "t": money(t)}, ans,
                f"ΔQ = t·b·d/(b+d) = {dq:.3f}; DWL = ½·{t}·{dq:.3f} = {ans:.2f}",
                {"forgot the ½": t * dq, "wrong triangle (tax revenue)": t * q1, "½·t·Q after tax": 0.5 * t * q1,
                 "½·t²": 0.5 * t * t})


@element("tax_incidence", types=("per-unit tax",))
def tax_incidence(rng, typ):
    a, b, d, p, t = _tax_market(rng)
    ans = t * d / (b + d)
    return Draw({"a": a, "b": b, "d": d, "t": t}, {"demand": f"Q_d = {a} - {term(b, 'P')}", "supply": f"Q_s = {term(d, 'P')}", "t": money(t)}, ans,
                f"buyers' price rises by t·d/(b+d) = {t}·{d}/{b + d} = {ans:.2f}",
                {"swapped the shares": t * b / (b + d), "the whole tax": float(t), "half the tax": t / 2})
