"""Document: its summary (and a new one on request), questions with cited pages, key facts with
their quotes, the page text."""

from __future__ import annotations

import logging

import streamlit as st

from app.db.models import Document, DocumentStatus, JobKind, JobStatus, SummaryMethod
from app.errors import AppError
from app.services import access, acting, dispatch, documents, jobs, questions, results
from app.services.answer_labels import AnswerView, planted_note, view_of
from ui import context as ctx
from ui.components.citations import open_citation, render_open_citation
from ui.components.job_status import JobView, progress_line
from ui.components.key_facts import render_key_facts
from ui.components.page_sources import page_caption, page_label, source_banners
from ui.components.page_text import page_html
from ui.components.quotes import model_text_apart, render_quotes, support_badge
from ui.components.summary_sentences import render_checked_summary

logger = logging.getLogger("longdoc.ui.document")

POLL_S = 1.0
MAX_CITATION_BUTTONS = 12


def _chosen_document_id() -> int | None:
    raw = st.query_params.get("doc")
    if raw and raw.isdigit():
        return int(raw)
    with ctx.session() as db:
        readable = acting.list_documents(session=db, actor=ctx.actor())
        choices = {d.id: d.title or d.file_name for d in readable}
        may_upload = access.can(session=db, actor=ctx.actor(), action="upload")
    if not choices:
        if may_upload:
            st.info("No documents yet. Upload PDFs first.", icon=":material/info:")
            st.page_link(ctx.UPLOAD_PAGE, label="Upload PDFs", icon=":material/upload_file:")
        else:
            st.info("No documents shared with you yet.", icon=":material/info:")
        return None
    chosen = st.selectbox(
        "Document", list(choices), format_func=lambda i: f"{choices[i]} (#{i})", index=None
    )
    if chosen is not None:
        st.query_params["doc"] = str(chosen)
    return chosen


def _opened(db, document_id: int) -> Document:
    """The document, checked; its first view in this browser session is logged."""
    seen = st.session_state.setdefault("viewed_documents", set())
    if document_id in seen:
        access.require_document(
            session=db, actor=ctx.actor(), document_id=document_id, action="view"
        )
        found = documents.get_document(session=db, document_id=document_id)
        assert found is not None
        return found
    document = acting.open_document(session=db, actor=ctx.actor(), document_id=document_id)
    seen.add(document_id)
    return document


def _header(document: Document) -> None:
    st.title(document.title or document.file_name)
    st.caption(ctx.md_escape(f"{document.file_name} · document #{document.id}"))
    cells = st.columns(5)
    cells[0].metric("Kind", document.kind.value.capitalize())
    cells[1].metric("Status", document.status.value.capitalize())
    cells[2].metric("Pages", f"{document.num_pages:,}")
    cells[3].metric("Tokens", f"{document.num_tokens:,}")
    cells[4].metric("Added", document.created_at.strftime("%Y-%m-%d"))
    if document.error:
        st.error(document.error)
    source_banners(document)


def _queue(document_id: int, kind: JobKind, params: dict | None = None) -> None:
    settings = ctx.settings()
    with ctx.session() as db:
        acting.allow_document_write(
            session=db, actor=ctx.actor(), document_id=document_id, action=kind.value
        )
        job = dispatch.submit_job(
            settings=settings, session=db, kind=kind, document_id=document_id, params=params
        )
        logger.info("queued %s job %s for document %s", kind.value, job.id, document_id)


def _live_jobs(job_ids: list[int], *, is_polling: bool) -> None:
    """Progress of the given jobs; a full rerun when the last one ends (shows its result)."""
    with ctx.session() as db:
        views = [JobView.of(job) for job in jobs.get_jobs(session=db, job_ids=job_ids).values()]
    for view in views:
        if view.is_open:
            progress_line(view)
    if is_polling and not any(view.is_open for view in views):
        st.rerun()


def _method_label(method: SummaryMethod, stats: dict) -> str:
    if method == SummaryMethod.ONE_PASS:
        return ":blue-badge[One pass: the whole document in one prompt]"
    num_sections = len(stats.get("section_pages") or ())
    sections = f" of {num_sections} sections" if num_sections else ""
    return f":violet-badge[Hierarchical: summaries{sections}, then combined]"


