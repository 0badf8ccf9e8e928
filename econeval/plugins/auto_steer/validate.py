"""Mechanical checks of a template a writer model wrote (auto-STEER's style transfer and
rewording, re-implemented): every written template passes all of them before it is kept, and
each rejection names its rule and why. The rules, in the order they are checked:

- `empty`: no template text could be read from the reply;
- `form`: the writer talking about the task rather than writing a template ("The original
  question was ...", "rewritten", "template", "domain"), quotation marks the gold template does not
  have, more questions than the gold template asks;
- `fields`: exactly the gold template's labeled fields (`{cost}`, `{q}`, ...), none missing, none
  added (a lexicon slot such as `{Subj}` or `{good}`, a `{a|b}` choice, a stray brace are added),
  each in single braces (`{{cost}}` is malformed: the filled question would keep a brace);
- `symbols`: the source's one-letter symbols (the `q` of "for q chairs", the `P` of "where P is the
  price", `x` and `y` naming goods) all kept and none added: a filled function names them;
- `leak`: a number in the text (outside a field) that the gold template's text does not hold: a
  value or an answer written in;
- `perspective`: the perspective's person and pronouns (first person: I/my and no you; second:
  you/your and no I; third person: none of those; a named person: the name, and no pronoun of the
  other gender);
- `domain`: a word of the target domain's vocabulary, and none of another domain's lexicon objects
  that the source named (a transfer that left "furniture maker" in a medical question);
- `kind`: still a question, of the same kind (a quantity or yes/no), naming most of the economic
  terms the gold question names;
- `length`: within bounds of the source's length (0.5× to 2.5× its words, 8 to 160 words);
- `unchanged`: a rewording identical to its source (rewording stage only).

Every gold template rendered by the lexicon into each of its domains and perspectives passes
these checks (tests/test_auto_steer.py): the rules refuse what a writer got wrong, not the
templates' own wording.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ...benchmarks.steer_me.generator import lexicon

RULE_TEXT = {
    "empty": "no template text could be read from the reply",
    "form": "the writer's own words (about the template, quotation marks, several questions), not a template",
    "fields": "not exactly the gold template's labeled fields",
    "symbols": "a one-letter symbol of the source (q, P, x, ...) missing or a new one added",
    "leak": "a number the gold template does not hold (a value or an answer written in)",
    "perspective": "the perspective's person or pronouns not kept",
    "domain": "no word of the target domain, or another domain's objects left",
    "kind": "no question, or a question of another kind",
    "length": "outside 0.5x to 2.5x the source's words (8 to 160)",
    "unchanged": "a rewording identical to its source or to a template already kept",
}
RULES = tuple(RULE_TEXT)
VALIDATOR_VERSION = 5  # 2: the form rule (the writer's own words, quotation marks, several questions); 3: larger domain vocabularies;
# 4: the symbols rule; 5: doubled braces ({{demand}}) are malformed fields
LEXICON_SLOTS = frozenset({"Subj", "subj", "Subj2", "poss", "Poss", "obj", "good", "good2", "product", "seller", "market",
                           "activity", "agent", "female", "male"})
_FIELD = re.compile(r"\{([A-Za-z0-9_]+)\}")
_BRACED = re.compile(r"\{[^{}]*\}")
_NUMBER = re.compile(r"(?<![A-Za-z_])\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")

FIRST = frozenset({"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves", "i'm", "i've", "i'd", "i'll"})
SECOND = frozenset({"you", "your", "yours", "yourself", "yourselves", "you're", "you've", "you'd", "you'll"})
FEMININE = frozenset({"she", "her", "hers", "herself", "she's"})
MASCULINE = frozenset({"he", "him", "his", "himself", "he's"})

# Each domain's vocabulary: its lexicon words (generator.lexicon) and these; a written template
# names at least one (matched as a word prefix, case aside).
DOMAIN_WORDS = {
    "consumer goods": ("consumer", "shop", "store", "retail", "grocer", "supermarket", "household good", "furniture",
                       "clothing", "appliance", "purchase", "customer", "brand", "shoe", "mall", "toy", "kitchen",
                       "groceries", "food", "coffee"),
    "medical": ("medic", "patient", "hospital", "clinic", "doctor", "nurse", "health", "pharma", "drug", "vaccine",
                "therap", "treatment", "surgery", "vitamin", "care", "medicine", "pill", "dentist", "prescription", "physician", "pharmacy",
                "illness", "disease", "insulin", "bandage", "mask"),
    "finance": ("financ", "invest", "bank", "fund", "stock", "bond", "portfolio", "loan", "asset", "broker", "saving",
                "credit", "insur", "wealth", "share", "dividend", "interest", "trader", "trading", "money"),
    "education": ("educat", "student", "school", "universit", "college", "tuition", "textbook", "tutor", "course",
                  "teach", "class", "lecture", "study", "studie", "campus", "exam", "homework", "book", "learn",
                  "pupil", "professor"),
    "technology": ("technolog", "tech", "laptop", "phone", "software", "app", "cloud", "computer", "chip", "device",
                   "gadget", "digital", "electronic", "server", "startup", "internet", "online", "robot", "camera",
                   "headphone", "tablet", "data"),
    "entertainment": ("entertain", "movie", "film", "cinema", "concert", "stream", "music", "theat", "show", "ticket",
                      "game", "festival", "band", "moviegoer", "video", "series", "actor", "album", "song", "podcast",
                      "netflix", "museum"),
    "environmental policy": ("environment", "solar", "recycl", "green", "carbon", "emission", "pollut", "renewable",
                             "electric bicycle", "bicycle", "climate", "energy", "sustainab", "wind", "compost",
                             "waste", "electric car", "heat pump", "conservation"),
    "politics": ("politic", "campaign", "election", "vot", "candidate", "party", "government", "policy", "council",
                 "senat", "legislat", "ballot", "flyer", "rally", "mayor", "parliament", "congress", "poll", "lobby",
                 "donor", "donation"),
    "sports": ("sport", "athlet", "team", "hockey", "tennis", "racket", "running", "gym", "coach", "league", "match",
               "stadium", "training", "fitness", "player", "basketball", "soccer", "football", "baseball", "golf",
               "swim", "ski", "cycl", "marathon", "ball", "jersey", "sneaker", "boot"),
    "gambling": ("gambl", "casino", "bet", "poker", "lottery", "wager", "chip", "slot machine", "jackpot", "odds",
                 "bookmaker", "dice", "roulette", "blackjack", "bingo", "jackpot", "raffle", "horse rac", "token"),
}

# Economic terms: the gold question's (its sentence with the question mark) must mostly be named again.
TERMS = ("average", "marginal", "total", "cost", "profit", "revenue", "price", "quantit", "demand", "supply", "surplus",
         "elastic", "utility", "tax", "labo", "capital", "wage", "income", "consum", "leisure", "share", "premium", "risk",
         "return", "output", "equilibri", "welfare", "deadweight", "loss", "hours", "substitut", "interest", "saving",
         "expect", "budget", "bundle", "rent", "discount", "present value", "worth", "spend", "compensat", "willing",
         "insur", "produc", "hire", "firm", "market", "invest", "wealth", "shift", "change", "fall", "rise", "increase",
         "decrease", "per unit", "units")
_AUX = re.compile(r"^(is|are|does|do|did|will|would|can|could|should|has|have)\b", re.IGNORECASE)


def fields_of(text: str) -> set[str]:
    return set(_FIELD.findall(text))


def labeled_fields(gold_text: str) -> set[str]:
    """A gold template's labeled fields: its slots that the filler fills with drawn values (not the
    lexicon's domain and perspective slots)."""
    return fields_of(gold_text) - LEXICON_SLOTS


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(_BRACED.sub(" ", text))]


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(_BRACED.sub(" ", text))}


