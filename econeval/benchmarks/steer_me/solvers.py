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
@element("find_eq_price", types=("quadratic cost",))
def find_eq_price(rng, typ):
    """Market supply derived from n identical price-taking firms with C(q) = c·q² (P = MC = 2cq,
    so each supplies P/(2c)), against linear demand Q = a − bP."""
    n, c, b = rng.choice([10, 20, 40, 50, 100]), rng.choice([0.5, 1, 2, 2.5, 5]), rng.choice([1, 2, 4, 5, 10])
    s_slope = n / (2 * c)  # market supply Q = s_slope·P
    p = rng.randint(4, 60)
    a = round((b + s_slope) * p + rng.choice([0, 0, 5, 10, 25]))
    ans = a / (b + s_slope)
    return Draw({"n": n, "c": c, "a": a, "b": b}, {"n": num(n), "cost": f"C(q) = {term(c, 'q')}^2", "demand": f"Q = {a} - {term(b, 'P')}"},
                ans, f"firm: P = 2·{c:g}·q → q = P/{2 * c:g}; market supply {s_slope:g}P; {a} - {b}P = {s_slope:g}P → P* = {ans:.2f}",
                {"forgot the number of firms": a / (b + 1 / (2 * c)), "marginal cost without the 2": a / (b + n / c),
                 "supply from average cost (P = cq)": a / (b + n / c) if c != 0.5 else a / (b + 3 * n),
                 "one firm's supply times demand slope": a / (b * n / (2 * c) + 1)})


@element("aggregation_of_consumer_demand", types=("cobb-douglas",))
def aggregation_of_consumer_demand(rng, typ):
    """Two groups of consumers with different Cobb-Douglas expenditure shares and incomes: each
    spends share α of income m on the good, q = α·m/P; market demand sums over every consumer."""
    n1, n2 = rng.choice([100, 200, 500, 1000, 2500]), rng.choice([150, 300, 400, 1200, 2000])
    a1, a2 = rng.choice([0.1, 0.2, 0.25, 0.3]), rng.choice([0.4, 0.5, 0.6, 0.75])
    m1, m2 = rng.choice([200, 400, 600, 1000]), rng.choice([300, 500, 800, 1500])
    p = rng.choice([2, 4, 5, 8, 10, 20])
    ans = (n1 * a1 * m1 + n2 * a2 * m2) / p
    return Draw({"n1": n1, "n2": n2, "a1": a1, "a2": a2, "m1": m1, "m2": m2, "p": p},
                {"n1": num(n1), "n2": num(n2), "u1": _cd(a1, round(1 - a1, 2)), "u2": _cd(a2, round(1 - a2, 2)),
                 "m1": money(m1), "m2": money(m2), "p": money(p)}, ans,
                f"Q = ({n1}·{a1:g}·{m1} + {n2}·{a2:g}·{m2})/{p} = {ans:g}",
                {"forgot the number of consumers": (a1 * m1 + a2 * m2) / p,
                 "treated everyone like the first group": (n1 + n2) * a1 * m1 / p,
                 "averaged the shares and incomes": (n1 + n2) * ((a1 + a2) / 2) * ((m1 + m2) / 2) / p,
                 "one consumer of each group, doubled": (a1 * m1 + a2 * m2) / p * 2})


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


@element("deadweight_loss", types=("linear demand",))
def deadweight_loss(rng, typ):
    """Deadweight loss of a monopoly: inverse demand P = a − bQ, cost C(Q) = F + cQ (MC = c).
    MR = a − 2bQ = c gives Q_m; the efficient quantity has P = c; DWL = ½(P_m − c)(Q_c − Q_m)."""
    b, c = rng.choice([0.5, 1, 2, 4, 5]), rng.randint(2, 40)
    a = c + b * 2 * rng.randint(5, 60)  # Q_m an integer
    f = rng.choice([50, 100, 200, 500, 1000])
    qm = (a - c) / (2 * b)
    pm = a - b * qm
    qc = (a - c) / b
    ans = 0.5 * (pm - c) * (qc - qm)
    ac_m = c + f / qm
    return Draw({"a": a, "b": b, "c": c, "F": f}, {"demand": f"P = {a:g} - {term(b, 'Q')}", "cost": f"C(Q) = {f} + {term(c, 'Q')}"}, ans,
                f"Q_m = ({a:g} - {c})/(2·{b:g}) = {qm:g}, P_m = {pm:g}, Q_c = {qc:g}; DWL = ½·({pm:g} - {c})·({qc:g} - {qm:g}) = {ans:.2f}",
                {"forgot the ½": (pm - c) * (qc - qm), "monopoly profit before fixed cost": (pm - c) * qm,
                 "average cost instead of marginal cost": 0.5 * (pm - ac_m) * (qc - qm),
                 "the demand intercept as the monopoly price": 0.5 * (a - c) * (qc - qm)})


@element("tax_incidence", types=("tax on sellers", "tax on buyers"))
def tax_incidence(rng, typ):
    """Irrelevance of tax incidence: the price buyers pay rises by t·d/(b+d) (and sellers' net
    price falls by t·b/(b+d)) whichever side the tax is legally levied on."""
    a, b, d, p, t = _tax_market(rng)
    side = "sellers" if typ == "tax on sellers" else "buyers"
    ask_buyers = rng.random() < 0.5
    buyers, sellers = t * d / (b + d), t * b / (b + d)
    ans = buyers if ask_buyers else sellers
    other = sellers if ask_buyers else buyers
    return Draw({"a": a, "b": b, "d": d, "t": t, "side": side, "ask": "buyers" if ask_buyers else "sellers"},
                {"demand": f"Q_d = {a} - {term(b, 'P')}", "supply": f"Q_s = {term(d, 'P')}", "t": money(t), "side": side,
                 "question": "the price buyers pay (including the tax) rise" if ask_buyers else "the price sellers keep (after the tax) fall"},
                ans, f"buyers bear t·d/(b+d) = {buyers:.2f}, sellers t·b/(b+d) = {sellers:.2f}, whoever remits the tax",
                {"swapped the shares": other, "the side taxed bears it all": float(t) if (side == "buyers") == ask_buyers else 0.0,
                 "half the tax": t / 2, "the whole tax": float(t)})


# ==== coverage batch 2 ======================================================================
def _cd(a: float, b: float, x="x", y="y") -> str:
    return f"U({x}, {y}) = {x}^{a:g} {y}^{b:g}"


