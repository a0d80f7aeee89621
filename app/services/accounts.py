"""Users, their passwords and their grants on collections; signing in and whether a session
still holds. Every change is written to the audit log as the actor who made it.

The first admin: a database without users, on a LongDoc whose shared UI password is set
(LONGDOC_UI_PASSWORD_HASH, from before accounts), gets the user "admin" with that password
(`ensure_first_admin`, run by the UI and by `longdoc db upgrade`), so nobody is locked out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import CollectionGrant, Role, User, utc_now
from app.errors import AppError
from app.services import audit, passwords
from app.services.access import Actor, can_manage_users, require_role

FIRST_ADMIN_NAME = "admin"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$")


class AccountError(AppError):
    """A user name, password or grant that cannot be used; the sentence says why."""

    code = "account_error"


def actor_for(user: User, origin: str) -> Actor:
    return Actor(user_id=user.id, name=user.name, role=user.role, origin=origin)


def is_valid_user_name(name: str) -> bool:
    return bool(_NAME.match(name))


def find_user(*, session: Session, name: str) -> User | None:
    return session.scalar(select(User).where(User.name == name))


def require_user(*, session: Session, name: str) -> User:
    user = find_user(session=session, name=name)
    if user is None:
        raise AccountError(f"There is no user named {name!r}; `longdoc users list` shows them.")
    return user


def list_users(*, session: Session, actor: Actor) -> list[User]:
    require_role(session=session, actor=actor, action="users", allowed=can_manage_users(actor))
    return list(session.scalars(select(User).order_by(User.name)))


def count_users(*, session: Session) -> int:
    return int(session.scalar(select(func.count(User.id))) or 0)


def _checked_password(password: str) -> str:
    if len(password) < passwords.MIN_PASSWORD_CHARS:
        raise AccountError(f"A password needs at least {passwords.MIN_PASSWORD_CHARS} characters.")
    return passwords.hash_password(password)


def add_user(*, session: Session, actor: Actor, name: str, role: Role, password: str) -> User:
    """A new, enabled user (flushed; the caller commits)."""
    require_role(session=session, actor=actor, action="users", allowed=can_manage_users(actor))
    if not is_valid_user_name(name):
        raise AccountError(
            "A user name is 1 to 100 letters, digits, dots, dashes, underscores or @, "
            "starting with a letter or digit."
        )
    if find_user(session=session, name=name) is not None:
        raise AccountError(f"There is already a user named {name!r}.")
    user = User(name=name, role=Role(role), password_hash=_checked_password(password))
    session.add(user)
    session.flush()
    audit.record(
        session=session, who=actor.who, action="user_add", target_kind="user", target_ids=[user.id]
    )
    return user


def _changed(session: Session, actor: Actor, name: str, action: str) -> User:
    require_role(session=session, actor=actor, action="users", allowed=can_manage_users(actor))
    user = require_user(session=session, name=name)
    audit.record(
        session=session, who=actor.who, action=action, target_kind="user", target_ids=[user.id]
    )
    return user


def set_disabled(*, session: Session, actor: Actor, name: str, is_disabled: bool = True) -> User:
    """Disable (or enable) a user; disabling ends their sessions."""
    user = _changed(session, actor, name, "user_disable" if is_disabled else "user_enable")
    user.is_disabled = is_disabled
    if is_disabled:
        user.sessions_valid_after = utc_now()
    session.flush()
    return user


def reset_password(*, session: Session, actor: Actor, name: str, password: str) -> User:
    """A new password; the user's sessions end."""
    user = _changed(session, actor, name, "user_reset_password")
    user.password_hash = _checked_password(password)
    user.sessions_valid_after = utc_now()
    session.flush()
    return user


def delete_user(*, session: Session, actor: Actor, name: str) -> None:
    """Delete a user: their grants go, their documents stay (ownerless), their log rows stay."""
    user = _changed(session, actor, name, "user_delete")
    session.delete(user)
    session.flush()


