"""A table row's reply as JSON (a model server's structured output): the schema asked for, the
reply read, and its quote checked against the document before it counts for anything.

Each document of a table is asked on its own (pipelines.collection.table), so a reply is one
row: {"answer": the value, "page": the page it is on, "quote": the document's words that say
it}. `page` comes before `quote` so that a reply cut by the token limit keeps the answer and
the page; what it got to of the quote still finds its sentence. A model that cannot follow a
schema (our engine) answers the same messages in plain text, read as before.

The model's quote is evidence only once the document holds it verbatim
(pipelines.answer.verbatim, as for a quote inside a plain-text answer): the sentence that holds
it goes first among the quotes the answer is judged against, and the row shows that sentence
and its page, never the model's words or its page number. A quote the document does not hold
is judged as the plain-text path judges an answer that quotes it (a made-up quote: the answer
falls back to the best retrieved quote).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipelines.answer.verbatim import VerbatimIndex
from pipelines.retrieval.evidence import DocumentSentences, Evidence

ROW_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "page": {"type": "integer"},
        "quote": {"type": "string"},
    },
    "required": ["answer", "page", "quote"],
    "additionalProperties": False,
}
# A cut quote shorter than this says too little to find its sentence by.
MIN_CUT_QUOTE_WORDS = 4
_STRING = r'"((?:[^"\\]|\\.)*)'
_CUT = re.compile(
    r'^\s*\{\s*"answer"\s*:\s*' + _STRING + r'"\s*(?:,\s*"page"\s*:\s*(\d+)\s*'
    r"(?:,\s*\"quote\"\s*:\s*" + _STRING + r")?)?",
)


@dataclass(frozen=True)
class RowReply:
    answer: str
    page: int | None
    quote: str
    is_cut: bool = False  # cut by the token limit: `quote` may be the start of one


def row_from_reply(reply: str) -> RowReply | None:
    """The row in a JSON reply of ROW_SCHEMA, or in one cut by the token limit after its
    answer; None for any other reply (plain text), which is read as plain text."""
    try:
        value = json.loads(reply)
    except ValueError:
        return _cut_row(reply)
    if not isinstance(value, dict) or set(value) != set(ROW_SCHEMA["required"]):
        return None
    answer, page, quote = value["answer"], value["page"], value["quote"]
    if not (isinstance(answer, str) and isinstance(quote, str)) or isinstance(page, bool):
        return None
    return RowReply(answer, page if isinstance(page, int) else None, quote)


def _cut_row(reply: str) -> RowReply | None:
    match = _CUT.match(reply)
    if match is None:
        return None
    answer, page, quote = match.group(1), match.group(2), match.group(3) or ""
    try:
        answer = json.loads(f'"{answer}"')
        quote = json.loads(f'"{quote}"') if quote else ""
    except ValueError:  # an escape cut in half
        quote = ""
    if len(quote.split()) < MIN_CUT_QUOTE_WORDS:
        quote = ""
    return RowReply(answer, int(page) if page else None, quote, is_cut=True)


@dataclass(frozen=True)
class QuoteCheck:
    """The model's quote against the document: `sentence`, the sentence that holds it (None
    when no single sentence does); `is_made_up`, the document does not hold it at all."""

    sentence: Evidence | None
    is_made_up: bool


def check_quote(
    quote: str, sentences: DocumentSentences, shown: Sequence[Evidence]
) -> QuoteCheck | None:
    """`quote` checked verbatim against the document; None for an empty quote. The sentences
    the prompt showed (`shown`) are looked at first, then every sentence of the document."""
    if not quote.strip():
        return None
    if not VerbatimIndex(sentences.text).holds(quote):
        return QuoteCheck(None, is_made_up=True)
    for evidence in shown:
        if VerbatimIndex(evidence.text).holds(quote):
            return QuoteCheck(evidence, is_made_up=False)
    for start, end in sentences.spans:
        text = sentences.text[start:end]
        if VerbatimIndex(text).holds(quote):
            page = sentences.page_of(start)
            return QuoteCheck(Evidence(text, page, -1, start, end, 0.0), is_made_up=False)
    return QuoteCheck(None, is_made_up=False)  # verbatim, across sentences: not shown


def judged_inputs(
    row: RowReply, written: str, check: QuoteCheck | None, quotes: Sequence[Evidence]
) -> tuple[str, list[Evidence]]:
    """What the answer check reads for a JSON row: the answer (quoting the model's quote where
    the document does not hold it, so the check rejects it as it does in plain text) and the
    quotes, the sentence holding the model's quote first."""
    if check is None:
        return written, list(quotes)
    if check.is_made_up:
        return f'{written} "{" ".join(row.quote.split())}"', list(quotes)
    if check.sentence is None:
        return written, list(quotes)
    held = check.sentence
    rest = [q for q in quotes if (q.start_char, q.end_char) != (held.start_char, held.end_char)]
    return written, [held, *rest]
