"""Where a document's text came from, on the document page: a warning for boxes that hide
readable text, a note for pages read by OCR, and "(OCR)" on citations of those pages."""

from __future__ import annotations

import streamlit as st

from app.db.models import Document
from app.services import documents
from app.services.provenance import (
    invisible_text_warning,
    ocr_notice,
    redaction_warning,
    source_label,
)
from ui import context as ctx

_OCR_PAGES_KEY = "ocr-pages"


def ocr_pages(document_id: int) -> dict[int, float | None]:
    """Page number -> OCR confidence of the pages OCR read, read once per run of the page."""
    cached = st.session_state.get(_OCR_PAGES_KEY)
    if cached is None or cached[0] != document_id:
        with ctx.session() as db:
            cached = (document_id, documents.ocr_pages_of(session=db, document_id=document_id))
        st.session_state[_OCR_PAGES_KEY] = cached
    return cached[1]


def forget_ocr_pages() -> None:
    st.session_state.pop(_OCR_PAGES_KEY, None)


def page_label(document_id: int, page: int) -> str:
    """A citation button's label: "p. 3", or "p. 3 (OCR)" for a page OCR read."""
    return f"p. {page} (OCR)" if page in ocr_pages(document_id) else f"p. {page}"


def page_caption(document_id: int, page: int) -> str | None:
    """Under a page shown in full: "Read by OCR, 97% confidence: ..."; None for a text page."""
    pages = ocr_pages(document_id)
    if page not in pages:
        return None
    label = source_label(source="ocr", ocr_confidence=pages[page])
    return f"Read by {label}: words may be misread; the scanned page is the original."


def source_banners(document: Document) -> None:
    """The redaction warning and the OCR note for the document's header (nothing if neither)."""
    forget_ocr_pages()  # a new run of the page: read them again
    if document.num_redactions:
        with ctx.session() as db:
            boxes = documents.get_redactions(session=db, document_id=document.id)
        warning = redaction_warning(
            pages=[box.page for box in boxes], is_hidden_text_kept=document.is_hidden_text_kept
        )
        if warning:
            st.warning(warning, icon=":material/visibility_off:")
    with ctx.session() as db:
        counts, kept = documents.invisible_text_of(session=db, document_id=document.id)
    invisible = invisible_text_warning(counts=counts, is_hidden_text_kept=kept)
    if invisible:
        st.warning(invisible, icon=":material/visibility_off:")
    pages = ocr_pages(document.id)
    confidences = [c for c in pages.values() if c is not None]
    note = ocr_notice(
        ocr_pages=sorted(pages),
        mean_confidence=sum(confidences) / len(confidences) if confidences else None,
    )
    if note:
        st.info(note, icon=":material/document_scanner:")