@element("exponents")
def exponents(rng, typ):
    base, m, n, k = rng.choice([2, 3, 1.5, 1.1, 1.05]), rng.randint(2, 6), rng.randint(1, 5), rng.randint(1, 4)
    ans = base ** (m + n - k)
    return Draw({"base": base, "m": m, "n": n, "k": k}, {"expr": f"{base:g}^{m} × {base:g}^{n} ÷ {base:g}^{k}"}, ans,
                f"{base:g}^({m}+{n}-{k}) = {base:g}^{m + n - k} = {ans:.4f}",
                {"multiplied the exponents": base ** (m * n - k), "added every exponent": base ** (m + n + k),
                 "divided by k": base ** (m + n) / k})


@element("diminishing_marginal_utility", types=("cobb-douglas",))
def diminishing_marginal_utility(rng, typ):
    a = rng.choice([0.2, 0.3, 0.4, 0.5, 0.6])
    b = rng.choice([0.3, 0.4, 0.5])
    y, x0 = rng.randint(4, 30), rng.randint(2, 20)
    x1 = x0 + rng.randint(1, 10)
    mu = lambda x: a * x ** (a - 1) * y ** b  # noqa: E731
    ans = mu(x0) - mu(x1)
    return Draw({"a": a, "b": b, "y": y, "x0": x0, "x1": x1}, {"u": _cd(a, b), "y": num(y), "x0": num(x0), "x1": num(x1)}, ans,
                f"MU_x({x0}) - MU_x({x1}) = {mu(x0):.4f} - {mu(x1):.4f} = {ans:.4f}",
                {"sign flipped": -ans, "change in utility": x1 ** a * y ** b - x0 ** a * y ** b,
                 "marginal utility at the start": mu(x0)})


@element("mrs_tangency", types=("cobb-douglas",))
def mrs_tangency(rng, typ):
    a, b = _cd_exponents(rng)
    px, py, m = rng.choice([1, 2, 3, 4, 5, 8]), rng.choice([1, 2, 3, 5, 6, 10]), rng.choice([100, 240, 360, 600])
    if px == py:
        py += 1
    return Draw({"a": a, "b": b, "px": px, "py": py, "m": m},
                {"u": _cd(a, b), "px": money(px), "py": money(py), "m": money(m)}, px / py,
                f"at the optimum MRS = p_x/p_y = {px}/{py} = {px / py:.4f}",
                {"inverted price ratio": py / px, "exponent ratio": a / b, "MRS at an equal budget split": a * px / (b * py)})


@element("substitutes_complements", types=("substitutes", "complements"))
def substitutes_complements(rng, typ):
    b, c = rng.choice([1, 2, 3, 4]), rng.choice([0.5, 1, 1.5, 2])
    if typ == "complements":
        c = -c
    px, py = rng.randint(2, 15), rng.randint(2, 15)
    a = int(b * px + abs(c) * py + rng.randint(20, 120))
    q = a - b * px + c * py
    ans = c * py / q
    return Draw({"a": a, "b": b, "c": c, "px": px, "py": py},
                {"demand": f"Q_x = {a} - {term(b, 'P_x')} {'+' if c > 0 else '-'} {term(abs(c), 'P_y')}", "px": money(px), "py": money(py)}, ans,
                f"cross-price elasticity = {c:g}·{py}/{q:g} = {ans:.4f}",
                {"sign flipped": -ans, "own-price elasticity": -b * px / q, "slope only": c, "inverted ratio": c * q / py})


@element("deriving_hicksian_demand", types=("cobb-douglas",))
def deriving_hicksian_demand(rng, typ):
    a = rng.choice([0.25, 0.3, 0.4, 0.5, 0.6, 0.75])
    px, py, u = rng.choice([1, 2, 4, 5, 8]), rng.choice([1, 2, 3, 4, 10]), rng.randint(5, 60)
    ans = u * (a * py / ((1 - a) * px)) ** (1 - a)
    return Draw({"a": a, "px": px, "py": py, "u": u}, {"u": _cd(a, r2(1 - a)), "px": money(px), "py": money(py), "ubar": num(u)}, ans,
                f"h_x = U·(a p_y/((1-a) p_x))^(1-a) = {ans:.2f}",
                {"wrong exponent": u * (a * py / ((1 - a) * px)) ** a, "ignored the share parameters": u * (py / px) ** (1 - a),
                 "Marshallian demand with income = U": a * u / px})


@element("hicksian_duality", types=("cobb-douglas",))
def hicksian_duality(rng, typ):
    a = rng.choice([0.25, 0.4, 0.5, 0.6, 0.75])
    px, py, m = rng.choice([1, 2, 4, 5]), rng.choice([1, 2, 3, 5]), rng.choice([100, 200, 400, 600])
    ans = a * m / px
    v = (a * m / px) ** a * ((1 - a) * m / py) ** (1 - a)
    return Draw({"a": a, "px": px, "py": py, "m": m, "v": v},
                {"u": _cd(a, r2(1 - a)), "px": money(px), "py": money(py), "m": money(m)}, ans,
                f"h_x(p, v(p, m)) = x(p, m) = a·m/p_x = {ans:.2f}",
                {"demand for y": (1 - a) * m / py, "the utility level": v, "half the budget": m / (2 * px)})


@element("law_of_demand", types=("cobb-douglas",))
def law_of_demand(rng, typ):
    a = rng.choice([0.2, 0.3, 0.4, 0.5, 0.6])
    m, p0 = rng.choice([120, 240, 360, 600, 900]), rng.choice([2, 3, 4, 5, 6])
    p1 = p0 + rng.choice([1, 2, 3, 4])
    ans = a * m / p1 - a * m / p0
    return Draw({"a": a, "m": m, "p0": p0, "p1": p1}, {"u": _cd(a, r2(1 - a)), "m": money(m), "p0": money(p0), "p1": money(p1)}, ans,
                f"a·m/p1 - a·m/p0 = {a * m / p1:.2f} - {a * m / p0:.2f} = {ans:.2f}",
                {"sign flipped": -ans, "linear in the price change": -a * m * (p1 - p0) / p0,
                 "used the price change as the price": a * m / (p1 - p0) - a * m / p0})


@element("consumption_changes", types=("linear",))
def consumption_changes(rng, typ):
    b = rng.choice([1, 2, 3, 4])
    p0 = rng.randint(2, 15)
    p1 = p0 + rng.randint(1, 6)
    a = b * p1 + rng.randint(10, 100)
    e = lambda p: p * (a - b * p)  # noqa: E731
    ans = e(p1) - e(p0)
    return Draw({"a": a, "b": b, "p0": p0, "p1": p1}, {"demand": f"Q = {a} - {term(b, 'P')}", "p0": money(p0), "p1": money(p1)}, ans,
                f"p1·Q(p1) - p0·Q(p0) = {e(p1):g} - {e(p0):g} = {ans:g}",
                {"ignored the quantity response": (p1 - p0) * (a - b * p0), "change in quantity": -b * (p1 - p0),
                 "sign flipped": -ans})


