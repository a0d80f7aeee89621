"""Upload: several PDFs at once; each becomes an ingest job whose progress shows live."""

from __future__ import annotations

import math

import streamlit as st

from app.db.models import DocumentKind
from app.errors import AppError
from app.services import access, acting, collections, jobs, uploads
from app.services.uploads import UploadResult
from ui import context as ctx
from ui.components.job_status import JobView, progress_line

POLL_S = 1.0
# "auto" and each of the stored kinds (app/db/models/documents.py), labelled for a person.
KINDS = {"auto": "Detect automatically"} | {kind.value: kind.value.title() for kind in DocumentKind}
MIB = 1024 * 1024


def _queue_file(
    name: str,
    data: bytes,
    *,
    kind: str,
    password: str,
    summarize: bool,
    collection_id: int | None,
) -> UploadResult:
    """Queue one file (app.services.uploads); an error becomes its card's sentence."""
    try:
        with ctx.session() as db:
            owner_id = acting.allow_upload(
                session=db, actor=ctx.actor(), collection_id=collection_id
            )
            return uploads.queue_upload(
                owner_id=owner_id,
                uploader=ctx.actor(),
                session=db,
                settings=ctx.settings(),
                file_name=name,
                data=data,
                kind=kind,
                password=password,
                summarize=summarize,
                collection_id=collection_id,
            )
    except AppError as error:
        return UploadResult(file_name=uploads.upload_name(name), refusal=str(error))


def _upload_form(choices: dict[int, str]) -> None:
    """The form; `choices`: the collections this user may upload into."""
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
        collection_id = st.selectbox(
            "Into collection",
            list(choices),
            format_func=choices.__getitem__,
            index=None,
            placeholder="None (the library only)",
            key="upload-collection",
        )
        summarize = st.checkbox("Summarize each document once it is read", value=True)
        submitted = st.form_submit_button(
            "Add to library", type="primary", icon=":material/library_add:", key="upload-submit"
        )
    if not submitted:
        return
    if not files:
        st.warning("Choose one or more PDF files first.")
        return
    entries = [
        _queue_file(
            f.name,
            f.getvalue(),
            kind=kind,
            password=password,
            summarize=summarize,
            collection_id=collection_id,
        )
        for f in files
    ]
    st.session_state["uploads"] = entries + st.session_state.get("uploads", [])


def _load_views(entries: list[UploadResult]) -> dict[int, JobView]:
    ids = [entry.job_id for entry in entries if entry.job_id is not None]
    with ctx.session() as db:
        rows = jobs.get_jobs(session=db, job_ids=ids)
        follow_ups = [
            v.follow_up_job_id for v in map(JobView.of, rows.values()) if v.follow_up_job_id
        ]
        rows.update(jobs.get_jobs(session=db, job_ids=follow_ups))
        return {job_id: JobView.of(job) for job_id, job in rows.items()}


def _entry_card(entry: UploadResult, views: dict[int, JobView]) -> None:
    with st.container(border=True):
        st.markdown(f":material/picture_as_pdf: **{ctx.md_escape(entry.file_name)}**")
        if entry.refusal is not None:
            st.error(entry.refusal, icon=":material/block:")
            return
        if entry.present_document_id is not None:
            st.info("This file is already in the library.", icon=":material/library_books:")
            ctx.document_link(entry.present_document_id, "Open the document")
            return
        view = views.get(entry.job_id)
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
        # Accounts (issue 25): the form only for whom may upload, and only the collections
        # they may upload into (app.services.access.can, which the upload asks again).
        with ctx.session() as db:
            actor = ctx.actor()
            may_upload = access.can(session=db, actor=actor, action="upload")
            choices = collections.picker_labels(
                c
                for c in acting.list_collections(session=db, actor=actor)
                if access.can(session=db, actor=actor, action="upload", collection_id=c.id)
            )
        if may_upload:
            _upload_form(choices)
        else:
            st.info(
                f"Your role ({actor.role.value}) may read and ask but not upload documents.",
                icon=":material/lock:",
            )
        entries = st.session_state.get("uploads", [])
        if not entries:
            return
        is_open = any(v.is_open for v in _load_views(entries).values())
        # Re-read the job rows every POLL_S while any is unfinished; no polling after that.
        st.fragment(run_every=POLL_S if is_open else None)(_results)(is_polling=is_open)
    except AppError as error:
        ctx.show_error(error)


render()
