"""A model's page citations checked against the quotes its answer rests on: "[p. N]" naming a
page that holds none of them is dropped, and when none of the model's citations remains, the
quotes' pages are cited in a "Sources:" line. A small model cites pages it did not read, or
the page of the first quote it was given whatever it answers from."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pipelines.citations import citation_line, parse_citations

# Anything bracketed short enough to be a citation; parse_citations says whether it is one.
_BRACKETED = re.compile(r"\s?[\[(][^\[\]()\n]{1,40}[\])]")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([.,;:])")


def checked_citations(text: str, support_pages: Sequence[int]) -> tuple[str, list[int], int, bool]:
    """(text, cited pages, citations dropped, whether the model's own remain): `text` without
    the citations of pages outside `support_pages`, with a Sources line of `support_pages`
    when none of its own remains."""
    support = set(support_pages)
    kept: list[int] = []
    dropped = 0

    def check(match: re.Match[str]) -> str:
        nonlocal dropped
        pages = parse_citations(match.group(0))
        if not pages:
            return match.group(0)  # not a citation: "(the Licensee)"
        if set(pages) <= support:
            kept.extend(page for page in pages if page not in kept)
            return match.group(0)
        dropped += 1
        return ""

    checked = _SPACE_BEFORE_PUNCTUATION.sub(r"\1", _BRACKETED.sub(check, text)).strip()
    if kept:
        return checked, sorted(kept), dropped, True
    cited = sorted(support)
    return f"{checked}\n\n{citation_line(cited)}", cited, dropped, False
