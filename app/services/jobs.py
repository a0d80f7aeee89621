"""Jobs: a row per background task, so the UI and CLI can show progress and errors.

Functions flush; the caller commits (a worker commits after each progress update so readers see
it). Functions that take a job_id return None when there is no such job, e.g. when its
document was deleted (and the job with it) while the task ran.
"""

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Job, JobKind, JobStatus, utc_now


def create_job(
    *,
    session: Session,
    kind: JobKind,
    document_id: int | None = None,
    params: dict[str, Any] | None = None,
) -> Job:
    """A queued job. `params` must be JSON-serialisable (e.g. {"question": ...})."""
    job = Job(
        kind=JobKind(kind),
        status=JobStatus.QUEUED,
        document_id=document_id,
        params=dict(params or {}),
    )
    session.add(job)
    session.flush()
    return job


def get_job(*, session: Session, job_id: int) -> Job | None:
    return session.get(Job, job_id)


def list_jobs(
    *,
    session: Session,
    status: JobStatus | None = None,
    kind: JobKind | None = None,
    document_id: int | None = None,
    limit: int = 100,
) -> list[Job]:
    """Newest first, at most `limit`."""
    query = select(Job).order_by(Job.created_at.desc(), Job.id.desc()).limit(limit)
    if status is not None:
        query = query.where(Job.status == status)
    if kind is not None:
        query = query.where(Job.kind == kind)
    if document_id is not None:
        query = query.where(Job.document_id == document_id)
    return list(session.scalars(query))


def start_job(*, session: Session, job_id: int, task_id: str | None = None) -> Job | None:
    """Mark the job running. A redelivered task calls this again: started_at is then renewed."""
    job = session.get(Job, job_id)
    if job is None:
        return None
    job.status = JobStatus.RUNNING
    job.started_at = utc_now()
    job.finished_at = None
    if task_id is not None:
        job.task_id = task_id
    session.flush()
    return job


def update_progress(
    *, session: Session, job_id: int, stage: str, done: int, total: int
) -> Job | None:
    """Record that `done` of `total` units of `stage` are finished (e.g. "parse", 12, 300)."""
    job = session.get(Job, job_id)
    if job is None:
        return None
    job.stage = stage
    job.progress_done = done
    job.progress_total = total
    session.flush()
    return job


def finish_job(
    *,
    session: Session,
    job_id: int,
    stats: dict[str, Any] | None = None,
    document_id: int | None = None,
) -> Job | None:
    """Mark the job succeeded. `document_id` links an ingest job to the document it stored
    (or found already stored); `stats` (JSON: timings, counts) replaces any earlier stats."""
    job = session.get(Job, job_id)
    if job is None:
        return None
    job.status = JobStatus.SUCCEEDED
    job.finished_at = utc_now()
    job.error_code = None
    job.error = None
    if stats is not None:
        job.stats = dict(stats)
    if document_id is not None:
        job.document_id = document_id
    session.flush()
    return job


def fail_job(*, session: Session, job_id: int, error_code: str, sentence: str) -> Job | None:
    """Mark the job failed with a stable code (e.g. AppError.code) and a sentence for people.
    The sentence must not quote document text."""
    job = session.get(Job, job_id)
    if job is None:
        return None
    job.status = JobStatus.FAILED
    job.finished_at = utc_now()
    job.error_code = error_code
    job.error = sentence
    session.flush()
    return job
