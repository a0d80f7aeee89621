"""A label section's body as a value a person reads: list items joined by "; ", prose lines by
spaces, SPL's cross-references ("(5.1)") left out; the quote keeps the text as printed."""

from __future__ import annotations

import re

from pipelines.facts.label_dosing import POPULATION
from pipelines.facts.structured import SECTION_REFERENCE, readable


def body_value(text: str, start: int, end: int) -> str:
    """A section body as a value: list items joined by "; ", prose lines by spaces. An item
    ends at a cross-reference ("(5.1)" closes each highlight) or with a line well short of the
    document's full width that has no punctuation asking for more."""
    width = full_width(text)
    marked = SECTION_REFERENCE.sub("\n\x00\n", text[start:end])
    lines = [line.strip() for line in marked.split("\n") if line.strip()]
    joined, item_end = "", False
    for line in lines:
        if line == "\x00":
            item_end = bool(joined)
            continue
        if joined:
            joined += "; " if item_end or POPULATION.match(line) else " "
        joined += line
        item_end = len(line) < 0.8 * width and not re.search(
            r"[,;:(\-–]$|\b(?:and|or|of|the|to|with|a|an|in|for)$", line
        )
    return readable(re.sub(r"[.:]\s*;", lambda m: m.group(0)[0], joined))


def full_width(text: str) -> int:
    """The length of a full line of the document's text (its 95th percentile)."""
    lengths = sorted(len(line) for line in text.split("\n") if line.strip())
    return lengths[int(0.95 * (len(lengths) - 1))] if lengths else 0
