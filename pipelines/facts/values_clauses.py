"""Readers of what a clause says: the governing law (a jurisdiction from a fixed list, named in
a quoted governing-law sentence), whether a clause type is there ("Yes" only with a quote that
says so), an opinion's disposition, and short extracts whose every word is quoted."""

from __future__ import annotations

import re

from pipelines.facts.context import FieldContext
from pipelines.facts.reading import (
    Reading,
    cleaned_answer,
    cut_before,
    find_phrase,
    matches_pattern,
)
from pipelines.retrieval.evidence import Evidence
from pipelines.values.dispositions import DISPOSITION, disposition_of
from pipelines.values.jurisdictions import find_jurisdictions

# "the laws of the State of", "the law of", "Laws of the Commonwealth of": what introduces the
# governing jurisdiction, so "a Delaware corporation" in the same sentence is not taken for it.
_LAW_OF = re.compile(
    r"\blaws?\s+(?:in\s+force\s+in\s+|of\s+)(?:the\s+)?(?:(?:state|commonwealth|province|"
    r"republic|kingdom|federation|principality|grand\s+duchy|canton)\s+of\s+)?(?:the\s+)?",
    re.IGNORECASE,
)
_LAW_OF_REACH_CHARS = 40
# A sentence that orders the outcome: the court speaking, or the capitalised ruling itself.
_ORDERING = re.compile(
    r"\b(?:we|this\s+court|the\s+court|judgment|order|decision|appeal|petition|is|are|hereby)\b",
    re.IGNORECASE,
)
_MAX_EXTRACT_WORDS = 60
_MAX_EXTRACT_CHARS = 320
_YES = re.compile(r"^\s*yes\b", re.IGNORECASE)
_HEADING_LINE = re.compile(r"^[^a-z\n]{3,80}\n")


# ---- governing law -------------------------------------------------------------------------


def _governing_places(context: FieldContext, sentence: Evidence) -> list[Reading]:
    """Jurisdictions the sentence says govern: those right after "the laws of" first."""
    cut = cut_before(context.document, sentence.start_char)
    said = (context.document.text[cut[0] : cut[1]] if cut else "") + " " + sentence.text
    if not re.search(context.spec.cue or ".", said, re.IGNORECASE):
        return []
    mentions = find_jurisdictions(sentence.text, proper_nouns_only=True)
    after_law = {m.end() for m in _LAW_OF.finditer(sentence.text)}
    first, rest = [], []
    for mention in mentions:
        start, end = sentence.start_char + mention.start, sentence.start_char + mention.end
        reading = Reading(mention.key, mention.key, start, end)
        introduced = any(0 <= mention.start - at <= _LAW_OF_REACH_CHARS for at in after_law)
        (first if introduced else rest).append(reading)
    # A place with no "laws of" before it governs only in a sentence that names one place.
    return first + (rest if not first and len({r.normalized for r in rest}) == 1 else [])


def read_jurisdiction_model(context: FieldContext, answer: str) -> Reading | None:
    """The model's place, if a quoted governing-law sentence names that same place."""
    named = {m.key for m in find_jurisdictions(cleaned_answer(answer))}
    for quote in context.quotes:
        for reading in _governing_places(context, quote):
            if reading.normalized in named:
                return reading
    return None


def read_jurisdiction_rule(context: FieldContext) -> Reading | None:
    for sentence in (*context.quotes, *context.ranked_sentences()):
        places = _governing_places(context, sentence)
        if places:
            return places[0]
    return None


# ---- clause types --------------------------------------------------------------------------


def _clause(context: FieldContext, sentences: list[Evidence]) -> Reading | None:
    pattern = re.compile(context.spec.pattern or "$^", re.IGNORECASE)
    for sentence in sentences:
        match = pattern.search(sentence.text)
        if match:
            start = sentence.start_char + match.start()
            return Reading("Yes", "yes", start, sentence.start_char + match.end())
    return None


def read_clause_model(context: FieldContext, answer: str) -> Reading | None:
    """ "Yes" stands only where a quote says so; a "No" cannot be checked against a quote."""
    if not _YES.match(answer):
        return None
    return _clause(context, list(context.quotes))


def read_clause_rule(context: FieldContext) -> Reading | None:
    return _clause(context, [*context.quotes, *context.ranked_sentences()])


# ---- an opinion's disposition --------------------------------------------------------------