@element("engel_curves", types=("cobb-douglas",))
def engel_curves(rng, typ):
    a, b = _cd_exponents(rng)
    px = rng.choice([1, 2, 4, 5, 8, 10])
    ans = a / (a + b) / px
    return Draw({"a": a, "b": b, "px": px}, {"u": _cd(a, b), "px": money(px)}, ans,
                f"x = a/(a+b)·m/p_x, so dx/dm = {a:g}/({a + b:g}·{px}) = {ans:.4f}",
                {"did not normalise the exponents": a / px, "multiplied by the price": a / (a + b) * px,
                 "share of income": a / (a + b)})


def _labor(rng):
    alpha = rng.choice([0.3, 0.4, 0.5, 0.6, 0.7])
    t, w, v = rng.choice([16, 24, 60, 80]), rng.choice([10, 12, 15, 20, 25, 30]), rng.choice([0, 50, 100, 150, 200])
    return alpha, t, w, v


@element("deriving_labor_supply", types=("cobb-douglas",))
def deriving_labor_supply(rng, typ):
    alpha, t, w, v = _labor(rng)
    ans = alpha * t - (1 - alpha) * v / w
    if ans <= 0:
        v = 0
        ans = alpha * t
    return Draw({"alpha": alpha, "T": t, "w": w, "V": v},
                {"u": f"U(c, l) = c^{alpha:g} l^{r2(1 - alpha):g}", "T": num(t), "w": money(w), "V": money(v),
                 "period": "day" if t <= 24 else "week"}, ans,  # no day has more than 24 hours
                f"h* = αT - (1-α)V/w = {alpha:g}·{t} - {r2(1 - alpha):g}·{v}/{w} = {ans:.2f}",
                {"ignored non-labour income": alpha * t if v else (1 - alpha) * t, "leisure instead of work": t - ans,
                 "wrong sign on V": alpha * t + (1 - alpha) * v / w if v else alpha * t / 2})


@element("labor_supply_elasticity", types=("cobb-douglas",))
def labor_supply_elasticity(rng, typ):
    alpha, t, w, v = _labor(rng)
    v = v or 100
    h = alpha * t - (1 - alpha) * v / w
    if h <= 1:
        t = 80
        h = alpha * t - (1 - alpha) * v / w
    ans = (1 - alpha) * v / w / h
    return Draw({"alpha": alpha, "T": t, "w": w, "V": v},
                {"u": f"U(c, l) = c^{alpha:g} l^{r2(1 - alpha):g}", "T": num(t), "w": money(w), "V": money(v)}, ans,
                f"h = αT - (1-α)V/w; ε = (dh/dw)·w/h = {(1 - alpha) * v / w:.3f}/{h:.3f} = {ans:.4f}",
                {"sign flipped": -ans, "slope only": (1 - alpha) * v / w ** 2, "inverted": 1 / ans})


@element("mrs_labor_supply", types=("cobb-douglas",))
def mrs_labor_supply(rng, typ):
    alpha = rng.choice([0.3, 0.4, 0.5, 0.6, 0.7])
    c, leisure = rng.choice([200, 400, 500, 800, 1000]), rng.randint(8, 16)
    ans = (1 - alpha) * c / (alpha * leisure)
    return Draw({"alpha": alpha, "c": c, "l": leisure}, {"u": f"U(c, l) = c^{alpha:g} l^{r2(1 - alpha):g}", "c": money(c), "l": num(leisure)}, ans,
                f"MRS = MU_l/MU_c = ((1-α)c)/(α l) = {ans:.2f}",
                {"inverted": 1 / ans, "exponent ratio only": (1 - alpha) / alpha, "swapped exponents": alpha * c / ((1 - alpha) * leisure)})


@element("price_of_risk", types=("mean-variance",))
def price_of_risk(rng, typ):
    mu, sigma, a = rng.choice([500, 800, 1000, 2000]), rng.choice([10, 20, 30, 40, 50]), rng.choice([0.02, 0.04, 0.05, 0.1])
    ans = a * sigma ** 2 / 2
    return Draw({"mu": mu, "sigma": sigma, "A": a}, {"mu": money(mu), "sigma": money(sigma), "A": f"{a:g}"}, ans,
                f"risk premium = A·σ²/2 = {a:g}·{sigma}²/2 = {ans:.2f}",
                {"forgot the ½": a * sigma ** 2, "used σ instead of σ²": a * sigma / 2, "certainty equivalent": mu - ans})


@element("state_based_consumption", types=("log utility",))
def state_based_consumption(rng, typ):
    pi, q1, q2 = rng.choice([0.2, 0.25, 0.4, 0.5, 0.6, 0.75]), rng.choice([0.3, 0.4, 0.5, 0.6]), rng.choice([0.3, 0.4, 0.5, 0.6])
    w = rng.choice([500, 1000, 2000])
    ans = pi * w / q1
    return Draw({"pi": pi, "q1": q1, "q2": q2, "W": w}, {"pi": f"{pi:g}", "q1": money(q1), "q2": money(q2), "W": money(w)}, ans,
                f"c1 = π·W/q1 = {pi:g}·{w}/{q1:g} = {ans:.2f}",
                {"ignored the state price": pi * w, "equal consumption": w / (q1 + q2), "other state's probability": (1 - pi) * w / q1})


@element("arbitrage", types=("transport cost",))
def arbitrage(rng, typ):
    pa, cost, k = rng.randint(5, 60), rng.choice([0.5, 1, 2, 3]), rng.choice([50, 100, 200, 500])
    pb = pa + cost + rng.randint(1, 15)
    ans = k * (pb - pa - cost)
    return Draw({"pa": pa, "pb": pb, "cost": cost, "k": k}, {"pa": money(pa), "pb": money(pb), "cost": money(cost), "k": num(k)}, ans,
                f"{k}·({pb} - {pa} - {cost:g}) = {ans:g}",
                {"ignored the cost": k * (pb - pa), "cost counted once": k * (pb - pa) - cost, "one unit": pb - pa - cost})


