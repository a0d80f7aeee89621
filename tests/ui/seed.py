"""Documents, summaries, answers and jobs written straight through app/services, for the UI tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

from sqlalchemy.orm import Session

from app.db.models import Document, DocumentStatus, JobKind
from app.services import documents, file_store, jobs, results

PAGE_SEPARATOR = "\n\n"


def add_document(
    session: Session,
    files_dir: Path,
    *,
    title: str,
    kind: str = "legal",
    pages: list[str] | None = None,
    status: DocumentStatus = DocumentStatus.READY,
) -> Document:
    """A stored document whose passages are its pages' sentences (ending in "."), with a file."""
    pages = pages or [f"{title} page one. It has two sentences.", f"{title} page two."]
    data = f"%PDF-1.7 {title}".encode()
    content_hash = hashlib.sha256(data).hexdigest()
    stored = file_store.store_file(files_dir=files_dir, content_hash=content_hash, data=data)
    passages, offset, ordinal = [], 0, 0
    for number, text in enumerate(pages, start=1):
        start = 0
        for sentence in text.split(". "):
            piece = sentence if sentence.endswith(".") else sentence + "."
            begin = text.index(piece, start) if piece in text[start:] else start
            end = min(begin + len(piece), len(text))
            passages.append(
                documents.NewPassage(
                    ordinal=ordinal,
                    first_page=number,
                    last_page=number,
                    start_char=offset + begin,
                    end_char=offset + end,
                    text=text[begin:end],
                    num_tokens=len(piece.split()),
                )
            )
            ordinal += 1
            start = end
        offset += len(text) + len(PAGE_SEPARATOR)
    document = documents.store_document(
        session=session,
        new=documents.NewDocument(
            content_hash=content_hash,
            file_name=f"{title.lower().replace(' ', '-')}.pdf",
            title=title,
            kind=kind,
            num_tokens=sum(len(p.split()) for p in pages),
            pages=[documents.NewPage(i, text) for i, text in enumerate(pages, start=1)],
            passages=passages,
            stored_path=str(stored),
        ),
    )
    document.status = status
    session.flush()
    return document


def add_summary(
    session: Session,
    document_id: int,
    text: str,
    *,
    method: str = "one_pass",
    stats=None,
    key_passages=(),
    sentence_support=(),
    lead=(),
):
    job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=document_id)
    summary = results.save_summary(
        session=session,
        job_id=job.id,
        document_id=document_id,
        method=method,
        text=text,
        model="smollm2-135m-instruct",
        stats=stats or {},
        key_passages=key_passages,
        sentence_support=sentence_support,
        lead=lead,
    )
    jobs.finish_job(session=session, job_id=job.id, stats=stats or {})
    return summary


def add_answer(
    session: Session,
    document_id: int,
    question: str,
    answer: str,
    pages: list[int],
    passage_ids,
    **evidence,
):
    """`evidence`: quotes, support, model_answer, unsupported_claims (results.save_answer)."""
    job = jobs.create_job(
        session=session, kind=JobKind.ANSWER, document_id=document_id, params={"question": question}
    )
    row = results.save_answer(
        session=session,
        job_id=job.id,
        document_id=document_id,
        question=question,
        answer=answer,
        cited_pages=pages,
        cited_passage_ids=passage_ids,
        model="smollm2-135m-instruct",
        **evidence,
    )
    jobs.finish_job(session=session, job_id=job.id)
    return row
