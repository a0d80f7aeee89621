"""Sentences for a stored document that came with a caveat the user must hear about."""

from __future__ import annotations

from collections.abc import Sequence

MAX_LISTED_PAGES = 10


def failed_pages_notice(failed_pages: Sequence[int]) -> str | None:
    """The sentence for pages pypdf could not read (they are stored empty); None when none."""
    if not failed_pages:
        return None
    listed = ", ".join(map(str, failed_pages[:MAX_LISTED_PAGES]))
    if len(failed_pages) > MAX_LISTED_PAGES:
        listed += ", …"
    if len(failed_pages) == 1:
        return (
            f"Page {listed} could not be read and is stored empty; summaries and answers "
            "cannot use it."
        )
    return (
        f"{len(failed_pages)} pages could not be read and are stored empty (pages {listed}); "
        "summaries and answers cannot use them."
    )
