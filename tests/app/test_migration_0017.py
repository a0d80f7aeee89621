"""Ids stay never reused across the migrations that rebuild tables on SQLite (0013 rebuilds
`documents`, 0016 `collections`), on SQLite and PostgreSQL: the newest document and collection
deleted at 0012 lend their ids to nothing after upgrading, nor after a downgrade and upgrade.
Migration 0017 raises a `documents` counter that the earlier 0013 lowered to the largest id left,
from the evidence that survives (the counter is never lowered)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine, text

from app import migrate
from app.db.models import AuditEvent, Collection, CollectionAnswer
from app.db.session import make_engine, session_factory
from app.services import collections, documents
from tests.app.new_documents import new_document

NOW = datetime(2026, 12, 5, tzinfo=UTC)
AUTOINCREMENT = re.compile(r"\bid INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT")


def _insert(connection, sql: str, **values) -> int:
    return connection.execute(text(f"{sql} RETURNING id"), {"now": NOW, **values}).scalar_one()


def _seed_and_delete_newest(engine: Engine) -> tuple[int, int]:
    """Three documents and two collections; the newest of each deleted: their ids."""
    with engine.begin() as connection:
        document_ids = [
            _insert(
                connection,
                "INSERT INTO documents (content_hash, file_name, title, kind, num_pages, "
                "num_chars, num_tokens, status, created_at, updated_at) VALUES (:hash, 'a.pdf', "
                "'Old Lease', 'legal', 1, 10, 3, 'ready', :now, :now)",
                hash=str(i) * 64,
            )
            for i in range(3)
        ]
        collection_ids = [
            _insert(
                connection,
                "INSERT INTO collections (name, created_at) VALUES (:name, :now)",
                name=name,
            )
            for name in ("Papers", "Gone")
        ]
        connection.execute(text("DELETE FROM documents WHERE id = :id"), {"id": document_ids[-1]})
        connection.execute(
            text("DELETE FROM collections WHERE id = :id"), {"id": collection_ids[-1]}
        )
    return document_ids[-1], collection_ids[-1]


def _new_ids(engine: Engine, seed: str) -> tuple[int, int]:
    with session_factory(engine)() as session:
        document = documents.store_document(session=session, new=new_document(seed))
        collection = collections.create_collection(session=session, name=f"Matter {seed}")
        session.commit()
        return document.id, collection.id


def _table_sql(engine: Engine, table: str) -> str:
    with engine.connect() as connection:
        query = text("SELECT sql FROM sqlite_master WHERE name = :table")
        return connection.execute(query, {"table": table}).scalar_one()


def test_ids_deleted_before_the_rebuilds_are_never_given_again(
    database_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(database_url, "0012")
    engine = make_engine(database_url)
    try:
        deleted_document, deleted_collection = _seed_and_delete_newest(engine)
        migrate.upgrade(database_url)
        if engine.dialect.name == "sqlite":
            for table in ("documents", "collections"):
                assert AUTOINCREMENT.search(_table_sql(engine, table))
        document_id, collection_id = _new_ids(engine, "after upgrade")
        assert document_id > deleted_document and collection_id > deleted_collection

        # The newest deleted again, then 0013's and 0016's downgrades rebuild both tables.
        with session_factory(engine)() as session:
            assert documents.delete_document(
                session=session, document_id=document_id, files_dir=tmp_path
            )
            assert collections.delete_collection(session=session, collection_id=collection_id)
            session.commit()
        migrate.downgrade(database_url, "0012")
        migrate.upgrade(database_url)
        again_document, again_collection = _new_ids(engine, "after a round trip")
        assert again_document > document_id and again_collection > collection_id
    finally:
        engine.dispose()


def _counter(engine: Engine) -> int:
    with engine.connect() as connection:
        query = text("SELECT seq FROM sqlite_sequence WHERE name = 'documents'")
        return connection.execute(query).scalar_one()


def _event(outcome: str, target_kind: str, target_ids: list[int], action: str) -> AuditEvent:
    return AuditEvent(
        user_name="edna",
        action=action,
        outcome=outcome,
        target_kind=target_kind,
        target_ids=target_ids,
        origin="ui",
    )


def test_0017_raises_a_counter_the_old_0013_lowered_to_the_evidence(sqlite_url: str) -> None:
    migrate.upgrade(sqlite_url, "0016")
    engine = make_engine(sqlite_url)
    try:
        deleted, _ = _seed_and_delete_newest(engine)
        assert deleted == 3
        with session_factory(engine)() as session:
            matter = Collection(name="Matter 50")
            session.add(matter)
            session.flush()
            matter_id = matter.id
            session.commit()
        evidence = [
            (None, 2),  # no trace of document 3: its id is lost (the docstring of 0017)
            (_event("ok", "document", [1, 7], "view"), 7),
            (_event("refused", "document", [10**12], "view"), 7),  # anyone may ask any id
            (_event("ok", "collection", [50, 8], "collection_write"), 8),  # 50: the collection
            (_event("ok", "collection", [60], "collection_rename"), 8),
            (
                CollectionAnswer(
                    collection_id=matter_id,
                    question="?",
                    mode="retrieval",
                    answer="",
                    model="m",
                    document_ids=[9],
                ),
                9,
            ),
        ]
        for row, expected in evidence:
            if row is not None:
                with session_factory(engine)() as session:
                    session.add(row)
                    session.commit()
            migrate.downgrade(sqlite_url, "0016")
            with engine.begin() as connection:  # what 0013 left before it kept the counter
                connection.execute(
                    text("UPDATE sqlite_sequence SET seq = 2 WHERE name = 'documents'")
                )
            migrate.upgrade(sqlite_url, "0017")
            assert _counter(engine) == expected
        with engine.begin() as connection:
            connection.execute(text("UPDATE sqlite_sequence SET seq = 40 WHERE name = 'documents'"))
        migrate.downgrade(sqlite_url, "0016")
        migrate.upgrade(sqlite_url, "0017")
        assert _counter(engine) == 40  # never lowered
        assert AUTOINCREMENT.search(_table_sql(engine, "documents"))
        document_id, _ = _new_ids(engine, "after the repair")
        assert document_id == 41
    finally:
        engine.dispose()
