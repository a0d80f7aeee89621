"""Jobs: a row per background task, so the UI and CLI can show progress and errors.

Functions flush; the caller commits (a worker commits after each progress update so readers see
it). Functions that take a job_id return None when there is no such job, e.g. when its
document was deleted (and the job with it) while the task ran.
"""

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Job, JobKind, JobStatus, utc_now
from app.db.session import write_transaction


def create_job(
    *,
    session: Session,
    kind: JobKind,
    document_id: int | None = None,
    params: dict[str, Any] | None = None,
    owner_host: str | None = None,
    owner_pid: int | None = None,
) -> Job:
    """A queued job. `params` must be JSON-serialisable (e.g. {"question": ...}).

    `owner_host` and `owner_pid` name the process that runs the job itself, outside the
    workers (`longdoc ingest`): the workers' restart sweep never queues such a job again.
    """
    job = Job(
        kind=JobKind(kind),
        status=JobStatus.QUEUED,
        document_id=document_id,
        params=dict(params or {}),
        owner_host=owner_host,
        owner_pid=owner_pid,
    )
    session.add(job)
    session.flush()
    return job


@dataclass(frozen=True)
class IngestParams:
    """An ingest job's params: the file to read and what follows it, as `Job.params` holds them
    (JSON, `to_dict`). `from_dict` reads any row, also one written before this type."""

    file_name: str  # shown to people; the stored copy is named by its content hash
    path: str | None = None  # the copy in the document store; None: a refusal recorded as a job
    source: str | None = None  # "upload" or "inbox"; None: the command line
    kind: str | None = None  # legal, medical or other; None: guessed from the text
    password: str | None = None  # an encrypted PDF's, until the ingest has an outcome
    then_summarize: bool = False  # a summarize job follows, created as the ingest job finishes
    collection_id: int | None = None  # the stored (or already present) document joins it
    owner_id: int | None = None  # the user it is stored for (accounts); None: no owner

    def to_dict(self) -> dict[str, Any]:
        """The JSON for `Job.params`; unset values are left out (no password key unless set)."""
        values = dataclasses.asdict(self)
        return {key: value for key, value in values.items() if value is not None}

    @classmethod
    def from_dict(cls, params: Mapping[str, Any] | None) -> "IngestParams":
        """The params of a job row; unknown keys are ignored, wrong types read as unset."""
        values = params or {}

        def text(key: str) -> str | None:
            value = values.get(key)
            return value if isinstance(value, str) and value else None

        collection_id = values.get("collection_id")
        owner_id = values.get("owner_id")
        return cls(
            file_name=text("file_name") or "",
            path=text("path"),
            source=text("source"),
            kind=text("kind"),
            password=text("password"),
            then_summarize=bool(values.get("then_summarize")),
            collection_id=collection_id if isinstance(collection_id, int) else None,
            owner_id=owner_id if isinstance(owner_id, int) else None,
        )


def create_ingest_job(
    *,
    session: Session,
    params: IngestParams,
    owner_host: str | None = None,
    owner_pid: int | None = None,
) -> Job:
    """A queued ingest job for one file (see create_job for the owner)."""
    return create_job(
        session=session,
        kind=JobKind.INGEST,
        params=params.to_dict(),
        owner_host=owner_host,
        owner_pid=owner_pid,
    )


def forget_password(*, session: Session, job_id: int) -> Job | None:
    """Remove the PDF password from an ingest job's params; it is kept only until the ingest has
    an outcome. Flushes; the caller commits."""
    write_transaction(session)  # read, then written: BEGIN IMMEDIATE on SQLite
    job = session.get(Job, job_id)
    if job is None or "password" not in (job.params or {}):
        return job
    job.params = {key: value for key, value in job.params.items() if key != "password"}
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


def list_document_jobs(
    *, session: Session, document_id: int, kind: JobKind, limit: int = 200
) -> list[Job]:
    """The document's newest `limit` jobs of `kind`, oldest first (the order of a conversation)."""
    newest = list_jobs(session=session, kind=kind, document_id=document_id, limit=limit)
    return list(reversed(newest))


def get_jobs(*, session: Session, job_ids: Sequence[int]) -> dict[int, Job]:
    """The jobs of `job_ids` that exist, by id (a deleted document's jobs are gone)."""
    if not job_ids:
        return {}
    return {job.id: job for job in session.scalars(select(Job).where(Job.id.in_(job_ids)))}


