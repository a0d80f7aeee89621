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


_NOTHING = "The model's summary states nothing that can be checked against the document"
# Shown instead of a checked summary none of whose sentences rests on the document.
NONE_SUPPORTED = (
    "No sentence of the model's summary rests on a passage of the document; each is set apart "
    "below with the reason."
)


def nothing_stated(stats: dict[str, Any] | None) -> str:
    """Why a checked summary shows no sentence of the model's, in plain words: it wrote back
    its instructions (pipelines.prompts.echo left them out), or no full sentence at all."""
    if (stats or {}).get("num_prompt_sentences_dropped"):
        return (
            f"{_NOTHING}: it repeated its own instructions, which are left out, and wrote no "
            "full sentence about the document."
        )
    return f"{_NOTHING}: it wrote no full sentence, only headings or fragments if anything."


def quoted_instead(*, has_lead: bool, has_key_passages: bool) -> str:
    """What the reader has from the document itself when the model's summary gives nothing:
    the key facts and the key passages shown above it (empty when there are neither)."""
    shown = [
        name for name, has in (("key facts", has_lead), ("key passages", has_key_passages)) if has
    ]
    if not shown:
        return ""
    return f"The {' and '.join(shown)} above are quoted from the document itself."


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