@element("optimal_portfolio_choice", types=("bid-ask spread",))
def optimal_portfolio_choice(rng, typ):
    mu, rf, s = rng.choice([0.08, 0.1, 0.12, 0.15]), rng.choice([0.02, 0.03, 0.04]), rng.choice([0.005, 0.01, 0.02])
    sigma, a = rng.choice([0.15, 0.2, 0.25, 0.3]), rng.choice([2, 3, 4, 5])
    ans = (mu - s - rf) / (a * sigma ** 2)
    return Draw({"mu": mu, "rf": rf, "s": s, "sigma": sigma, "A": a},
                {"mu": f"{mu * 100:g}%", "rf": f"{rf * 100:g}%", "s": f"{s * 100:g}%", "sigma": f"{sigma * 100:g}%", "A": num(a)}, ans,
                f"w* = (μ - s - r_f)/(A σ²) = {mu - s - rf:.3f}/{a * sigma ** 2:.4f} = {ans:.4f}",
                {"ignored the spread": (mu - rf) / (a * sigma ** 2), "used σ not σ²": (mu - s - rf) / (a * sigma),
                 "forgot the risk-free rate": (mu - s) / (a * sigma ** 2)})


@element("intertemporal_consumption_smoothing", types=("log utility",))
def intertemporal_consumption_smoothing(rng, typ):
    y1, y2 = rng.choice([500, 800, 1000, 1500, 2000]), rng.choice([0, 500, 1000, 1500, 2500])
    beta, rate = rng.choice([0.9, 0.95, 0.96, 0.98]), rng.choice([0.02, 0.04, 0.05, 0.1])
    wealth = y1 + y2 / (1 + rate)
    ans = wealth / (1 + beta)
    return Draw({"y1": y1, "y2": y2, "beta": beta, "r": rate},
                {"y1": money(y1), "y2": money(y2), "beta": f"{beta:g}", "r": f"{rate * 100:g}%"}, ans,
                f"c1 = (y1 + y2/(1+r))/(1+β) = {wealth:.2f}/{1 + beta:g} = {ans:.2f}",
                {"linear Euler (c1 = c2)": wealth / (1 + 1 / (1 + rate)), "no discounting of y2": (y1 + y2) / (1 + beta),
                 "consumed the first-period income": float(y1), "discounted twice": (y1 + y2 / (1 + rate) ** 2) / (1 + beta)})


# ==== coverage batch 3: production ==========================================================
def _cd_prod(a: float, b: float, A: float = 1) -> str:
    return f"Q(L, K) = {'' if A == 1 else f'{A:g}'}L^{a:g} K^{b:g}"


@element("marginal_production", types=("cobb-douglas",))
def marginal_production(rng, typ):
    A, a, b = rng.choice([1, 2, 5, 10]), rng.choice([0.3, 0.4, 0.5, 0.6, 0.7]), rng.choice([0.3, 0.4, 0.5])
    L, K = rng.randint(4, 100), rng.randint(4, 100)
    ans = a * A * L ** (a - 1) * K ** b
    return Draw({"A": A, "a": a, "b": b, "L": L, "K": K}, {"f": _cd_prod(a, b, A), "L": num(L), "K": num(K)}, ans,
                f"MP_L = {a:g}·{A}·L^{a - 1:g} K^{b:g} = {ans:.4f}",
                {"average product": A * L ** (a - 1) * K ** b, "marginal product of capital": b * A * L ** a * K ** (b - 1),
                 "did not lower the power": a * A * L ** a * K ** b})


@element("output_elasticity", types=("cobb-douglas", "linear"))
def output_elasticity(rng, typ):
    L, K = rng.randint(5, 80), rng.randint(5, 80)
    if typ == "cobb-douglas":
        a, b = rng.choice([0.2, 0.3, 0.4, 0.6, 0.7]), rng.choice([0.3, 0.4, 0.5, 0.6])
        return Draw({"a": a, "b": b, "L": L, "K": K}, {"f": _cd_prod(a, b), "L": num(L), "K": num(K)}, a,
                    f"ε_L = ∂ln Q/∂ln L = {a:g}",
                    {"capital's exponent": b, "returns to scale": a + b, "marginal product": a * L ** (a - 1) * K ** b})
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    q = a * L + b * K
    return Draw({"a": a, "b": b, "L": L, "K": K}, {"f": f"Q(L, K) = {term(a, 'L')} + {term(b, 'K')}", "L": num(L), "K": num(K)}, a * L / q,
                f"ε_L = MP_L·L/Q = {a}·{L}/{q} = {a * L / q:.4f}",
                {"marginal product": float(a), "capital's elasticity": b * K / q, "inverted": q / (a * L)})


@element("elasticity_of_substitution", types=("CES",))
def elasticity_of_substitution(rng, typ):
    rho = rng.choice([-2, -1, -0.5, 0.25, 0.5, 0.75])
    a = rng.choice([0.3, 0.4, 0.5, 0.6])
    ans = 1 / (1 - rho)
    return Draw({"rho": rho, "a": a}, {"f": f"Q(L, K) = ({a:g}L^{rho:g} + {r2(1 - a):g}K^{rho:g})^(1/{rho:g})"}, ans,
                f"σ = 1/(1 - ρ) = 1/(1 - {rho:g}) = {ans:.4f}",
                {"used ρ": float(rho), "1/ρ": 1 / rho, "1/(1 + ρ)": 1 / (1 + rho) if rho != -1 else 2.0})


@element("diminishing_marginal_product", types=("cobb-douglas", "leontief", "linear"))
def diminishing_marginal_product(rng, typ):
    """How much the marginal product of labour falls when L rises, holding K: Cobb-Douglas
    (diminishing), Leontief min(αL, βK) (α until labour stops binding, then 0), linear αL + βK
    (constant: no fall)."""
    K = rng.randint(10, 100)
    if typ == "cobb-douglas":
        a, b = rng.choice([0.3, 0.4, 0.5, 0.6]), rng.choice([0.3, 0.4, 0.5])
        L0 = rng.randint(4, 40)
        L1 = L0 + rng.randint(2, 20)
        mp = lambda L: a * L ** (a - 1) * K ** b  # noqa: E731
        f = _cd_prod(a, b)
        mistakes = {"sign flipped": mp(L1) - mp(L0), "change in output": L1 ** a * K ** b - L0 ** a * K ** b,
                    "marginal product at the start": mp(L0)}
    elif typ == "leontief":
        a, b = rng.choice([1, 2, 3, 4]), rng.choice([1, 2, 3, 5])
        kink = b * K / a  # labour stops binding here
        L0 = max(1, int(kink * rng.choice([0.3, 0.5, 0.7])))
        L1 = int(kink * rng.choice([1.5, 2, 3])) + 1
        mp = lambda L: float(a) if a * L < b * K else 0.0  # noqa: E731
        f = f"Q = min({term(a, 'L')}, {term(b, 'K')})"
        mistakes = {"no fall (as if linear)": 0.0, "capital's coefficient": float(b) if b != a else a + 1.0,
                    "change in output": float(min(a * L1, b * K) - min(a * L0, b * K))}
    else:
        a, b = rng.choice([2, 3, 4, 5, 8]), rng.choice([1, 2, 3, 6])
        L0 = rng.randint(4, 40)
        L1 = L0 + rng.randint(2, 20)
        mp = lambda L: float(a)  # noqa: E731
        f = f"Q = {term(a, 'L')} + {term(b, 'K')}"
        mistakes = {"the marginal product itself": float(a), "change in output": float(a * (L1 - L0)),
                    "marginal product per worker at the start": a / L0}
    return Draw({"a": a, "b": b, "K": K, "L0": L0, "L1": L1}, {"f": f, "K": num(K), "L0": num(L0), "L1": num(L1)},
                mp(L0) - mp(L1), f"MP_L({L0}) - MP_L({L1}) = {mp(L0):.4f} - {mp(L1):.4f}", mistakes)


