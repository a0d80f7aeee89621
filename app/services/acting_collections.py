"""What a person does with collections, checked and logged (as app/services/acting.py, which
re-exports these: every way in calls them as `acting.X`): finding one by name among those the
actor may read, creating, renaming, writing to and asking a collection, and its answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from app.db.models import Collection, CollectionAnswer, CollectionGrant
from app.display import display_name
from app.errors import NotFound
from app.services import access, collection_answers, collection_names, collections
from app.services.access import Actor


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
