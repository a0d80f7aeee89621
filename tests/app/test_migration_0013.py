"""Accounts (migration 0013) on SQLite and PostgreSQL: a database of 0012 with a document and
the shared UI password migrates; that password then signs in as the first admin, who sees the
document and is moved to an argon2 hash; a downgrade drops the accounts and keeps the document."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from sqlalchemy import inspect, text

from app import migrate
from app.db.models import Role, User
from app.db.session import make_engine, session_factory
from app.services import accounts, acting, audit
from ui.auth import hash_password as shared_password_hash

NOW = datetime(2026, 12, 4, tzinfo=UTC)
SHARED = "the shared office password"


def test_an_0012_database_migrates_and_its_shared_password_signs_in_as_admin(
    database_url: str,
) -> None:
    migrate.upgrade(database_url, "0012")
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO documents (content_hash, file_name, title, kind, num_pages, "
                    "num_chars, num_tokens, status, created_at, updated_at) VALUES (:hash, "
                    "'a.pdf', 'Old Lease', 'legal', 1, 10, 3, 'ready', :now, :now)"
                ),
                {"hash": "1" * 64, "now": NOW},
            )
        migrate.upgrade(database_url)
        if engine.dialect.name == "sqlite":
            with engine.connect() as connection:
                sql = connection.execute(
                    text("SELECT sql FROM sqlite_master WHERE name = 'documents'")
                ).scalar()
            assert re.search(r"\bid INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT", sql)  # kept
        with session_factory(engine)() as session:
            assert accounts.ensure_first_admin(session=session, password_hash="") is None
            shared = shared_password_hash(SHARED, iterations=1000)
            admin = accounts.ensure_first_admin(session=session, password_hash=shared)
            assert admin is not None and admin.name == "admin" and admin.role == Role.ADMIN
            assert accounts.ensure_first_admin(session=session, password_hash=shared) is None
            wrong = accounts.sign_in(session=session, name="admin", password="guess", origin="ui")
            assert wrong is None
            signed = accounts.sign_in(session=session, name="admin", password=SHARED, origin="ui")
            assert signed is not None and signed.actor.is_admin
            (document,) = acting.list_documents(session=session, actor=signed.actor)
            assert document.title == "Old Lease" and document.owner_id is None
            user = session.get(User, admin.id)
            assert user.password_hash.startswith("$argon2id$")  # moved off the shared PBKDF2
            assert accounts.sign_in(session=session, name="admin", password=SHARED, origin="ui")
            outcomes = [e.outcome for e in audit.list_events(session=session, user_name="admin")]
            assert outcomes == ["failed", "ok", "ok"]
        migrate.downgrade(database_url, "0012")
        tables = set(inspect(engine).get_table_names())
        assert not tables & {"users", "collection_grants", "audit_events"}
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM documents")).scalar() == 1
    finally:
        engine.dispose()
