"""Readers of a contract's parties. A name the model gives counts only where the document
writes it and, where the preamble lists the parties, only as one of them; the rule reads the
layout every preamble shares ("between A, a Delaware corporation ("A"), and B") or, without a
list, the companies the opening gives a defined term ('the Acme Fund, (the "Fund")')."""

from __future__ import annotations

import re

from pipelines.facts.context import FieldContext
from pipelines.facts.reading import (
    Reading,
    cleaned_answer,
    find_in_document,
    find_phrase,
)

MAX_NAME_WORDS = 14
_SMALL_WORDS = frozenset(["of", "for", "the", "and", "in", "at", "to", "on"])
_GENERIC_NAMES = frozenset(
    ["party", "parties", "agreement", "the", "company", "each", "other", "hereto", "both", "all"]
)
# A party's name ends where its description starts: ", a Delaware corporation", " (",
# ", located at", ", as Servicer".
_DESCRIPTION = re.compile(
    r",?\s+(?:a|an)\s+(?=[A-Z\w])|\s*\(|\s*[“\"]|,?\s+(?:located|with\s+(?:its\s+)?(?:principal\s+)?"
    r"offices?|having|organized|incorporated|whose|on\s+behalf|acting|as\s+(?=[A-Z]))\b|,\s*$",
)
_PARTY_LIST_START = re.compile(r"\b(?:by\s+and\s+)?(?:between|among|amongst)\b\s*:?", re.IGNORECASE)
_PARTY_LIST_END = re.compile(
    r"\b(?:WHEREAS|RECITALS|WITNESSETH|W\s?I\s?T\s?N\s?E\s?S\s?S\s?E\s?T\s?H|BACKGROUND|NOW,?\s+THEREFORE|"
    r"PRELIMINARY\s+STATEMENT|Dated|Date|TABLE\s+OF\s+CONTENTS|ARTICLE|Section\s+1|1\.\s)",
)
_MAX_PARTY_LIST_CHARS = 900
# Between parties: a defined term's closing bracket, a role (", as Servicer, Marketing Agent and
# Custodian"), a semicolon, an "and".
_PARTY_SPLIT = re.compile(
    r"[”\"]\s*\)\s*,?|\)\s*,|;|,?\s+as\s+(?:the\s+)?[A-Z][A-Za-z]*(?:[ ,]+(?:and\s+)?[A-Z][A-Za-z]*)*,?"
    r"|,?\s+\band\b\s+(?!/)|\n\s*and\s*\n"
)
# A company's or institution's name, ending in the word that says what it is; and a defined
# term right after a name: 'Acme Widgets, LLC ("Acme")'.
_ENTITY_NAME = re.compile(
    r"(?:[A-Z][\w&'’./-]*,?\s+(?:(?:of|and|for|de|the)\s+)?){0,8}(?:Inc\.?|Incorporated|LLC|"
    r"L\.L\.C\.|Ltd\.?|Limited|Corporation|Corp\.?|Company|Co\.|AG|GmbH|S\.A\.|N\.V\.|B\.V\.|"
    r"plc|PLC|L\.P\.|LP|LLP|Trust|Partnership|Fund|University|Bank|Association|Foundation|"
    r"Institute)(?![\w])"
)
_DEFINED_TERM = re.compile(r",?\s*\(\s*(?:the\s+)?[“\"][^”\"]{1,40}[”\"]")


def capitalised(line: str) -> bool:
    line = re.sub(r"\b[dfa]/[bk]/a\b", " ", line, flags=re.IGNORECASE)  # d/b/a, f/k/a, a/k/a
    words = [w for w in re.findall(r"[A-Za-z][\w'’&.-]*", line) if w.lower() not in _SMALL_WORDS]
    return bool(words) and sum(w[0].isupper() for w in words) >= 0.8 * len(words)


def valid_name(name: str) -> bool:
    words = name.split()
    return (
        0 < len(words) <= MAX_NAME_WORDS
        and name[:1].isupper()
        and name.casefold().strip(" .,") not in _GENERIC_NAMES
        and re.search(r"[A-Za-z]{2}", name) is not None
    )


def _split_answer_names(text: str) -> list[str]:
    text = re.sub(r"^(?:the\s+)?parties(?:\s+to\s+this\s+\w+)?\s+are\s*:?\s*", "", text, flags=re.I)
    pieces = text.split(";") if ";" in text else re.split(r",?\s+and\s+|\s*&\s*", text)
    return [piece.strip().strip(_QUOTES).strip(" ,") for piece in pieces if piece.strip()]


_QUOTES = "\"'“”‘’"


