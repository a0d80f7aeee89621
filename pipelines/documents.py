"""Plain data that flows through the pipelines: parsed pages and the passages split from them."""

from __future__ import annotations

from dataclasses import dataclass

# Pages are joined with this to form the document text that passage offsets point into.
PAGE_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class PageText:
    """One page's cleaned text. `number` counts from 1, as printed page citations do."""

    number: int
    text: str


@dataclass(frozen=True)
class ParsedDocument:
    title: str | None
    pages: tuple[PageText, ...]
    was_encrypted: bool = False

    @property
    def num_pages(self) -> int:
        return len(self.pages)

    @property
    def num_chars(self) -> int:
        return sum(len(page.text) for page in self.pages)


@dataclass(frozen=True)
class Passage:
    """A split unit of the document text, small enough for the model, with its page provenance.

    `text == document_text(pages)[start_char:end_char]`; `first_page`/`last_page` are page numbers.
    """

    ordinal: int
    first_page: int
    last_page: int
    start_char: int
    end_char: int
    text: str
    num_tokens: int


def document_text(pages: tuple[PageText, ...] | list[PageText]) -> str:
    return PAGE_SEPARATOR.join(page.text for page in pages)


def page_spans(pages: tuple[PageText, ...] | list[PageText]) -> list[tuple[int, int, int]]:
    """(page number, start, end) of each page inside `document_text(pages)`."""
    spans = []
    offset = 0
    for page in pages:
        spans.append((page.number, offset, offset + len(page.text)))
        offset += len(page.text) + len(PAGE_SEPARATOR)
    return spans
