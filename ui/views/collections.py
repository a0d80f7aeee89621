"""Collections: create, rename and delete them, add and remove documents, and ask a collection a
question. The answer cites "[Document, p. N]" (each a button to that page), with its quotes; a
question about every document is answered in a table (document, answer, quote, page)."""

from __future__ import annotations

import logging

import streamlit as st

from app.db.models import CollectionAnswer, JobKind, JobStatus
from app.errors import AppError, InvalidCollection
from app.services import access, acting, collection_answers, collections, dispatch, jobs
from app.services.answer_labels import row_source, view_of
from app.services.questions import InvalidQuestion
from ui import context as ctx
from ui.components.citations import CITATION_KEY, open_citation, render_open_citation
from ui.components.job_status import JobView, progress_line
from ui.components.quotes import flat, model_text_apart, support_badge

logger = logging.getLogger("longdoc.ui.collections")

POLL_S = 1.0
MODES = {"auto": None, "each": True, "retrieve": False}
MODE_LABELS = {
    "auto": "Let the question decide",
    "each": "Answer for every document (a table)",
    "retrieve": "Answer from the best passages across them",
}
CHOICE_KEY = "collection-choice"
PENDING_KEY = "collection-pending"
# The New-collection popover tracks whether it is open, so that Create can close it.
POPOVER_KEY = "new-collection-popover"
CLOSE_POPOVER_KEY = "new-collection-close"


def _allow_write(db, collection_id: int, action: str) -> None:
    acting.allow_collection_write(
        session=db, actor=ctx.actor(), collection_id=collection_id, action=action
    )


def _show_next(collection_id: int | None) -> None:
    """Choose this collection (None: none) on the rerun that follows: a widget's value is set
    before the widget is drawn, so the picker shows it too (a popped key leaves the browser's
    old choice on screen)."""
    st.session_state[PENDING_KEY] = collection_id
    if collection_id is None:
        st.query_params.pop("collection", None)
    else:
        st.query_params["collection"] = str(collection_id)


def _may_create() -> bool:
    with ctx.session() as db:
        return access.can(session=db, actor=ctx.actor(), action="collection_create")


def _chosen_collection(*, may_create: bool) -> int | None:
    with ctx.session() as db:
        rows = acting.list_collections(session=db, actor=ctx.actor())  # only those granted
    # The picker sends back the label shown, so a label is the name alone: one with the number
    # of documents in it would stop matching once a document is added. Names are unique per
    # owner: one that several share is told apart by its owner and id.
    choices = collections.picker_labels(rows)
    if PENDING_KEY in st.session_state:
        st.session_state[CHOICE_KEY] = st.session_state.pop(PENDING_KEY)
    if st.session_state.pop(CLOSE_POPOVER_KEY, False):  # created on the run before: close it
        st.session_state[POPOVER_KEY] = False
    if CHOICE_KEY not in st.session_state:  # a link to ?collection=N
        raw = st.query_params.get("collection")
        is_known = raw is not None and raw.isdigit() and int(raw) in choices
        st.session_state[CHOICE_KEY] = int(raw) if is_known else None
    if st.session_state[CHOICE_KEY] is not None and st.session_state[CHOICE_KEY] not in choices:
        st.session_state[CHOICE_KEY] = None  # deleted elsewhere
    with st.container(horizontal=True, vertical_alignment="bottom"):
        chosen = st.selectbox(
            "Collection",
            list(choices),
            format_func=lambda i: choices[i],
            placeholder="Choose a collection" if choices else "No collections yet",
            key=CHOICE_KEY,
        )
        if may_create:  # accounts (issue 25): not offered to whom may not
            with st.popover(
                "New collection", icon=":material/add:", key=POPOVER_KEY, on_change="rerun"
            ):
                _create_form()
    if chosen is not None:
        st.query_params["collection"] = str(chosen)
    return chosen


def _create_form() -> None:
    # A form, so that Create sends the name typed (a text input outside a form reaches the
    # script only on Enter or blur, and a button disabled until then cannot be clicked).
    with st.form("new-collection", clear_on_submit=True, border=False):
        name = st.text_input("Name", key="new-collection-name", max_chars=200)
        if not st.form_submit_button("Create", key="create-collection", icon=":material/add:"):
            return
    try:
        with ctx.session() as db:
            created = acting.create_collection(session=db, actor=ctx.actor(), name=name)
            db.commit()
    except InvalidCollection as error:
        ctx.show_error(error)
        return
    _show_next(created.id)
    st.session_state[CLOSE_POPOVER_KEY] = True
    st.rerun()


