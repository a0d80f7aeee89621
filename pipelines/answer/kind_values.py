"""The values of each asked kind (pipelines.answer.asked) that a text states, each with a key
that compares equal however it is written: a place by its canonical name, a date by its
readings, a period in days or months, a dose by amount, unit and how often (where written), a docket number without its
spaces, a name by its words, an outcome by its past form and whether it is negated.

Answers and quotes are read the same way, so "is the value of the answer in the quote" is a
comparison of keys. Generic words are never a party: "the Parties", "the Company" and "the
Agreement" name no one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from pipelines.answer.asked import (
    AMOUNT,
    COURT,
    DATE,
    DOCKET,
    DOSE,
    EXPIRY,
    JURISDICTION,
    OUTCOME,
    PARTY,
    PERIOD,
    RELIEF,
    RENEWAL,
)
from pipelines.answer.rejections import NEGATION
from pipelines.values.claims import find_dates, find_names, find_numbers, normalise_word
from pipelines.values.dispositions import DISPOSITION, disposition_of
from pipelines.values.dockets import DOCKET_OR_ONE_PIECE, docket_key
from pipelines.values.durations import find_durations
from pipelines.values.jurisdictions import find_jurisdictions


@dataclass(frozen=True)
class Value:
    """A value of `kind` stated at [start, end) of a text."""

    kind: str
    text: str
    key: frozenset
    start: int
    end: int
    negated: bool = False

    def same_as(self, other: Value) -> bool:
        if self.kind != other.kind:
            return False
        if self.kind == DATE:
            return any(_same_date(a, b) for a in self.key for b in other.key)
        if self.kind == DOSE:
            return any(_same_dose(a, b) for a in self.key for b in other.key)
        return bool(self.key & other.key)


def _same_dose(a: tuple, b: tuple) -> bool:
    """Two doses agree in amount and unit, and in how often where both say it: "500 mg every 8
    hours" is not "500 mg every 12 hours", but "500 mg" may be either."""
    (amount_a, unit_a, hours_a), (amount_b, unit_b, hours_b) = a, b
    return (
        amount_a == amount_b
        and unit_a == unit_b
        and (hours_a is None or hours_b is None or hours_a == hours_b)
    )


def _same_date(a: tuple, b: tuple) -> bool:
    """Two readings of a date agree: "December 19" is "December 19, 2018"; a year or day left
    out by one of them is not a difference."""
    (year_a, month_a, day_a), (year_b, month_b, day_b) = a, b
    return (
        month_a == month_b
        and (day_a is None or day_b is None or day_a == day_b)
        and (year_a is None or year_b is None or year_a == year_b)
    )


# Words that say what a party is, not who: a name made only of them names no one.
GENERIC_NAME_WORDS = frozenset(
    normalise_word(word)
    for word in (
        "party", "parties", "agreement", "agreements", "contract", "document", "documents", "company",
        "companies", "affiliate", "affiliates", "licensor", "licensors", "licensee", "licensees",
        "plaintiff", "plaintiffs", "defendant", "defendants", "appellant", "appellants", "appellee",
        "appellees", "petitioner", "petitioners", "respondent", "respondents", "buyer", "seller",
        "supplier", "customer", "client", "contractor", "consultant", "employer", "employee",
        "landlord", "tenant", "lender", "borrower", "court", "state", "section", "article", "exhibit",
        "schedule", "recitals", "whereas", "witness", "effective", "date", "term", "terms",
        "parties'", "corporation", "inc", "llc", "ltd", "the", "this", "that", "these", "such",
        "each", "both", "any", "all", "other", "and", "distributor", "manufacturer", "sponsor",
        "owner", "trust", "fund", "funds", "trustee", "trustees", "services", "service", "provider",
        "recipient", "discloser", "member", "members", "partner", "partners", "holder", "holders",
        "issuer", "purchaser", "vendor", "subscriber", "user", "users", "government", "federal",
        "united", "states", "law",
    )
)  # fmt: skip
_DOSE = re.compile(
    r"(?<![\w.])(?P<amount>\d+(?:[.,]\d+)?)\s*(?P<unit>mg/kg/day|mg/kg/d|mcg/kg/day|mg/kg|mg/m2|mg/m²|mcg/kg|mg|mcg|µg|"
    r"micrograms?|milligrams?|grams?|g|ml|mL|units?|IU|tablets?|capsules?|puffs?|drops?)"
    r"(?![\w/])",
    re.IGNORECASE,
)
_DOSE_UNITS = {"milligram": "mg", "microgram": "mcg", "µg": "mcg", "gram": "g", "mg/m²": "mg/m2"}
# How often, right after a dose: "every 8 hours", "once daily", "three times a day", "q12h".
_HOW_OFTEN = re.compile(
    r"[\s,]*(?:(?!(?:or|and|to)\b)[A-Za-z][\w-]*[\s,]+){0,3}"
    r"(?:every\s+(?P<every>\d+)(?:\s*(?:to|-|–)\s*\d+)?\s*hours?\b|q\s?(?P<q>\d+)\s?h\b"
    r"|(?P<times>once|twice|two\s+times|three\s+times|four\s+times|[1-4]\s+times)"
    r"\s+(?:a\s+|per\s+|each\s+)?(?:day|daily)\b|(?P<daily>daily|a\s+day|per\s+day)\b)",
    re.IGNORECASE,
)
_TIMES_A_DAY = {"once": 1, "twice": 2, "two": 2, "three": 3, "four": 4}


