"""Migration 0007 on a library that exists before it, on SQLite and PostgreSQL: the passages
already stored become searchable, and a downgrade removes the search objects and the collection
tables while the passages stay."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import inspect, text

from app import migrate
from app.db.session import make_engine, session_factory
from app.services.search import search_passages

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _seed(connection) -> None:
    connection.execute(
        text(
            "INSERT INTO documents (id, content_hash, file_name, title, kind, num_pages, "
            "num_chars, num_tokens, status, created_at, updated_at) VALUES (1, :hash, 'a.pdf', "
            "'Old Lease', 'legal', 1, 10, 3, 'ready', :now, :now)"
        ),
        {"hash": "0" * 64, "now": NOW},
    )
    connection.execute(
        text(
            "INSERT INTO passages (id, document_id, ordinal, first_page, last_page, start_char, "
            "end_char, text, num_tokens) VALUES (1, 1, 0, 1, 1, 0, 40, "
            "'The tenant shall indemnify the landlord.', 6)"
        )
    )


def test_passages_from_before_are_searchable_and_a_downgrade_keeps_them(database_url) -> None:
    migrate.upgrade(database_url, "0005")
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            _seed(connection)
        migrate.upgrade(database_url, "0007")
        with session_factory(engine)() as session:
            (hit,) = search_passages(session=session, query="indemnified")
            assert (hit.document_id, hit.page, hit.title) == (1, 1, "Old Lease")
        migrate.downgrade(database_url, "0005")
        inspector = inspect(engine)
        tables = set(inspector.get_table_names())
        assert not {"collections", "collection_documents", "collection_answers"} & tables
        assert not any(name.startswith("passages_fts") for name in tables)
        columns = {column["name"] for column in inspector.get_columns("passages")}
        assert "search_vector" not in columns
        assert "collection_id" not in {c["name"] for c in inspector.get_columns("jobs")}
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM passages")).scalar() == 1
        migrate.upgrade(database_url)
        with session_factory(engine)() as session:
            assert len(search_passages(session=session, query="landlord")) == 1
    finally:
        engine.dispose()
