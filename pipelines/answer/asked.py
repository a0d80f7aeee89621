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
from dataclasses import dataclass
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
               r"(signed|made|dated|executed|entered|effective|decided|issued|approved|filed|argued|"
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


# ---- the parts of a question, each with the finer kind the support check reads -------------

COURT, PARTY, DOCKET, OUTCOME, JURISDICTION = "court", "party", "docket", "outcome", "jurisdiction"
DOSE, WARNING, CONTRAINDICATION, INDICATION = "dose", "warning", "contraindication", "indication"
BOXED = "boxed_warning"  # a label's boxed warning: a warning, and only the one in the box
EXPIRY, RENEWAL, OPEN = "expiry", "renewal", "open"
RELIEF = "relief"  # what a party asked a court for: an injunction, a declaratory judgment
# The finer kinds (DATE, PERIOD and AMOUNT are shared with the coarse ones above). In order:
# the first whose cue a clause matches is its kind, so "expiration date" is an expiry before a
# date, "notice period to terminate renewal" a period before a renewal, and "what did the
# court decide" an outcome before a court.
_PART_CUES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        (CONTRAINDICATION, r"\bcontraindicat\w*|\bwho\s+should\s+not\s+(take|use|receive)\b"
                           r"|\bshould\s+not\s+be\s+(used|given|taken)\b"),
        (BOXED, r"\bboxed\s+warning|\bblack[-\s]box"),
        (WARNING, r"\bwarnings?\b|\bprecautions?\b|\bside\s+effects?\b"
                  r"|\badverse\s+(reactions?|effects?|events?)\b"),
        (INDICATION, r"\bindicat(ed|ions?)\b|\b(used|prescribed|approved)\s+(for|to\s+treat)\b"
                     r"|\bwhat\s+does\s+(\w+\s+){1,3}treat\b"),
        (DOSE, r"\bdos(e|es|age|ages|ing)\b|\bhow\s+(much|many|often)\b.*\b(take|taken|give|given|"
               r"administer|administered)\b"),
        (DOCKET, r"\b(docket|case|file)\s+(number|no\b\.?)|\bnumber\s+of\s+the\s+case\b"),
        # Asking words only beside a court's words: "what did the plaintiff seek in the suit",
        # not "what information may the patient request".
        (RELIEF, r"\bwhat\s+(\w+\s+){0,2}relief\b|\b(move|moved)\s+for\b"
                 r"|\b(seek|seeks|sought|seeking|request|requests|requested|ask|asks|asked|"
                 r"pray|prayed)\b.*\b(courts?|suit|sued|sue|sues|complaint|motion|petition|"
                 r"lawsuit|action|brought)\b"
                 r"|\b(courts?|suit|sued|complaint|motion|petition|lawsuit)\b.*\b(seek|seeks|"
                 r"sought|seeking|request|requests|requested|ask|asks|asked)\b"),
        (OUTCOME, r"\bholding\b|\bwhat\s+did\s+(the\s+)?(\w+\s+){0,2}(decide|hold|rule|order|"
                  r"find|conclude|do)\b|\bhow\s+did\s+(the\s+)?(\w+\s+){0,2}(rule|decide)\b"
                  r"|\boutcome\b|\bdisposition\b|\bresult\s+of\s+the\s+(case|appeal|motion|"
                  r"petition|trial)\b|\b(was|were)\s+(the\s+)?(\w+\s+){0,2}(granted|denied|"
                  r"affirmed|reversed|dismissed|upheld|vacated|remanded)\b|\bdid\s+(she|he|they|"
                  r"it|the\s+\w+)\s+(get|win|obtain|prevail|succeed|receive)\b"
                  r"|\bwho\s+(won|prevailed)\b"),
        (COURT, r"\b(which|what)\s+(?!did\b|does\b|do\b|was\b|is\b|were\b)(\w+\s+){0,2}?"
                r"courts?\b|\bcourt'?s\s+name\b|\bname\s+of\s+the\s+court\b"),
        (JURISDICTION, _CUES[0][1].pattern),
        (EXPIRY, r"\bexpir\w*|\bwhen\s+(\w+\s+){0,4}(end|ends|terminate|terminates)\b"
                 r"|\b(end|termination)\s+date\b|\bhow\s+long\s+(\w+\s+){0,4}(last|lasts|run|"
                 r"runs|remain|remains|continue|continues|in\s+effect|in\s+force)\b"
                 r"|\b(initial\s+)?term\s+of\s+(this|the)\s+(agreement|contract|lease|licen[cs]e)\b"),
        (PERIOD, _CUES[1][1].pattern + r"|\bnotice\s+period\b"),
        (RENEWAL, r"\brenew\w*|\b(automatically|auto)\W*(extend|extends|extended|continue|"
                  r"continues)\b"),
        (DATE, _CUES[2][1].pattern + r"|\beffective\s+date\b"),
        (AMOUNT, _CUES[3][1].pattern + r"|\b(what|which)\s+(\w+\s+){0,3}(royalty|royalties|"
                 r"salary|payment|payments)\b"),
        (PARTY, r"\bparties\b|\bparty\s+to\b|\bbetween\s+whom\b|\b(which|what)\s+(\w+\s+){0,3}"
                r"(company|companies)\b|\bwho\s+(is|are|was|were)\s+the\s+(plaintiffs?|"
                r"defendants?|appellants?|appellees?|petitioners?|respondents?|licensors?|"
                r"licensees?|buyers?|sellers?|landlords?|tenants?|lenders?|borrowers?|"
                r"employers?|employees?|manufacturers?|sponsors?|signatories)\b"),
    )
)  # fmt: skip
# Where a question asks a second thing: ", and does it renew", " and what did the court
# decide", or a second sentence. Only before a question word, so "terms and conditions" stays.
_CLAUSE_BREAK = re.compile(
    r"\?\s+|[,;]?\s+and\s+(?=(?:what|who|whom|which|when|where|why|how|did|does|do|is|are|was|"
    r"were|will|can|may|has|have|if|whether)\b)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class AskedPart:
    """One thing a question asks: its kind and the clause that asks it."""

    kind: str
    clause: str


# "Besides the boxed warning, what warnings ...": what a question sets aside is not asked.
_SET_ASIDE = re.compile(
    r"\b(?:besides|other\s+than|apart\s+from|aside\s+from|except(?:\s+for)?|excluding|"
    r"not\s+counting|in\s+addition\s+to)\s+[^,;?]+(?:[,;]\s*|(?=\?))",
    re.IGNORECASE,
)


def without_set_aside(question: str) -> str:
    """`question` less what it sets aside: "Besides the boxed warning, what warnings does the
    label give?" asks "what warnings does the label give?"."""
    kept = re.sub(r"[\s,;]+(?=[,;?]|$)", "", " ".join(_SET_ASIDE.sub(" ", question).split()))
    return kept.strip() if kept.strip(" ?,;") else question


def asked_parts(question: str) -> tuple[AskedPart, ...]:
    """What `question` asks, one part per clause, in order: "When does it expire, and does it
    renew?" asks an EXPIRY and a RENEWAL. A clause of no kind the cues know is OPEN; two
    clauses of one kind are one part; what the question sets aside ("besides the boxed
    warning") is no part."""
    parts: list[AskedPart] = []
    question = without_set_aside(question)
    for clause in _CLAUSE_BREAK.split(question.strip()):
        clause = clause.strip(" ?.,;")
        if not clause:
            continue
        kind = next((k for k, pattern in _PART_CUES if pattern.search(clause)), OPEN)
        if all((part.kind, _which_date(part)) != (kind, _which_date(clause)) for part in parts):
            parts.append(AskedPart(kind, clause))
    return tuple(parts) or (AskedPart(OPEN, question.strip()),)


# The events a date question may ask about: "when was it argued, and when was it decided?"
# asks two dates, each a part of its own.
_DATE_EVENTS = re.compile(
    r"\b(?:(?P<argued>argued|heard|submitted)|(?P<decided>decided|issued|filed)"
    r"|(?P<effective>effective|start|starts|begin|begins|commence\w*)"
    r"|(?P<made>signed|made|dated|executed|entered))\b",
    re.IGNORECASE,
)


def _which_date(part: AskedPart | str) -> str | None:
    """The event a clause asks the date of, if it names one."""
    clause = part.clause if isinstance(part, AskedPart) else part
    found = _DATE_EVENTS.search(clause)
    return found.lastgroup if found else None
