"""Cut a long document into sections for hierarchical summarization, at passage boundaries.

Passages already end at paragraph or sentence ends (pipelines.ingest.split), so a section made of whole
passages does too. Sections are packed greedily up to a token budget; a full section ends at the
last passage that closes a paragraph, unless that would leave it less than half full.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipelines.documents import PageText, Passage, document_text

# What a "[p. N]" line costs, in tokens, as an upper bound for common tokenizers.
MARKER_TOKENS = 8
_MIN_FILL_AT_PARAGRAPH_END = 0.5
_PARAGRAPH_END = re.compile(r"[^\S\n]*(\n[^\S\n]*\n|\Z)")


@dataclass(frozen=True)
class Section:
    """Consecutive passages summarized together; pages are the first and last they touch."""

    passages: tuple[Passage, ...]

    def __post_init__(self) -> None:
        if not self.passages:
            raise ValueError("a section needs at least one passage")

    @property
    def first_page(self) -> int:
        return self.passages[0].first_page

    @property
    def last_page(self) -> int:
        return max(passage.last_page for passage in self.passages)

    @property
    def start_char(self) -> int:
        return self.passages[0].start_char

    @property
    def end_char(self) -> int:
        return max(passage.end_char for passage in self.passages)

    @property
    def num_tokens(self) -> int:
        return sum(passage_cost(passage) for passage in self.passages)


def passage_cost(passage: Passage) -> int:
    """Tokens a passage takes in a prompt: its text and a page marker for each page it touches."""
    return passage.num_tokens + MARKER_TOKENS * (passage.last_page - passage.first_page + 1)


def ends_paragraph(text: str, passage: Passage) -> bool:
    """Whether the document text after `passage` is a blank line (or the end of the text)."""
    return _PARAGRAPH_END.match(text, passage.end_char) is not None


def cut_sections(
    pages: Sequence[PageText], passages: Sequence[Passage], max_tokens: int
) -> list[Section]:
    """Sections of whole passages, in order, each within `max_tokens` (by `passage_cost`).

    A passage that alone exceeds the budget becomes a section of its own; the caller must check.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    text = document_text(pages)
    sections: list[Section] = []
    current: list[Passage] = []
    used = 0
    for passage in passages:
        cost = passage_cost(passage)
        # A paragraph-end cut carries passages over, so the next one may still not fit: loop.
        while current and used + cost > max_tokens:
            keep = _cut_point(text, current, max_tokens)
            sections.append(Section(tuple(current[:keep])))
            current = current[keep:]
            used = sum(passage_cost(p) for p in current)
        current.append(passage)
        used += cost
    if current:
        sections.append(Section(tuple(current)))
    return sections


def _cut_point(text: str, current: list[Passage], max_tokens: int) -> int:
    """How many of `current` to close the section with: through the last paragraph end if full enough."""
    filled = 0
    best = len(current)
    for index, passage in enumerate(current, start=1):
        filled += passage_cost(passage)
        if (
            index < len(current)
            and ends_paragraph(text, passage)
            and filled >= _MIN_FILL_AT_PARAGRAPH_END * max_tokens
        ):
            best = index
    if ends_paragraph(text, current[-1]):
        return len(current)
    return best


def halve(section: Section) -> list[Section]:
    """Two sections of about equal tokens, for a section whose real prompt turned out too long."""
    if len(section.passages) < 2:
        return [section]
    total = section.num_tokens
    filled = 0
    cut = len(section.passages) - 1
    for index, passage in enumerate(section.passages[:-1], start=1):
        filled += passage_cost(passage)
        if filled * 2 >= total:
            cut = index
            break
    return [Section(section.passages[:cut]), Section(section.passages[cut:])]