@element("returns_to_scale", types=("cobb-douglas", "leontief", "linear"))
def returns_to_scale(rng, typ):
    """The factor by which output changes when every input is scaled by λ: λ^(a+b) for
    Cobb-Douglas L^a K^b, λ^γ for min(αL, βK)^γ and (αL + βK)^γ."""
    lam = rng.choice([1.5, 2, 3, 4])
    if typ == "cobb-douglas":
        a, b = rng.choice([0.2, 0.3, 0.4, 0.5, 0.6]), rng.choice([0.3, 0.4, 0.5, 0.6, 0.7])
        deg, f = a + b, _cd_prod(a, b)
        mistakes = {"constant returns assumed": float(lam), "multiplied by the exponent sum": lam * (a + b), "labour only": lam ** a}
        params = {"a": a, "b": b}
    else:
        al, be, g = rng.choice([1, 2, 3]), rng.choice([1, 2, 4]), rng.choice([0.5, 0.75, 1.25, 1.5, 2])
        inner = f"min({term(al, 'L')}, {term(be, 'K')})" if typ == "leontief" else f"({term(al, 'L')} + {term(be, 'K')})"
        deg, f = g, f"Q = {inner}^{g:g}"
        mistakes = {"constant returns assumed": float(lam), "multiplied by the exponent": lam * g,
                    "squared the factor": lam ** (2 * g)}
        params = {"alpha": al, "beta": be, "g": g}
    ans = lam ** deg
    return Draw({**params, "lam": lam}, {"f": f, "lam": f"{lam:g}"}, ans,
                f"Q(λL, λK) = λ^{deg:g}·Q = {lam:g}^{deg:g} = {ans:.4f}", mistakes)


@element("cost_minimization_problem", types=("cobb-douglas",))
def cost_minimization_problem(rng, typ):
    a, b = rng.choice([0.25, 0.5, 0.75]), rng.choice([0.25, 0.5])
    w, r, q = rng.choice([10, 15, 20, 25, 40]), rng.choice([5, 8, 10, 20]), rng.choice([10, 20, 50, 100])
    s = a + b
    ans = q ** (1 / s) * (a * r / (b * w)) ** (b / s)
    return Draw({"a": a, "b": b, "w": w, "r": r, "q": q}, {"f": _cd_prod(a, b), "w": money(w), "r": money(r), "q": num(q)}, ans,
                f"L* = Q^(1/(a+b))·(a r/(b w))^(b/(a+b)) = {ans:.2f}",
                {"inverted price ratio": q ** (1 / s) * (b * w / (a * r)) ** (b / s),
                 "ignored the exponents in the ratio": q ** (1 / s) * (r / w) ** (b / s),
                 "capital instead of labour": q ** (1 / s) * (b * w / (a * r)) ** (a / s)})


@element("factor_demand", types=("cobb-douglas",))
def factor_demand(rng, typ):
    A, a = rng.choice([2, 4, 5, 10]), rng.choice([0.25, 0.5, 0.75])
    p, w = rng.choice([2, 4, 5, 10, 20]), rng.choice([5, 10, 15, 20, 25])
    ans = (a * p * A / w) ** (1 / (1 - a))
    return Draw({"A": A, "a": a, "p": p, "w": w}, {"f": f"Q(L) = {A}L^{a:g}", "p": money(p), "w": money(w)}, ans,
                f"p·a·A·L^(a-1) = w → L* = (a p A/w)^(1/(1-a)) = {ans:.2f}",
                {"forgot the exponent": a * p * A / w, "ignored the price": (a * A / w) ** (1 / (1 - a)),
                 "wrong exponent": (a * p * A / w) ** (1 / a)})


@element("supply_elasticity", types=("linear",))
def supply_elasticity(rng, typ):
    d, p0 = rng.choice([1, 2, 3, 5, 10]), rng.randint(2, 20)
    p = p0 + rng.randint(2, 30)
    ans = p / (p - p0)
    return Draw({"d": d, "p0": p0, "p": p}, {"supply": f"Q = {d}(P - {p0})" if d != 1 else f"Q = P - {p0}", "p": money(p)}, ans,
                f"ε_s = (dQ/dP)·P/Q = {d}·{p}/{d * (p - p0)} = {ans:.4f}",
                {"slope only": float(d), "inverted": (p - p0) / p, "used the intercept": p0 / (p - p0)})


@element("shephards_lemma", types=("cobb-douglas",))
def shephards_lemma(rng, typ):
    w, r, q = rng.choice([4, 9, 16, 25, 36]), rng.choice([1, 4, 9, 16]), rng.choice([10, 20, 50, 100])
    ans = q * (r / w) ** 0.5
    return Draw({"w": w, "r": r, "q": q}, {"cost": "C(w, r, Q) = 2Q√(w r)", "w": money(w), "r": money(r), "q": num(q)}, ans,
                f"L = ∂C/∂w = Q√(r/w) = {ans:.2f}",
                {"capital demand": q * (w / r) ** 0.5, "forgot the 2 cancels": 2 * q * (r / w) ** 0.5, "total cost": 2 * q * (w * r) ** 0.5})


@element("input_price_response", types=("cobb-douglas",))
def input_price_response(rng, typ):
    A, a = rng.choice([2, 4, 5, 10]), rng.choice([0.25, 0.5])
    p, w0 = rng.choice([2, 4, 5, 10]), rng.choice([5, 10, 15, 20])
    w1 = w0 + rng.choice([1, 2, 5])
    L = lambda w: (a * p * A / w) ** (1 / (1 - a))  # noqa: E731
    ans = L(w1) - L(w0)
    return Draw({"A": A, "a": a, "p": p, "w0": w0, "w1": w1}, {"f": f"Q(L) = {A}L^{a:g}", "p": money(p), "w0": money(w0), "w1": money(w1)}, ans,
                f"L*(w) = (a p A/w)^(1/(1-a)): {L(w1):.2f} - {L(w0):.2f} = {ans:.2f}",
                {"sign flipped": -ans, "forgot the exponent": a * p * A / w1 - a * p * A / w0, "new level instead of change": L(w1)})


