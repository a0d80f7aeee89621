"""Collections: named sets of documents (a matter, a case file, a set of papers).

Cascade rules (the database's foreign keys, tested on both databases): deleting a collection
deletes its links, its questions' jobs and answers, never a document; deleting a document removes
it from every collection, and `forget_document` deletes the collection answers that quote it.
Functions flush; the caller commits. "Not found" is None (or False); bad names raise
InvalidCollection. Names are unique per owner; which name picks which collection, and which
names a user may not give, is app/services/collection_names.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection as Ids
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.db.models import Collection, CollectionAnswer, CollectionDocument, Document, User
from app.display import typed_text
from app.services import collection_names as names

MAX_NAME_CHARS = names.MAX_NAME_CHARS


@dataclass(frozen=True)
class CollectionSummary:
    id: int
    name: str
    num_documents: int
    owner_name: str | None = None  # None: the admins' (no owner)


def create_collection(
    *,
    session: Session,
    name: str,
    owner_id: int | None = None,
    readable: Ids[int] | None = None,
) -> Collection:
    """A new collection of `owner_id` (None: the admins'), made by a user who may read the
    collections `readable` (None: every one): refused when one of those has the name, never
    because of one they may not read (collection_names.refuse_taken)."""
    clean = names.checked_name(name)
    names.refuse_taken(session, clean, owner_id=owner_id, readable=readable)
    collection = Collection(name=clean, owner_id=owner_id)
    session.add(collection)
    session.flush()
    return collection


def rename_collection(
    *,
    session: Session,
    collection_id: int,
    name: str,
    readable: Ids[int] | None = None,
) -> Collection | None:
    """`readable`: as for create_collection."""
    collection = session.get(Collection, collection_id)
    if collection is None:
        return None
    clean = names.checked_name(name)
    names.refuse_taken(
        session, clean, owner_id=collection.owner_id, readable=readable, renaming=collection_id
    )
    collection.name = clean
    session.flush()
    return collection


def delete_collection(*, session: Session, collection_id: int) -> bool:
    """Delete the collection, its links, answers and question jobs; its documents stay. A
    question job still running stops at its next check and saves nothing (worker/jobs/run_claim.py)."""
    collection = session.get(Collection, collection_id)
    if collection is None:
        return False
    session.delete(collection)
    session.flush()
    return True


def get_collection(*, session: Session, collection_id: int) -> Collection | None:
    return session.get(Collection, collection_id)


def find_collection(
    *, session: Session, name: str, among: Ids[int] | None = None
) -> Collection | None:
    """The collection `name` picks among the ids `among` (None: every one): "#ID", or the name
    as a person reads it ("Café" typed composed or decomposed, or "CAFÉ", is one name). None if
    none; AmbiguousCollection, naming each one's id and owner, if several (collection_names)."""
    return names.find(session, name, among=among)


def list_collections(*, session: Session) -> list[CollectionSummary]:
    counts = (
        select(
            Collection.id,
            Collection.name,
            func.count(CollectionDocument.document_id),
            User.name,
        )
        .outerjoin(CollectionDocument, CollectionDocument.collection_id == Collection.id)
        .outerjoin(User, User.id == Collection.owner_id)
        .group_by(Collection.id, Collection.name, User.name)
        .order_by(func.lower(Collection.name), Collection.id)
    )
    return [
        CollectionSummary(id=i, name=n, num_documents=c, owner_name=o)
        for i, n, c, o in session.execute(counts)
    ]


def picker_labels(rows: Iterable[CollectionSummary]) -> dict[int, str]:
    """Each collection's label in a list a person picks from: its name, and where another in the
    list reads the same, its owner and id too ("Smith (alice's, #3)")."""
    rows = list(rows)
    counts = Counter(typed_text(row.name).casefold() for row in rows)
    labels = {}
    for row in rows:
        if counts[typed_text(row.name).casefold()] == 1:
            labels[row.id] = row.name
        else:
            owner = names.whose(row.owner_name)
            labels[row.id] = f"{row.name} ({owner}, {names.ID_PREFIX}{row.id})"
    return labels


def add_documents(*, session: Session, collection_id: int, document_ids: Iterable[int]) -> int:
    """Add the documents not yet in the collection; returns how many were added. Ids of
    documents that do not exist are skipped (`missing_documents` names them)."""
    wanted = set(document_ids)
    present = set(document_ids_of(session=session, collection_id=collection_id))
    existing = set(session.scalars(select(Document.id).where(Document.id.in_(wanted))))
    new = sorted((wanted & existing) - present)
    session.add_all(CollectionDocument(collection_id=collection_id, document_id=i) for i in new)
    session.flush()
    return len(new)


def missing_documents(*, session: Session, document_ids: Iterable[int]) -> list[int]:
    wanted = set(document_ids)
    existing = set(session.scalars(select(Document.id).where(Document.id.in_(wanted))))
    return sorted(wanted - existing)


def remove_documents(*, session: Session, collection_id: int, document_ids: Iterable[int]) -> int:
    """Take the documents out of the collection (they stay in the library); returns how many."""
    result = session.execute(
        delete(CollectionDocument).where(
            CollectionDocument.collection_id == collection_id,
            CollectionDocument.document_id.in_(set(document_ids)),
        )
    )
    session.flush()
    return result.rowcount or 0


def document_ids_of(*, session: Session, collection_id: int) -> list[int]:
    query = (
        select(CollectionDocument.document_id)
        .where(CollectionDocument.collection_id == collection_id)
        .order_by(CollectionDocument.document_id)
    )
    return list(session.scalars(query))


def documents_of(*, session: Session, collection_id: int) -> list[Document]:
    query = (
        select(Document)
        .join(CollectionDocument, CollectionDocument.document_id == Document.id)
        .where(CollectionDocument.collection_id == collection_id)
        .order_by(Document.id)
    )
    return list(session.scalars(query))


def collections_of(*, session: Session, document_id: int) -> list[Collection]:
    query = (
        select(Collection)
        .join(CollectionDocument, CollectionDocument.collection_id == Collection.id)
        .where(CollectionDocument.document_id == document_id)
        .order_by(func.lower(Collection.name))
    )
    return list(session.scalars(query))


def forget_document(*, session: Session, document_id: int) -> int:
    """Delete the collection answers that quote the document (call before deleting it): they
    hold its text. Returns how many were deleted."""
    collection_ids = [c.id for c in collections_of(session=session, document_id=document_id)]
    if not collection_ids:
        return 0
    answers = session.scalars(
        select(CollectionAnswer).where(CollectionAnswer.collection_id.in_(collection_ids))
    )
    quoting = [answer for answer in answers if document_id in (answer.document_ids or [])]
    for answer in quoting:
        session.delete(answer)
    session.flush()
    return len(quoting)
