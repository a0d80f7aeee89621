"""Several documents of one file (migration 0015), on SQLite and PostgreSQL: a database of 0014
with a document migrates and keeps it; a second document of the same file can then be stored
for a reader who may not read the first; a downgrade refuses, with a sentence, while two share a
file, and once one is gone restores the uniqueness."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app import migrate
from app.db.models import Document
from app.db.session import make_engine, session_factory
from app.services import documents
from tests.app.new_documents import new_document

COPIED = ("content_hash", "file_name", "kind", "num_pages", "num_chars", "num_tokens", "status")


def _store_a_copy(session: Session, document_id: int) -> None:
    """Another row of the same file, written as the database is (no service check)."""
    original = session.get(Document, document_id)
    session.add(Document(**{column: getattr(original, column) for column in COPIED}))
    session.flush()


def test_an_0014_database_migrates_and_one_file_may_be_several_documents(
    database_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(database_url, "0014")
    engine = make_engine(database_url)
    sessions = session_factory(engine)
    try:
        with sessions() as session:
            first_id = documents.store_document(session=session, new=new_document("lease")).id
            session.commit()
            with pytest.raises(IntegrityError):  # one document a file, before
                _store_a_copy(session, first_id)
        migrate.upgrade(database_url)
        with sessions() as session:
            assert [d.id for d in session.scalars(select(Document))] == [first_id]
            nobody = Document.id.in_([])  # a reader who may read none of them
            second = documents.store_document(
                session=session, new=new_document("lease"), readable=nobody
            )
            session.commit()
            second_id = second.id
            found = documents.find_by_hash(session=session, content_hash=second.content_hash)
            assert found is not None and found.id == first_id  # the oldest, for who reads all
        with pytest.raises(RuntimeError, match="stored as several documents"):
            migrate.downgrade(database_url, "0014")
        with sessions() as session:
            assert documents.delete_document(
                session=session, document_id=second_id, files_dir=tmp_path
            )
            session.commit()
        migrate.downgrade(database_url, "0014")
        with sessions() as session, pytest.raises(IntegrityError):  # one a file again
            _store_a_copy(session, first_id)
    finally:
        engine.dispose()