@element("finding_tfp", types=("cobb-douglas",))
def finding_tfp(rng, typ):
    a, b = rng.choice([0.3, 0.4, 0.5, 0.6, 0.7]), rng.choice([0.3, 0.4, 0.5])
    A, L, K = rng.choice([1.5, 2, 2.5, 3, 4]), rng.choice([16, 25, 36, 64, 100]), rng.choice([16, 25, 36, 64, 81])
    q = r2(A * L ** a * K ** b)
    ans = q / (L ** a * K ** b)
    return Draw({"a": a, "b": b, "L": L, "K": K, "Q": q}, {"f": f"Q = A·L^{a:g} K^{b:g}", "L": num(L), "K": num(K), "Q": num(q)}, ans,
                f"A = Q/(L^a K^b) = {q:g}/{L ** a * K ** b:.3f} = {ans:.4f}",
                {"output per worker": q / L, "ignored the exponents": q / (L * K), "swapped the exponents": q / (L ** b * K ** a)})


@element("dynamic_profit_max", types=("capital investment",))
def dynamic_profit_max(rng, typ):
    A, a = rng.choice([2, 4, 5, 10]), rng.choice([0.25, 0.5])
    p, rate, delta = rng.choice([1, 2, 5]), rng.choice([0.04, 0.05, 0.08, 0.1]), rng.choice([0.05, 0.1, 0.15])
    uc = rate + delta
    ans = (a * p * A / uc) ** (1 / (1 - a))
    return Draw({"A": A, "a": a, "p": p, "r": rate, "delta": delta},
                {"f": f"Q(K) = {A}K^{a:g}", "p": money(p), "r": f"{rate * 100:g}%", "delta": f"{delta * 100:g}%"}, ans,
                f"p·MP_K = r + δ → K* = (a p A/(r+δ))^(1/(1-a)) = {ans:.2f}",
                {"ignored depreciation": (a * p * A / rate) ** (1 / (1 - a)), "forgot the exponent": a * p * A / uc,
                 "depreciation only": (a * p * A / delta) ** (1 / (1 - a))})


@element("entry_exit_decisions", types=("quadratic cost",))
def entry_exit_decisions(rng, typ):
    f, c = rng.choice([100, 200, 400, 900, 1600]), rng.choice([1, 2, 4, 0.5])
    ans = 2 * (f * c) ** 0.5
    return Draw({"F": f, "c": c}, {"cost": f"C(q) = {f} + {term(c, 'q')}^2"}, ans,
                f"exit below min AC: q = √(F/c), AC = 2√(F c) = {ans:.2f}",
                {"average cost at q = 1": f + c, "2√F": 2 * f ** 0.5, "√(F c)": (f * c) ** 0.5})


# ==== coverage batch 4: markets ============================================================
@element("aggregation_of_offer_curve", types=("quadratic cost",))
def aggregation_of_offer_curve(rng, typ):
    n, c, p = rng.choice([10, 20, 50, 100, 200]), rng.choice([0.5, 1, 2, 2.5, 5]), rng.randint(10, 80)
    ans = n * p / (2 * c)
    return Draw({"n": n, "c": c, "p": p}, {"n": num(n), "cost": f"C(q) = {term(c, 'q')}^2", "p": money(p)}, ans,
                f"each firm: P = 2cq → q = {p}/{2 * c:g}; market: {n}·{p / (2 * c):.2f} = {ans:.2f}",
                {"one firm's supply": p / (2 * c), "forgot the 2": n * p / c, "price over cost parameter": n * p * c / 2})


def _labor_demand(a, p, A, w):
    return (a * p * A / w) ** (1 / (1 - a))


@element("aggregation_of_labor_demand", types=("cobb-douglas",))
def aggregation_of_labor_demand(rng, typ):
    n1, n2, a = rng.choice([10, 20, 30]), rng.choice([5, 10, 15]), rng.choice([0.25, 0.5])
    A1, A2, p, w = rng.choice([2, 4]), rng.choice([5, 10]), rng.choice([2, 4, 5]), rng.choice([5, 10, 20])
    l1, l2 = _labor_demand(a, p, A1, w), _labor_demand(a, p, A2, w)
    ans = n1 * l1 + n2 * l2
    return Draw({"n1": n1, "n2": n2, "a": a, "A1": A1, "A2": A2, "p": p, "w": w},
                {"n1": num(n1), "n2": num(n2), "f1": f"Q = {A1}L^{a:g}", "f2": f"Q = {A2}L^{a:g}", "p": money(p), "w": money(w)}, ans,
                f"{n1}·{l1:.2f} + {n2}·{l2:.2f} = {ans:.2f}",
                {"ignored the second group": n1 * l1, "one firm of each kind": l1 + l2,
                 "averaged the technologies": (n1 + n2) * _labor_demand(a, p, (A1 + A2) / 2, w)})


@element("aggregation_of_capital_demand", types=("cobb-douglas",))
def aggregation_of_capital_demand(rng, typ):
    n, a = rng.choice([10, 25, 40, 100]), rng.choice([0.25, 0.5])
    A, p, rent = rng.choice([2, 4, 5, 10]), rng.choice([2, 4, 5]), rng.choice([4, 5, 8, 10])
    k = _labor_demand(a, p, A, rent)
    ans = n * k
    return Draw({"n": n, "a": a, "A": A, "p": p, "r": rent}, {"n": num(n), "f": f"Q = {A}K^{a:g}", "p": money(p), "r": money(rent)}, ans,
                f"each firm K = (a p A/r)^(1/(1-a)) = {k:.2f}; total {n}·{k:.2f} = {ans:.2f}",
                {"one firm": k, "forgot the exponent": n * a * p * A / rent, "ignored the output price": n * _labor_demand(a, 1, A, rent)})