def _manage(collection_id: int) -> None:
    with ctx.session() as db:
        collection = collections.get_collection(session=db, collection_id=collection_id)
        members = collections.documents_of(session=db, collection_id=collection_id)
        library = acting.list_documents(session=db, actor=ctx.actor())
    member_ids = {d.id for d in members}
    with st.expander(f"Documents ({len(members)})", icon=":material/folder_open:"):
        for document in members:
            with st.container(horizontal=True, vertical_alignment="center"):
                ctx.document_link(document.id, display := (document.title or document.file_name))
                if st.button(
                    "Remove",
                    key=f"remove-{document.id}",
                    icon=":material/remove:",
                    help=f"Take {display} out of this collection (it stays in the library).",
                ):
                    with ctx.session() as db:
                        _allow_write(db, collection_id, "collection_write")
                        collections.remove_documents(
                            session=db, collection_id=collection_id, document_ids=[document.id]
                        )
                        db.commit()
                    st.rerun()
        others = {d.id: d.title or d.file_name for d in library if d.id not in member_ids}
        _add_form(collection_id, others)
    with st.expander("Rename or delete", icon=":material/edit:"):
        _rename_form(collection_id, collection.name)
        st.caption("Deleting a collection keeps its documents; its questions and answers go.")
        if st.button("Delete collection", key="delete-collection", icon=":material/delete:"):
            with ctx.session() as db:
                _allow_write(db, collection_id, "collection_delete")
                collections.delete_collection(session=db, collection_id=collection_id)
                db.commit()
            _show_next(None)
            st.rerun()


def _add_form(collection_id: int, others: dict[int, str]) -> None:
    # A form, cleared on submit, so the picker empties once the documents are in.
    with st.form(f"add-form-{collection_id}", clear_on_submit=True, border=False):
        added = st.multiselect(
            "Add documents",
            list(others),
            format_func=lambda i: f"{others[i]} (#{i})",
            key=f"add-{collection_id}",
            placeholder="Choose documents" if others else "Every document is in it",
        )
        if not st.form_submit_button("Add", key="add-documents", icon=":material/add:"):
            return
    if added:
        with ctx.session() as db:
            acting.allow_add_documents(
                session=db, actor=ctx.actor(), collection_id=collection_id, document_ids=added
            )
            collections.add_documents(session=db, collection_id=collection_id, document_ids=added)
            db.commit()
        st.rerun()


def _rename_form(collection_id: int, name: str) -> None:
    with st.form("rename-collection-form", border=False):
        new_name = st.text_input("New name", value=name, key="rename-collection-name")
        if not st.form_submit_button("Rename", key="rename-collection") or new_name == name:
            return
    try:
        with ctx.session() as db:
            acting.rename_collection(
                session=db, actor=ctx.actor(), collection_id=collection_id, name=new_name
            )
            db.commit()
    except InvalidCollection as error:
        ctx.show_error(error)
        return
    _show_next(collection_id)  # the new label
    st.rerun()


def _ask(collection_id: int, num_documents: int) -> None:
    with st.form("ask-collection", clear_on_submit=True):
        question = st.text_area(
            "Ask the collection",
            max_chars=ctx.settings().max_question_chars,
            key="collection-question",
            placeholder="Which of these contracts can be assigned without consent?",
        )
        mode = st.radio(
            "How", list(MODES), format_func=MODE_LABELS.get, horizontal=True, key="ask-mode"
        )
        asked = st.form_submit_button("Ask", icon=":material/send:", disabled=not num_documents)
    if asked and question.strip():
        settings = ctx.settings()
        try:
            with ctx.session() as db:
                acting.allow_collection_question(
                    session=db, actor=ctx.actor(), collection_id=collection_id, question=question
                )
                params = collection_answers.question_params(
                    collection_id=collection_id,
                    question=question,
                    each=MODES[mode],
                    max_chars=settings.max_question_chars,
                )
                job = dispatch.submit_job(
                    settings=settings,
                    session=db,
                    kind=JobKind.ANSWER,
                    collection_id=collection_id,
                    params=params,
                )
                logger.info("queued collection question job %s", job.id)
        except InvalidQuestion as error:
            ctx.show_error(error)
            return
        st.rerun()


def _live(job_ids: list[int], *, is_polling: bool) -> None:
    with ctx.session() as db:
        views = [JobView.of(job) for job in jobs.get_jobs(session=db, job_ids=job_ids).values()]
    for view in views:
        if view.is_open or view.status == JobStatus.FAILED:
            progress_line(view)
    if is_polling and not any(view.is_open for view in views):
        st.rerun()


