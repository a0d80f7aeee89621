"""Library: every document with its status, filters, search, and delete after a confirmation."""

from __future__ import annotations

import logging

import streamlit as st

from app.db.models import Document, DocumentKind, DocumentStatus
from app.db.session import write_transaction
from app.errors import AppError
from app.services import access, acting, dispatch, documents, results
from ui import context as ctx

logger = logging.getLogger("longdoc.ui.library")

MAX_ROWS = 200
ALL = "All"
STATUS_BADGES = {
    DocumentStatus.READY: ":green-badge[:material/check_circle: Ready]",
    DocumentStatus.PENDING: ":gray-badge[:material/schedule: Pending]",
    DocumentStatus.PARSING: ":blue-badge[:material/sync: Parsing]",
    DocumentStatus.FAILED: ":red-badge[:material/error: Failed]",
}
COLUMNS = [3.6, 0.9, 1.2, 0.7, 0.9, 1.0, 1.6, 1.1, 0.6]
HEADERS = ["Title", "Kind", "Status", "Pages", "Tokens", "Summary", "Added", "", ""]


def _forget_delete() -> None:
    st.session_state.pop("delete_document", None)


@st.dialog("Delete this document?", on_dismiss=_forget_delete)
def _confirm_delete(document_id: int, title: str) -> None:
    st.markdown(
        f"**{ctx.md_escape(title)}** will be removed with its pages, passages, summaries, "
        "answers and stored file. This cannot be undone."
    )
    left, right = st.columns(2)
    if left.button("Delete", type="primary", icon=":material/delete:", key="confirm-delete"):
        settings = ctx.settings()
        with ctx.session() as db:
            # Checked, then deleted: the write lock first (SQLite fails a transaction that read
            # and then writes after a worker's commit with "database is locked", at once).
            write_transaction(db)
            acting.allow_document_write(
                session=db, actor=ctx.actor(), document_id=document_id, action="delete"
            )
            removed = documents.delete_document(
                session=db,
                document_id=document_id,
                files_dir=settings.files_dir,
                kv_cache_dir=settings.kv_cache_dir,
                broker=dispatch.client_for(settings),
            )
            db.commit()
        logger.info("document %s deleted from the UI: %s", document_id, removed)
        _forget_delete()
        st.session_state["library_notice"] = f"Deleted “{title}”."
        st.rerun()
    if right.button("Cancel", key="cancel-delete"):
        _forget_delete()
        st.rerun()


def _filters() -> tuple[DocumentKind | None, DocumentStatus | None, str]:
    search, kind, status = st.columns([3, 1, 1])
    query = search.text_input(
        "Search titles", placeholder="Title or file name", icon=":material/search:"
    )
    kind_value = kind.selectbox("Kind", [ALL, *(k.value for k in DocumentKind)], key="kind")
    status_value = status.selectbox(
        "Status", [ALL, *(s.value for s in DocumentStatus)], key="status"
    )
    return (
        None if kind_value == ALL else DocumentKind(kind_value),
        None if status_value == ALL else DocumentStatus(status_value),
        query.strip(),
    )


def _row(document: Document, is_summarized: bool, *, may_delete: bool) -> None:
    cells = st.columns(COLUMNS, vertical_alignment="center")
    title = document.title or document.file_name
    cells[0].markdown(f"**{ctx.md_escape(title)}**")
    if document.title:
        cells[0].caption(ctx.md_escape(document.file_name))
    cells[1].markdown(document.kind.value.capitalize())
    cells[2].markdown(STATUS_BADGES[document.status])
    cells[3].markdown(f"{document.num_pages:,}")
    cells[4].markdown(f"{document.num_tokens:,}")
    cells[5].markdown(":material/check: Yes" if is_summarized else ":gray[No]")
    cells[6].markdown(document.created_at.strftime("%Y-%m-%d %H:%M"))
    with cells[7]:
        ctx.document_link(document.id, "Open", icon=":material/open_in_new:")
    # Accounts (issue 25): offered only to whom the service would let delete it.
    if may_delete and cells[8].button(
        "", icon=":material/delete:", key=f"delete-{document.id}", help="Delete this document"
    ):
        st.session_state["delete_document"] = (document.id, title)


def render() -> None:
    st.title("Library")
    notice = st.session_state.pop("library_notice", None)
    if notice:
        st.success(notice, icon=":material/check:")
    try:
        kind, status, query = _filters()
        with ctx.session() as db:
            actor = ctx.actor()
            everything = acting.list_documents(session=db, actor=actor)
            rows = acting.list_documents(
                session=db, actor=actor, kind=kind, status=status, title_query=query or None
            )
            summarized = results.summarized_document_ids(session=db)
            deletable = {
                row.id
                for row in rows[:MAX_ROWS]
                if access.can(session=db, actor=actor, action="delete", document_id=row.id)
            }
            may_upload = access.can(session=db, actor=actor, action="upload")
    except AppError as error:
        ctx.show_error(error)
        return
    metrics = st.columns(4)
    metrics[0].metric("Documents", len(everything))
    metrics[1].metric("Pages", f"{sum(d.num_pages for d in everything):,}")
    metrics[2].metric("Tokens", f"{sum(d.num_tokens for d in everything):,}")
    metrics[3].metric("Summarized", sum(1 for d in everything if d.id in summarized))
    if not everything:
        if may_upload:
            st.info("No documents yet. Upload PDFs to start.", icon=":material/info:")
            st.page_link(ctx.UPLOAD_PAGE, label="Upload PDFs", icon=":material/upload_file:")
        else:
            st.info("No documents shared with you yet.", icon=":material/info:")
        return
    if not rows:
        st.info("No documents match these filters.", icon=":material/filter_alt_off:")
        return
    with st.container(border=True):
        header = st.columns(COLUMNS)
        for cell, label in zip(header, HEADERS, strict=True):
            cell.caption(f"**{label}**" if label else "")
        for document in rows[:MAX_ROWS]:
            _row(document, document.id in summarized, may_delete=document.id in deletable)
    shown = min(len(rows), MAX_ROWS)
    st.caption(
        f"{shown} of {len(rows)} matching document{'s' if len(rows) != 1 else ''}"
        + (" (narrow the search to see the rest)" if len(rows) > MAX_ROWS else "")
    )
    pending = st.session_state.get("delete_document")
    if pending:
        _confirm_delete(*pending)


render()
