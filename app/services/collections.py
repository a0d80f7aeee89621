"""Collections: named sets of documents (a matter, a case file, a set of papers).

Cascade rules (the database's foreign keys, tested on both databases): deleting a collection
deletes its links, its questions' jobs and answers, never a document; deleting a document removes
it from every collection, and `forget_document` deletes the collection answers that quote it.
Functions flush; the caller commits. "Not found" is None (or False); bad names raise
InvalidCollection.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.db.models import Collection, CollectionAnswer, CollectionDocument, Document
from app.display import display_name, typed_text
from app.errors import InvalidCollection

MAX_NAME_CHARS = 200


@dataclass(frozen=True)
class CollectionSummary:
    id: int
    name: str
    num_documents: int


def _checked_name(session: Session, name: str, *, renaming: int | None = None) -> str:
    clean = typed_text(display_name(name))
    if not clean:
        raise InvalidCollection(
            "A collection needs a name with at least one visible character."
            if name.strip()
            else "A collection needs a name."
        )
    if len(clean) > MAX_NAME_CHARS:
        raise InvalidCollection(f"A collection's name has at most {MAX_NAME_CHARS} characters.")
    taken = find_collection(session=session, name=clean)
    if taken is not None and taken.id != renaming:
        raise InvalidCollection(f"There is already a collection named {taken.name!r}.")
    return clean


def create_collection(*, session: Session, name: str) -> Collection:
    collection = Collection(name=_checked_name(session, name))
    session.add(collection)
    session.flush()
    return collection


def rename_collection(*, session: Session, collection_id: int, name: str) -> Collection | None:
    collection = session.get(Collection, collection_id)
    if collection is None:
        return None
    collection.name = _checked_name(session, name, renaming=collection_id)
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


def find_collection(*, session: Session, name: str) -> Collection | None:
    """The collection with this name: exact, then the same as a person reads it (Unicode
    normalized, invisible characters and case aside: "Café" typed composed or decomposed, or
    "CAFÉ", is one name). Compared here rather than in SQL, whose lower() is ASCII-only on
    SQLite; a library holds few collections."""
    clean = typed_text(name)
    found = session.scalars(select(Collection).where(Collection.name == clean)).first()
    if found is not None or not clean:
        return found
    key = clean.casefold()
    for collection in session.scalars(select(Collection).order_by(Collection.id)):
        if typed_text(collection.name).casefold() == key:
            return collection
    return None


def list_collections(*, session: Session) -> list[CollectionSummary]:
    counts = (
        select(Collection.id, Collection.name, func.count(CollectionDocument.document_id))
        .outerjoin(CollectionDocument, CollectionDocument.collection_id == Collection.id)
        .group_by(Collection.id, Collection.name)
        .order_by(func.lower(Collection.name))
    )
    return [CollectionSummary(id=i, name=n, num_documents=c) for i, n, c in session.execute(counts)]


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