def count_by_status(*, session: Session) -> dict[JobStatus, int]:
    """How many jobs are in each status, every status present (0 when none)."""
    rows = session.execute(select(Job.status, func.count()).group_by(Job.status))
    counts = {status: 0 for status in JobStatus}
    counts.update({JobStatus(status): int(n) for status, n in rows})
    return counts


def start_job(*, session: Session, job_id: int, task_id: str | None = None) -> Job | None:
    """Mark the job running. A redelivered task calls this again: started_at is then renewed."""
    write_transaction(session)  # read, then written: BEGIN IMMEDIATE on SQLite
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
    """Record that `done` of `total` units of `stage` are finished (e.g. "parse", 12, 300).

    Progress never moves backwards within a stage: a report of the same stage (its details in
    brackets aside: "combining (3 of 5 calls done)") whose fraction is below the one recorded
    (a redelivered task starting over, a new model call of the same step) keeps the recorded
    done of total, and only the stage's details are updated."""
    write_transaction(session)  # read, then written: BEGIN IMMEDIATE on SQLite
    job = session.get(Job, job_id)
    if job is None:
        return None
    if _same_stage(job.stage, stage) and _fraction(done, total) < _fraction(
        job.progress_done or 0, job.progress_total or 0
    ):
        job.stage = stage
        session.flush()
        return job
    job.stage = stage
    job.progress_done = done
    job.progress_total = total
    session.flush()
    return job


def _same_stage(old: str | None, new: str) -> bool:
    return old is not None and old.partition(" (")[0] == new.partition(" (")[0]


def _fraction(done: int, total: int) -> float:
    return min(done / total, 1.0) if total > 0 else 0.0


def finish_job(
    *,
    session: Session,
    job_id: int,
    stats: dict[str, Any] | None = None,
    document_id: int | None = None,
) -> Job | None:
    """Mark the job succeeded (stage "done"). `document_id` links an ingest job to the document it stored
    (or found already stored); `stats` (JSON: timings, counts) replaces any earlier stats."""
    write_transaction(session)  # read, then written: BEGIN IMMEDIATE on SQLite
    job = session.get(Job, job_id)
    if job is None:
        return None
    job.status = JobStatus.SUCCEEDED
    job.finished_at = utc_now()
    job.error_code = None
    job.error = None
    # A finished job's last stage is "done", never the one it was in when it finished.
    job.stage = "done"
    job.progress_done = max(job.progress_done or 0, job.progress_total or 0)
    if stats is not None:
        job.stats = dict(stats)
    if document_id is not None:
        job.document_id = document_id
    session.flush()
    return job


def fail_abandoned_jobs(
    *, session: Session, host: str, is_alive: Callable[[int], bool], sentence: str
) -> list[int]:
    """Fail the running jobs whose owning process on `host` is gone (`is_alive(pid)` False).

    Jobs owned on other hosts are left alone: their processes cannot be seen from here.
    Returns the ids failed; flushes, the caller commits.
    """
    write_transaction(session)  # read, then written: BEGIN IMMEDIATE on SQLite
    query = select(Job).where(
        Job.status == JobStatus.RUNNING, Job.owner_host == host, Job.owner_pid.is_not(None)
    )
    failed = []
    for job in session.scalars(query):
        if not is_alive(job.owner_pid):
            fail_job(session=session, job_id=job.id, error_code="owner_gone", sentence=sentence)
            failed.append(job.id)
    return failed


def fail_job(*, session: Session, job_id: int, error_code: str, sentence: str) -> Job | None:
    """Mark the job failed with a stable code (e.g. AppError.code) and a sentence for people.
    The sentence must not quote document text."""
    write_transaction(session)  # read, then written: BEGIN IMMEDIATE on SQLite
    job = session.get(Job, job_id)
    if job is None:
        return None
    job.status = JobStatus.FAILED
    job.finished_at = utc_now()
    job.error_code = error_code
    job.error = sentence
    session.flush()
    return job


def wait_for_job(
    *,
    open_session: Callable[[], AbstractContextManager[Session]],
    job_id: int,
    on_update: Callable[[Job], None] | None = None,
    interval_s: float = 0.5,
) -> Job | None:
    """Read the job's row every `interval_s` until it has ended (succeeded or failed), each row
    read shown to `on_update`; its last row (detached), or None once the job is gone (its
    document was deleted). Waiting never changes the job: Ctrl-C stops only the waiting."""
    while True:
        with open_session() as session:
            job = get_job(session=session, job_id=job_id)
            if job is None:
                return None
            session.expunge(job)
        if on_update is not None:
            on_update(job)
        if job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED):
            return job
        time.sleep(interval_s)