def grant(
    *, session: Session, actor: Actor, name: str, collection_id: int, can_write: bool
) -> CollectionGrant:
    """Grant (or change) a user's access to a collection. A viewer is never granted writing."""
    user = _changed(session, actor, name, "grant")
    if can_write and user.role == Role.VIEWER:
        raise AccountError(f"{name!r} is a viewer: a viewer may only read (use --read).")
    row = session.get(CollectionGrant, (user.id, collection_id))
    if row is None:
        row = CollectionGrant(user_id=user.id, collection_id=collection_id, can_write=can_write)
        session.add(row)
    row.can_write = can_write
    session.flush()
    return row


def revoke(*, session: Session, actor: Actor, name: str, collection_id: int) -> bool:
    user = _changed(session, actor, name, "revoke")
    row = session.get(CollectionGrant, (user.id, collection_id))
    if row is None:
        return False
    session.delete(row)
    session.flush()
    return True


def grants_of(*, session: Session, user_id: int) -> list[CollectionGrant]:
    return list(session.scalars(select(CollectionGrant).where(CollectionGrant.user_id == user_id)))


# --- signing in ---


@dataclass(frozen=True)
class SignIn:
    """A sign-in that worked: who, and when (a session holds from then)."""

    actor: Actor
    at: datetime


def ensure_first_admin(*, session: Session, password_hash: str) -> User | None:
    """The user "admin" with the shared UI password's hash, on a database without users; None
    when there are users already or no shared password. Committed."""
    if not password_hash or count_users(session=session) > 0:
        return None
    user = User(name=FIRST_ADMIN_NAME, role=Role.ADMIN, password_hash=password_hash)
    session.add(user)
    session.flush()
    audit.record(
        session=session,
        who=audit.Who(user_id=None, name="upgrade", origin="shared password"),
        action="user_add",
        target_kind="user",
        target_ids=[user.id],
    )
    session.commit()
    return user


def sign_in(*, session: Session, name: str, password: str, origin: str) -> SignIn | None:
    """Check a name and password; record the attempt (committed). None when refused: the same
    for an unknown name, a wrong password and a disabled user, so a guesser learns nothing."""
    user = find_user(session=session, name=name)
    is_right = user is not None and passwords.verify_password(password, user.password_hash)
    if user is None:
        # Hash anyway, so that an unknown name takes as long as a wrong password.
        passwords.verify_password(password, _DUMMY_HASH)
    ok = is_right and user is not None and not user.is_disabled
    audit.record(
        session=session,
        who=audit.Who(user_id=user.id if user else None, name=name[:100], origin=origin),
        action="sign_in",
        outcome=audit.OK if ok else audit.FAILED,
        details={"is_disabled": True} if is_right and user and user.is_disabled else None,
    )
    if ok and user is not None and passwords.needs_rehash(user.password_hash):
        user.password_hash = passwords.hash_password(password)
    session.commit()
    if not ok or user is None:
        return None
    return SignIn(actor=actor_for(user, origin), at=utc_now())


_DUMMY_HASH = passwords.hash_password("not anyone's password")


def record_locked(*, session: Session, name: str, origin: str) -> None:
    """A sign-in refused by the limits before its password was looked at (committed)."""
    user = find_user(session=session, name=name)
    audit.record(
        session=session,
        who=audit.Who(user_id=user.id if user else None, name=name[:100], origin=origin),
        action="sign_in",
        outcome=audit.LOCKED,
    )
    session.commit()


def record_sign_out(*, session: Session, actor: Actor) -> None:
    audit.record(session=session, who=actor.who, action="sign_out")
    session.commit()


def session_holds(
    *, session: Session, user_id: int, signed_in_at: datetime, max_age_s: float
) -> Actor | None:
    """The actor of a signed-in session, re-read; None when it is over: expired, the user
    disabled or deleted, or their password reset since."""
    user = session.get(User, user_id)
    if user is None or user.is_disabled:
        return None
    if signed_in_at < user.sessions_valid_after:
        return None
    if utc_now() - signed_in_at > timedelta(seconds=max_age_s):
        return None
    return actor_for(user, origin="")
