"""What an answer's support status says to a person: a short label and one sentence, the same
in the UI, the CLI and the exports. (What each status means is decided in
pipelines/answer/check.py.)

`answer_view` is the one formatter every way in uses for an answer (a document's or a
collection's): the text shown (the model's, or the best verbatim quote labelled "quoted from
p. N" when the model's cannot stand), the state, its label and note, and the model's own text
set apart under MODEL_TEXT_TITLE; `AnswerView.record()` is the same as plain data (JSON).

Three states a person reads: supported, partly supported, not supported. "quoted" (the model
gave no usable answer) is a way of being not supported, and "no_answer" says nothing relevant
was found. Answers saved before the meaning check keep their old status ("unchecked", or none
at all) and still display.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.db.models import Answer, CollectionAnswer, SupportStatus

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


# Where a row of a collection's per-document table comes from, in a word.
ROW_SOURCES = {"fact": "key facts", "model": "model", "quote": "quote", "none": "—"}


def row_source(source: str) -> str:
    """The "From" of a per-document table row: key facts, model, quote, or a dash for none."""
    return ROW_SOURCES.get(source, source)


# Above (or beside) the model's own text when the answer shown is not it.
MODEL_TEXT_TITLE = "The model's own answer, set apart (not shown above)"
# "(quoted from p. 3)" of a document's answer, "(quoted from [Lease, p. 3])" of a collection's.
_QUOTED_FROM = re.compile(r"\(quoted from \[?(?:[^()\[\]]*?, )?pp?\. (\d+)\]?\)")


@dataclass(frozen=True)
class AnswerView:
    """An answer as every way in shows it. `text`: the answer shown; `state`: SUPPORTED,
    PARTLY_SUPPORTED, NOT_SUPPORTED or None (no answer found, or saved before the check);
    `label` and `note`: the mark and its sentence; `missing`: what a partly supported answer
    lacks; `quoted_from_pages`: the pages of the quotes shown as the answer (the model's text
    could not stand); `model_text`: the model's own text, set apart, when it is not `text`."""

    text: str
    status: str | None
    state: str | None
    label: str | None
    note: str
    missing: str = ""
    quoted_from_pages: tuple[int, ...] = ()
    model_text: str | None = None
    quotes: tuple[Mapping[str, Any], ...] = field(default=())

    def record(self) -> dict[str, Any]:
        """The view as plain data, for JSON: the same fields and words as the UI and the CLI."""
        return {
            "answer": self.text,
            "support": self.state,
            "support_status": self.status,
            "support_label": self.label,
            "support_note": self.note,
            "missing": self.missing or None,
            "quoted_from_pages": list(self.quoted_from_pages),
            "model_answer_set_apart": self.model_text,
            "quotes": [
                {
                    key: quote[key]
                    for key in ("title", "document_id", "text", "page")
                    if key in quote
                }
                for quote in self.quotes
            ],
        }


def answer_view(
    *,
    text: str,
    support: SupportStatus | str | None,
    stats: Mapping[str, Any] | None = None,
    model_answer: str | None = None,
    unsupported_claims: Sequence[str] = (),
    quotes: Sequence[Mapping[str, Any]] = (),
) -> AnswerView:
    """How an answer is shown, from what is stored with it (see AnswerView)."""
    status = SupportStatus(support) if support is not None else None
    stats = stats or {}
    model_text = (model_answer or "").strip() or None
    # The quotes stand for the model's text: it was set apart, or it gave nothing usable.
    by_quote = model_text is not None or status in (SupportStatus.UNSUPPORTED, SupportStatus.QUOTED)
    pages = tuple(int(page) for page in _QUOTED_FROM.findall(text)) if by_quote else ()
    missing = ""
    if status == SupportStatus.PARTLY_SUPPORTED:
        missing = str(stats.get("support_missing") or "")
    return AnswerView(
        text=text,
        status=status.value if status is not None else None,
        state=support_state(status),
        label=support_label(status),
        note=support_note(status, unsupported_claims, stats, model_answer=model_text),
        missing=missing,
        quoted_from_pages=pages,
        model_text=model_text,
        quotes=tuple(quotes),
    )


def view_of(answer: Answer | CollectionAnswer) -> AnswerView:
    """The view of a stored answer: a document's (app.db.models.Answer) or a collection's
    (CollectionAnswer, whose model text, when set apart, is kept in its stats)."""
    stats = answer.stats or {}
    model_answer = getattr(answer, "model_answer", None) or stats.get("model_answer")
    return answer_view(
        text=answer.answer,
        support=answer.support,
        stats=stats,
        model_answer=model_answer,
        unsupported_claims=getattr(answer, "unsupported_claims", None) or (),
        quotes=answer.quotes or (),
    )


def answer_record(answer: Answer) -> dict[str, Any]:
    """A document's answer as JSON data (`longdoc ask --json`, and any API): its view's record."""
    return {
        "document_id": answer.document_id,
        "question": answer.question,
        **view_of(answer).record(),
        "cited_pages": list(answer.cited_pages or ()),
    }


def collection_answer_record(answer: CollectionAnswer) -> dict[str, Any]:
    """A collection's answer as JSON data; a question about every document has its rows, each
    with where its answer came from, in the table's words."""
    return {
        "collection_id": answer.collection_id,
        "question": answer.question,
        "mode": answer.mode,
        **view_of(answer).record(),
        "citations": [
            {key: cited[key] for key in ("document_id", "title", "page")}
            for cited in answer.citations or ()
        ],
        "rows": [
            {
                **{
                    key: row.get(key) for key in ("document_id", "title", "answer", "quote", "page")
                },
                "from": row_source(row.get("source") or "none"),
            }
            for row in answer.rows or ()
        ],
    }
