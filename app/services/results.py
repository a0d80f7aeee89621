"""Summaries and answers: what the model tasks produce, saved at most once per job.

A task may be delivered twice (a worker died after the model finished but before the broker
heard of it). Saving is therefore an upsert by job_id: the second delivery finds the first
delivery's row and returns it. Functions flush; the caller commits.
"""

from collections.abc import Sequence
from typing import Any

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
)


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
) -> Summary:
    """The job's summary: stored now, or the one an earlier delivery of the job stored."""
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
    )
    try:
        with session.begin_nested():
            session.add(summary)
    except IntegrityError:
        raced = get_summary_for_job(session=session, job_id=job_id)
        if raced is None:
            raise  # another constraint, e.g. the document is gone
        return raced
    return summary


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
) -> Answer:
    """The job's answer: stored now, or the one an earlier delivery of the job stored."""
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
    )
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:
        raced = get_answer_for_job(session=session, job_id=job_id)
        if raced is None:
            raise
        return raced
    return row


def list_summaries(*, session: Session, document_id: int) -> list[Summary]:
    """Newest first."""
    query = (
        select(Summary)
        .where(Summary.document_id == document_id)
        .order_by(Summary.created_at.desc(), Summary.id.desc())
    )
    return list(session.scalars(query))


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
