"""Quotes under an answer and key passages above a summary: each sentence as the document has
it, with a button to its page (the sentence marked there), and the answer's support label."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from app.db.models import SupportStatus
from app.services.answer_labels import MODEL_TEXT_TITLE, AnswerView
from ui import context as ctx
from ui.components.citations import open_citation
from ui.components.page_sources import page_label

# The three states a person reads (app.services.answer_labels): supported green, partly
# supported orange, not supported red (also when the best quote stands for a missing answer).
BADGE_COLOURS = {
    SupportStatus.SUPPORTED: "green",
    SupportStatus.PARTLY_SUPPORTED: "orange",
    SupportStatus.UNCHECKED: "gray",
    SupportStatus.UNSUPPORTED: "red",
    SupportStatus.QUOTED: "red",
    SupportStatus.NO_ANSWER: "gray",
}
BADGE_ICONS = {
    SupportStatus.SUPPORTED: ":material/verified:",
    SupportStatus.PARTLY_SUPPORTED: ":material/rule:",
    SupportStatus.UNSUPPORTED: ":material/warning:",
    SupportStatus.QUOTED: ":material/format_quote:",
}


def flat(text: str) -> str:
    """A quote's text on one line (PDF text wraps lines inside sentences)."""
    return " ".join(text.split())


def support_badge(view: AnswerView) -> None:
    """The label as a coloured badge, and the sentence that explains it (what is missing, why
    the model's text was set apart): app.services.answer_labels.answer_view's words."""
    status = SupportStatus(view.status) if view.status is not None else None
    if view.label is not None and status is not None:
        icon = BADGE_ICONS.get(status)
        text = f"{icon} {view.label}" if icon else view.label
        st.markdown(f":{BADGE_COLOURS[status]}-badge[{text}]")
    st.caption(ctx.md_escape(view.note))


def model_text_apart(view: AnswerView) -> None:
    """The model's own text, when the answer shown is not it: set apart, folded."""
    if view.model_text:
        with st.expander(MODEL_TEXT_TITLE):
            st.markdown(ctx.md_escape(view.model_text))


def render_quotes(document_id: int, quotes: Sequence[dict], *, key: str, title: str) -> None:
    """Each quote with a page button that opens the page with the sentence marked."""
    if not quotes:
        return
    st.caption(title)
    for index, quote in enumerate(quotes):
        with st.container(horizontal=True, vertical_alignment="top", gap="small"):
            if st.button(
                page_label(document_id, quote["page"]),
                key=f"{key}-{index}",
                icon=":material/description:",
                help="Open the page with this sentence marked.",
            ):
                open_citation(
                    document_id, quote["page"], [], spans=[(quote["start_char"], quote["end_char"])]
                )
            st.markdown(f"“{ctx.md_escape(flat(quote['text']))}”")