def _hours_apart(text: str, end: int) -> int | None:
    """Hours between doses as written right after the dose ending at `end`, else None."""
    m = _HOW_OFTEN.match(text, end)
    if m is None:
        return None
    if m.group("every") or m.group("q"):
        return int(m.group("every") or m.group("q"))
    if m.group("times"):
        first = m.group("times").split()[0].lower()
        return 24 // (int(first) if first.isdigit() else _TIMES_A_DAY[first])
    return 24


# Outcomes an order gives, by stem, in their written past form.
_RENEWAL = re.compile(
    r"\brenew\w*|\bextend\w*|\bextension\b|\bsuccessive\b|\bauto[- ]?renew\w*", re.IGNORECASE
)
_AUTOMATIC = re.compile(r"\bautomatic\w*|\bauto[- ]?renew\w*|\bunless\b.{0,80}\bnotice\b", re.I)
# Words a place's own name may carry: "the Laws of the State of New York".
_PLACE_FRAME_WORDS = frozenset(
    {"the", "of", "state", "states", "commonwealth", "province", "republic", "kingdom", "law",
     "laws", "and", "in", "district", "county", "federal", "government", "governing"}
)  # fmt: skip
_CAPITALISED = re.compile(r"\b[A-Z][\w'’&-]*")
_COMPANY_FORM = re.compile(
    r"[\s,]*(?:Inc|Incorporated|LLC|L\.L\.C|Ltd|Limited|Corp|Corporation|Co|LP|L\.P|LLP|"
    r"PLC|plc|AG|GmbH|S\.A|N\.A|B\.V|N\.V|Pty|SE|SAS|S\.p\.A)\b\.?"
)
_COMPANY_NAME = re.compile(
    r"\b((?:[A-Z][\w'’&.-]*\s+){0,5}[A-Z][\w'’&-]*)(?=" + _COMPANY_FORM.pattern + ")"
)
_COMPANY_FORMS = frozenset(
    {"inc", "incorporated", "llc", "ltd", "limited", "corp", "corporation", "co", "lp", "llp",
     "plc", "ag", "gmbh", "sa", "na", "bv", "nv", "pty", "se", "sas", "spa"}
)  # fmt: skip
_SMALL_WORDS = frozenset({"in", "the", "of", "for", "and", "at"})
# How near before a word "not" must be to negate it ("did not affirm", "was not granted").
NEGATION_REACH_CHARS = 24


def _negated_at(text: str, start: int) -> bool:
    before = text[max(0, start - NEGATION_REACH_CHARS) : start]
    return NEGATION.search(before) is not None


