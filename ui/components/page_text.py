"""A page's text as HTML, with the cited passages marked.

Passage offsets point into the document text: the pages joined with a blank line (pipelines'
PAGE_SEPARATOR). `highlight_spans` maps them back onto one page; the text is escaped before any
tag is added, so nothing in a document can become markup.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Protocol

PAGE_SEPARATOR = "\n\n"  # pipelines/documents.py; the UI may not import pipelines

PAGE_STYLE = (
    "white-space:pre-wrap;font-family:Georgia,'Times New Roman',serif;font-size:0.98rem;"
    "line-height:1.55;padding:1rem 1.25rem;border:1px solid rgba(128,128,128,0.35);"
    "border-radius:0.5rem;max-height:32rem;overflow-y:auto;background:rgba(250,250,247,0.6);"
    "color:inherit"
)
MARK_STYLE = "background:#ffe58a;color:#111;padding:0 1px;border-radius:2px"


class PageLike(Protocol):
    number: int
    text: str


class PassageLike(Protocol):
    start_char: int
    end_char: int


def page_start_offsets(pages: Sequence[PageLike]) -> dict[int, int]:
    """Where each page (by number) begins inside the document text."""
    offsets: dict[int, int] = {}
    offset = 0
    for page in sorted(pages, key=lambda p: p.number):
        offsets[page.number] = offset
        offset += len(page.text) + len(PAGE_SEPARATOR)
    return offsets


def highlight_spans(
    page: PageLike, page_start: int, passages: Sequence[PassageLike]
) -> list[tuple[int, int]]:
    """The parts of `page` the passages cover, as merged (start, end) offsets into page.text."""
    page_end = page_start + len(page.text)
    spans = sorted(
        (max(p.start_char, page_start) - page_start, min(p.end_char, page_end) - page_start)
        for p in passages
        if p.start_char < page_end and p.end_char > page_start
    )
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def page_html(text: str, spans: Sequence[tuple[int, int]] = ()) -> str:
    """One line of HTML (no blank line, so Markdown leaves the block alone)."""
    parts: list[str] = []
    cursor = 0
    for start, end in spans:
        parts.append(_escape(text[cursor:start]))
        parts.append(f'<mark style="{MARK_STYLE}">{_escape(text[start:end])}</mark>')
        cursor = end
    parts.append(_escape(text[cursor:]))
    body = "".join(parts) or "<em>(This page has no text.)</em>"
    return f'<div class="longdoc-page" style="{PAGE_STYLE}">{body}</div>'


def _escape(text: str) -> str:
    # <br> instead of newlines: a blank line would end the HTML block and let Markdown in.
    return html.escape(text).replace("\n", "<br>")
