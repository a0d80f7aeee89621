"""Read-only lookups the pages need that app/services does not offer (yet).

Each takes a session and returns rows or plain values; nothing here writes. Candidates to move
into app/services/results.py and jobs.py.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Answer, Job, JobKind, JobStatus, Summary

OPEN_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING)


def summarized_document_ids(session: Session) -> set[int]:
    return set(session.scalars(select(Summary.document_id).distinct()))


def list_answers(session: Session, document_id: int) -> list[Answer]:
    """Oldest first: the order of a conversation."""
    query = (
        select(Answer)
        .where(Answer.document_id == document_id)
        .order_by(Answer.created_at, Answer.id)
    )
    return list(session.scalars(query))


def job_counts(session: Session) -> dict[JobStatus, int]:
    rows = session.execute(select(Job.status, func.count()).group_by(Job.status))
    counts = {status: 0 for status in JobStatus}
    counts.update({JobStatus(status): int(n) for status, n in rows})
    return counts


def document_jobs(
    session: Session, document_id: int, kind: JobKind, *, limit: int = 200
) -> list[Job]:
    """The document's jobs of `kind`, oldest first."""
    query = (
        select(Job)
        .where(Job.document_id == document_id, Job.kind == kind)
        .order_by(Job.created_at.desc(), Job.id.desc())
        .limit(limit)
    )
    return list(reversed(session.scalars(query).all()))


def jobs_by_id(session: Session, job_ids: list[int]) -> dict[int, Job]:
    if not job_ids:
        return {}
    return {job.id: job for job in session.scalars(select(Job).where(Job.id.in_(job_ids)))}