def names_reading(context: FieldContext, names: list[str]) -> Reading | None:
    """The names that occur in the document, kept in the order given, with the span from the
    first to the last of them in the sentence that holds the first."""
    kept, spans = [], []
    for name in names:
        if not valid_name(name) or any(name.casefold() == k.casefold() for k in kept):
            continue
        span = _locate(name, context)
        if span is None and name.endswith("."):  # "Acme LLC." ending the model's sentence
            span = _locate(name.rstrip("."), context)
        if span is None:
            continue
        kept.append(" ".join(context.document.text[span[0] : span[1]].split()))
        spans.append(span)
    if len(kept) < 2:
        return None  # an agreement, a case, has two sides at least
    start = spans[0][0]
    nearby = [end for s, end in spans if 0 <= s - start < 2_000]
    end = max(nearby) if nearby else spans[0][1]
    return Reading("; ".join(kept), "; ".join(kept), start, end)


def _locate(name: str, context: FieldContext) -> tuple[int, int] | None:
    found = find_phrase(name, (*context.quotes, *context.sentences))
    return (found[1], found[2]) if found else find_in_document(name, context)


def _alias_of(name: str, context: FieldContext) -> str | None:
    """The defined term that follows a party's name: 'Acme Widgets, LLC, a Utah company
    ("Acme")' -> "acme"."""
    span = find_in_document(name, context)
    if span is None:
        return None
    after = context.document.text[span[1] : span[1] + 200]
    term = re.search(r"\(\s*(?:the\s+)?[“\"]([^”\"]{1,40})[”\"]", after)
    return term.group(1).casefold() if term else None


def read_parties_model(context: FieldContext, answer: str) -> Reading | None:
    """The model's names that the document writes. Where the preamble lists the parties, only
    its names count: a short form ("Acme" for 'Acme Widgets, LLC ("Acme")') reads as the full
    name, and when the model gives every one of them the value is the preamble's full list."""
    reading = names_reading(context, _split_answer_names(cleaned_answer(answer)))
    if reading is None:
        return None
    preamble = read_parties_rule(context)
    if preamble is None:
        return reading
    full_names = preamble.value.split("; ")
    aliases = {name: _alias_of(name, context) for name in full_names}
    resolved = []
    for name in reading.value.split("; "):
        key = name.casefold()
        match = next(
            (full for full in full_names if key in full.casefold() or aliases[full] == key), None
        )
        resolved.append(match)
    if all(resolved):
        return preamble
    # The preamble lists the parties: a name it does not list (a parent company named in the
    # recitals) is not one.
    names = list(dict.fromkeys(full for full in resolved if full))
    if len(names) < 2:
        return None
    value = "; ".join(names)
    return Reading(value, value, preamble.start, preamble.end)


def _party_list(context: FieldContext) -> tuple[int, str] | None:
    """The opening's list of parties: what follows its first "between" or "among", up to the
    recitals (document offset, text)."""
    for sentence in context.sentences:
        match = _PARTY_LIST_START.search(sentence.text)
        if match is None:
            continue
        begin = sentence.start_char + match.end()
        tail = context.document.text[begin : begin + _MAX_PARTY_LIST_CHARS]
        stop = _PARTY_LIST_END.search(tail)
        return begin, tail[: stop.start()] if stop else tail
    return None


def party_names(listing: str) -> list[str]:
    """Names in a list of parties: each piece between "and"s and defined terms, cut where its
    description starts. "A Inc., a Delaware corporation ("A"), and B LLC" -> [A Inc., B LLC]."""
    names = []
    for piece in _PARTY_SPLIT.split(listing):
        piece = " ".join(piece.split()).lstrip(",;: ")
        piece = re.sub(r"^(?:and|the)\s+", "", piece, flags=re.IGNORECASE)
        cut = _DESCRIPTION.search(piece)
        name = (piece[: cut.start()] if cut else piece).strip(" ,;:")
        if valid_name(name) and capitalised(name) and len(name.split()) <= MAX_NAME_WORDS:
            names.append(name)
    return names


def defined_entity_names(text: str) -> list[str]:
    """Company names given a defined term: 'the Acme Fund, (the "Fund")' -> [Acme Fund]."""
    names = []
    for term in _DEFINED_TERM.finditer(text):
        before = text[max(0, term.start() - 150) : term.start()].rstrip(" ,")
        candidates = [m for m in _ENTITY_NAME.finditer(before) if m.end() == len(before)]
        # One word ("the Fund") names a role, not a company.
        if candidates and len(candidates[0].group(0).split()) > 1:
            names.append(" ".join(candidates[0].group(0).split()).strip(" ,"))
    return names


def read_parties_rule(context: FieldContext) -> Reading | None:
    """The names of the opening's "between A and B" list; without one, the companies that the
    opening gives a defined term."""
    found = _party_list(context)
    if found is not None:
        reading = names_reading(context, party_names(found[1]))
        if reading is not None:
            return reading
    opening = " ".join(sentence.text for sentence in context.sentences)
    return names_reading(context, defined_entity_names(opening))