_SYMBOL = re.compile(r"(?<![\w{'’])([A-Za-z])(?![\w}'’])")


def symbols(text: str) -> set[str]:
    """The one-letter symbols of a text (not the article a/A nor the pronoun I)."""
    return set(_SYMBOL.findall(_BRACED.sub(" ", text))) - {"a", "A", "I"}


def _question(text: str) -> str:
    """The sentence that asks: the last one ending with a question mark."""
    body = _BRACED.sub("F", text)
    parts = re.split(r"(?<=[.?!;:])\s+", body.strip())
    asks = [p for p in parts if p.rstrip().endswith("?")]
    return asks[-1] if asks else ""


def question_kind(text: str) -> str | None:
    q = _question(text)
    if not q:
        return None
    return "yes/no" if _AUX.match(q.strip()) else "quantity"


def question_terms(text: str) -> set[str]:
    q = _question(text).lower()
    return {t for t in TERMS if re.search(r"\b" + re.escape(t), q)}


def has_term(text: str, term: str) -> bool:
    return re.search(r"\b" + re.escape(term), _BRACED.sub(" ", text).lower().replace("labor", "labour")) is not None


DOMAIN_SLOTS = frozenset({"good", "good2", "product", "seller", "market", "activity", "agent"})


def domain_vocabulary(domain: str) -> tuple[str, ...]:
    lex = lexicon()["domains"][domain]
    own = [domain, lex["agent"], lex["product"], lex["seller"], lex["activity"], *lex["goods"]]
    return tuple(dict.fromkeys(w.lower() for w in own + list(DOMAIN_WORDS.get(domain, ()))))


