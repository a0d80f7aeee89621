"""Quotes as the support check reads them: a verbatim sentence and its page, and a quote
joined with the quotes that continue it in the document (a caption or a clause that the
sentence splitter cut in pieces: "ACME LLC," / "Plaintiff," / "v." / "BETA INC."), so that a
role is read across them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pipelines.answer.kind_values import Value

# Quotes this close in the document (whitespace between) are read as one text for roles.
MAX_GAP_CHARS = 3
# A quote grows by its neighbours, one on each side at a time, until it is this long: a caption
# or a clause cut in pieces, not a page.
MAX_CONTEXT_CHARS = 400


class Quoted(Protocol):
    """A quote: a verbatim sentence of the document and the page it starts on."""

    @property
    def text(self) -> str: ...

    @property
    def page(self) -> int: ...


@dataclass(frozen=True)
class Context:
    """A quote with the quotes that continue it in the document (a caption, a clause split
    over sentences), as one text; `offset`: where the quote starts in it; `members`: the
    quotes joined, by index, in document order."""

    text: str
    page: int
    offset: int
    members: tuple[int, ...]


def in_context(quotes: Sequence[Quoted], index: int) -> Context:
    """Quote `index` joined with the quotes right before and after it in the document (those
    with document offsets, whose gap is only whitespace)."""
    quote = quotes[index]
    if getattr(quote, "start_char", None) is None:
        return Context(quote.text, quote.page, 0, (index,))
    spans = sorted(
        (q.start_char, q.end_char, i) for i, q in enumerate(quotes) if hasattr(q, "start_char")
    )
    spans = [span for n, span in enumerate(spans) if n == 0 or span[0] != spans[n - 1][0]]
    at = next(n for n, span in enumerate(spans) if span[0] == quote.start_char)
    first = last = at

    def size() -> int:
        return spans[last][1] - spans[first][0]

    grown = True
    while grown and size() < MAX_CONTEXT_CHARS:
        grown = False
        if first > 0 and 0 <= spans[first][0] - spans[first - 1][1] <= MAX_GAP_CHARS:
            first, grown = first - 1, True
        if last + 1 < len(spans) and 0 <= spans[last + 1][0] - spans[last][1] <= MAX_GAP_CHARS:
            last, grown = last + 1, True
    text, offset = "", 0
    for n in range(first, last + 1):
        if n == at:
            offset = len(text)
        text += quotes[spans[n][2]].text + ("\n" if n < last else "")
    members = tuple(spans[n][2] for n in range(first, last + 1))
    return Context(text, quotes[spans[first][2]].page, offset, members)


def shifted(value: Value, offset: int) -> Value:
    return Value(
        value.kind, value.text, value.key, value.start + offset, value.end + offset, value.negated
    )