@element("aggregation_of_labor_supply", types=("cobb-douglas",))
def aggregation_of_labor_supply(rng, typ):
    n1, n2, alpha, t, w = rng.choice([20, 50, 100]), rng.choice([10, 30, 60]), rng.choice([0.4, 0.5, 0.6]), 24, rng.choice([10, 15, 20, 25])
    v1, v2 = 0, rng.choice([40, 60, 80])
    h1, h2 = alpha * t - (1 - alpha) * v1 / w, alpha * t - (1 - alpha) * v2 / w
    ans = n1 * h1 + n2 * h2
    return Draw({"n1": n1, "n2": n2, "alpha": alpha, "T": t, "w": w, "V1": v1, "V2": v2},
                {"n1": num(n1), "n2": num(n2), "u": f"U(c, l) = c^{alpha:g} l^{r2(1 - alpha):g}", "T": num(t), "w": money(w), "V2": money(v2)}, ans,
                f"{n1}·{h1:.2f} + {n2}·{h2:.2f} = {ans:.2f}",
                {"ignored non-labour income": (n1 + n2) * alpha * t, "one worker of each kind": h1 + h2,
                 "leisure instead of work": n1 * (t - h1) + n2 * (t - h2)})


@element("fixed_factor_aggregation", types=("reservation rents",))
def fixed_factor_aggregation(rng, typ):
    acres = [rng.choice([50, 80, 100, 120, 200]) for _ in range(4)]
    reserve = sorted(rng.sample([10, 20, 30, 40, 50, 60, 70], 4))
    rent = rng.choice([reserve[1], reserve[2], reserve[3]]) + 5
    ans = sum(a for a, r in zip(acres, reserve) if r <= rent)
    desc = "; ".join(f"owner {i + 1}: {a} acres, rents out at {money(r)} or more" for i, (a, r) in enumerate(zip(acres, reserve)))
    return Draw({"acres": acres, "reserve": reserve, "rent": rent}, {"owners": desc, "rent": money(rent)}, float(ans),
                f"sum of the acres whose reservation rent ≤ {rent} = {ans}",
                {"all land": float(sum(acres)), "only the cheapest owner": float(acres[0]),
                 "excluded the marginal owner": float(ans - [a for a, r in zip(acres, reserve) if r <= rent][-1])})


@element("factor_shares_equilibrium", types=("cobb-douglas",))
def factor_shares_equilibrium(rng, typ):
    a, y = rng.choice([0.3, 0.4, 0.6, 0.65, 0.7]), rng.choice([1000, 5000, 20000, 100000])
    ans = a * y
    return Draw({"a": a, "Y": y}, {"f": f"Q = A·L^{a:g} K^{r2(1 - a):g}", "Y": money(y)}, ans,
                f"w·L = p·MP_L·L = a·pQ = {a:g}·{y} = {ans:.2f}",
                {"capital's share": (1 - a) * y, "equal split": y / 2, "whole output": float(y)})


@element("tfp_shocks", types=("linear demand",))
def tfp_shocks(rng, typ):
    a, b, n, w = rng.choice([200, 500, 1000]), rng.choice([1, 2, 5]), rng.choice([10, 20, 50]), rng.choice([10, 20, 40])
    A0 = rng.choice([1, 2])
    A1 = A0 + rng.choice([1, 2])
    s = lambda A: n * A ** 2 / (2 * w)  # noqa: E731  market supply slope: Q = n·A²P/(2w)
    price = lambda A: a / (b + s(A))  # noqa: E731
    ans = price(A1) - price(A0)
    return Draw({"a": a, "b": b, "n": n, "w": w, "A0": A0, "A1": A1},
                {"demand": f"Q = {a} - {term(b, 'P')}", "n": num(n), "A0": num(A0), "A1": num(A1), "w": money(w)}, ans,
                f"firm supply q = A²P/(2w); P* = a/(b + nA²/(2w)): {price(A1):.3f} - {price(A0):.3f} = {ans:.3f}",
                {"sign flipped": -ans, "new price level": price(A1),
                 "ignored the number of firms": a / (b + A1 ** 2 / (2 * w)) - a / (b + A0 ** 2 / (2 * w))})


@element("elastic_inelastic_supply", types=("perfectly inelastic supply", "perfectly elastic supply"))
def elastic_inelastic_supply(rng, typ):
    """A demand shift against a vertical supply (fixed quantity S: only the price moves, by
    shift/b) or a horizontal supply (price fixed at c: only the quantity moves, by the shift)."""
    b, shift = rng.choice([0.5, 1, 2, 4, 5]), rng.choice([10, 20, 40, 60, 90])
    if typ == "perfectly inelastic supply":
        S = rng.choice([100, 200, 400, 600])
        a = S + b * rng.randint(10, 80)
        ans = shift / b
        return Draw({"a": a, "b": b, "S": S, "shift": shift, "ask": "price"},
                    {"demand": f"Q_d = {a:g} - {term(b, 'P')}", "supply": f"fixed at Q_s = {S} units whatever the price",
                     "shift": num(shift), "question": "the equilibrium price rise"}, ans,
                    f"Q = {S} stays; {a:g} + {shift} - {b:g}P = {S} → ΔP = {shift}/{b:g} = {ans:.2f}",
                    {"the quantity change": float(shift) if float(shift) != ans else shift * 2.0, "no change": 0.0,
                     "multiplied by the slope": shift * b, "half the shift over the slope": shift / (2 * b)})
    c = rng.randint(5, 60)
    a = b * c + rng.randint(20, 300)
    ans = float(shift)
    return Draw({"a": a, "b": b, "c": c, "shift": shift, "ask": "quantity"},
                {"demand": f"Q_d = {a:g} - {term(b, 'P')}", "supply": f"perfectly elastic at a price of {money(c)}",
                 "shift": num(shift), "question": "the equilibrium quantity rise"}, ans,
                f"P stays at {c}; Q rises by the whole shift, {shift}",
                {"price change over the slope": shift / b if shift / b != shift else shift / 2, "no change": 0.0,
                 "half the shift": shift / 2, "shift times the slope": shift * b if b != 1 else shift * 3})


# ==== coverage batch 5: welfare =============================================================
def _exchange(rng):
    a1, a2 = rng.choice([0.3, 0.4, 0.5, 0.6]), rng.choice([0.3, 0.5, 0.7])
    ex1, ey1, ex2, ey2 = rng.choice([10, 20, 40]), rng.choice([10, 30, 50]), rng.choice([20, 30, 60]), rng.choice([20, 40, 80])
    return a1, a2, ex1, ey1, ex2, ey2


@element("welfare_theorem_1", types=("exchange economy",))
def welfare_theorem_1(rng, typ):
    a1, a2, ex1, ey1, ex2, ey2 = _exchange(rng)
    px = (a1 * ey1 + a2 * ey2) / ((1 - a1) * ex1 + (1 - a2) * ex2)
    x1 = a1 * (px * ex1 + ey1) / px
    return Draw({"a1": a1, "a2": a2, "ex1": ex1, "ey1": ey1, "ex2": ex2, "ey2": ey2},
                {"u1": _cd(a1, r2(1 - a1)), "u2": _cd(a2, r2(1 - a2)), "e1": f"({ex1}, {ey1})", "e2": f"({ex2}, {ey2})"}, x1,
                f"p_x = Σa_i e_yi / Σ(1-a_i) e_xi = {px:.4f}; x1 = a1(p_x e_x1 + e_y1)/p_x = {x1:.2f}",
                {"endowment kept": float(ex1), "equal split of good x": (ex1 + ex2) / 2, "prices fixed at 1": a1 * (ex1 + ey1),
                 "consumer 2's allocation": ex1 + ex2 - x1})


