"""Whom the command line acts for: the local admin, unless `longdoc --as NAME` names a user
(an admin then sees what that user sees, and is refused what they are refused)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.services import access, accounts
from app.services.access import Actor

ORIGIN = "cli"
_as_name: str | None = None


def set_name(name: str | None) -> None:
    """Called by the root command for every invocation (None: the local admin)."""
    global _as_name
    _as_name = name


def actor(session: Session) -> Actor:
    """The acting user, re-read; AccountError for an unknown or disabled name."""
    if _as_name is None:
        return access.local_admin(ORIGIN)
    user = accounts.require_user(session=session, name=_as_name)
    if user.is_disabled:
        raise accounts.AccountError(f"The user {_as_name!r} is disabled.")
    return accounts.actor_for(user, ORIGIN)


def require_document(
    session: Session, document_id: int, *, action: str, write: bool = False
) -> Actor:
    """The acting user may `action` the document (logged; the caller commits with its own
    writes); NotFound for a missing one when they may see everything, else AccessRefused with
    one sentence for missing and refused alike."""
    from app.errors import NotFound
    from app.services import acting, documents

    who = actor(session)
    if who.is_admin and documents.get_document(session=session, document_id=document_id) is None:
        raise NotFound(f"There is no document with id {document_id}; see `longdoc docs`.")
    if write:
        acting.allow_document_write(
            session=session, actor=who, document_id=document_id, action=action
        )
    else:
        access.require_document(session=session, actor=who, document_id=document_id, action=action)
        access.record_ok(
            session=session,
            actor=who,
            action=action,
            target_kind="document",
            target_ids=[document_id],
        )
    return who
