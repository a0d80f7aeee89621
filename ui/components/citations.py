"""The citation viewer: a page's text with the passages an answer used marked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st

from app.services import documents
from ui import context as ctx
from ui.components.page_sources import page_caption
from ui.components.page_text import highlight_spans, page_html, page_start_offsets

CITATION_KEY = "citation"


@dataclass(frozen=True)
class CharSpan:
    """A quoted sentence's place in the document text, as passages carry theirs."""

    start_char: int
    end_char: int


def open_citation(
    document_id: int,
    page_number: int,
    passage_ids: list[int],
    *,
    spans: Sequence[tuple[int, int]] = (),
    marked: str | None = None,
) -> None:
    """Show `page_number` with the passages, or the quoted sentences at `spans`, marked.
    `marked` says what the marks are, where they are not the passages an answer drew on."""
    st.session_state[CITATION_KEY] = {
        "document_id": document_id,
        "page": page_number,
        "passage_ids": list(passage_ids),
        "spans": [list(span) for span in spans],
        "marked": marked,
    }


@dataclass(frozen=True)
class _Span:
    start_char: int
    end_char: int


def _forget() -> None:
    st.session_state.pop(CITATION_KEY, None)


def cited_page_html(
    document_id: int,
    page_number: int,
    passage_ids: list[int],
    spans: Sequence[tuple[int, int]] = (),
) -> str | None:
    """The page as HTML with the cited passages and quoted `spans` (document offsets) on it
    marked; None when there is no such page."""
    with ctx.session() as db:
        pages = documents.get_pages(session=db, document_id=document_id)
        page = next((p for p in pages if p.number == page_number), None)
        if page is None:
            return None
        cited: list = []
        if passage_ids:
            cited = documents.get_passages(
                session=db,
                document_id=document_id,
                passage_ids=passage_ids,
                page_number=page_number,
            )
        cited += [CharSpan(start, end) for start, end in spans]
        start = page_start_offsets(pages)[page_number]
        return page_html(page.text, highlight_spans(page, start, cited))


@st.dialog("Cited page", width="large", on_dismiss=_forget)
def _citation_dialog(
    document_id: int,
    page_number: int,
    passage_ids: list[int],
    spans: list[list[int]],
    marked: str | None = None,
) -> None:
    body = cited_page_html(document_id, page_number, passage_ids, [tuple(s) for s in spans])
    if body is None:
        st.warning(f"This document has no page {page_number}.")
        return
    st.markdown(f"#### Page {page_number}")
    caption = page_caption(document_id, page_number)
    if caption:
        st.caption(caption)
    has_marks = "<mark" in body
    if marked and has_marks:
        st.caption(f"Highlighted: {marked}.")
    elif spans:
        st.caption("Highlighted: the quoted sentence, as the document has it.")
    else:
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
        _citation_dialog(
            document_id,
            citation["page"],
            citation["passage_ids"],
            citation.get("spans", []),
            citation.get("marked"),
        )
