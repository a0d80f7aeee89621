"""Collection owners (migration 0016) on SQLite and PostgreSQL: a database of 0015 holding
collections, with their documents and grants, migrates and keeps them (without an owner, the
admins'; ids still never reused); a name is then unique per owner, not across the library; a
downgrade refuses, with a sentence, while two collections share a name, and once they no longer
do restores the global uniqueness."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import IntegrityError

from app import migrate
from app.db.models import Collection, CollectionGrant, Role, User
from app.db.session import make_engine, session_factory
from app.services import acting, collections
from app.services.access import Actor

NOW = datetime(2026, 12, 5, tzinfo=UTC)


def _insert(connection, sql: str, **values) -> int:
    return connection.execute(text(f"{sql} RETURNING id"), {"now": NOW, **values}).scalar_one()


def _seed_0015(connection) -> dict[str, int]:
    """The ids of a document, an editor and collections (one deleted, the newest) at 0015."""
    ids = {
        "document": _insert(
            connection,
            "INSERT INTO documents (content_hash, file_name, title, kind, num_pages, num_chars, "
            "num_tokens, status, created_at, updated_at) VALUES (:hash, 'a.pdf', 'Old Lease', "
            "'legal', 1, 10, 3, 'ready', :now, :now)",
            hash="1" * 64,
        ),
        "edna": _insert(
            connection,
            "INSERT INTO users (name, password_hash, role, is_disabled, sessions_valid_after, "
            "created_at) VALUES ('edna', 'x', 'editor', false, :now, :now)",
        ),
    }
    for name in ("Matter 7", "Papers", "Gone"):
        ids[name] = _insert(
            connection,
            "INSERT INTO collections (name, created_at) VALUES (:name, :now)",
            name=name,
        )
    connection.execute(text("DELETE FROM collections WHERE id = :id"), {"id": ids["Gone"]})
    connection.execute(
        text(
            "INSERT INTO collection_documents (collection_id, document_id, added_at) "
            "VALUES (:collection, :document, :now)"
        ),
        {"collection": ids["Matter 7"], "document": ids["document"], "now": NOW},
    )
    connection.execute(
        text(
            "INSERT INTO collection_grants (user_id, collection_id, can_write) "
            "VALUES (:user, :collection, true)"
        ),
        {"user": ids["edna"], "collection": ids["Matter 7"]},
    )
    return ids


def test_an_0015_database_keeps_its_collections_and_names_become_unique_per_owner(
    database_url: str,
) -> None:
    migrate.upgrade(database_url, "0015")
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            ids = _seed_0015(connection)
        matter = ids["Matter 7"]
        with pytest.raises(IntegrityError), engine.begin() as connection:  # one name, before
            connection.execute(
                text("INSERT INTO collections (name, created_at) VALUES ('Matter 7', :now)"),
                {"now": NOW},
            )
        migrate.upgrade(database_url)
        if engine.dialect.name == "sqlite":
            with engine.connect() as connection:
                sql = connection.execute(
                    text("SELECT sql FROM sqlite_master WHERE name = 'collections'")
                ).scalar()
            assert re.search(r"\bid INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT", sql)  # kept
        with session_factory(engine)() as session:
            rows = session.scalars(select(Collection).order_by(Collection.id)).all()
            assert [(c.id, c.name, c.owner_id) for c in rows] == [
                (matter, "Matter 7", None),
                (ids["Papers"], "Papers", None),
            ]
            assert collections.document_ids_of(session=session, collection_id=matter) == [
                ids["document"]
            ]
            grant = session.get(CollectionGrant, (ids["edna"], matter))
            assert grant is not None and grant.can_write
            # Another editor, who may read neither, names a collection "Matter 7": theirs.
            vic = User(name="vic", role=Role.EDITOR, password_hash="x")
            session.add(vic)
            session.flush()
            actor = Actor(user_id=vic.id, name="vic", role=Role.EDITOR)
            theirs = acting.create_collection(session=session, actor=actor, name="Matter 7")
            session.commit()
            theirs_id = theirs.id
            assert theirs_id > ids["Gone"] and theirs.owner_id == vic.id  # an id not reused
            with pytest.raises(IntegrityError):  # the database's rule: unique per owner
                session.add(Collection(name="Matter 7", owner_id=vic.id))
                session.flush()
            session.rollback()
        with pytest.raises(RuntimeError, match="used by several owners"):
            migrate.downgrade(database_url, "0015")
        with session_factory(engine)() as session:
            assert collections.rename_collection(
                session=session, collection_id=theirs_id, name="Vic's"
            )
            session.commit()
        migrate.downgrade(database_url, "0015")
        with pytest.raises(IntegrityError), engine.begin() as connection:  # one name again
            connection.execute(
                text("INSERT INTO collections (name, created_at) VALUES ('Papers', :now)"),
                {"now": NOW},
            )
        with engine.connect() as connection:
            names = connection.execute(text("SELECT name FROM collections ORDER BY id")).scalars()
            assert list(names) == ["Matter 7", "Papers", "Vic's"]
            links = connection.execute(text("SELECT count(*) FROM collection_documents")).scalar()
            assert links == 1
    finally:
        engine.dispose()
