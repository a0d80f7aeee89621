"""Plain data that flows through the pipelines: parsed pages and the passages split from them."""

from __future__ import annotations

from dataclasses import dataclass

# Pages are joined with this to form the document text that passage offsets point into.
PAGE_SEPARATOR = "\n\n"


# Where a page's text came from.
TEXT_LAYER = "text_layer"
OCR = "ocr"


@dataclass(frozen=True)
class PageText:
    """One page's cleaned text. `number` counts from 1, as printed page citations do.

    `source` is TEXT_LAYER or OCR; `ocr_confidence` is the OCR's mean confidence per character
    (0 to 1) on an OCR'd page, None on a text-layer page.
    """

    number: int
    text: str
    source: str = TEXT_LAYER
    ocr_confidence: float | None = None


@dataclass(frozen=True)
class RedactionBox:
    """A dark box drawn over characters that are still in the file (pipelines/ingest/redactions.py):
    its page, its corners in PDF points (origin bottom left) and how many characters it hides."""

    page: int
    left: float
    bottom: float
    right: float
    top: float
    num_chars: int


@dataclass(frozen=True)
class InvisibleText:
    """Characters on a page that a reader of the rendered page cannot see (white on white, tiny,
    render mode 3 or 7, outside the page, clipped away, in a hidden layer): how many, never
    what (pipelines/ingest/redactions.py)."""

    page: int
    num_chars: int


@dataclass(frozen=True)
class ParsedDocument:
    title: str | None
    pages: tuple[PageText, ...]
    was_encrypted: bool = False
    redactions: tuple[RedactionBox, ...] = ()
    # Whether the characters under `redactions`, and the invisible ones, were removed from the
    # pages' text (the default).
    is_hidden_text_removed: bool = True
    invisible_text: tuple[InvisibleText, ...] = ()

    @property
    def ocr_pages(self) -> tuple[int, ...]:
        return tuple(page.number for page in self.pages if page.source == OCR)

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
