"""What an answer's support status says to a person: a short label and one sentence, the same
in the UI and the CLI. (What each status means is decided in pipelines/answer/check.py.)"""

from __future__ import annotations

from collections.abc import Sequence

from app.db.models import SupportStatus

LABELS = {
    SupportStatus.SUPPORTED: "Supported by the quoted text",
    SupportStatus.UNCHECKED: "Nothing in it to check",
    SupportStatus.UNSUPPORTED: "Not supported by the quoted text",
    SupportStatus.QUOTED: "No usable answer: quoted from the document",
    SupportStatus.NO_ANSWER: "No answer found",
}
_NOTES = {
    SupportStatus.SUPPORTED: (
        "Every name, number, date and place in the answer occurs in the quotes or the document."
    ),
    SupportStatus.UNCHECKED: "The answer states no name, number, date or place to check.",
    SupportStatus.UNSUPPORTED: (
        "The model's answer stated {claims}, which the document does not contain; the best "
        "quote is shown instead."
    ),
    SupportStatus.QUOTED: (
        "The model's answer was empty, repeated itself, or did not name what the question asks "
        "for; the best quote is shown instead."
    ),
    SupportStatus.NO_ANSWER: (
        "No sentence of the document states what the question asks for; any quotes below are "
        "the closest passages, for you to check."
    ),
}


def support_label(status: SupportStatus | str | None) -> str | None:
    """The label, or None for an answer saved before answers were checked."""
    return LABELS[SupportStatus(status)] if status is not None else None


def support_note(status: SupportStatus | str | None, unsupported_claims: Sequence[str]) -> str:
    if status is None:
        return "This answer was saved before answers were checked against quotes."
    claims = ", ".join(f'"{claim}"' for claim in unsupported_claims) or "something"
    return _NOTES[SupportStatus(status)].format(claims=claims)