def _summary_tab(document: Document, *, may_summarize: bool) -> None:
    with ctx.session() as db:
        summaries = results.list_summaries(session=db, document_id=document.id)
        rows = jobs.list_document_jobs(session=db, document_id=document.id, kind=JobKind.SUMMARIZE)
        summary_jobs = [JobView.of(job) for job in rows]
    open_ids = [v.job_id for v in summary_jobs if v.is_open]
    if summaries:
        latest = summaries[0]
        if latest.key_passages:
            st.markdown("##### Key passages")
            render_quotes(
                document.id,
                latest.key_passages,
                key=f"key-{latest.id}",
                title="The sentences that cover the document best, quoted as it has them, in "
                "order. Click a page to read the sentence there.",
            )
            st.markdown("##### Summary by the model")
        st.markdown(_method_label(latest.method, latest.stats or {}))
        st.caption(
            ctx.md_escape(f"{latest.model} · {latest.created_at.strftime('%Y-%m-%d %H:%M')} UTC")
        )
        render_checked_summary(document.id, latest)
        planted = planted_note(latest.stats).strip()
        if planted:
            st.warning(planted, icon=":material/gpp_maybe:")
        if len(summaries) > 1:
            with st.expander(f"Earlier summaries ({len(summaries) - 1})"):
                for older in summaries[1:]:
                    st.caption(
                        f"{older.method.value.replace('_', ' ')} · "
                        f"{older.created_at.strftime('%Y-%m-%d %H:%M')} UTC"
                    )
                    st.markdown(older.text)
                    st.divider()
    elif not open_ids:
        st.info("No summary yet.", icon=":material/info:")
    last = summary_jobs[-1] if summary_jobs else None
    if last is not None and last.status == JobStatus.FAILED:
        progress_line(last)
    if open_ids:
        st.fragment(run_every=POLL_S)(_live_jobs)(open_ids, is_polling=True)
    if not may_summarize:  # accounts (issue 25): a reader is not offered what writes
        return
    is_ready = document.status == DocumentStatus.READY
    label = "Summarize again" if summaries else "Summarize"
    if st.button(
        label,
        icon=":material/refresh:",
        disabled=bool(open_ids) or not is_ready,
        key="summarize",
        help="Queue a new summary; the current one stays until the new one is saved.",
    ):
        _queue(document.id, JobKind.SUMMARIZE)
        st.rerun()


def _answer(document_id: int, answer) -> None:
    with st.chat_message("user"):
        st.markdown(ctx.md_escape(answer.question))
    with st.chat_message("assistant"):
        view = view_of(answer)
        st.markdown(view.text)
        _evidence(document_id, answer, view)
        if not answer.cited_pages:
            st.caption("No page cited.")
            return
        with st.container(horizontal=True, vertical_alignment="center", gap="small"):
            st.caption(":material/format_quote: Cited pages, click to read:", width="content")
            for page in answer.cited_pages[:MAX_CITATION_BUTTONS]:
                if st.button(
                    page_label(document_id, page),
                    key=f"cite-{answer.id}-{page}",
                    icon=":material/description:",
                ):
                    open_citation(document_id, page, answer.cited_passage_ids)


def _evidence(document_id: int, answer, view: AnswerView) -> None:
    """The support label, the quotes the answer rests on, and the model's own text if replaced."""
    if answer.support is None and not answer.quotes:
        return  # saved before answers were checked
    support_badge(view)
    render_quotes(
        document_id,
        answer.quotes or [],
        key=f"quote-{answer.id}",
        title=":material/format_quote: Quoted from the document, click a page to read it there:",
    )
    model_text_apart(view)