def jurisdictions(text: str) -> list[Value]:
    """Places named as places: not inside a longer name ("Federal Reserve Bank of New York",
    "the China JV Agreement", "the United States Constitution")."""
    runs = [(span.start, span.end) for span in find_names(text)]
    found = []
    for m in find_jurisdictions(text, proper_nouns_only=True):
        run = next(((a, b) for a, b in runs if a <= m.start and m.end <= b), None)
        if run is not None and not text[run[0] : run[1]].isupper():
            rest = _words(text[run[0] : m.start] + " " + text[m.end : run[1]])
            if rest - _PLACE_FRAME_WORDS:
                continue
        found.append(Value(JURISDICTION, text[m.start : m.end], frozenset({m.key}), m.start, m.end))
    return found


def dates(text: str) -> list[Value]:
    return [
        Value(DATE, text[s.start : s.end], frozenset(s.values), s.start, s.end)
        for s in find_dates(text)
    ]


def periods(text: str) -> list[Value]:
    found = []
    for m in find_durations(text):
        # One key for "12 months" and "one year", "14 days" and "two weeks".
        if m.unit in ("day", "week"):
            key = (m.amount * (7 if m.unit == "week" else 1), "day")
        else:
            key = (m.amount * (12 if m.unit == "year" else 1), "month")
        found.append(Value(PERIOD, text[m.start : m.end], frozenset({key}), m.start, m.end))
    return found


def amounts(text: str) -> list[Value]:
    return [
        Value(AMOUNT, text[s.start : s.end], frozenset(s.values), s.start, s.end)
        for s in find_numbers(text, skip=find_dates(text))
    ]


def doses(text: str) -> list[Value]:
    found = []
    for m in _DOSE.finditer(text):
        unit = m.group("unit").lower().rstrip("s") if len(m.group("unit")) > 2 else m.group("unit")
        unit = _DOSE_UNITS.get(unit.lower(), unit.lower())
        key = (Decimal(m.group("amount").replace(",", ".")), unit, _hours_apart(text, m.end()))
        found.append(Value(DOSE, m.group(0), frozenset({key}), m.start(), m.end()))
    return found


def dockets(text: str) -> list[Value]:
    found = []
    for m in DOCKET_OR_ONE_PIECE.finditer(text):
        number = docket_key(m.group("number")).lower()
        found.append(Value(DOCKET, m.group(0).strip(), frozenset({number}), m.start(), m.end()))
    return found


def names(text: str) -> list[Value]:
    """Names of someone: capitalised runs with a word that is not generic, not a place alone,
    and either of two words or more ("Jane Roe", "Acme Holdings") or followed by a company
    form ("Acme, Inc."): a lone capitalised word is a defined term ("Improvements") as often
    as a name."""
    places = {word for m in find_jurisdictions(text) for word in _words(text[m.start : m.end])}
    spans = [(span.start, span.end) for span in find_names(text)]
    # A company's name at a sentence's start ("Parties: Acme, Inc."), which find_names leaves
    # out as an ordinary capitalised word.
    spans += [
        m.span(1)
        for m in _COMPANY_NAME.finditer(text)
        if not any(a < m.end(1) and m.start(1) < b for a, b in spans)
    ]
    found = []
    for start, end in sorted(spans):
        written = text[start:end]
        words = _words(written) - GENERIC_NAME_WORDS - _COMPANY_FORMS
        if not words or words <= places or "court" in _words(written):
            continue  # no one, a place, or a court ("United States Court of Appeals")
        if len(_CAPITALISED.findall(written)) < 2 and not _COMPANY_FORM.match(text, end):
            continue
        found.append(Value(PARTY, written, words, start, end))
    return found


def courts(text: str) -> list[Value]:
    """Names of a court: a capitalised run holding "Court" and another word that is not generic
    ("Supreme Court of Vermont"; "the court" is none)."""
    found = []
    for span in find_names(text):
        written = text[span.start : span.end]
        words = _words(written) - _SMALL_WORDS
        if "court" in words and len(words) >= 2:
            found.append(Value(COURT, written, words, span.start, span.end))
    return found


