"""Migration 0006 (page sources, OCR and redaction counts, the redactions table) on rows that
exist before it, up and down, on SQLite and PostgreSQL."""

from datetime import UTC, datetime

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from app import migrate
from app.db.session import make_engine

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _columns(engine, table: str) -> set[str]:
    return {column["name"] for column in inspect(engine).get_columns(table)}


def test_pages_from_before_read_as_text_layer_and_survive_a_downgrade(database_url: str) -> None:
    migrate.upgrade(database_url, "0005")
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO documents (id, content_hash, file_name, kind, num_pages, "
                    "num_chars, num_tokens, status, created_at, updated_at) VALUES (1, :hash, "
                    "'a.pdf', 'legal', 1, 10, 3, 'ready', :now, :now)"
                ),
                {"hash": "0" * 64, "now": NOW},
            )
            connection.execute(
                text("INSERT INTO pages (id, document_id, number, text) VALUES (1, 1, 1, 'p')")
            )
        migrate.upgrade(database_url, "0006")
        assert {"source", "ocr_confidence"} <= _columns(engine, "pages")
        with engine.connect() as connection:
            assert connection.execute(text("SELECT source, ocr_confidence FROM pages")).one() == (
                "text_layer",
                None,
            )
            counts = connection.execute(
                text("SELECT num_ocr_pages, num_redactions, is_hidden_text_kept FROM documents")
            ).one()
            assert (counts[0], counts[1], bool(counts[2])) == (0, 0, False)
        with engine.begin() as connection:
            connection.execute(
                text(
                    'INSERT INTO redactions (document_id, page, "left", bottom, "right", top, '
                    "num_chars) VALUES (1, 1, 10, 20, 30, 40, 12)"
                )
            )
        # A redaction belongs to a document that exists.
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(
                text(
                    'INSERT INTO redactions (document_id, page, "left", bottom, "right", top, '
                    "num_chars) VALUES (99, 1, 10, 20, 30, 40, 12)"
                )
            )

        migrate.downgrade(database_url, "0005")
        assert "source" not in _columns(engine, "pages")
        assert "num_ocr_pages" not in _columns(engine, "documents")
        assert "redactions" not in inspect(engine).get_table_names()
        with engine.connect() as connection:
            assert connection.execute(text("SELECT text FROM pages")).scalar() == "p"
    finally:
        engine.dispose()
