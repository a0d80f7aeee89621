"""Migration 0003 (answers' quotes and support, summaries' key passages) on rows that exist
before it, up and down, on SQLite and PostgreSQL."""

from datetime import UTC, datetime

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from app import migrate
from app.db.session import make_engine

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _columns(engine, table: str) -> set[str]:
    return {column["name"] for column in inspect(engine).get_columns(table)}


def _seed(connection) -> None:
    connection.execute(
        text(
            "INSERT INTO documents (id, content_hash, file_name, kind, num_pages, num_chars, "
            "num_tokens, status, created_at, updated_at) VALUES (1, :hash, 'a.pdf', 'legal', 1, "
            "10, 3, 'ready', :now, :now)"
        ),
        {"hash": "0" * 64, "now": NOW},
    )
    connection.execute(
        text(
            "INSERT INTO answers (id, document_id, question, answer, cited_passage_ids, "
            "cited_pages, model, created_at, stats) VALUES (1, 1, 'q', 'a', '[]', '[1]', 'm', "
            ":now, '{}')"
        ),
        {"now": NOW},
    )
    connection.execute(
        text(
            "INSERT INTO summaries (id, document_id, method, text, model, created_at, stats) "
            "VALUES (1, 1, 'one_pass', 's', 'm', :now, '{}')"
        ),
        {"now": NOW},
    )


def test_rows_from_before_get_empty_quotes_and_key_passages_and_survive_a_downgrade(
    database_url: str,
) -> None:
    migrate.upgrade(database_url, "0001")
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            _seed(connection)
        migrate.upgrade(database_url, "0003")
        assert {"quotes", "support", "model_answer", "unsupported_claims"} <= _columns(
            engine, "answers"
        )
        with engine.connect() as connection:
            quotes, support, claims = connection.execute(
                text("SELECT quotes, support, unsupported_claims FROM answers")
            ).one()
            key_passages = connection.execute(text("SELECT key_passages FROM summaries")).scalar()
        # SQLite hands JSON back as text, PostgreSQL's JSONB as Python values.
        assert quotes in ("[]", []) and claims in ("[]", []) and support is None
        assert key_passages in ("[]", [])

        # The CHECK constraint keeps support to the known statuses.
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(text("UPDATE answers SET support = 'maybe'"))
        with engine.begin() as connection:
            connection.execute(text("UPDATE answers SET support = 'quoted'"))

        migrate.downgrade(database_url, "0001")
        assert "support" not in _columns(engine, "answers")
        assert "key_passages" not in _columns(engine, "summaries")
        with engine.connect() as connection:
            assert connection.execute(text("SELECT answer FROM answers")).scalar() == "a"
            assert connection.execute(text("SELECT text FROM summaries")).scalar() == "s"
        # The summaries' method CHECK is still there after the downgrade.
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(text("UPDATE summaries SET method = 'guess'"))
    finally:
        engine.dispose()