def _outcomes(text: str) -> list[str]:
    seen: list[str] = []
    for match in DISPOSITION.finditer(text):
        outcome = disposition_of(match)
        if outcome not in seen:
            seen.append(outcome)
    return seen


def _ordering_sentences(context: FieldContext) -> list[Evidence]:
    """Sentences that order an outcome, the last in the document first: an opinion ends with
    its disposition."""
    found = []
    for sentence in context.sentences:
        if _outcomes(sentence.text) and (
            _ORDERING.search(sentence.text) or sentence.text.strip().isupper()
        ):
            found.append(sentence)
    return found[::-1]


def _disposition(sentence: Evidence, wanted: set[str] | None) -> Reading | None:
    outcomes = _outcomes(sentence.text)
    if wanted is not None:
        outcomes = [o for o in outcomes if o in wanted]
    if not outcomes:
        return None
    value = " and ".join(outcomes)
    return Reading(value, value, sentence.start_char, sentence.end_char)


def read_disposition_model(context: FieldContext, answer: str) -> Reading | None:
    """The model's outcome, if the opinion's last ordering sentence orders it; the value is
    everything that sentence orders ("modified and affirmed" for "affirmed")."""
    wanted = set(_outcomes(cleaned_answer(answer)))
    ordering = _ordering_sentences(context)
    if not wanted or not ordering:
        return None
    last = ordering[0]
    return _disposition(last, None) if wanted & set(_outcomes(last.text)) else None


def read_disposition_rule(context: FieldContext) -> Reading | None:
    for sentence in _ordering_sentences(context):
        reading = _disposition(sentence, None)
        if reading is not None:
            return reading
    return None


# ---- short extracts ------------------------------------------------------------------------


def read_text_model(context: FieldContext, answer: str) -> Reading | None:
    """The model's extract, if a quote that says what the field asks holds it word for word."""
    text = cleaned_answer(answer)
    if len(text.split()) < 2 or len(text.split()) > _MAX_EXTRACT_WORDS:
        return None
    found = find_phrase(text, [q for q in context.quotes if matches_pattern(context, q)])
    if found is None:
        return None
    _, start, end = found
    value = " ".join(context.document.text[start:end].split())
    return Reading(value, value, start, end)


def _match_to_line_end(context: FieldContext, sentence: Evidence) -> Reading | None:
    match = re.search(context.spec.pattern or "$^", sentence.text, re.IGNORECASE)
    if match is None:
        return None
    line_end = sentence.text.find("\n", match.end())
    end = len(sentence.text) if line_end < 0 else line_end
    start = sentence.start_char + match.start()
    value = " ".join(sentence.text[match.start() : end].split())
    return Reading(value, value, start, sentence.start_char + end)


def read_text_rule(context: FieldContext) -> Reading | None:
    """The best quote that says what the field asks, without a heading line, cut to a few
    hundred characters at a word; a heading alone (no small letter) says nothing."""
    for sentence in (*context.quotes, *context.ranked_sentences()):
        if not matches_pattern(context, sentence):
            continue
        if context.spec.value_is_match:
            return _match_to_line_end(context, sentence)
        if sentence.score <= 0 or not re.search(r"[a-z]{3}", sentence.text):
            continue
        offset = _extract_start(context, sentence)
        body = sentence.text[offset:]
        if len(body) > _MAX_EXTRACT_CHARS:
            cut = body.rfind(" ", 0, _MAX_EXTRACT_CHARS)
            body = body[: cut if cut > 0 else _MAX_EXTRACT_CHARS]
        start = sentence.start_char + offset
        value = " ".join(body.split())
        return Reading(value, value, start, start + len(body))
    return None


def _extract_start(context: FieldContext, sentence: Evidence) -> int:
    """Where an extract of `sentence` begins: after a heading line; in a long sentence (a
    section the splitter could not cut), at the line where the field's pattern first matches."""
    heading = _HEADING_LINE.match(sentence.text)
    offset = heading.end() if heading and len(sentence.text) > heading.end() + 20 else 0
    if len(sentence.text) - offset > _MAX_EXTRACT_CHARS and context.spec.pattern:
        match = re.compile(context.spec.pattern, re.IGNORECASE).search(sentence.text, offset)
        if match:
            offset = sentence.text.rfind("\n", offset, match.start()) + 1 or offset
    return offset
