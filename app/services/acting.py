"""What a person does, checked and logged: every way in (UI pages, the CLI, ingestion) calls
these with the acting user (app/services/access.py decides; app/services/audit.py records).

Reads that return data filter it here, so nothing of a document the actor may not read leaves
the services: no row, title, snippet, citation or count. Each function that reads commits its
audit row itself (a read has nothing else to commit); those that allow a write leave the commit
to the caller, with the write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from app.db.models import AuditEvent, Document, Job, Role, User
from app.services import access, audit, documents, facts
from app.services.access import Actor

# Collections are in app/services/acting_collections.py; every way in calls them from here.
from app.services.acting_collections import (  # noqa: F401 (re-exported)
    allow_add_documents,
    allow_collection_question,
    allow_collection_write,
    collection_answers_for,
    create_collection,
    find_collection,
    list_collections,
    lookup_collection,
    open_collection,
    rename_collection,
    visible_answer,
)
from app.services.search import SearchFilters, SearchHit, search_passages

# --- documents ---


def list_documents(*, session: Session, actor: Actor, **filters: Any) -> list[Document]:
    """documents.list_documents, only those `actor` may read."""
    rows = documents.list_documents(session=session, **filters)
    readable = access.readable_document_ids(session=session, actor=actor)
    return rows if readable is None else [row for row in rows if row.id in readable]


def open_document(*, session: Session, actor: Actor, document_id: int) -> Document:
    """The document, read by `actor` (logged); AccessRefused when they may not, or it is gone."""
    access.require_document(session=session, actor=actor, document_id=document_id, action="view")
    document = documents.get_document(session=session, document_id=document_id)
    assert document is not None  # require_document found it
    access.record_ok(
        session=session,
        actor=actor,
        action="view",
        target_kind="document",
        target_ids=[document_id],
    )
    session.commit()
    return document


def allow_document_write(*, session: Session, actor: Actor, document_id: int, action: str) -> None:
    """Summarize, extract facts, delete: checked and logged (the caller commits)."""
    access.require_document(
        session=session, actor=actor, document_id=document_id, action=action, write=True
    )
    access.record_ok(
        session=session,
        actor=actor,
        action=action,
        target_kind="document",
        target_ids=[document_id],
    )


def allow_ask(*, session: Session, actor: Actor, document_id: int, question: str) -> None:
    """A question about a document: its reader may ask (logged with the question's length)."""
    access.require_document(session=session, actor=actor, document_id=document_id, action="ask")
    access.record_ok(
        session=session,
        actor=actor,
        action="ask",
        target_kind="document",
        target_ids=[document_id],
        details={"question_chars": len(question)},
    )


def allow_upload(
    *, session: Session, actor: Actor, collection_id: int | None, record: bool = True
) -> int | None:
    """May `actor` store a document (into `collection_id`)? Logged (the caller commits with its
    job; `record=False`: a refusal only, the caller records the upload once it is stored, with
    record_upload). Returns the owner to give what is stored."""
    access.require_role(
        session=session, actor=actor, action="upload", allowed=access.can_upload(actor)
    )
    if collection_id is not None:
        access.require_collection(
            session=session, actor=actor, collection_id=collection_id, action="upload", write=True
        )
    if record:
        record_upload(session=session, actor=actor, collection_id=collection_id)
    return actor.user_id


def record_upload(
    *,
    session: Session,
    actor: Actor,
    collection_id: int | None,
    document_ids: Sequence[int] = (),
) -> None:
    """The upload, allowed, in the audit log: into which collection, or which documents."""
    if collection_id is not None:
        kind, ids = "collection", [collection_id]
    else:
        kind, ids = ("document" if document_ids else ""), list(document_ids)
    access.record_ok(
        session=session, actor=actor, action="upload", target_kind=kind, target_ids=ids
    )


# --- search and key facts ---


def search(
    *,
    session: Session,
    actor: Actor,
    query: str,
    filters: SearchFilters | None = None,
    **options: Any,
) -> list[SearchHit]:
    """search_passages over the documents `actor` may read, and no others: a sentence found only
    in another's document gives nothing, not even a count. Logged with the query's length."""
    filters = filters or SearchFilters()
    if filters.collection_id is not None:
        access.require_collection(
            session=session, actor=actor, collection_id=filters.collection_id, action="search"
        )
    readable = access.readable_document_ids(session=session, actor=actor)
    if readable is not None:
        allowed = readable if filters.document_ids is None else readable & set(filters.document_ids)
        filters = replace(filters, document_ids=tuple(sorted(allowed)))
    hits = search_passages(session=session, query=query, filters=filters, **options)
    access.record_ok(
        session=session,
        actor=actor,
        action="search",
        target_kind="collection" if filters.collection_id is not None else "",
        target_ids=[] if filters.collection_id is None else [filters.collection_id],
        details={"query_chars": len(query), "num_hits": len(hits)},
    )
    session.commit()
    return hits


def export_facts(*, session: Session, actor: Actor, path: Path) -> int:
    """The key facts of the documents `actor` may read, written to `path`; logged."""
    suffix = path.suffix.lower()
    columns, rows = facts.export_table(session=session)
    readable = access.readable_document_ids(session=session, actor=actor)
    if readable is not None:
        rows = [row for row in rows if row["document_id"] in readable]
    text = facts.render_export(columns, rows, suffix)  # an unknown suffix raises first
    access.record_ok(
        session=session,
        actor=actor,
        action="export_facts",
        target_kind="document",
        target_ids=[row["document_id"] for row in rows],
        details={"num_rows": len(rows)},
    )
    session.commit()
    path.write_text(text, encoding="utf-8")
    return len(rows)


def list_facts(*, session: Session, actor: Actor, document_id: int) -> list:
    access.require_document(session=session, actor=actor, document_id=document_id, action="facts")
    return facts.list_facts(session=session, document_id=document_id)


# --- the audit log ---


def read_audit(
    *, session: Session, actor: Actor, user_name: str | None = None, since: Any = None
) -> list[AuditEvent]:
    """The log, for an admin (reading it is logged too)."""
    access.require_role(session=session, actor=actor, action="audit_read", allowed=actor.is_admin)
    events = audit.list_events(session=session, user_name=user_name, since=since)
    access.record_ok(
        session=session, actor=actor, action="audit_read", details={"num_rows": len(events)}
    )
    session.commit()
    return events


# --- ingestion ---


def claim_documents(*, session: Session, owner_id: int | None, document_ids: Sequence[int]) -> int:
    """Documents without an owner become `owner_id`'s (what a user uploads or ingests; one
    already stored keeps its owner). Returns how many; the caller commits."""
    if owner_id is None or not document_ids:
        return 0
    rows = session.scalars(
        select(Document).where(Document.id.in_(list(document_ids)), Document.owner_id.is_(None))
    ).all()
    for row in rows:
        row.owner_id = owner_id
    session.flush()
    return len(rows)


def readable_by_owner(*, session: Session, owner_id: int | None) -> ColumnElement[bool] | None:
    """What a file ingested for `owner_id` may be found stored as (documents.find_by_hash): the
    documents they may read; None, the local admin's (any). A user deleted since reads none
    but their own, so their file becomes a new document (migration 0015)."""
    if owner_id is None:
        return None
    user = session.get(User, owner_id)
    role = Role.VIEWER if user is None else user.role
    name = "" if user is None else user.name
    return access.readable_condition(Actor(user_id=owner_id, name=name, role=role))


def visible_jobs(*, session: Session, actor: Actor, rows: Sequence[Job]) -> list[Job]:
    """The jobs `actor` may see: of documents and collections they may read (a job's stage and
    error may name a file); for an admin, every one."""
    if actor.is_admin:
        return list(rows)
    documents_ok = access.readable_document_ids(session=session, actor=actor) or set()
    collections_ok = access.readable_collection_ids(session=session, actor=actor) or set()
    return [
        job
        for job in rows
        if (job.document_id is not None and job.document_id in documents_ok)
        or (job.collection_id is not None and job.collection_id in collections_ok)
    ]
