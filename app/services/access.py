"""Who may do what: the one place that decides, for every way in (UI pages, the CLI, search,
collection questions, key-facts export, ingestion).

Rules (issue 25):
- admin: everything, users and the audit log included.
- editor: uploads (owning what they upload), summarizes and asks; reads the documents they
  own and those of collections granted to them; writes (adds, removes, ingests into, renames,
  deletes) the collections granted to them for writing, and the documents they own or that
  such a collection holds. An editor who creates a collection owns it and is granted it for
  writing (ownership scopes its name, app/services/collection_names.py; access is the grant's).
- viewer: reads and asks within the collections granted to them; writes nothing.
- A document in no collection is seen by its owner and the admins only.

Every `require_*` that refuses writes a "refused" row to the audit log and commits it before
raising AccessRefused, so call it before the operation writes anything. A refused document and a
missing one get the same sentence: a refusal never tells that a document exists.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from sqlalchemy import ColumnElement, exists, or_, select
from sqlalchemy.orm import Session

from app.db.models import CollectionDocument, CollectionGrant, Document, Role
from app.errors import AppError
from app.services import audit

LOCAL_ADMIN_NAME = "local admin"


class AccessRefused(AppError):
    """The signed-in user may not do this; the sentence says what, never whether it exists."""

    code = "access_refused"


@dataclass(frozen=True)
class Actor:
    """The person an operation runs for. user_id None: the local admin (the CLI without
    `--as`, a UI without accounts), who may do everything."""

    user_id: int | None
    name: str
    role: Role
    origin: str = "cli"

    @property
    def is_admin(self) -> bool:
        return self.role == Role.ADMIN

    @property
    def who(self) -> audit.Who:
        return audit.Who(user_id=self.user_id, name=self.name, origin=self.origin)

    def coming_from(self, origin: str) -> Actor:
        return replace(self, origin=origin)


def local_admin(origin: str = "cli") -> Actor:
    return Actor(user_id=None, name=LOCAL_ADMIN_NAME, role=Role.ADMIN, origin=origin)


# --- the rules ---


def _granted_documents(user_id: int, *, write: bool) -> ColumnElement[bool]:
    grants = select(CollectionDocument.document_id).join(
        CollectionGrant, CollectionGrant.collection_id == CollectionDocument.collection_id
    )
    grants = grants.where(CollectionGrant.user_id == user_id)
    if write:
        grants = grants.where(CollectionGrant.can_write.is_(True))
    return Document.id.in_(grants)


def readable_condition(actor: Actor) -> ColumnElement[bool] | None:
    """A condition on `Document` for the documents `actor` may read; None: every one."""
    if actor.is_admin:
        return None
    assert actor.user_id is not None  # only the local admin has none
    return or_(Document.owner_id == actor.user_id, _granted_documents(actor.user_id, write=False))


def readable_document_ids(*, session: Session, actor: Actor) -> set[int] | None:
    """The ids of the documents `actor` may read; None: every one (an admin)."""
    condition = readable_condition(actor)
    if condition is None:
        return None
    return set(session.scalars(select(Document.id).where(condition)))


def can_read_document(*, session: Session, actor: Actor, document_id: int) -> bool:
    condition = readable_condition(actor)
    query = select(Document.id).where(Document.id == document_id)
    if condition is not None:
        query = query.where(condition)
    return session.scalar(query) is not None


def can_write_document(*, session: Session, actor: Actor, document_id: int) -> bool:
    if actor.is_admin:
        return session.get(Document, document_id) is not None
    if actor.role != Role.EDITOR:
        return False
    assert actor.user_id is not None
    condition = or_(
        Document.owner_id == actor.user_id, _granted_documents(actor.user_id, write=True)
    )
    return (
        session.scalar(select(Document.id).where(Document.id == document_id, condition)) is not None
    )


def _grant(session: Session, actor: Actor, collection_id: int) -> CollectionGrant | None:
    if actor.user_id is None:
        return None
    return session.get(CollectionGrant, (actor.user_id, collection_id))


def can_read_collection(*, session: Session, actor: Actor, collection_id: int) -> bool:
    return actor.is_admin or _grant(session, actor, collection_id) is not None


def can_write_collection(*, session: Session, actor: Actor, collection_id: int) -> bool:
    if actor.is_admin:
        return True
    grant = _grant(session, actor, collection_id)
    return actor.role == Role.EDITOR and grant is not None and grant.can_write


def readable_collection_ids(*, session: Session, actor: Actor) -> set[int] | None:
    """The collections `actor` may see; None: every one."""
    if actor.is_admin:
        return None
    query = select(CollectionGrant.collection_id).where(CollectionGrant.user_id == actor.user_id)
    return set(session.scalars(query))


def can_upload(actor: Actor) -> bool:
    return actor.role in (Role.ADMIN, Role.EDITOR)


def can_manage_users(actor: Actor) -> bool:
    return actor.is_admin


def can_create_collection(actor: Actor) -> bool:
    return actor.role in (Role.ADMIN, Role.EDITOR)


# Every action a way in may ask about with `can`, and what it needs: a role's leave, or the
# right to read or write its document or collection.
ROLE_ACTIONS = {
    "upload": can_upload,
    "collection_create": can_create_collection,
    "users": can_manage_users,
    "audit_read": can_manage_users,
}
DOCUMENT_WRITES = frozenset({"summarize", "facts_run", "delete"})
DOCUMENT_READS = frozenset({"view", "ask", "facts"})
COLLECTION_WRITES = frozenset(
    {"collection_write", "collection_rename", "collection_delete", "upload"}
)
COLLECTION_READS = frozenset({"view", "ask", "search"})


def can(
    *,
    session: Session,
    actor: Actor,
    action: str,
    document_id: int | None = None,
    collection_id: int | None = None,
) -> bool:
    """Whether `actor` may do `action` (to the document or collection given): the one question
    a page asks before it shows a control, so that nobody is offered what they would be
    refused. It decides as the `require_*` checks do and records nothing; the services still
    check (and log) when the action is done. "upload" with a collection: into that one."""
    if action in ROLE_ACTIONS and not ROLE_ACTIONS[action](actor):
        return False
    if document_id is not None:
        if action in DOCUMENT_WRITES:
            return can_write_document(session=session, actor=actor, document_id=document_id)
        if action in DOCUMENT_READS:
            return can_read_document(session=session, actor=actor, document_id=document_id)
        raise ValueError(f"unknown action on a document: {action!r}")
    if collection_id is not None:
        if action in COLLECTION_WRITES:
            return can_write_collection(session=session, actor=actor, collection_id=collection_id)
        if action in COLLECTION_READS:
            return can_read_collection(session=session, actor=actor, collection_id=collection_id)
        raise ValueError(f"unknown action on a collection: {action!r}")
    if action in ROLE_ACTIONS:
        return True
    raise ValueError(f"{action!r} needs a document or a collection")


def is_in_any_collection(*, session: Session, document_id: int) -> bool:
    query = exists().where(CollectionDocument.document_id == document_id)
    return bool(session.scalar(select(query)))


# --- the checks every way in makes ---


def refuse(
    *,
    session: Session,
    actor: Actor,
    action: str,
    sentence: str,
    target_kind: str = "",
    target_ids: Iterable[int] = (),
) -> AccessRefused:
    """Record the refusal (committed at once) and return the error to raise."""
    audit.record(
        session=session,
        who=actor.who,
        action=action,
        outcome=audit.REFUSED,
        target_kind=target_kind,
        target_ids=target_ids,
    )
    session.commit()
    return AccessRefused(sentence)


def require_document(
    *, session: Session, actor: Actor, document_id: int, action: str, write: bool = False
) -> None:
    """Raise AccessRefused (recorded) unless `actor` may read (or write) the document."""
    allowed = (can_write_document if write else can_read_document)(
        session=session, actor=actor, document_id=document_id
    )
    if allowed:
        return
    if write and can_read_document(session=session, actor=actor, document_id=document_id):
        sentence = f"You may read document {document_id} but not {_verb(action)} it."
    else:
        sentence = f"There is no document with id {document_id} that you may open."
    raise refuse(
        session=session,
        actor=actor,
        action=action,
        sentence=sentence,
        target_kind="document",
        target_ids=[document_id],
    )


def require_collection(
    *, session: Session, actor: Actor, collection_id: int, action: str, write: bool = False
) -> None:
    allowed = (can_write_collection if write else can_read_collection)(
        session=session, actor=actor, collection_id=collection_id
    )
    if allowed:
        return
    if write and can_read_collection(session=session, actor=actor, collection_id=collection_id):
        sentence = f"You may read this collection but not {_verb(action)} it."
    else:
        sentence = "There is no such collection that you may open."
    raise refuse(
        session=session,
        actor=actor,
        action=action,
        sentence=sentence,
        target_kind="collection",
        target_ids=[collection_id],
    )


def require_role(*, session: Session, actor: Actor, action: str, allowed: bool) -> None:
    """For actions decided by the role alone (upload, users, the audit log)."""
    if allowed:
        return
    raise refuse(
        session=session,
        actor=actor,
        action=action,
        sentence=f"Your role ({actor.role.value}) may not {_verb(action)}.",
    )


_VERBS = {
    "upload": "upload documents",
    "summarize": "summarize",
    "delete": "delete",
    "collection_write": "change",
    "collection_create": "create collections",
    "users": "manage users",
    "audit_read": "read the audit log",
    "facts_run": "extract key facts of",
}


def _verb(action: str) -> str:
    return _VERBS.get(action, action.replace("_", " "))


def record_ok(
    *,
    session: Session,
    actor: Actor,
    action: str,
    target_kind: str = "",
    target_ids: Iterable[int] = (),
    details: dict[str, int | float | bool] | None = None,
) -> None:
    """An allowed action's audit row (flushed; the caller commits, as with its own writes)."""
    audit.record(
        session=session,
        who=actor.who,
        action=action,
        target_kind=target_kind,
        target_ids=target_ids,
        details=details,
    )
