"""Migration 0002 (passage embeddings) up and down over a database that already holds passages."""

from __future__ import annotations

from sqlalchemy import inspect, text

from app import migrate
from app.db.session import make_engine

PASSAGE_COLUMNS = {"embedding", "embedding_model"}


def _passage_columns(engine) -> set[str]:
    return {column["name"] for column in inspect(engine).get_columns("passages")}


def _insert_document_with_a_passage(engine) -> None:
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO documents (id, content_hash, file_name, kind, num_pages, num_chars,"
                " num_tokens, status, created_at, updated_at) VALUES (1, :hash, 'a.pdf',"
                " 'legal', 1, 4, 1, 'ready', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            ),
            {"hash": "a" * 64},
        )
        connection.execute(
            text(
                "INSERT INTO passages (document_id, ordinal, first_page, last_page, start_char,"
                " end_char, text, num_tokens) VALUES (1, 0, 1, 1, 0, 4, 'Text', 1)"
            )
        )


def test_upgrade_adds_empty_vectors_to_old_passages_and_downgrade_keeps_them(
    database_url: str,
) -> None:
    engine = make_engine(database_url)
    try:
        migrate.upgrade(database_url, "0001")
        _insert_document_with_a_passage(engine)
        assert not PASSAGE_COLUMNS & _passage_columns(engine)

        migrate.upgrade(database_url, "0002")
        assert _passage_columns(engine) >= PASSAGE_COLUMNS
        with engine.begin() as connection:
            row = connection.execute(text("SELECT text, embedding, embedding_model FROM passages"))
            assert row.one() == ("Text", None, None)
            connection.execute(
                text("UPDATE passages SET embedding = :blob, embedding_model = 'm'"),
                {"blob": b"\x00\x3c" * 4},
            )
            stored = connection.execute(text("SELECT embedding FROM passages")).scalar_one()
            assert bytes(stored) == b"\x00\x3c" * 4

        migrate.downgrade(database_url, "0001")
        assert not PASSAGE_COLUMNS & _passage_columns(engine)
        with engine.connect() as connection:
            assert connection.execute(text("SELECT text FROM passages")).scalar_one() == "Text"
    finally:
        engine.dispose()
