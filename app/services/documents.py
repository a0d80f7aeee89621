"""Documents, their pages and passages (their files: app/services/file_store.py).

Functions take a session and flush; the caller commits. "Not found" returns None (or False).
"""

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from celery import Celery
from sqlalchemy import ColumnElement, or_, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app import kv_cache_files
from app.db.models import (
    Document,
    DocumentKind,
    DocumentStatus,
    Job,
    JobKind,
    Page,
    PageSource,
    Passage,
    Redaction,
)
from app.db.session import write_transaction
from app.display import display_name, display_name_or_none
from app.errors import DuplicateDocument
from app.services import collections, dispatch, file_store


@dataclass(frozen=True)
class NewPage:
    number: int  # 1-based
    text: str
    source: PageSource = PageSource.TEXT_LAYER
    ocr_confidence: float | None = None  # 0 to 1 on an OCR'd page


@dataclass(frozen=True)
class NewRedaction:
    """A box that hides text still in the file: its page, corners (PDF points) and count."""

    page: int
    left: float
    bottom: float
    right: float
    top: float
    num_chars: int


@dataclass(frozen=True)
class NewPassage:
    ordinal: int
    first_page: int
    last_page: int
    start_char: int
    end_char: int
    text: str
    num_tokens: int
    embedding: bytes | None = None  # its sentences' vectors as bytes (worker/model/vector_store.py)
    embedding_model: str | None = None


@dataclass(frozen=True)
class NewDocument:
    """A parsed document to store. num_pages and num_chars are derived from `pages`."""

    content_hash: str  # sha256 hex of the file, see content_hash_of
    file_name: str
    kind: DocumentKind
    num_tokens: int
    pages: Sequence[NewPage]
    passages: Sequence[NewPassage]
    title: str | None = None
    stored_path: str | None = None  # as returned by store_file, or relative to files_dir
    redactions: Sequence[NewRedaction] = ()
    is_hidden_text_kept: bool = False  # the text under `redactions` left in the pages

    def __post_init__(self) -> None:
        if not file_store.is_content_hash(self.content_hash):
            raise ValueError("content_hash must be 64 lowercase hex digits (sha256)")


def find_by_hash(
    *, session: Session, content_hash: str, readable: ColumnElement[bool] | None = None
) -> Document | None:
    """A document of this file; with `readable` (app.services.access.readable_condition), one
    that its reader may read: a file stored only as others' documents is not theirs to find
    (several documents may hold one file, migration 0015). The oldest first."""
    query = select(Document).where(Document.content_hash == content_hash)
    if readable is not None:
        query = query.where(readable)
    return session.scalars(query.order_by(Document.id)).first()


