"""What kind of thing a question asks for, and whether a text holds one: a place, a date, a
period, an amount or names.

A small model often answers "Which state's law governs this agreement?" with a sentence that
names no state ("The agreement is governed by the law of the state."): nothing in it is false,
so the support check (pipelines.answer.check) passes it, yet it does not answer. Reading the
question's own wording ("which state", "when", "how long", "how much", "who") says what the
answer must contain; an answer without it is no answer, and the quote that has one is the
better answer. The cues are ordinary English question forms, not words of any one document.

Questions whose kind cannot be read this way (why, how, what does it say, when may it end)
get None: any answer will do for them. The cues are kept narrow on purpose: a wrong kind would
replace a good answer by a quote.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeVar

from pipelines.retrieval.evidence import Evidence
from pipelines.values.claims import find_dates, find_names, find_numbers
from pipelines.values.durations import find_durations
from pipelines.values.jurisdictions import find_jurisdictions

PLACE, DATE, PERIOD, AMOUNT, NAMES = "place", "date", "period", "amount", "names"

# First match wins: "how many days" is a period before "how many" is an amount.
_CUES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        (PLACE, r"\b(which|what|whose)\s+(\w+\s+){0,3}(state|states|country|countries|"
                r"jurisdiction|jurisdictions|province|provinces)\b|\bgoverning\s+law\b"
                r"|\blaws?\s+(govern|governs|apply|applies)\b|\bgoverned\s+by\b"
                r"|\b(which|what)\s+laws?\b"),
        (PERIOD, r"\bhow\s+long\b|\b(what|which)\s+(\w+\s+){0,3}(term|period|duration)\b"
                 r"|\bhow\s+many\s+(days|weeks|months|years)\b"),
        (DATE, r"\b(what|which)\s+(\w+\s+){0,3}(date|day|year)\b|\bwhen\s+(\w+\s+){0,4}"
               r"(signed|made|dated|executed|entered|effective|decided|issued|approved|filed|"
               r"expire|expires|end|ends|start|starts|begin|begins)\b"),
        (AMOUNT, r"\bhow\s+(much|many)\b|\b(what|which)\s+(\w+\s+){0,3}(amount|price|fee|"
                 r"fees|cost|sum|rate|percentage|dose|dosage)\b"),
        (NAMES, r"^\s*(who|whom)\b|\b(who|whom)\s+(is|are|was|were|signed|issued|decided|"
                r"wrote|owns|pays)\b|\b(which|what)\s+(\w+\s+){0,3}(parties|party|company|"
                r"companies|court|judge|manufacturer|sponsor)\b"),
    )
)  # fmt: skip

T = TypeVar("T", bound=Evidence)


def asked_kind(question: str) -> str | None:
    """The kind of thing `question` asks for, or None when its wording does not say."""
    for kind, pattern in _CUES:
        if pattern.search(question):
            return kind
    return None


def holds(text: str, kind: str | None) -> bool:
    """Whether `text` states a thing of `kind` (always true for None)."""
    if kind is None:
        return True
    if kind == PLACE:
        return bool(find_jurisdictions(text, proper_nouns_only=True))
    if kind == DATE:
        return bool(find_dates(text))
    if kind == PERIOD:
        return bool(find_durations(text))
    if kind == AMOUNT:
        return bool(find_numbers(text, skip=find_dates(text)))
    if kind == NAMES:
        return bool(find_names(text))
    raise ValueError(f"unknown answer kind {kind!r}")


def holding_first(quotes: Sequence[T], kind: str | None) -> list[T]:
    """`quotes` with those that state a thing of `kind` first, each group in its own order."""
    holding = [quote for quote in quotes if holds(quote.text, kind)]
    return holding + [quote for quote in quotes if not holds(quote.text, kind)]