def _objects(domain: str) -> tuple[str, ...]:
    """A domain's lexicon objects: what a transfer out of it must not leave behind."""
    lex = lexicon()["domains"][domain]
    return tuple(w.lower() for w in (*lex["goods"], lex["product"], lex["seller"]))


@dataclass(frozen=True)
class Target:
    """What a written template must be: the gold template it comes from, its domain, its
    perspective (and the name of a named person), the text it was written from (its source)."""

    gold: str  # the gold template's text (with lexicon slots)
    domain: str
    perspective: str
    source: str  # the text the writer was given (fields as {field})
    name: str | None = None  # a named third person's name
    source_domain: str | None = None  # the domain the source was in
    reword: bool = False  # a rewording: it must differ from its source
    require_domain: bool = True  # False: the domain rule is not applied (a gold rendering of a domain-free template)


@dataclass
class Verdict:
    reasons: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.reasons

    def add(self, rule: str, why: str) -> None:
        self.reasons.append((rule, why))

    def as_list(self) -> list[dict]:
        return [{"rule": r, "why": w} for r, w in self.reasons]


def _shown(words: set[str]) -> str:
    return ", ".join(sorted(w if not w.startswith("i") or w[1:2] not in ("", "'") else "I" + w[1:] for w in words))


def _perspective(words: list[str], text: str, t: Target) -> str | None:
    ws = set(words)
    first, second = ws & FIRST, ws & SECOND
    fem, masc = ws & FEMININE, ws & MASCULINE
    p = t.perspective
    if p == "first person":
        if not first:
            return "first person, but no I, me or my"
        if second:
            return f"first person, but addresses the reader ({_shown(second)})"
        if fem or masc:
            return f"first person, but names a third person ({_shown(fem | masc)})"
        return None
    if p == "second person":
        if not second:
            return "second person, but no you or your"
        bad = sorted(first | fem | masc)
        return f"second person, but uses {_shown(set(bad))}" if bad else None
    bad = sorted(first | second)
    if bad:
        return f"{p}, but uses {_shown(set(bad))}"
    if p == "third person female":
        if masc:
            return f"a woman ({t.name}), but uses {_shown(masc)}"
        if t.name and not re.search(r"\b" + re.escape(t.name) + r"\b", text):
            return f"a woman named {t.name}, but the name is missing"
    if p == "third person male":
        if fem:
            return f"a man ({t.name}), but uses {_shown(fem)}"
        if t.name and not re.search(r"\b" + re.escape(t.name) + r"\b", text):
            return f"a man named {t.name}, but the name is missing"
    if p == "third person anonymous" and (fem or masc):
        return f"an unnamed person, but uses {_shown(fem | masc)}"
    return None