def _one_store_at_a_time(session: Session, content_hash: str) -> None:
    """On PostgreSQL, a lock on this file until the transaction ends, so that a store that
    began a moment after another's sees its document instead of adding a second. SQLite writes
    one transaction at a time already (store_read begins it IMMEDIATE)."""
    if session.get_bind().dialect.name == "postgresql":
        key = int(content_hash[:15], 16)  # 60 bits of the hash: a bigint
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def store_document(
    *, session: Session, new: NewDocument, readable: ColumnElement[bool] | None = None
) -> Document:
    """Add a ready document with its pages and passages, and flush; the caller commits.

    Raises DuplicateDocument when the file is stored already as a document (that `readable`
    allows, see find_by_hash), also when another process stored it a moment ago: stores of one
    file wait for each other (_one_store_at_a_time), since the database no longer holds one
    document a file (migration 0015). The session stays usable (the insert runs in a savepoint).
    """
    _one_store_at_a_time(session, new.content_hash)
    existing = find_by_hash(session=session, content_hash=new.content_hash, readable=readable)
    if existing is not None:
        raise DuplicateDocument(new.content_hash, existing.id)
    document = Document(
        content_hash=new.content_hash,
        # Names and titles come from whoever made the file: no escapes or bidi overrides stored.
        file_name=display_name(new.file_name)[:255] or "unnamed.pdf",
        title=display_name_or_none(new.title),
        kind=DocumentKind(new.kind),
        num_pages=len(new.pages),
        num_chars=sum(len(page.text) for page in new.pages),
        num_tokens=new.num_tokens,
        status=DocumentStatus.READY,
        stored_path=new.stored_path,
        num_ocr_pages=sum(1 for page in new.pages if page.source == PageSource.OCR),
        num_redactions=len(new.redactions),
        is_hidden_text_kept=new.is_hidden_text_kept and bool(new.redactions),
        pages=[
            Page(
                number=page.number,
                text=page.text,
                source=PageSource(page.source).value,
                ocr_confidence=page.ocr_confidence,
            )
            for page in new.pages
        ],
        # NewPassage's fields are the row's columns (worker/ingest/passage_rows.py maps the pipelines').
        passages=[Passage(**dataclasses.asdict(p)) for p in new.passages],
    )
    try:
        with session.begin_nested():
            session.add(document)
            session.flush()
            session.add_all(
                Redaction(
                    document_id=document.id,
                    page=box.page,
                    left=box.left,
                    bottom=box.bottom,
                    right=box.right,
                    top=box.top,
                    num_chars=box.num_chars,
                )
                for box in new.redactions
            )
    except IntegrityError:
        raced = find_by_hash(session=session, content_hash=new.content_hash, readable=readable)
        if raced is None:
            raise  # another constraint: a bug in the caller's pages or passages
        raise DuplicateDocument(new.content_hash, raced.id) from None
    return document


def list_documents(
    *,
    session: Session,
    kind: DocumentKind | None = None,
    status: DocumentStatus | None = None,
    title_query: str | None = None,
) -> list[Document]:
    """Newest first. `title_query` matches title or file name, case-insensitively, literally."""
    query = select(Document).order_by(Document.created_at.desc(), Document.id.desc())
    if kind is not None:
        query = query.where(Document.kind == kind)
    if status is not None:
        query = query.where(Document.status == status)
    if title_query:
        query = query.where(
            or_(
                Document.title.icontains(title_query, autoescape=True),
                Document.file_name.icontains(title_query, autoescape=True),
            )
        )
    return list(session.scalars(query))


def missing_document_ids(*, session: Session, document_ids: Sequence[int]) -> list[int]:
    """Those of document_ids that name no document (deleted), in ascending order."""
    wanted = {int(document_id) for document_id in document_ids}
    if not wanted:
        return []
    found = set(session.scalars(select(Document.id).where(Document.id.in_(wanted))))
    return sorted(wanted - found)


def get_document(*, session: Session, document_id: int) -> Document | None:
    return session.get(Document, document_id)


def get_pages(*, session: Session, document_id: int, number: int | None = None) -> list[Page]:
    """The document's pages in order, or only page `number`; [] when there is none."""
    query = select(Page).where(Page.document_id == document_id).order_by(Page.number)
    if number is not None:
        query = query.where(Page.number == number)
    return list(session.scalars(query))


def get_redactions(*, session: Session, document_id: int) -> list[Redaction]:
    """The document's boxes that hide text still in its file, by page and position."""
    query = (
        select(Redaction)
        .where(Redaction.document_id == document_id)
        .order_by(Redaction.page, Redaction.top.desc(), Redaction.left, Redaction.id)
    )
    return list(session.scalars(query))


def invisible_text_of(*, session: Session, document_id: int) -> tuple[dict[int, int], bool]:
    """Page number -> characters a reader cannot see, left out of the document's pages (kept
    when the bool is True), from the stats of the ingest that stored it ({} before they were
    counted, or once that job is pruned)."""
    query = (
        select(Job.stats)
        .where(Job.document_id == document_id, Job.kind == JobKind.INGEST)
        .order_by(Job.id.desc())
    )
    for stats in session.scalars(query):
        if isinstance(stats, dict) and "invisible_text" in stats:
            counts = {int(page): int(count) for page, count in stats["invisible_text"]}
            return counts, bool(stats.get("is_hidden_text_kept"))
    return {}, False


