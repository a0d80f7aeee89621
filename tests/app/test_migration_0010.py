"""Migration 0010 (answers may be partly supported) on rows that exist before it, up and down,
on SQLite and PostgreSQL: the new status is accepted after the upgrade and unknown ones are
still refused; a downgrade keeps every row, a partly supported one as "unchecked"."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from app import migrate
from app.db.session import make_engine

NOW = datetime(2026, 12, 3, tzinfo=UTC)


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
            "INSERT INTO answers (id, document_id, question, answer, cited_passage_ids, "
            "cited_pages, model, created_at, stats, support) VALUES (1, 1, 'q', 'a', '[]', "
            "'[1]', 'm', :now, '{}', 'supported')"
        ),
        {"now": NOW},
    )
    connection.execute(
        text("INSERT INTO collections (id, name, created_at) VALUES (1, 'Leases', :now)"),
        {"now": NOW},
    )
    connection.execute(
        text(
            "INSERT INTO collection_answers (id, collection_id, question, mode, answer, "
            "citations, quotes, rows, document_ids, support, model, created_at, stats) VALUES "
            "(1, 1, 'q', 'retrieval', 'a', '[]', '[]', '[]', '[]', 'quoted', 'm', :now, '{}')"
        ),
        {"now": NOW},
    )


def _set(engine, table: str, status: str) -> None:
    with engine.begin() as connection:
        connection.execute(text(f"UPDATE {table} SET support = :s"), {"s": status})


def _support(engine, table: str) -> str | None:
    with engine.connect() as connection:
        return connection.execute(text(f"SELECT support FROM {table}")).scalar()


@pytest.mark.parametrize("table", ["answers", "collection_answers"])
def test_partly_supported_is_accepted_after_0010_and_kept_as_unchecked_below_it(
    database_url: str, table: str
) -> None:
    migrate.upgrade(database_url, "0009")
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            _seed(connection)
        with pytest.raises(IntegrityError):
            _set(engine, table, "partly_supported")  # before 0010: refused

        migrate.upgrade(database_url, "0010")
        assert _support(engine, "answers") == "supported"
        assert _support(engine, "collection_answers") == "quoted"
        _set(engine, table, "partly_supported")
        assert _support(engine, table) == "partly_supported"
        with pytest.raises(IntegrityError):
            _set(engine, table, "maybe")

        migrate.downgrade(database_url, "0009")
        assert _support(engine, table) == "unchecked"
        with pytest.raises(IntegrityError):
            _set(engine, table, "partly_supported")
        with engine.connect() as connection:
            assert connection.execute(text(f"SELECT answer FROM {table}")).scalar() == "a"
    finally:
        engine.dispose()
