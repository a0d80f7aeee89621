"""A factory for documents to store (app.services.documents.NewDocument): two pages, three
passages, the content hash taken from `seed`."""

from __future__ import annotations

import hashlib

from app.db.models import DocumentKind
from app.services.documents import NewDocument, NewPage, NewPassage


def new_document(
    seed: str = "a",
    *,
    kind: DocumentKind = DocumentKind.LEGAL,
    title: str | None = "Lease agreement",
    file_name: str = "lease.pdf",
    stored_path: str | None = None,
) -> NewDocument:
    pages = (NewPage(1, "First page."), NewPage(2, "Second page, longer."))
    passages = (
        NewPassage(0, 1, 1, 0, 11, "First page.", 3),
        NewPassage(1, 1, 2, 11, 31, "page. Second page, longer.", 6),
        NewPassage(2, 2, 2, 12, 31, "Second page, longer.", 5),
    )
    return NewDocument(
        content_hash=hashlib.sha256(seed.encode()).hexdigest(),
        file_name=file_name,
        kind=kind,
        num_tokens=14,
        pages=pages,
        passages=passages,
        title=title,
        stored_path=stored_path,
    )
