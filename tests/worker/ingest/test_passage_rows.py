"""One mapping between the pipelines' passages and the stored rows: a split passage stored and
read back is the same passage, on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses

from sqlalchemy.orm import Session

from app.db.models import DocumentKind
from app.services import documents
from pipelines.documents import Passage
from worker.ingest.passage_rows import PASSAGE_FIELDS, from_row, new_passage

PASSAGES = (
    Passage(
        ordinal=0, first_page=1, last_page=1, start_char=0, end_char=6, text="Lease.", num_tokens=2
    ),
    Passage(
        ordinal=1,
        first_page=1,
        last_page=2,
        start_char=8,
        end_char=20,
        text="Rent is 900.",
        num_tokens=5,
    ),
)


def test_a_stored_passage_reads_back_as_the_same_passage(session: Session) -> None:
    rows = [new_passage(PASSAGES[0], embedding=b"\x00\x01", embedding_model="m")]
    rows.append(new_passage(PASSAGES[1], embedding=None, embedding_model="m"))
    document = documents.store_document(
        session=session,
        new=documents.NewDocument(
            content_hash="a" * 64,
            file_name="lease.pdf",
            kind=DocumentKind.LEGAL,
            num_tokens=7,
            pages=[documents.NewPage(1, "Lease."), documents.NewPage(2, "Rent is 900.")],
            passages=rows,
        ),
    )
    session.commit()

    stored = documents.get_passages(session=session, document_id=document.id)

    assert tuple(from_row(row) for row in stored) == PASSAGES
    assert [(row.embedding, row.embedding_model) for row in stored] == [
        (b"\x00\x01", "m"),
        (None, None),
    ]


def test_every_pipeline_field_is_a_stored_field() -> None:
    stored_fields = {field.name for field in dataclasses.fields(documents.NewPassage)}
    assert set(PASSAGE_FIELDS) <= stored_fields
    assert stored_fields - set(PASSAGE_FIELDS) == {"embedding", "embedding_model"}
