"""A summary's sentences as a reader sees them, the same in the UI and the CLI: each with the
page of the passage it rests on, or why it has none (app may not import pipelines; the statuses
are decided in pipelines/summary/support.py and stored on Summary.sentence_support)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SUPPORTED, UNSUPPORTED, NO_EVIDENCE = "supported", "unsupported", "no_evidence"
NOTES = {
    UNSUPPORTED: "not in the document: {claims}",
    NO_EVIDENCE: "no passage of the document states this",
}


# Shown instead of a summary whose text was checked and holds no statement at all.
NOTHING_STATED = (
    "The model's summary states nothing that can be checked against the document (no full "
    "sentence: a heading or a copied signature block at most). The key passages quote the "
    "document itself."
)


def was_checked(stats: dict[str, Any] | None) -> bool:
    """Whether a summary's sentences were checked when it was made (its stats count them):
    summaries from before the check have none and are shown as written."""
    return "num_summary_sentences" in (stats or {})


@dataclass(frozen=True)
class SentenceView:
    text: str
    status: str
    page: int | None  # the page of its best quote, for a supported sentence
    quotes: list[dict[str, Any]]
    note: str  # why a sentence is set apart; empty for a supported one

    @property
    def is_supported(self) -> bool:
        return self.status == SUPPORTED


def sentence_views(rows: Sequence[dict[str, Any]]) -> list[SentenceView]:
    """The stored rows (Summary.sentence_support) as views, in the summary's order."""
    views = []
    for row in rows:
        status = str(row.get("status", ""))
        quotes = list(row.get("quotes") or ())
        claims = ", ".join(f'"{claim}"' for claim in row.get("missing") or ()) or "a claim"
        views.append(
            SentenceView(
                text=str(row.get("text", "")),
                status=status,
                page=int(quotes[0]["page"]) if quotes and status == SUPPORTED else None,
                quotes=quotes,
                note=NOTES.get(status, "").format(claims=claims),
            )
        )
    return views


def support_line(views: Sequence[SentenceView]) -> str:
    """ "7 of 9 sentences rest on a quoted passage; 2 are set apart." (or all of them)."""
    supported = sum(view.is_supported for view in views)
    if supported == len(views):
        return f"Every sentence ({len(views)}) rests on a quoted passage of the document."
    apart = len(views) - supported
    return (
        f"{supported} of {len(views)} sentences rest on a quoted passage of the document; "
        f"{apart} {'is' if apart == 1 else 'are'} set apart below, not supported by it."
    )
