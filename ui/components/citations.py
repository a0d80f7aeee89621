"""The citation viewer: a page's text with the passages an answer used marked."""

from __future__ import annotations

import streamlit as st

from app.services import documents
from ui import context as ctx
from ui.components.page_text import highlight_spans, page_html, page_start_offsets

CITATION_KEY = "citation"


def open_citation(document_id: int, page_number: int, passage_ids: list[int]) -> None:
    st.session_state[CITATION_KEY] = {
        "document_id": document_id,
        "page": page_number,
        "passage_ids": list(passage_ids),
    }


def _forget() -> None:
    st.session_state.pop(CITATION_KEY, None)


def cited_page_html(document_id: int, page_number: int, passage_ids: list[int]) -> str | None:
    """The page as HTML with the cited passages on it marked; None when there is no such page."""
    with ctx.session() as db:
        pages = documents.get_pages(session=db, document_id=document_id)
        page = next((p for p in pages if p.number == page_number), None)
        if page is None:
            return None
        cited = documents.get_passages(
            session=db, document_id=document_id, passage_ids=passage_ids, page_number=page_number
        )
        start = page_start_offsets(pages)[page_number]
        return page_html(page.text, highlight_spans(page, start, cited))


@st.dialog("Cited page", width="large", on_dismiss=_forget)
def _citation_dialog(document_id: int, page_number: int, passage_ids: list[int]) -> None:
    body = cited_page_html(document_id, page_number, passage_ids)
    if body is None:
        st.warning(f"This document has no page {page_number}.")
        return
    st.markdown(f"#### Page {page_number}")
    has_marks = "<mark" in body
    st.caption(
        "Highlighted: the passages the answer drew on."
        if has_marks
        else "The answer cites this page; none of the passages it drew on lies on it."
    )
    st.markdown(body, unsafe_allow_html=True)
    if st.button("Close", key="close-citation"):
        _forget()
        st.rerun()


def render_open_citation(document_id: int) -> None:
    """Show the dialog if a citation of this document was clicked."""
    citation = st.session_state.get(CITATION_KEY)
    if citation and citation["document_id"] == document_id:
        _citation_dialog(document_id, citation["page"], citation["passage_ids"])