def _citations(answer: CollectionAnswer) -> None:
    if not answer.citations:
        st.caption("No page cited.")
        return
    with st.container(horizontal=True, vertical_alignment="center", gap="small"):
        st.caption(":material/format_quote: Cited, click to read:", width="content")
        for index, cited in enumerate(answer.citations[:16]):
            label = f"{cited['title']}, p. {cited['page']}"
            if st.button(label, key=f"cite-{answer.id}-{index}", icon=":material/description:"):
                # The page opens with the answer's quotes on it marked, where it has some.
                spans = [
                    (q["start_char"], q["end_char"])
                    for q in answer.quotes
                    if q["document_id"] == cited["document_id"] and q["page"] == cited["page"]
                ]
                open_citation(cited["document_id"], cited["page"], [], spans=spans)


def _quotes(answer: CollectionAnswer) -> None:
    if not answer.quotes:
        return
    st.caption(":material/format_quote: Quoted from the documents, click to read it there:")
    for index, quote in enumerate(answer.quotes):
        with st.container(horizontal=True, vertical_alignment="top", gap="small"):
            if st.button(
                f"{quote['title']}, p. {quote['page']}",
                key=f"quote-{answer.id}-{index}",
                icon=":material/description:",
            ):
                open_citation(
                    quote["document_id"],
                    quote["page"],
                    [],
                    spans=[(quote["start_char"], quote["end_char"])],
                )
            st.markdown(f"“{ctx.md_escape(flat(quote['text']))}”")


TABLE_COLUMNS = ("Document", "Page", "Answer", "Quote", "From")
TABLE_CONFIG = {
    "Document": st.column_config.TextColumn(width=160),
    "Page": st.column_config.NumberColumn(width=50, format="%d"),
    "Answer": st.column_config.TextColumn(width=300),
    "Quote": st.column_config.TextColumn(
        width=360, help="The document's words that support the answer (click to read all)."
    ),
    "From": st.column_config.TextColumn(width=80),
}


def _table(answer: CollectionAnswer) -> None:
    st.dataframe(
        [
            {
                "Document": row["title"],
                "Answer": row["answer"],
                "Quote": flat(row["quote"] or ""),
                "Page": row["page"],
                "From": row_source(row["source"]),
            }
            for row in answer.rows
        ],
        hide_index=True,
        key=f"table-{answer.id}",
        width="stretch",
        # Widths that add up to the page's width, the short columns first: left to size
        # themselves, a long answer and quote pushed the quote and the page out at the right.
        column_order=TABLE_COLUMNS,
        column_config=TABLE_CONFIG,
    )


def _answer(answer: CollectionAnswer) -> None:
    with st.chat_message("user"):
        st.markdown(ctx.md_escape(answer.question))
    with st.chat_message("assistant"):
        view = view_of(answer)
        st.markdown(ctx.md_escape(view.text))
        if answer.rows:
            _table(answer)
        else:
            support_badge(view)
            _quotes(answer)
            model_text_apart(view)
        _citations(answer)


def _page() -> None:
    st.title("Collections")
    may_create = _may_create()
    collection_id = _chosen_collection(may_create=may_create)
    if collection_id is None:
        st.info(
            "Choose a collection, or create one." if may_create else "Choose a collection.",
            icon=":material/info:",
        )
        return
    with ctx.session() as db:
        if collections.get_collection(session=db, collection_id=collection_id) is None:
            st.warning("This collection does not exist any more.")
            return
        # Accounts (issue 25): read granted (logged if refused); answers citing a document
        # this user may not read are not shown; managing needs the write grant.
        answers = acting.collection_answers_for(
            session=db, actor=ctx.actor(), collection_id=collection_id
        )
        may_write = access.can(
            session=db, actor=ctx.actor(), action="collection_write", collection_id=collection_id
        )
        num_documents = len(collections.document_ids_of(session=db, collection_id=collection_id))
        open_ids = [
            job.id
            for job in collection_answers.question_jobs(session=db, collection_id=collection_id)
            if job.status in (JobStatus.QUEUED, JobStatus.RUNNING)
        ]
    if may_write:
        _manage(collection_id)
    _ask(collection_id, num_documents)
    if open_ids:
        st.fragment(run_every=POLL_S)(_live)(open_ids, is_polling=True)
    for answer in answers:
        _answer(answer)
    citation = st.session_state.get(CITATION_KEY)
    if citation:
        render_open_citation(citation["document_id"])


def render() -> None:
    try:
        _page()
    except AppError as error:
        ctx.show_error(error)


render()
