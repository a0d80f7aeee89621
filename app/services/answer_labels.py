"""What an answer's support status says to a person: a short label and one sentence, the same
in the UI, the CLI and the exports. (What each status means is decided in
pipelines/answer/check.py.)

Three states a person reads: supported, partly supported, not supported. "quoted" (the model
gave no usable answer) is a way of being not supported, and "no_answer" says nothing relevant
was found. Answers saved before the meaning check keep their old status ("unchecked", or none
at all) and still display.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.db.models import SupportStatus

SUPPORTED, PARTLY_SUPPORTED, NOT_SUPPORTED = "supported", "partly_supported", "not_supported"
# The state of each status, as a person reads it.
STATES = {
    SupportStatus.SUPPORTED: SUPPORTED,
    SupportStatus.PARTLY_SUPPORTED: PARTLY_SUPPORTED,
    SupportStatus.UNSUPPORTED: NOT_SUPPORTED,
    SupportStatus.QUOTED: NOT_SUPPORTED,
}
LABELS = {
    SupportStatus.SUPPORTED: "Supported by the quoted text",
    SupportStatus.PARTLY_SUPPORTED: "Partly supported by the quoted text",
    SupportStatus.UNSUPPORTED: "Not supported by the quoted text",
    SupportStatus.QUOTED: "Not supported: no usable answer, quoted from the document",
    SupportStatus.NO_ANSWER: "No answer found",
    SupportStatus.UNCHECKED: "Not checked",
}
_NOTES = {
    SupportStatus.SUPPORTED: "The quotes state what the question asks, in that role.",
    SupportStatus.PARTLY_SUPPORTED: (
        "The quotes bear on the question but do not settle it; check them before relying on it."
    ),
    SupportStatus.UNSUPPORTED: (
        "The model's answer stated {claims}, which the document does not contain; the best "
        "quote is shown instead."
    ),
    SupportStatus.QUOTED: (
        "The model's answer was empty, repeated itself or the question, or did not say what the "
        "question asks for; the best quote is shown instead."
    ),
    SupportStatus.NO_ANSWER: (
        "No sentence of the document states what the question asks for; any quotes below are "
        "the closest passages, for you to check."
    ),
    SupportStatus.UNCHECKED: (
        "Saved before answers were checked for meaning: it stated no name, number, date or "
        "place to check."
    ),
}
BY_QUOTE_NOTE = (
    "The answer shown is quoted from the document; the model's own answer is set apart below."
)


def support_state(status: SupportStatus | str | None) -> str | None:
    """SUPPORTED, PARTLY_SUPPORTED or NOT_SUPPORTED; None for no answer found, an old answer
    (unchecked or saved before the check)."""
    return STATES.get(SupportStatus(status)) if status is not None else None


def support_label(status: SupportStatus | str | None) -> str | None:
    """The label, or None for an answer saved before answers were checked."""
    return LABELS[SupportStatus(status)] if status is not None else None


def support_note(
    status: SupportStatus | str | None,
    unsupported_claims: Sequence[str],
    stats: Mapping[str, Any] | None = None,
    *,
    model_answer: str | None = None,
) -> str:
    """The sentence under the label: what is missing for a partly supported answer, why the
    model's text was set apart (the answer's stats, "support_missing" and "support_reason"),
    and which claims the document does not hold."""
    if status is None:
        return "This answer was saved before answers were checked against quotes."
    status = SupportStatus(status)
    stats = stats or {}
    missing = str(stats.get("support_missing") or "")
    reason = str(stats.get("support_reason") or "")
    claims = ", ".join(f'"{claim}"' for claim in unsupported_claims)
    if status == SupportStatus.UNSUPPORTED and claims:
        note = _NOTES[status].format(claims=claims)
    elif status == SupportStatus.UNSUPPORTED:
        note = "The model's answer is not supported by the quotes; the best quote is shown instead."
        note = f"{reason} {note}" if reason else note
    elif status in (SupportStatus.SUPPORTED, SupportStatus.PARTLY_SUPPORTED) and missing:
        note = missing
    elif status == SupportStatus.QUOTED and reason:
        note = f"{reason} The best quote is shown instead."
    else:
        note = _NOTES[status]
    if model_answer and status in (SupportStatus.SUPPORTED, SupportStatus.PARTLY_SUPPORTED):
        why = f" {reason}" if reason else ""
        note = f"{note} {BY_QUOTE_NOTE}{why}"
        if claims:
            note += f" It stated {claims}, which the document does not contain."
    return note + planted_note(stats)


def planted_note(stats: Mapping[str, Any] | None) -> str:
    """A sentence (with a leading space) when the document held instruction-like text that was
    left out (pipelines/planted.py, counted in the stats); "" otherwise."""
    count = int((stats or {}).get("num_instruction_spans_left_out") or 0)
    if count < 1:
        return ""
    what = "passage" if count == 1 else f"{count} passages"
    verb = "was" if count == 1 else "were"
    return (
        f" The document holds {'a ' if count == 1 else ''}{what} written as instructions to a "
        f'model (such as "ignore the question"); {"it" if count == 1 else "they"} {verb} left '
        "out of what the model read and never quoted as evidence."
    )
