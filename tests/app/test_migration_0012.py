"""Ids are never reused (migration 0012), on SQLite and PostgreSQL: deleting the newest document,
job and collection never frees their ids for the next ones, on a new database and on one
migrated from 0011, whose rows, constraints and full-text search are kept."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from app import migrate
from app.db.models import JobKind
from app.db.session import make_engine, session_factory
from app.services import collections, documents, jobs
from app.services.search import search_passages
from tests.app.new_documents import new_document

NOW = datetime(2026, 12, 4, tzinfo=UTC)
TABLES = (
    "documents",
    "pages",
    "redactions",
    "passages",
    "jobs",
    "summaries",
    "answers",
    "facts",
    "collections",
    "collection_answers",
)


def _seed(connection) -> None:
    connection.execute(
        text(
            "INSERT INTO documents (id, content_hash, file_name, title, kind, num_pages, "
            "num_chars, num_tokens, status, created_at, updated_at) VALUES (:id, :hash, 'a.pdf', "
            "'Old Lease', 'legal', 1, 10, 3, 'ready', :now, :now)"
        ),
        [{"id": i, "hash": str(i) * 64, "now": NOW} for i in (1, 2)],
    )
    connection.execute(
        text(
            "INSERT INTO passages (id, document_id, ordinal, first_page, last_page, start_char, "
            "end_char, text, num_tokens) VALUES (1, 2, 0, 1, 1, 0, 40, "
            "'The tenant shall indemnify the landlord.', 6)"
        )
    )
    connection.execute(
        text(
            "INSERT INTO jobs (id, kind, status, progress_done, progress_total, document_id, "
            "created_at, stats, params) VALUES (:id, 'summarize', 'succeeded', 0, 0, :doc, :now, "
            "'{}', '{}')"
        ),
        [{"id": 1, "doc": 1, "now": NOW}, {"id": 2, "doc": 2, "now": NOW}],
    )
    connection.execute(
        text(
            "INSERT INTO summaries (id, document_id, job_id, method, text, model, created_at, "
            "stats) VALUES (1, 2, 2, 'one_pass', 'A lease.', 'm', :now, '{}')"
        ),
        {"now": NOW},
    )
    connection.execute(
        text("INSERT INTO collections (id, name, created_at) VALUES (1, 'Leases', :now)"),
        {"now": NOW},
    )
    if connection.dialect.name == "postgresql":  # ids given explicitly leave the sequences at 1
        for table in ("documents", "passages", "jobs", "summaries", "collections"):
            connection.execute(
                text(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), max(id)) FROM {table}"
                )
            )


def _ids_of_new_rows(engine, files_dir: Path) -> tuple[int, int, int]:
    """Delete the newest document (and its job) and collection, then make new ones: their ids."""
    with session_factory(engine)() as session:
        newest = max(d.id for d in documents.list_documents(session=session))
        assert documents.delete_document(session=session, document_id=newest, files_dir=files_dir)
        collection = collections.create_collection(session=session, name="Old matter")
        session.flush()
        assert collections.delete_collection(session=session, collection_id=collection.id)
        session.commit()
        document = documents.store_document(session=session, new=new_document("fresh"))
        job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=document.id)
        later = collections.create_collection(session=session, name="New matter")
        session.commit()
        assert document.id > newest
        assert later.id > collection.id
        return document.id, job.id, later.id


def test_a_deleted_newest_document_job_and_collection_never_lend_their_ids(
    migrated_url: str, tmp_path: Path
) -> None:
    engine = make_engine(migrated_url)
    try:
        with session_factory(engine)() as session:
            first = documents.store_document(session=session, new=new_document("a"))
            job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=first.id)
            session.commit()
            first_id, job_id = first.id, job.id
        document_id, new_job_id, _ = _ids_of_new_rows(engine, tmp_path)
        assert document_id > first_id
        assert new_job_id > job_id
    finally:
        engine.dispose()


def _schema(engine) -> dict[str, str]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT name, sql FROM sqlite_master WHERE sql NOT NULL"))
        return {name: sql for name, sql in rows}


def _constraints(sql: str) -> list[str]:
    """A table's constraints but its primary key, as a set of lines (order aside)."""
    lines = [line.strip().rstrip(",") for line in sql.splitlines()]
    return sorted(line for line in lines if line.startswith("CONSTRAINT") and "PRIMARY" not in line)


def test_an_0011_database_keeps_its_rows_and_constraints_and_gets_autoincrement(
    database_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(database_url, "0011")
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            _seed(connection)
        is_sqlite = engine.dialect.name == "sqlite"
        before = _schema(engine) if is_sqlite else {}
        migrate.upgrade(database_url, "0012")
        if is_sqlite:
            after = _schema(engine)
            for table in TABLES:
                assert re.search(r"\bid INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT", after[table])
                assert _constraints(after[table]) == _constraints(before[table])
            indexes = {name for name, sql in before.items() if sql.startswith("CREATE INDEX")}
            assert indexes and all(after.get(name) == before[name] for name in indexes)
        migrate.upgrade(database_url)  # the services below use the newest models
        with engine.connect() as connection:
            counts = {
                table: connection.execute(text(f"SELECT count(*) FROM {table}")).scalar()
                for table in ("documents", "passages", "jobs", "summaries", "collections")
            }
            summary = connection.execute(text("SELECT document_id, job_id FROM summaries")).one()
        assert counts == {
            "documents": 2,
            "passages": 1,
            "jobs": 2,
            "summaries": 1,
            "collections": 1,
        }
        assert tuple(summary) == (2, 2)
        with session_factory(engine)() as session:
            (hit,) = search_passages(session=session, query="indemnified")  # triggers made again
            assert hit.document_id == 2
        with pytest.raises(IntegrityError), engine.begin() as connection:  # constraints still hold
            connection.execute(text("UPDATE jobs SET progress_done = -1"))

        document_id, job_id, collection_id = _ids_of_new_rows(engine, tmp_path)
        assert document_id > 2 and job_id > 2 and collection_id > 2
        with session_factory(engine)() as session:
            assert search_passages(session=session, query="indemnified") == []  # cascade kept
            hits = search_passages(session=session, query="second page")
            assert hits and {hit.document_id for hit in hits} == {document_id}

        migrate.downgrade(database_url, "0011")
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM documents")).scalar() == 2
        with session_factory(engine)() as session:
            assert search_passages(session=session, query="second page")
    finally:
        engine.dispose()
