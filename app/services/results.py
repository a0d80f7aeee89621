"""Summaries and answers: what the model tasks produce, saved at most once per job.

A task may be delivered twice (a worker died after the model finished but before the broker
heard of it). Saving is therefore an upsert by job_id: the second delivery finds the first
delivery's row and returns it. Functions flush; the caller commits.
"""

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import exists, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import (
    Answer,
    Document,
    DocumentStatus,
    Job,
    JobKind,
    Summary,
    SummaryMethod,
    SupportStatus,
)

# What every stored quote (an answer's quote, a key passage) holds at least.
QUOTE_FIELDS = frozenset({"text", "page", "start_char", "end_char"})

_Row = TypeVar("_Row", Summary, Answer)


def get_summary_for_job(*, session: Session, job_id: int) -> Summary | None:
    return session.scalars(select(Summary).where(Summary.job_id == job_id)).first()


def get_answer_for_job(*, session: Session, job_id: int) -> Answer | None:
    return session.scalars(select(Answer).where(Answer.job_id == job_id)).first()


def save_summary(
    *,
    session: Session,
    job_id: int,
    document_id: int,
    method: SummaryMethod | str,
    text: str,
    model: str,
    stats: dict[str, Any] | None = None,
    key_passages: Sequence[dict[str, Any]] = (),
    sentence_support: Sequence[dict[str, Any]] = (),
    lead: Sequence[dict[str, Any]] = (),
) -> Summary:
    """The job's summary: stored now, or the one an earlier delivery of the job stored.

    `key_passages` are the extractive summary's quotes (see Summary.key_passages);
    `sentence_support` each sentence of `text` with its status and quotes; `lead` the lines
    from the document's key facts that come first (Summary.lead), as sentence rows."""
    existing = get_summary_for_job(session=session, job_id=job_id)
    if existing is not None:
        return existing
    summary = Summary(
        job_id=job_id,
        document_id=document_id,
        method=SummaryMethod(method),
        text=text,
        model=model,
        stats=dict(stats or {}),
        key_passages=[_quote_row(quote) for quote in key_passages],
        sentence_support=[_sentence_row(row) for row in sentence_support],
        lead=[_sentence_row(row) for row in lead],
    )
    return _insert_once(
        session, summary, lambda: get_summary_for_job(session=session, job_id=job_id)
    )


def save_answer(
    *,
    session: Session,
    job_id: int,
    document_id: int,
    question: str,
    answer: str,
    cited_pages: Sequence[int],
    cited_passage_ids: Sequence[int],
    model: str,
    stats: dict[str, Any] | None = None,
    quotes: Sequence[dict[str, Any]] = (),
    support: SupportStatus | str | None = None,
    model_answer: str | None = None,
    unsupported_claims: Sequence[str] = (),
) -> Answer:
    """The job's answer: stored now, or the one an earlier delivery of the job stored.

    `quotes` are the sentences it rests on and `support` how it stands against them (see the
    Answer columns); `model_answer` is the model's own text when the best quote replaced it."""
    existing = get_answer_for_job(session=session, job_id=job_id)
    if existing is not None:
        return existing
    row = Answer(
        job_id=job_id,
        document_id=document_id,
        question=question,
        answer=answer,
        cited_pages=list(cited_pages),
        cited_passage_ids=list(cited_passage_ids),
        model=model,
        stats=dict(stats or {}),
        quotes=[_quote_row(quote) for quote in quotes],
        support=SupportStatus(support) if support is not None else None,
        model_answer=model_answer,
        unsupported_claims=[str(claim) for claim in unsupported_claims],
    )
    return _insert_once(session, row, lambda: get_answer_for_job(session=session, job_id=job_id))


def _insert_once(session: Session, row: _Row, stored: Callable[[], _Row | None]) -> _Row:
    """Add the job's result row, or return the one a concurrent delivery of the same job stored
    first (the unique job_id refuses a second); any other constraint's error is raised."""
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:
        raced = stored()
        if raced is None:
            raise  # another constraint, e.g. the document is gone
        return raced
    return row


def _quote_row(quote: dict[str, Any]) -> dict[str, Any]:
    """A quote as stored: its verbatim text, page and document offsets, passage and score."""
    missing = QUOTE_FIELDS - quote.keys()
    if missing:
        raise ValueError(f"a quote needs {', '.join(sorted(missing))}")
    return {
        "text": str(quote["text"]),
        "page": int(quote["page"]),
        "start_char": int(quote["start_char"]),
        "end_char": int(quote["end_char"]),
        "passage_ordinal": int(quote.get("passage_ordinal", -1)),
        "score": float(quote.get("score", 0.0)),
    }


SENTENCE_STATUSES = frozenset({"supported", "unsupported", "no_evidence"})


def _sentence_row(row: dict[str, Any]) -> dict[str, Any]:
    """A summary sentence as stored: its text, status, quotes and missing claims."""
    status = str(row.get("status", ""))
    if status not in SENTENCE_STATUSES:
        raise ValueError(f"a summary sentence's status is one of {sorted(SENTENCE_STATUSES)}")
    return {
        "text": str(row["text"]),
        "status": status,
        "quotes": [_quote_row(quote) for quote in row.get("quotes", ())],
        "missing": [str(claim) for claim in row.get("missing", ())],
    }


def set_summary_leads(*, session: Session, document_id: int, lead: Sequence[dict[str, Any]]) -> int:
    """Replace the lead of every summary of the document (its facts were saved again); how many
    summaries there were."""
    rows = [_sentence_row(row) for row in lead]
    summaries = list_summaries(session=session, document_id=document_id)
    for summary in summaries:
        summary.lead = [dict(row) for row in rows]
    return len(summaries)


def list_summaries(*, session: Session, document_id: int) -> list[Summary]:
    """Newest first."""
    query = (
        select(Summary)
        .where(Summary.document_id == document_id)
        .order_by(Summary.created_at.desc(), Summary.id.desc())
    )
    return list(session.scalars(query))


def list_answers(*, session: Session, document_id: int) -> list[Answer]:
    """Oldest first: the order of a conversation."""
    query = (
        select(Answer)
        .where(Answer.document_id == document_id)
        .order_by(Answer.created_at, Answer.id)
    )
    return list(session.scalars(query))


def summarized_document_ids(*, session: Session) -> set[int]:
    """Ids of the documents that have at least one summary."""
    return set(session.scalars(select(Summary.document_id).distinct()))


def documents_needing_summary(*, session: Session, limit: int = 50) -> list[int]:
    """Ids of ready documents with no summary and no summarize job at all, oldest first.

    A document whose summarize job failed is left alone (it would fail again every tick); the
    user retries it with `longdoc summarize ID`.
    """
    has_summary = exists().where(Summary.document_id == Document.id)
    has_job = exists().where(Job.document_id == Document.id, Job.kind == JobKind.SUMMARIZE)
    query = (
        select(Document.id)
        .where(Document.status == DocumentStatus.READY, ~has_summary, ~has_job)
        .order_by(Document.id)
        .limit(limit)
    )
    return list(session.scalars(query))