@element("welfare_theorem_2", types=("exchange economy",))
def welfare_theorem_2(rng, typ):
    a = rng.choice([0.3, 0.4, 0.5, 0.6])
    ex1, ey1, ex2, ey2 = rng.choice([10, 20, 40]), rng.choice([10, 30, 50]), rng.choice([20, 30, 60]), rng.choice([20, 40, 80])
    X, Y = ex1 + ex2, ey1 + ey2
    share = rng.choice([0.3, 0.4, 0.5, 0.6, 0.7])
    target = share * X
    px = a * Y / ((1 - a) * X)
    transfer = px * target / a - (px * ex1 + ey1)
    return Draw({"a": a, "ex1": ex1, "ey1": ey1, "ex2": ex2, "ey2": ey2, "target": target},
                {"u": _cd(a, r2(1 - a)), "e1": f"({ex1}, {ey1})", "e2": f"({ex2}, {ey2})", "target": num(r2(target))}, transfer,
                f"p_x = aY/((1-a)X) = {px:.4f}; T = p_x·x1*/a - (p_x e_x1 + e_y1) = {transfer:.2f}",
                {"sign flipped": -transfer, "transferred the good-x gap": target - ex1, "prices fixed at 1": target / a - (ex1 + ey1)})


@element("capital_market_distortions", types=("capital tax",))
def capital_market_distortions(rng, typ):
    A, a, p = rng.choice([2, 4, 5]), rng.choice([0.25, 0.5]), rng.choice([2, 4, 5])
    rent, tau = rng.choice([4, 5, 8, 10]), rng.choice([0.1, 0.2, 0.25, 0.5])
    k0, k1 = _labor_demand(a, p, A, rent), _labor_demand(a, p, A, rent * (1 + tau))
    ans = k0 - k1
    return Draw({"A": A, "a": a, "p": p, "r": rent, "tau": tau},
                {"f": f"Q = {A}K^{a:g}", "p": money(p), "r": money(rent), "tau": f"{tau * 100:g}%"}, ans,
                f"K(r) - K(r(1+τ)) = {k0:.2f} - {k1:.2f} = {ans:.2f}",
                {"sign flipped": -ans, "proportional cut τ·K": tau * k0, "forgot the exponent": a * p * A / rent - a * p * A / (rent * (1 + tau))})


@element("efficient_surplus", types=("linear",))
def efficient_surplus(rng, typ):
    b, d, p = rng.choice([1, 2, 4]), rng.choice([1, 2, 3]), rng.randint(10, 50)
    a = (b + d) * p
    q = d * p
    ans = 0.5 * q * (a / b)
    return Draw({"a": a, "b": b, "d": d}, {"demand": f"Q_d = {a} - {term(b, 'P')}", "supply": f"Q_s = {term(d, 'P')}"}, ans,
                f"Q* = {q}, P* = {p}; CS + PS = ½·{q}·({a / b:g} - 0) = {ans:.2f}",
                {"consumer surplus only": 0.5 * q * (a / b - p), "producer surplus only": 0.5 * q * p, "rectangle": q * a / b})


@element("labor_supply_distortions", types=("labour income tax",))
def labor_supply_distortions(rng, typ):
    alpha, t, w = rng.choice([0.4, 0.5, 0.6]), rng.choice([24, 60, 80]), rng.choice([10, 15, 20, 25])
    v, tau = rng.choice([50, 100, 150]), rng.choice([0.1, 0.2, 0.3])
    h = lambda wage: alpha * t - (1 - alpha) * v / wage  # noqa: E731
    if h(w * (1 - tau)) <= 1:
        return None  # not an interior solution after the tax: draw again
    ans = h(w) - h(w * (1 - tau))
    return Draw({"alpha": alpha, "T": t, "w": w, "V": v, "tau": tau},
                {"u": f"U(c, l) = c^{alpha:g} l^{r2(1 - alpha):g}", "T": num(t), "w": money(w), "V": money(v), "tau": f"{tau * 100:g}%"}, ans,
                f"h(w) - h(w(1-τ)) = {h(w):.3f} - {h(w * (1 - tau)):.3f} = {ans:.3f}",
                {"sign flipped": -ans, "proportional cut τ·h": tau * h(w), "ignored non-labour income (no response)": 0.0})


@element("non_distortionary_taxes", types=("lump-sum and per-unit", "land and per-unit"))
def non_distortionary_taxes(rng, typ):
    """Two taxes, one non-distortionary (a lump-sum tax, or a per-unit tax on land in fixed
    supply) and one per-unit tax on a market with sloped supply: the total deadweight loss is the
    second tax's triangle alone. Identifying which tax distorts is the point."""
    b, d, p, t = rng.choice([1, 2, 3, 4]), rng.choice([1, 2, 3, 4]), rng.randint(10, 60), rng.choice([1, 2, 3, 4, 5, 6])
    a = (b + d) * p
    dq = t * b * d / (b + d)
    ans = 0.5 * t * dq
    if typ == "lump-sum and per-unit":
        L = rng.choice([50, 100, 200, 500])
        other = f"a lump-sum tax of {money(L)} on every household"
        wrong = {"counted the lump-sum tax as a loss": ans + L, "doubled: as if the lump-sum tax distorted too": 2 * ans}
        params = {"L": L}
    else:
        S, t2 = rng.choice([100, 200, 500]), rng.choice([2, 5, 10])
        other = f"a tax of {money(t2)} per acre on land, whose supply is fixed at {S} acres"
        wrong = {"a triangle for the land tax too": ans + 0.5 * t2 * t2 * b * d / (b + d),
                 "counted the land tax revenue as a loss": ans + t2 * S}
        params = {"S": S, "t2": t2}
    return Draw({"a": a, "b": b, "d": d, "t": t, **params},
                {"demand": f"Q_d = {a} - {term(b, 'P')}", "supply": f"Q_s = {term(d, 'P')}", "t": money(t), "other": other}, ans,
                f"only the per-unit tax on the sloped market distorts: ½·t·ΔQ = ½·{t}·{dq:.3f} = {ans:.2f}",
                {**wrong, "no deadweight loss at all": 0.0, "forgot the ½": t * dq})
