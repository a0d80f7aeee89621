"""Accounts (migration 0013): users, their grants on collections, the audit log and API keys."""

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import (
    EMPTY_LIST,
    NEVER_REUSED,
    Base,
    JsonType,
    UTCDateTime,
    str_enum,
    utc_now,
)


class Role(enum.StrEnum):
    """What a user may do (app/services/access.py decides)."""

    ADMIN = "admin"  # everything: every document, users, the audit log
    EDITOR = "editor"  # upload, summarize, ask; manage the collections granted to them to write
    VIEWER = "viewer"  # read and ask within the collections granted to them


class User(Base):
    """A person who signs in. The password is an argon2id hash (app/services/passwords.py), or
    the PBKDF2 hash of the shared UI password for the first admin until they sign in once.
    Sessions that began before `sessions_valid_after` are over (a disable, a password reset)."""

    __tablename__ = "users"
    __table_args__ = (NEVER_REUSED,)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    password_hash: Mapped[str] = mapped_column(Text)
    role: Mapped[Role] = mapped_column(str_enum(Role, "user_role"))
    is_disabled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    sessions_valid_after: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)

    def __repr__(self) -> str:
        return f"User(id={self.id}, role={self.role})"


class CollectionGrant(Base):
    """A user's access to a collection: read (see and ask), or write (add, remove, ingest into)."""

    __tablename__ = "collection_grants"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    collection_id: Mapped[int] = mapped_column(
        ForeignKey("collections.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    can_write: Mapped[bool] = mapped_column(Boolean, default=False)


class AuditEvent(Base):
    """One line of the audit log: who did what to which ids, when, from where, and whether it
    was allowed. Never text of documents, questions or answers: their ids and lengths only
    (`details` holds numbers). Append-only: the database refuses an UPDATE (triggers of
    migration 0013); only pruning past the retention setting deletes rows. No foreign key on
    the user: deleting a user keeps their rows, which also keep the name they had."""

    __tablename__ = "audit_events"
    __table_args__ = (NEVER_REUSED,)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now, index=True)
    user_id: Mapped[int | None] = mapped_column(Integer, index=True)
    user_name: Mapped[str] = mapped_column(String(100))
    action: Mapped[str] = mapped_column(String(32))
    outcome: Mapped[str] = mapped_column(String(16))  # "ok" | "refused" | "failed" | "locked"
    target_kind: Mapped[str] = mapped_column(String(16), default="", server_default=text("''"))
    target_ids: Mapped[list[int]] = mapped_column(JsonType, default=list, server_default=EMPTY_LIST)
    details: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    origin: Mapped[str] = mapped_column(String(100))  # "cli", "ui 10.0.0.7", "inbox", ...

    def __repr__(self) -> str:
        return f"AuditEvent(id={self.id}, action={self.action}, outcome={self.outcome})"


class ApiKey(Base):
    """A user's key for `longdoc serve` (migration 0014). The secret is shown once, when made;
    only its SHA-256 is kept (it is 32 random bytes: a fast hash is enough, and lets the server
    check a request quickly). `prefix` is the key's public name, its first characters."""

    __tablename__ = "api_keys"
    __table_args__ = (NEVER_REUSED,)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    prefix: Mapped[str] = mapped_column(String(16), unique=True)
    secret_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    def __repr__(self) -> str:
        return f"ApiKey(id={self.id}, prefix={self.prefix})"
