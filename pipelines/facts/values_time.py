"""Readers of dates, terms and periods: the model's value must be a date (or period) that the
quote itself writes, next to the field's cue; the rule takes the quoted one nearest the cue."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pipelines.facts.context import FieldContext
from pipelines.facts.reading import (
    Reading,
    cleaned_answer,
    cue_position,
    has_cue,
    matches_pattern,
)
from pipelines.retrieval.evidence import Evidence
from pipelines.values.dates import find_dates
from pipelines.values.durations import find_durations

# "continues in perpetuity", "perpetual", "indefinitely": a term with no end.
_PERPETUAL = re.compile(r"\b(?:perpetu\w*|indefinite(?:ly)?)\b", re.IGNORECASE)


def _accepts(context: FieldContext, sentence: Evidence, start: int, end: int) -> bool:
    if not matches_pattern(context, sentence):
        return False
    return has_cue(context, sentence, start, end) or not context.spec.cue_required


def _dates_in(context: FieldContext, sentences: Iterable[Evidence]) -> list[Reading]:
    """The quoted dates the field accepts: those after their cue first ("Decided June 13"),
    then those before it, then (if the cue is not required) datelines (a date that starts its
    line, under a title), each in the given order."""
    ranked: list[tuple[int, int, Reading]] = []
    for sentence in sentences:
        for mention in find_dates(sentence.text):
            start, end = sentence.start_char + mention.start, sentence.start_char + mention.end
            if not _accepts(context, sentence, start, end):
                continue
            reading = Reading(sentence.text[mention.start : mention.end], mention.iso, start, end)
            position = cue_position(context, sentence, start, end)
            if position is None and not _starts_line(sentence.text, mention.start):
                continue  # a date without its cue counts only as a dateline
            ranked.append((2 if position is None else position, len(ranked), reading))
    return [reading for *_, reading in sorted(ranked, key=lambda item: item[:2])]


def _starts_line(text: str, offset: int) -> bool:
    return not text[text.rfind("\n", 0, offset) + 1 : offset].strip()


def _periods_in(context: FieldContext, sentences: Iterable[Evidence]) -> list[Reading]:
    found = []
    for sentence in sentences:
        for mention in find_durations(sentence.text):
            start, end = sentence.start_char + mention.start, sentence.start_char + mention.end
            if _accepts(context, sentence, start, end) and has_cue(context, sentence, start, end):
                found.append(
                    Reading(sentence.text[mention.start : mention.end], mention.iso, start, end)
                )
    return found


def _perpetual_in(context: FieldContext, sentences: Iterable[Evidence]) -> list[Reading]:
    found = []
    for sentence in sentences:
        for match in _PERPETUAL.finditer(sentence.text):
            start, end = sentence.start_char + match.start(), sentence.start_char + match.end()
            if _accepts(context, sentence, start, end) and has_cue(context, sentence, start, end):
                found.append(Reading(match.group(0), "perpetual", start, end))
    return found


def _rule_order(context: FieldContext) -> list[Evidence]:
    """Opening fields read the document in order (the first cued date of a preamble is its
    date); others read the best-matching sentences first."""
    if context.spec.region == "opening":
        return list(context.sentences)
    return [*context.quotes, *context.ranked_sentences()]


def _model_pick(candidates: list[Reading], wanted: set[str]) -> Reading | None:
    return next((reading for reading in candidates if reading.normalized in wanted), None)


def read_date_model(context: FieldContext, answer: str) -> Reading | None:
    """The model's date, if the quotes write that same date where the field accepts one."""
    wanted = {mention.iso for mention in find_dates(cleaned_answer(answer))}
    return _model_pick(_dates_in(context, context.quotes), wanted) if wanted else None


def read_date_rule(context: FieldContext) -> Reading | None:
    found = _dates_in(context, _rule_order(context))
    return found[0] if found else None


def read_duration_model(context: FieldContext, answer: str) -> Reading | None:
    wanted = {mention.iso for mention in find_durations(cleaned_answer(answer))}
    return _model_pick(_periods_in(context, context.quotes), wanted) if wanted else None


def read_duration_rule(context: FieldContext) -> Reading | None:
    found = _periods_in(context, _rule_order(context))
    return found[0] if found else None


def _term_candidates(context: FieldContext, sentences: list[Evidence]) -> list[Reading]:
    found = []
    for sentence in sentences:
        one = [sentence]
        found += _dates_in(context, one) + _periods_in(context, one) + _perpetual_in(context, one)
    return found


def read_term_model(context: FieldContext, answer: str) -> Reading | None:
    """A term is an end date, a period, or no end at all ("perpetual")."""
    text = cleaned_answer(answer)
    wanted = {m.iso for m in find_dates(text)} | {m.iso for m in find_durations(text)}
    if _PERPETUAL.search(text):
        wanted.add("perpetual")
    return _model_pick(_term_candidates(context, list(context.quotes)), wanted) if wanted else None


def read_term_rule(context: FieldContext) -> Reading | None:
    for sentence in _rule_order(context):
        found = _term_candidates(context, [sentence])
        if found:
            return min(found, key=lambda reading: reading.start)
    return None
