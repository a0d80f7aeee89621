"""Users' API keys for `longdoc serve` (issue 25): made, listed and revoked by admins, and
looked up by the server for every request.

A key reads "ldk_<8 hex>_<43 url-safe characters>": its first 12 characters are its public
name (`prefix`), the rest is 32 random bytes. Only the SHA-256 of the whole key is stored, so
the secret is shown once, when it is made. A key works while it is not revoked and its user is
enabled; nothing here is cached, so a revoke or a disable holds from the next request.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from app.db.models import ApiKey, User, utc_now
from app.db.session import write_transaction
from app.services import audit
from app.services.access import Actor, can_manage_users, require_role
from app.services.accounts import AccountError, require_user

KEY_START = "ldk_"
PREFIX_CHARS = len(KEY_START) + 8
_SECRET_BYTES = 32
REQUEST_ACTION = "api_request"


@dataclass(frozen=True)
class NewKey:
    """A key just made: the row, and the secret, which is never shown again."""

    key: ApiKey
    secret: str


def _sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _require_admin(session: Session, actor: Actor, *, writes: bool = False) -> None:
    if writes:
        write_transaction(session)  # read, then written: BEGIN IMMEDIATE on SQLite
    require_role(session=session, actor=actor, action="users", allowed=can_manage_users(actor))


def create_key(*, session: Session, actor: Actor, name: str) -> NewKey:
    """A new key for the user `name` (flushed; the caller commits)."""
    _require_admin(session, actor, writes=True)
    user = require_user(session=session, name=name)
    while True:
        prefix = KEY_START + secrets.token_hex(4)
        if session.scalar(select(ApiKey.id).where(ApiKey.prefix == prefix)) is None:
            break
    secret = f"{prefix}_{secrets.token_urlsafe(_SECRET_BYTES)}"
    key = ApiKey(user_id=user.id, prefix=prefix, secret_sha256=_sha256(secret))
    session.add(key)
    session.flush()
    audit.record(
        session=session,
        who=actor.who,
        action="api_key_create",
        target_kind="api_key",
        target_ids=[key.id],
        details={"user_id": user.id},
    )
    return NewKey(key=key, secret=secret)


def list_keys(
    *, session: Session, actor: Actor, name: str | None = None
) -> list[tuple[ApiKey, str]]:
    """(key, its user's name), of one user or of all; oldest first. Never a secret."""
    _require_admin(session, actor)
    query = select(ApiKey, User.name).join(User, User.id == ApiKey.user_id)
    if name is not None:
        query = query.where(User.id == require_user(session=session, name=name).id)
    rows = session.execute(query.order_by(ApiKey.created_at, ApiKey.id))
    return [(key, user_name) for key, user_name in rows]


def revoke_key(*, session: Session, actor: Actor, prefix: str) -> bool:
    """Revoke the key named `prefix` (flushed; the caller commits); False when it was revoked
    already. AccountError when there is no such key."""
    _require_admin(session, actor, writes=True)
    key = session.scalar(select(ApiKey).where(ApiKey.prefix == prefix))
    if key is None:
        raise AccountError(f"There is no API key {prefix!r}; `longdoc users api-keys` lists them.")
    if key.revoked_at is not None:
        return False
    key.revoked_at = utc_now()
    audit.record(
        session=session,
        who=actor.who,
        action="api_key_revoke",
        target_kind="api_key",
        target_ids=[key.id],
        details={"user_id": key.user_id},
    )
    session.flush()
    return True


def active_key(*, session: Session, secret: str) -> tuple[ApiKey, User] | None:
    """The key `secret` and its user, when the key is not revoked and the user is enabled."""
    if not secret.startswith(KEY_START):
        return None
    row = session.execute(
        select(ApiKey, User)
        .join(User, User.id == ApiKey.user_id)
        .where(ApiKey.secret_sha256 == _sha256(secret), ApiKey.revoked_at.is_(None))
    ).first()
    if row is None or row[1].is_disabled:
        return None
    return row[0], row[1]


def user_for_key(*, session: Session, secret: str) -> User | None:
    """The enabled user whose unrevoked key `secret` is; None otherwise."""
    found = active_key(session=session, secret=secret)
    return None if found is None else found[1]


def has_active_keys(*, session: Session) -> bool:
    """Whether any enabled user has an unrevoked key."""
    query = (
        select(ApiKey.id)
        .join(User, User.id == ApiKey.user_id)
        .where(ApiKey.revoked_at.is_(None), User.is_disabled.is_(False))
    )
    return bool(session.scalar(select(exists(query))))


def record_request(
    *,
    session: Session,
    key_id: int,
    user_id: int,
    user_name: str,
    origin: str,
    outcome: str,
    num_prompt_tokens: int,
    num_completion_tokens: int,
) -> None:
    """One audit row for one request made with a key (counts only, never text), and the key's
    last use (flushed; the caller commits)."""
    audit.record(
        session=session,
        who=audit.Who(user_id=user_id, name=user_name, origin=origin),
        action=REQUEST_ACTION,
        outcome=outcome,
        target_kind="api_key",
        target_ids=[key_id],
        details={
            "prompt_tokens": int(num_prompt_tokens),
            "completion_tokens": int(num_completion_tokens),
        },
    )
    key = session.get(ApiKey, key_id)
    if key is not None:
        key.last_used_at = utc_now()
    session.flush()