def _questions_tab(document: Document) -> None:
    with ctx.session() as db:
        answers = results.list_answers(session=db, document_id=document.id)
        answer_jobs = jobs.list_document_jobs(
            session=db, document_id=document.id, kind=JobKind.ANSWER
        )
        answered = {a.job_id for a in answers if a.job_id is not None}
        unanswered = [(j, JobView.of(j)) for j in answer_jobs if j.id not in answered]
    timeline = [(a.created_at, "answer", a) for a in answers] + [
        (job.created_at, "job", (str(job.params.get("question") or ""), view))
        for job, view in unanswered
        if view.status != JobStatus.SUCCEEDED
    ]
    if not timeline:
        st.caption("Ask anything about this document; answers cite the pages they rely on.")
    for _, what, item in sorted(timeline, key=lambda entry: entry[0]):
        if what == "answer":
            _answer(document.id, item)
            continue
        question, view = item
        with st.chat_message("user"):
            st.markdown(ctx.md_escape(question))
        with st.chat_message("assistant"):
            if view.is_open:
                st.fragment(run_every=POLL_S)(_live_jobs)([view.job_id], is_polling=True)
            else:
                progress_line(view)
    question = st.chat_input(
        "Ask a question about this document",
        disabled=document.status != DocumentStatus.READY,
        max_chars=ctx.settings().max_question_chars,
        key="question",
    )
    if question and question.strip():
        _ask(document.id, question)


def _ask(document_id: int, question: str) -> None:
    """Queue an answer job; a question the service refuses (empty once read as it looks, too
    long) is shown as its sentence."""
    try:
        settings = ctx.settings()
        with ctx.session() as db:
            acting.allow_ask(
                session=db, actor=ctx.actor(), document_id=document_id, question=question
            )
            job = dispatch.submit_job(
                settings=settings,
                session=db,
                kind=JobKind.ANSWER,
                document_id=document_id,
                params={"question": _checked(question)},
            )
            logger.info("queued answer job %s for document %s", job.id, document_id)
    except questions.InvalidQuestion as error:
        ctx.show_error(error)
        return
    st.rerun()


def _checked(question: str) -> str:
    return questions.typed_question(question, max_chars=ctx.settings().max_question_chars)


def _pages_tab(document: Document) -> None:
    if document.num_pages == 0:
        st.info("This document has no pages stored.")
        return
    number = st.number_input(
        "Page", min_value=1, max_value=document.num_pages, value=1, step=1, key="page_number"
    )
    with ctx.session() as db:
        pages = documents.get_pages(session=db, document_id=document.id, number=int(number))
    if not pages:
        st.warning(f"Page {number} is not stored.")
        return
    st.caption(f"Page {number} of {document.num_pages} · {len(pages[0].text):,} characters")
    caption = page_caption(document.id, int(number))
    if caption:
        st.caption(caption)
    st.markdown(page_html(pages[0].text), unsafe_allow_html=True)


def render() -> None:
    try:
        document_id = _chosen_document_id()
        if document_id is None:
            return
        with ctx.session() as db:
            document = documents.get_document(session=db, document_id=document_id)
            if document is not None or not ctx.actor().is_admin:
                # Accounts (issue 25): refused, and logged, unless this user may read it; a
                # missing and a refused document read alike (the URL's ?doc= is anyone's).
                document = _opened(db, document_id)
        if document is None:
            st.warning(f"There is no document #{document_id}; it may have been deleted.")
            st.page_link(
                ctx.LIBRARY_PAGE, label="Back to the library", icon=":material/arrow_back:"
            )
            return
        _header(document)
        with ctx.session() as db:
            may = {
                action: access.can(
                    session=db, actor=ctx.actor(), action=action, document_id=document.id
                )
                for action in ("summarize", "facts_run")
            }
        summary, questions, key_facts, pages = st.tabs(
            [
                ":material/summarize: Summary",
                ":material/forum: Questions",
                ":material/fact_check: Key facts",
                ":material/article: Pages",
            ]
        )
        with summary:
            _summary_tab(document, may_summarize=may["summarize"])
        with questions:
            _questions_tab(document)
        with key_facts:
            render_key_facts(
                document,
                queue=_queue,
                may_run=may["facts_run"],
                live_jobs=lambda ids: st.fragment(run_every=POLL_S)(_live_jobs)(
                    ids, is_polling=True
                ),
            )
        with pages:
            _pages_tab(document)
        render_open_citation(document.id)
    except AppError as error:
        ctx.show_error(error)


render()
