"""Page citations in answer text: read "[p. N]", "[pp. N-M]", "(p. N)" and similar; write them."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

# A bracketed or parenthesised citation: p./pp./page/pages, then numbers, ranges and lists.
_CITATION = re.compile(
    r"[\[(]\s*(?:pp?|pages?)\s*\.?\s*"
    r"(\d+(?:\s*[-–—]\s*\d+)?(?:\s*(?:,|;|and|&)\s*(?:pp?\.?\s*)?\d+(?:\s*[-–—]\s*\d+)?)*)"
    r"\s*[\])]",
    re.IGNORECASE,
)
_ITEM = re.compile(r"(\d+)(?:\s*[-–—]\s*(\d+))?")
# A range wider than this is not a citation anyone can check; only its ends are kept.
MAX_RANGE_PAGES = 50


def parse_citations(text: str) -> list[int]:
    """Cited page numbers in order of first mention, without repeats; ranges are expanded."""
    pages: list[int] = []
    seen: set[int] = set()
    for match in _CITATION.finditer(text):
        for item in _ITEM.finditer(match.group(1)):
            first = int(item.group(1))
            last = int(item.group(2)) if item.group(2) else first
            if last < first:
                first, last = last, first
            if last - first + 1 > MAX_RANGE_PAGES:
                numbers: Iterable[int] = (first, last)
            else:
                numbers = range(first, last + 1)
            for number in numbers:
                if number not in seen:
                    seen.add(number)
                    pages.append(number)
    return pages


def remove_citations(text: str) -> str:
    """`text` with each citation blanked out by as many spaces, so offsets stay the same."""
    return _CITATION.sub(lambda match: " " * len(match.group(0)), text)


def keep_pages(pages: Iterable[int], allowed: Collection[int]) -> list[int]:
    """`pages` that are in `allowed` (the pages of the document or of the passages given)."""
    return [page for page in pages if page in allowed]


def format_citations(pages: Iterable[int]) -> str:
    """ "[p. 3], [pp. 5-7]" for pages 3, 5, 6, 7: sorted, runs of consecutive pages joined."""
    ordered = sorted(set(pages))
    runs: list[tuple[int, int]] = []
    for page in ordered:
        if runs and page == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], page)
        else:
            runs.append((page, page))
    return ", ".join(f"[p. {a}]" if a == b else f"[pp. {a}-{b}]" for a, b in runs)


def citation_line(pages: Iterable[int]) -> str:
    """The line appended to an answer whose model cited no page: "Sources: [p. 3], [p. 7]"."""
    return f"Sources: {format_citations(pages)}"
