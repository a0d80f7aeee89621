"""A factory for stored documents whose pages are given as text: each page becomes one passage,
and pages joined by `span` into one passage spanning them."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from sqlalchemy.orm import Session

from app.db.models import Document, DocumentKind
from app.services import documents


def store(
    session: Session,
    title: str,
    pages: Sequence[str],
    *,
    kind: DocumentKind = DocumentKind.LEGAL,
    span: tuple[int, int] | None = None,
) -> Document:
    """Store a ready document; passage i is page i+1, except pages span[0]..span[1] (1-based)
    which are one passage."""
    groups: list[list[int]] = []
    for number in range(1, len(pages) + 1):
        if span is not None and span[0] < number <= span[1]:
            groups[-1].append(number)
        else:
            groups.append([number])
    passages, offset = [], 0
    for ordinal, group in enumerate(groups):
        text = "\n\n".join(pages[n - 1] for n in group)
        passages.append(
            documents.NewPassage(
                ordinal=ordinal,
                first_page=group[0],
                last_page=group[-1],
                start_char=offset,
                end_char=offset + len(text),
                text=text,
                num_tokens=len(text.split()),
            )
        )
        offset += len(text) + 2
    digest = hashlib.sha256(f"{title}|{'|'.join(pages)}".encode()).hexdigest()
    document = documents.store_document(
        session=session,
        new=documents.NewDocument(
            content_hash=digest,
            file_name=f"{title.lower().replace(' ', '_')}.pdf",
            kind=kind,
            num_tokens=sum(p.num_tokens for p in passages),
            pages=[documents.NewPage(number=i + 1, text=t) for i, t in enumerate(pages)],
            passages=passages,
            title=title,
        ),
    )
    session.flush()
    return document


FILLER = (
    "The parties agree to the terms set out in this section. Each party shall perform its "
    "obligations in good faith and in a timely manner."
)
