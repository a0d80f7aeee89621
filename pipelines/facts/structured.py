"""What the structure readers share: a value read from where the document's own layout puts it
(a label's section heading, an opinion's caption and conclusion, a contract's preamble and its
term clause), the verbatim spans it rests on, and a words-for-a-person origin.

A structure reader never guesses: a value is returned only with the document characters it
was read from, and `origin` says where they stand ("caption, p. 1", "section 2 DOSAGE AND
ADMINISTRATION, p. 3", "clause 12.1, p. 9"). extract.py takes such a value before asking the
model, which then has nothing to add for that field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pipelines.retrieval.evidence import DocumentSentences

# A span longer than this is cut (at a word) when it is quoted: the reader sees the part that
# gives the value, not a whole section.
MAX_SPAN_CHARS = 800
# A value read from a long passage shows its first words only; the quote holds the rest.
MAX_VALUE_CHARS = 320
# SPL's cross-references to sections ("(5.1)", "( 2.1 , 2.2 )", "(1.1 to 1.4)"): kept in the
# quote, left out of a value a person reads.
SECTION_REFERENCE = re.compile(
    r"\(\s*\d{1,2}(?:\.\d{1,2})?(?:\s*(?:,|to|and|-|–)\s*\d{1,2}(?:\.\d{1,2})?)*\s*\)"
)


@dataclass(frozen=True)
class Found:
    """A field's value as the document's structure gives it. `spans` are document character
    ranges [start, end) quoted as its evidence, first the one that gives the value; `table`
    holds rows of a value that has several parts (a label's doses per indication and
    population), each a dict of strings plus its own "page", "start_char" and "end_char"."""

    value: str
    normalized: str
    spans: tuple[tuple[int, int], ...]
    origin: str
    table: tuple[dict[str, Any], ...] = field(default=())


def origin_on_page(where: str, sentences: DocumentSentences, start: int) -> str:
    """`where` with the page of document offset `start`: "caption, p. 1"."""
    return f"{where}, p. {sentences.page_of(start)}"


def clipped(text: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) without its surrounding whitespace, at most MAX_SPAN_CHARS long (cut at a
    word, after a full stop where one is near)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end - start <= MAX_SPAN_CHARS:
        return start, end
    limit = start + MAX_SPAN_CHARS
    stop = max(text.rfind(". ", start, limit), text.rfind(".\n", start, limit))
    if stop > start + MAX_SPAN_CHARS // 2:
        return start, stop + 1
    space = text.rfind(" ", start, limit)
    return start, space if space > start else limit


def readable(text: str, *, max_chars: int = MAX_VALUE_CHARS) -> str:
    """Quoted text as a value: section cross-references left out, whitespace collapsed, cut at
    a sentence or word end near `max_chars`."""
    text = " ".join(SECTION_REFERENCE.sub(" ", text).split())
    text = re.sub(r"\s+([.,;:)])", r"\1", text)
    text = re.sub(r";+\)", ")", re.sub(r"\(\s+", "(", text)).strip(" ;,")
    if len(text) <= max_chars:
        return text
    stop = text.rfind(". ", 0, max_chars)
    if stop > max_chars // 2:
        return text[: stop + 1]
    space = text.rfind(" ", 0, max_chars)
    return text[: space if space > 0 else max_chars].rstrip(" ,;:") + " …"


def line_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each non-blank line of text[start:end], without surrounding spaces."""
    spans = []
    offset = start
    for line in text[start:end].split("\n"):
        stripped = line.strip()
        if stripped:
            at = offset + line.index(stripped)
            spans.append((at, at + len(stripped)))
        offset += len(line) + 1
    return spans
