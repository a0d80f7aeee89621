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

from app.db.models import (
    AuditEvent,
    Collection,
    CollectionAnswer,
    CollectionGrant,
    Document,
    Job,
    Role,
    User,
)
from app.display import display_name
from app.errors import NotFound
from app.services import (
    access,
    audit,
    collection_answers,
    collection_names,
    collections,
    documents,
    facts,
)
from app.services.access import Actor
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


# --- collections ---


def list_collections(*, session: Session, actor: Actor) -> list[collections.CollectionSummary]:
    rows = collections.list_collections(session=session)
    readable = access.readable_collection_ids(session=session, actor=actor)
    return rows if readable is None else [row for row in rows if row.id in readable]


def find_collection(*, session: Session, actor: Actor, name: str, action: str) -> Collection:
    """The collection `name` picks among those `actor` may read ("#ID" or a name; every one
    for an admin), for them to `action` (the caller checks the action itself). One that does
    not exist and one they may not read get the same refusal (logged), so a name tells nobody
    that a collection exists; an admin, who may read every one, is told NotFound. A name that
    picks several they may read raises AmbiguousCollection, naming each one's id and owner."""
    found = lookup_collection(session=session, actor=actor, name=name)
    if found is not None:
        return found
    wanted_id = collection_names.by_id(name)
    what = f"#{wanted_id}" if wanted_id is not None else f"named {display_name(name)!r}"
    sentence = f"There is no collection {what}"
    if actor.is_admin:
        raise NotFound(f"{sentence}; see `longdoc collections list`.")
    # The audit log (for the admins) keeps which collections of that name or id exist.
    hidden = [row.id for row in collection_names.matching(session, name, among=None)]
    raise access.refuse(
        session=session,
        actor=actor,
        action=action,
        sentence=f"{sentence} that you may open; see `longdoc collections list`.",
        target_kind="collection" if hidden else "",
        target_ids=hidden,
    )


def lookup_collection(*, session: Session, actor: Actor, name: str) -> Collection | None:
    """find_collection without the refusal: None when `name` picks no collection `actor` may
    read (whether or not one they may not read has it: ingesting into a named collection then
    creates theirs). AmbiguousCollection as find_collection."""
    readable = access.readable_collection_ids(session=session, actor=actor)
    return collections.find_collection(session=session, name=name, among=readable)


def open_collection(*, session: Session, actor: Actor, collection_id: int) -> Collection:
    access.require_collection(
        session=session, actor=actor, collection_id=collection_id, action="view"
    )
    collection = collections.get_collection(session=session, collection_id=collection_id)
    if collection is None:
        raise access.AccessRefused("There is no such collection that you may open.")
    return collection


def allow_collection_write(
    *, session: Session, actor: Actor, collection_id: int, action: str
) -> None:
    """Rename, delete, add to or remove from a collection: checked and logged (caller commits)."""
    access.require_collection(
        session=session, actor=actor, collection_id=collection_id, action=action, write=True
    )
    access.record_ok(
        session=session,
        actor=actor,
        action=action,
        target_kind="collection",
        target_ids=[collection_id],
    )


def allow_add_documents(
    *, session: Session, actor: Actor, collection_id: int, document_ids: Sequence[int]
) -> None:
    """Adding (or removing) documents needs the collection's write grant and each document
    readable: one may not pull another's document into a collection one shares, and a document
    one may not read and a missing one are refused alike."""
    access.require_collection(
        session=session,
        actor=actor,
        collection_id=collection_id,
        action="collection_write",
        write=True,
    )
    for document_id in document_ids:
        access.require_document(
            session=session, actor=actor, document_id=document_id, action="collection_write"
        )
    access.record_ok(
        session=session,
        actor=actor,
        action="collection_write",
        target_kind="collection",
        target_ids=[collection_id, *document_ids],
    )


def create_collection(*, session: Session, actor: Actor, name: str) -> Collection:
    """A new collection, owned by `actor`; an editor who makes it may write it. Refused when a
    collection `actor` may read has the name; one they may not read never stops them and is
    never mentioned (names are unique per owner). The caller commits."""
    access.require_role(
        session=session,
        actor=actor,
        action="collection_create",
        allowed=access.can_create_collection(actor),
    )
    collection = collections.create_collection(
        session=session,
        name=name,
        owner_id=actor.user_id,
        readable=access.readable_collection_ids(session=session, actor=actor),
    )
    if not actor.is_admin and actor.user_id is not None:
        session.add(
            CollectionGrant(user_id=actor.user_id, collection_id=collection.id, can_write=True)
        )
        session.flush()
    access.record_ok(
        session=session,
        actor=actor,
        action="collection_create",
        target_kind="collection",
        target_ids=[collection.id],
    )
    return collection


def rename_collection(
    *, session: Session, actor: Actor, collection_id: int, name: str
) -> Collection:
    """Rename a collection `actor` may write (checked and logged; the caller commits); refused
    as create_collection refuses a name."""
    allow_collection_write(
        session=session, actor=actor, collection_id=collection_id, action="collection_rename"
    )
    renamed = collections.rename_collection(
        session=session,
        collection_id=collection_id,
        name=name,
        readable=access.readable_collection_ids(session=session, actor=actor),
    )
    if renamed is None:  # an admin's, deleted meanwhile
        raise NotFound("There is no such collection any more.")
    return renamed


def allow_collection_question(
    *, session: Session, actor: Actor, collection_id: int, question: str
) -> None:
    """A question across a collection: its readers may ask. The job reads only the collection's
    documents, which a reader of the collection may all read (a grant covers all of them)."""
    access.require_collection(
        session=session, actor=actor, collection_id=collection_id, action="ask"
    )
    access.record_ok(
        session=session,
        actor=actor,
        action="ask",
        target_kind="collection",
        target_ids=[collection_id],
        details={"question_chars": len(question)},
    )


def visible_answer(*, session: Session, actor: Actor, answer: CollectionAnswer) -> bool:
    """Whether a collection answer cites only documents `actor` may read (a document may have
    left the collection since it was answered): one that does not is not shown."""
    readable = access.readable_document_ids(session=session, actor=actor)
    return readable is None or set(answer.document_ids or ()) <= readable


def collection_answers_for(
    *, session: Session, actor: Actor, collection_id: int, **options: Any
) -> list[CollectionAnswer]:
    access.require_collection(
        session=session, actor=actor, collection_id=collection_id, action="view"
    )
    rows = collection_answers.list_for_collection(
        session=session, collection_id=collection_id, **options
    )
    return [row for row in rows if visible_answer(session=session, actor=actor, answer=row)]


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