def outcomes(text: str) -> list[Value]:
    found = []
    for m in DISPOSITION.finditer(text):
        outcome = disposition_of(m)
        negated = _negated_at(text, m.start())
        found.append(Value(OUTCOME, m.group(0), frozenset({outcome}), m.start(), m.end(), negated))
    return found


# What a party asks a court for, each by one key however written: "seeking to enjoin" and "an
# injunction" are one relief. Ordinary forms of civil and appellate practice.
_RELIEFS = (
    ("injunction", r"enjoin\w*|injunct\w*|restrain\w*\s+order"),
    ("declaratory judgment", r"declaratory\s+(?:judgment|relief)|declaration\s+that"),
    ("damages", r"(?:compensatory\s+|punitive\s+|money\s+|monetary\s+)?damages"),
    ("summary judgment", r"summary\s+judgment"),
    ("dismissal", r"dismiss(?:al|ed)?\b|to\s+dismiss"),
    ("new trial", r"new\s+trial"),
    ("mandamus", r"(?:writ\s+of\s+)?mandamus"),
    ("habeas corpus", r"(?:writ\s+of\s+)?habeas(?:\s+corpus)?"),
    ("certiorari", r"(?:writ\s+of\s+)?certiorari"),
    ("restitution", r"restitution"),
    ("specific performance", r"specific\s+performance"),
    ("attorney's fees", r"attorneys?['’]?\s+fees"),
    ("rescission", r"rescission|rescind\w*"),
    ("stay", r"\bstay\s+of\b|to\s+stay\b"),
    ("vacatur", r"vacatur|to\s+vacate"),
)
_RELIEF = re.compile(
    "|".join(f"(?P<r{i}>\\b(?:{pattern}))" for i, (_, pattern) in enumerate(_RELIEFS)),
    re.IGNORECASE,
)


def reliefs(text: str) -> list[Value]:
    """What a party asks a court for, each with its one key."""
    found = []
    for m in _RELIEF.finditer(text):
        key = _RELIEFS[int(m.lastgroup[1:])][0]
        found.append(Value(RELIEF, m.group(0), frozenset({key}), m.start(), m.end()))
    return found


# A term with no end: "continues in perpetuity", "a perpetual license", "indefinitely".
_NO_END = re.compile(r"\b(?:in\s+perpetuity|perpetu\w*|indefinite(?:ly)?)\b", re.IGNORECASE)


def no_end(text: str) -> list[Value]:
    """Statements that a term has no end, as one value whatever their wording."""
    return [
        Value(
            EXPIRY,
            m.group(0),
            frozenset({"no end"}),
            m.start(),
            m.end(),
            _negated_at(text, m.start()),
        )
        for m in _NO_END.finditer(text)
    ]


def renewals(text: str) -> list[Value]:
    """Statements about renewal: the key says whether it is automatic."""
    found = []
    for m in _RENEWAL.finditer(text):
        automatic = _AUTOMATIC.search(text) is not None
        key = frozenset({"automatic" if automatic else "renewal"})
        found.append(
            Value(RENEWAL, m.group(0), key, m.start(), m.end(), _negated_at(text, m.start()))
        )
    return found


def name_words(text: str) -> frozenset[str]:
    """The words of a name as written, normalised, without connectors and company forms."""
    return _words(text) - _SMALL_WORDS - _COMPANY_FORMS


def _words(text: str) -> frozenset[str]:
    return frozenset(normalise_word(w) for w in re.findall(r"[\w'’.&-]+", text) if w.strip("."))


FINDERS = {
    JURISDICTION: jurisdictions,
    DATE: dates,
    PERIOD: periods,
    AMOUNT: amounts,
    DOSE: doses,
    DOCKET: dockets,
    PARTY: names,
    COURT: courts,
    OUTCOME: outcomes,
    RENEWAL: renewals,
    RELIEF: reliefs,
}


def values_of(kind: str, text: str) -> list[Value]:
    """The values of `kind` that `text` states; an expiry is a date or a period."""
    if kind == EXPIRY:
        return dates(text) + periods(text) + no_end(text)
    finder = FINDERS.get(kind)
    return finder(text) if finder is not None else []
