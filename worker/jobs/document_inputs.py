"""A stored document as pipeline input (pipelines.inputs.DocumentInput): its pages and passages."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from app.db.models import Document, Page, Passage
from app.services import documents
from pipelines.documents import PageText
from pipelines.inputs import DocumentInput
from pipelines.vectors import PassageVectors
from worker.ingest.passage_rows import from_row


def document_input(
    session: Session, document: Document, vectors: PassageVectors | None = None
) -> DocumentInput:
    """`vectors` are dropped when they do not cover the passages one for one."""
    pages = documents.get_pages(session=session, document_id=document.id)
    passages = documents.get_passages(session=session, document_id=document.id)
    return input_of_rows(document, pages, passages, vectors)


def input_of_rows(
    document: Document,
    pages: Sequence[Page],
    passages: Sequence[Passage],
    vectors: PassageVectors | None = None,
) -> DocumentInput:
    """document_input from its page and passage rows as already read."""
    if vectors is not None and vectors.num_passages != len(passages):
        vectors = None  # passages are never re-split today; BM25 alone if they ever are
    return DocumentInput(
        title=document.title,
        kind=document.kind.value,
        pages=tuple(PageText(number=p.number, text=p.text) for p in pages),
        passages=tuple(from_row(p) for p in passages),
        passage_embeddings=vectors,
    )