META = re.compile(r"\b(original (?:question|template|sentence)|rewritten|rephrased|reformatted|template|labeled field|"
                  r"domain|perspective|here'?s|here is|this response|variant \d)\b", re.IGNORECASE)
_QUOTES = re.compile(r"[\"“”]")


def validate(text: str | None, t: Target) -> Verdict:
    """Every rule's verdict on a written template (all failures, not only the first)."""
    v = Verdict()
    if not text or not text.strip():
        v.add("empty", "no template text in the reply")
        return v
    meta = sorted({m.group(0).lower() for m in META.finditer(_BRACED.sub(" ", text))} -
                  {m.group(0).lower() for m in META.finditer(_BRACED.sub(" ", t.source + " " + t.gold))})
    forms = []
    if meta:
        forms.append(f"talks about the task ({', '.join(meta[:3])})")
    if _QUOTES.search(text) and not _QUOTES.search(t.gold):
        forms.append("quotation marks")
    if text.count("?") > max(1, t.gold.count("?")):
        forms.append(f"{text.count('?')} questions")
    if forms:
        v.add("form", "; ".join(forms))
    want = labeled_fields(t.gold)
    got = fields_of(text)
    stray = [b for b in _BRACED.findall(text) if not _FIELD.fullmatch(b)] + \
        (["unbalanced brace"] if text.count("{") != text.count("}") else []) + \
        (["doubled braces"] if "{{" in text or "}}" in text else [])
    if got != want or stray:
        parts = []
        if want - got:
            parts.append("missing " + ", ".join(f"{{{f}}}" for f in sorted(want - got)))
        if got - want:
            parts.append("added " + ", ".join(f"{{{f}}}" for f in sorted(got - want)))
        if stray:
            parts.append("malformed " + ", ".join(stray[:3]))
        v.add("fields", "; ".join(parts))
    had, has = symbols(t.source), symbols(text)
    if had != has:
        parts = ([f"missing {', '.join(sorted(had - has))}"] if had - has else []) + \
            ([f"added {', '.join(sorted(has - had))}"] if has - had else [])
        v.add("symbols", "; ".join(parts))
    leaked = sorted(_numbers(text) - _numbers(t.source) - _numbers(t.gold), key=lambda n: (len(n), n))
    if leaked:
        v.add("leak", f"number(s) not in the gold template: {', '.join(leaked[:5])}")
    words = _words(text)
    why = _perspective(words, _BRACED.sub(" ", text), t)
    if why:
        v.add("perspective", why)
    low = " " + " ".join(words) + " "
    vocab = domain_vocabulary(t.domain)
    if not t.require_domain:
        pass
    elif not any(re.search(r"\b" + re.escape(w), low) for w in vocab):
        v.add("domain", f"no word of the {t.domain} domain (e.g. {', '.join(vocab[1:4])})")
    elif t.source_domain and t.source_domain != t.domain:
        left = [w for w in _objects(t.source_domain) if w not in vocab and re.search(r"\b" + re.escape(w) + r"\b", low)]
        if left:
            v.add("domain", f"still names {t.source_domain}'s {', '.join(left)}")
    kind, gold_kind = question_kind(text), question_kind(t.gold)
    if kind is None:
        v.add("kind", "asks no question (no sentence ends with '?')")
    elif gold_kind and kind != gold_kind:
        v.add("kind", f"asks a {kind} question; the gold template asks a {gold_kind} one")
    else:
        terms = question_terms(t.gold)
        missing = sorted(x for x in terms if not has_term(text, x.replace("labor", "labour")))
        if terms and len(missing) > len(terms) - math.ceil(len(terms) * 2 / 3):
            v.add("kind", f"the question no longer names {', '.join(missing)}")
    n, n_src = len(text.split()), len(t.source.split())
    lo, hi = max(8, math.floor(0.5 * n_src)), min(160, math.ceil(2.5 * n_src))
    if not lo <= n <= hi:
        v.add("length", f"{n} words; bounds {lo} to {hi} (the source has {n_src})")
    if t.reword and " ".join(text.split()).lower() == " ".join(t.source.split()).lower():
        v.add("unchanged", "identical to the template it rewords")
    return v
