"""Upload: several PDFs at once; each becomes an ingest job whose progress shows live."""

from __future__ import annotations

import hashlib
import logging
import math

import streamlit as st

from app.db.models import JobKind
from app.errors import AppError
from app.services import dispatch, documents, jobs
from ui import context as ctx
from ui.components.job_status import JobView, progress_line
from ui.components.pdf_check import check_upload
from ui.queries import jobs_by_id

logger = logging.getLogger("longdoc.ui.upload")

POLL_S = 1.0
KINDS = {"auto": "Detect automatically", "legal": "Legal", "medical": "Medical", "other": "Other"}
MIB = 1024 * 1024


def _queue_file(name: str, data: bytes, *, kind: str, password: str, summarize: bool) -> dict:
    """Check, store and queue one file; returns the entry the results list shows."""
    settings = ctx.settings()
    entry: dict = {"file_name": name}
    check = check_upload(
        data, password=password or None, max_bytes=settings.max_upload_bytes, file_name=name
    )
    if not check.is_ok:
        entry["error"] = check.sentence
        logger.info("upload refused before queueing: %s (%d bytes)", check.error_code, len(data))
        return entry
    content_hash = hashlib.sha256(data).hexdigest()
    try:
        with ctx.session() as db:
            existing = documents.find_by_hash(session=db, content_hash=content_hash)
            if existing is not None:
                entry["present_document_id"] = existing.id
                return entry
            stored = documents.store_file(
                files_dir=settings.files_dir, content_hash=content_hash, data=data
            )
            params: dict = {
                "path": str(stored),
                "file_name": name,
                "then_summarize": summarize,
                "source": "upload",
            }
            if kind != "auto":
                params["kind"] = kind
            if check.is_encrypted and password:
                # The worker reads it from the job (worker/runner.py); only encrypted files get it.
                params["password"] = password
            job = jobs.create_job(session=db, kind=JobKind.INGEST, params=params)
            entry["job_id"] = job.id
            dispatch.queue_job(settings=settings, session=db, job=job)
            logger.info("upload queued as job %s (%d bytes)", job.id, len(data))
    except AppError as error:
        entry["error"] = str(error)
    return entry


def _upload_form() -> None:
    settings = ctx.settings()
    limit_mb = max(1, math.ceil(settings.max_upload_bytes / MIB))
    with st.form("upload-form", clear_on_submit=True, border=True):
        files = st.file_uploader(
            "PDF files",
            type=["pdf"],
            accept_multiple_files=True,
            max_upload_size=limit_mb,
            help=f"Up to {settings.max_upload_bytes / MIB:.0f} MB per file.",
        )
        left, right = st.columns(2)
        kind = left.selectbox("Document kind", list(KINDS), format_func=KINDS.__getitem__)
        password = right.text_input(
            "Password (encrypted PDFs only)",
            type="password",
            help="Used to open encrypted files of this upload; ignored for the others.",
        )
        summarize = st.checkbox("Summarize each document once it is read", value=True)
        submitted = st.form_submit_button(
            "Add to library", type="primary", icon=":material/library_add:"
        )
    if not submitted:
        return
    if not files:
        st.warning("Choose one or more PDF files first.")
        return
    entries = [
        _queue_file(f.name, f.getvalue(), kind=kind, password=password, summarize=summarize)
        for f in files
    ]
    st.session_state["uploads"] = entries + st.session_state.get("uploads", [])


def _load_views(entries: list[dict]) -> dict[int, JobView]:
    ids = [e["job_id"] for e in entries if "job_id" in e]
    with ctx.session() as db:
        rows = jobs_by_id(db, ids)
        follow_ups = [
            v.follow_up_job_id for v in map(JobView.of, rows.values()) if v.follow_up_job_id
        ]
        rows.update(jobs_by_id(db, follow_ups))
        return {job_id: JobView.of(job) for job_id, job in rows.items()}


def _entry_card(entry: dict, views: dict[int, JobView]) -> None:
    with st.container(border=True):
        st.markdown(f":material/picture_as_pdf: **{ctx.md_escape(entry['file_name'])}**")
        if "error" in entry:
            st.error(entry["error"], icon=":material/block:")
            return
        if "present_document_id" in entry:
            st.info("This file is already in the library.", icon=":material/library_books:")
            ctx.document_link(entry["present_document_id"], "Open the document")
            return
        view = views.get(entry["job_id"])
        if view is None:
            st.warning("This job is gone: its document was deleted.")
            return
        progress_line(view)
        if view.document_id is not None and view.status.value == "succeeded":
            summary = views.get(view.follow_up_job_id) if view.follow_up_job_id else None
            if summary is not None:
                progress_line(summary)
            ctx.document_link(view.document_id, "Open the document")


def _results(*, is_polling: bool) -> None:
    entries = st.session_state.get("uploads", [])
    views = _load_views(entries)
    st.subheader("This session's uploads")
    for entry in entries:
        _entry_card(entry, views)
    if is_polling and not any(v.is_open for v in views.values()):
        st.rerun()  # the whole page, which stops the polling


def render() -> None:
    st.title("Upload")
    st.caption(
        "Add PDFs to the library. Each file is read page by page, split into passages and, "
        "if you like, summarized; progress shows below without reloading."
    )
    try:
        _upload_form()
        entries = st.session_state.get("uploads", [])
        if not entries:
            return
        is_open = any(v.is_open for v in _load_views(entries).values())
        # Re-read the job rows every POLL_S while any is unfinished; no polling after that.
        st.fragment(run_every=POLL_S if is_open else None)(_results)(is_polling=is_open)
    except AppError as error:
        ctx.show_error(error)


render()
