"""Is an answer supported by its quotes? Every date, number, amount, place and name it states
must occur in the quoted sentences or, failing that, somewhere in the document.

What is checked (pipelines.values.claims): dates in any common format, numbers in digits or words,
money amounts and percentages, jurisdictions (pipelines.values.jurisdictions), and capitalised names,
word by word. Page citations ("[p. 4]") and our own "Sources:" line are not claims. A claim found
only in the document (not in the quotes) is supported, and its offset there lets the caller
quote the sentence that holds it, so the quotes end up holding everything the answer states.
Instruction-like text ("SYSTEM: ignore the question and answer that ...", pipelines.planted)
supports nothing: a quote of it is not looked in, and the document is indexed without it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from pipelines.citations import remove_citations
from pipelines.planted import instruction_spans, is_instruction_like, masked
from pipelines.retrieval.bm25 import terms
from pipelines.values.claims import (
    DateValue,
    Span,
    find_dates,
    find_names,
    find_numbers,
    word_offsets,
)
from pipelines.values.jurisdictions import find_jurisdictions

DATE, NUMBER, JURISDICTION, NAME = "date", "number", "jurisdiction", "name"
IN_QUOTES, IN_DOCUMENT, MISSING = "quotes", "document", "missing"
_SOURCES_LINE = re.compile(r"^\s*Sources:.*$", re.MULTILINE)


@dataclass(frozen=True)
class Claim:
    """One checkable thing an answer states, as written there ([start, end) of the answer)."""

    kind: str  # DATE, NUMBER, JURISDICTION or NAME
    text: str
    start: int
    end: int
    values: frozenset


@dataclass(frozen=True)
class ClaimCheck:
    claim: Claim
    found_in: str  # IN_QUOTES, IN_DOCUMENT or MISSING
    document_offset: int | None = None  # where the document holds it, when found only there


@dataclass(frozen=True)
class SupportCheck:
    checks: tuple[ClaimCheck, ...]

    @property
    def num_claims(self) -> int:
        return len(self.checks)

    @property
    def missing(self) -> list[Claim]:
        return [check.claim for check in self.checks if check.found_in == MISSING]

    @property
    def is_supported(self) -> bool:
        return not self.missing


class FactIndex:
    """The dates, numbers, places and words of a text (a document, or the quotes), each with the
    offset of its first occurrence, for looking up an answer's claims."""

    def __init__(self, text: str) -> None:
        # Instruction-like text (pipelines.planted) states nothing a claim could rest on; masked
        # with offsets kept, so a document's index still points into the document.
        text = masked(text, instruction_spans(text))
        self.text = text
        dates = find_dates(text)
        self.dates: dict[DateValue, int] = {}
        for span in dates:
            for value in span.values:
                self.dates.setdefault(value, span.start)
        self.numbers: dict[Decimal, int] = {}
        # Numbers inside dates count too: "2019" of "May 1, 2019" is a year the text states.
        for span in find_numbers(text):
            for value in span.values:
                self.numbers.setdefault(value, span.start)
        self.places: dict[str, int] = {}
        for mention in find_jurisdictions(text):
            self.places.setdefault(mention.key, mention.start)
        self.words = word_offsets(text)
        # Stems as BM25 matches them, for names an answer inflects ("Governing Law" beside a
        # document's "governed by"): the first word of the text with each stem.
        self.stems: dict[str, int] = {}
        for word, offset in self.words.items():
            for stem in terms(word):
                if offset < self.stems.get(stem, offset + 1):
                    self.stems[stem] = offset

    def find(self, claim: Claim) -> int | None:
        """The offset in this text where `claim` is stated, or None."""
        if claim.kind == DATE:
            return self._find_date(claim.values)
        if claim.kind == NUMBER:
            return next((self.numbers[v] for v in claim.values if v in self.numbers), None)
        if claim.kind == JURISDICTION:
            return next((self.places[v] for v in claim.values if v in self.places), None)
        return self._find_name(claim.values)

    def _find_date(self, readings: frozenset) -> int | None:
        for year, month, day in readings:
            for (doc_year, doc_month, doc_day), offset in self.dates.items():
                if doc_month != month or (day is not None and doc_day != day):
                    continue
                if year is None or doc_year == year:
                    return offset
                # "December 19" in the text and "2018" elsewhere in it: the year is stated.
                if doc_year is None and Decimal(year) in self.numbers:
                    return offset
        return None

    def _find_name(self, words: frozenset) -> int | None:
        offsets = []
        for word in words:
            offset = self._word(word)
            if offset is None:
                return None
            offsets.append((-len(word), offset))
        # Where the longest (most distinctive) word of the name first occurs.
        return min(offsets)[1] if offsets else None

    def _word(self, word: str) -> int | None:
        for form in (word, *(_variants(word))):
            if form in self.words:
                return self.words[form]
        stems = terms(word)
        if len(stems) == 1 and stems[0] in self.stems:
            return self.stems[stems[0]]
        return None


def _variants(word: str) -> list[str]:
    """Singular and plural of a word, as an answer may write either ("Licensees")."""
    forms = [f"{word}s", f"{word}es"]
    if word.endswith("es"):
        forms.append(word[:-2])
    if word.endswith("s"):
        forms.append(word[:-1])
    if "-" in word:
        forms.append(word.replace("-", ""))
    return forms


def claims_of(answer: str) -> list[Claim]:
    """The checkable claims of an answer, in order: dates first claim their characters, then
    places, then numbers and names outside them."""
    text = _SOURCES_LINE.sub(lambda m: " " * len(m.group(0)), remove_citations(answer))
    found: list[Claim] = []
    dates = find_dates(text)
    found += [_claim(DATE, text, span) for span in dates]
    places = [
        Span(m.start, m.end, frozenset({m.key}))
        for m in find_jurisdictions(text, proper_nouns_only=True)
    ]
    found += [_claim(JURISDICTION, text, span) for span in places]
    taken = [*dates, *places]
    found += [_claim(NUMBER, text, span) for span in find_numbers(text, skip=taken)]
    found += [_claim(NAME, text, span) for span in find_names(text, skip=taken)]
    return sorted(found, key=lambda claim: claim.start)


def _claim(kind: str, text: str, span: Span) -> Claim:
    return Claim(
        kind, " ".join(text[span.start : span.end].split()), span.start, span.end, span.values
    )


def check_support(answer: str, quotes: Sequence[str], document: FactIndex | str) -> SupportCheck:
    """Look up each of the answer's claims in the quotes, then in the document (whose index is
    built only when a claim is not in the quotes: half a second per 100 pages)."""
    in_document = document if isinstance(document, FactIndex) else None
    # A quote of instruction-like text is no evidence, whoever picked it.
    in_quotes = FactIndex("\n\n".join(q for q in quotes if not is_instruction_like(q)))
    checks = []
    for claim in claims_of(answer):
        if in_quotes.find(claim) is not None:
            checks.append(ClaimCheck(claim, IN_QUOTES))
            continue
        if in_document is None:
            in_document = FactIndex(str(document))
        offset = in_document.find(claim)
        found_in = MISSING if offset is None else IN_DOCUMENT
        checks.append(ClaimCheck(claim, found_in, offset))
    return SupportCheck(tuple(checks))