def ocr_pages_of(*, session: Session, document_id: int) -> dict[int, float | None]:
    """Page number -> OCR confidence of the document's pages that OCR read."""
    query = select(Page.number, Page.ocr_confidence).where(
        Page.document_id == document_id, Page.source == PageSource.OCR.value
    )
    return {number: confidence for number, confidence in session.execute(query)}


def get_passages(
    *,
    session: Session,
    document_id: int,
    passage_ids: Sequence[int] | None = None,
    page_number: int | None = None,
) -> list[Passage]:
    """The document's passages in order; only those in `passage_ids` and/or overlapping
    `page_number` when given. Ids of other documents' passages are ignored."""
    query = select(Passage).where(Passage.document_id == document_id).order_by(Passage.ordinal)
    if passage_ids is not None:
        query = query.where(Passage.id.in_(passage_ids))
    if page_number is not None:
        query = query.where(Passage.first_page <= page_number, Passage.last_page >= page_number)
    return list(session.scalars(query))


def set_passage_embeddings(
    *, session: Session, document_id: int, model: str, embeddings: Mapping[int, bytes]
) -> int:
    """Store `embeddings` (passage ordinal -> vector bytes) made by `model` on the document's
    passages and flush; the number of passages updated (ordinals it lacks are ignored)."""
    updated = 0
    for passage in get_passages(session=session, document_id=document_id):
        if passage.ordinal in embeddings:
            passage.embedding = embeddings[passage.ordinal]
            passage.embedding_model = model
            updated += 1
    session.flush()
    return updated


def documents_missing_embeddings(*, session: Session, model: str) -> list[int]:
    """Ids of ready documents with a passage that has no vector of `model`, oldest first."""
    lacking = (
        select(Passage.document_id)
        .where(or_(Passage.embedding.is_(None), Passage.embedding_model != model))
        .distinct()
    )
    query = (
        select(Document.id)
        .where(Document.status == DocumentStatus.READY, Document.id.in_(lacking))
        .order_by(Document.id)
    )
    return list(session.scalars(query))


def delete_document(
    *,
    session: Session,
    document_id: int,
    files_dir: Path,
    kv_cache_dir: Path | None = None,
    broker: Celery | None = None,
) -> bool:
    """Delete the document and, by cascade, its pages, passages, jobs, summaries and answers,
    its place in collections, and the collection answers that quote it.

    Its stored file is removed too when it lies inside `files_dir` (a path elsewhere is never
    touched), and its KV blocks in the engine's disk tier under `kv_cache_dir` (the workers
    sharing the folder drop theirs from memory too: app/kv_cache_files.py). With `broker` (a
    client: dispatch.client_for), every worker connected to it is told to drop the document's
    KV from its GPU prefix cache and CPU tier, disk tier on or off. Flushes; the caller
    commits. False when there is no such document.

    A task still running one of its jobs stops using the model at its next check once this is
    committed and saves nothing (worker/jobs/run_claim.py); ids are never given again
    (migration 0012), so no later document or job can receive what it was computing.
    """
    write_transaction(session)  # read, then deleted: BEGIN IMMEDIATE on SQLite
    document = session.get(Document, document_id)
    if document is None:
        return False
    stored_path = document.stored_path
    collections.forget_document(session=session, document_id=document_id)
    session.delete(document)
    session.flush()
    # The file stays while another document holds it (one per reader, migration 0015).
    if stored_path and find_by_hash(session=session, content_hash=document.content_hash) is None:
        file_store.remove_file(files_dir=files_dir, stored_path=stored_path)
    kv_cache_files.forget_document_kv(kv_cache_dir=kv_cache_dir, document_id=document_id)
    if broker is not None:
        dispatch.tell_workers_to_forget_document_kv(client=broker, document_id=document_id)
    return True
