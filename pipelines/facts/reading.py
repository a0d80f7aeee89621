"""What every key-fact reader shares: a Reading (a value and where it stands in the document),
the model's answer cleaned of its wrapping, and verbatim search in quoted text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from pipelines.facts.context import FieldContext
from pipelines.retrieval.evidence import DocumentSentences, Evidence

# How far (characters) around a value its field's cue may stand: "dated as of" ... the date.
CUE_BEFORE_CHARS = 80
CUE_AFTER_CHARS = 40
_NOT_STATED = re.compile(
    r"^(?:not\s+stated|none|n/?a|unknown|no\s+answer|the\s+(?:quote|text|document)\s+does\s+not)",
    re.IGNORECASE,
)
_LEAD_IN = re.compile(r"^(?:answer\s*:\s*|the\s+answer\s+is\s*:?\s*)", re.IGNORECASE)
_CUT_JSON = re.compile(r'^\s*\{\s*"answer"\s*:\s*"([^"\\]*)$')
_QUOTE_MARKS = "\"'“”‘’`"


@dataclass(frozen=True)
class Reading:
    """A field's value: `value` as shown, `normalized` as compared and exported (ISO dates,
    canonical places), and document offsets [start, end) of the words it rests on."""

    value: str
    normalized: str
    start: int
    end: int


def answer_from_reply(reply: str) -> tuple[str, bool]:
    """The answer in the model's reply, and whether the reply was JSON of
    pipelines.facts.prompts.ANSWER_SCHEMA ({"answer": "..."}); any other reply (plain text, JSON
    of another shape) is returned as it is, for cleaned_answer's text parsing. A JSON reply cut
    by the token limit ({"answer": "The laws of the State) gives the words it got to."""
    try:
        value = json.loads(reply)
    except ValueError:
        cut = _CUT_JSON.match(reply)
        return (cut.group(1), False) if cut else (reply, False)
    if isinstance(value, dict) and set(value) == {"answer"} and isinstance(value["answer"], str):
        return value["answer"], True
    return reply, False


def cleaned_answer(answer: str) -> str:
    """The model's answer without its wrapping: the first non-empty line, no "Answer:" lead-in,
    no surrounding quotes or final full stop; "" when it says the quote does not tell."""
    line = next((line.strip() for line in answer.splitlines() if line.strip()), "")
    line = _LEAD_IN.sub("", line).strip().strip(_QUOTE_MARKS).strip()
    if line.endswith(".") and not re.search(r"\b(?:[A-Z][a-z]{0,3}|[A-Z])\.$", line):
        line = line[:-1].rstrip()
    if not line or _NOT_STATED.match(line):
        return ""
    return line


def phrase_pattern(phrase: str) -> re.Pattern[str] | None:
    """A case-insensitive pattern for `phrase` as written, any run of whitespace between its
    words (PDF text breaks lines anywhere); None for a phrase with no word."""
    words = phrase.split()
    if not words:
        return None
    body = r"\s+".join(re.escape(word) for word in words)
    return re.compile(rf"(?<![\w]){body}(?![\w])", re.IGNORECASE)


def find_phrase(phrase: str, sentences: Iterable[Evidence]) -> tuple[Evidence, int, int] | None:
    """The first sentence holding `phrase` verbatim (case and spacing aside), with the phrase's
    document offsets."""
    pattern = phrase_pattern(phrase)
    if pattern is None:
        return None
    for sentence in sentences:
        match = pattern.search(sentence.text)
        if match:
            return sentence, sentence.start_char + match.start(), sentence.start_char + match.end()
    return None


def find_in_document(phrase: str, context: FieldContext) -> tuple[int, int] | None:
    """Document offsets of the first occurrence of `phrase` anywhere in the document."""
    pattern = phrase_pattern(phrase)
    if pattern is None:
        return None
    match = pattern.search(context.document.text)
    return (match.start(), match.end()) if match else None


def cue_position(context: FieldContext, sentence: Evidence, start: int, end: int) -> int | None:
    """Where the field's cue stands near document offsets [start, end) inside `sentence`: 0
    before the value ("Decided June 13, 2013"), 1 only after it ('June 1, 2004 (the "Effective
    Date")'), None nowhere near. 0 for a field without a cue."""
    cue = context.spec.cue
    if cue is None:
        return 0
    lo = max(sentence.start_char, start - CUE_BEFORE_CHARS) - sentence.start_char
    hi = min(sentence.end_char, end + CUE_AFTER_CHARS) - sentence.start_char
    at = start - sentence.start_char
    if re.search(cue, sentence.text[lo:at], re.IGNORECASE):
        return 0
    after = sentence.text[end - sentence.start_char : hi]
    if context.spec.cue_after and re.search(cue, after, re.IGNORECASE):
        return 1
    return None


def has_cue(context: FieldContext, sentence: Evidence, start: int, end: int) -> bool:
    """Whether the field's cue stands near document offsets [start, end) inside `sentence`
    (always true for a field without a cue)."""
    return cue_position(context, sentence, start, end) is not None


def matches_pattern(context: FieldContext, sentence: Evidence) -> bool:
    """Whether `sentence` says what the field's pattern asks (true without a pattern)."""
    pattern = context.spec.pattern
    return pattern is None or re.search(pattern, sentence.text, re.IGNORECASE) is not None


def cut_before(document: DocumentSentences, start: int) -> tuple[int, int] | None:
    """The span of the sentence before the one at `start` when the splitter cut one sentence in
    two there (a blank line inside a clause: the text before it ends without a full stop)."""
    before = document.overlapping(max(0, start - 300), start)
    before = [(s, e) for s, e in before if e <= start]
    if not before:
        return None
    text = document.text[before[-1][0] : before[-1][1]]
    return None if text.rstrip().endswith((".", "!", "?", ";", ":")) else before[-1]
