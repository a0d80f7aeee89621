"""The poison-task guard: a job whose worker process dies under it N times is failed with a
sentence and never run again; and a job whose task fails outside the job's run still ends.

acks_late with reject_on_worker_lost puts a task back on the queue when the pool child running
it dies (SIGKILL, the OOM killer, a native crash): right when a machine lost power, wrong for a
file that kills every worker that reads it, whose task would come back forever.

How it counts: every task run of a job adds one to the job's `num_unfinished_runs` (committed)
before it starts, and takes it off in a `finally` when it returns or raises. A run whose process
died never takes it off. A delivery that finds LONGDOC_MAX_WORKER_DEATHS (default 2) such runs
fails the job with a sentence and returns without running it: the message is acknowledged, so
it is never delivered again. The counter lives in the job row, so it holds across pool children,
worker restarts (worker/jobs/recovery.py queues the job again: that delivery counts too) and hosts.

The other queues meanwhile: the dead child is replaced at once and the worker takes its next
message, so a question or summary waits for at most N runs of the poison task, then never
again. Where that is too long, run the ingest queue on a worker of its own (the compose stack
does: a CPU worker parses, the GPU worker answers).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Task
from celery.app import trace as celery_trace
from celery.app.trace import LOG_RETRY
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobStatus
from app.db.retry import is_lock_error, with_lock_retries
from app.db.session import write_transaction
from app.errors import DatabaseBusy
from app.services import jobs
from app.services.dispatch import TASK_FOR_KIND
from worker import resources

logger = logging.getLogger(__name__)

WORKER_DIED = "worker_died"
_DIED = (
    "The worker stopped unexpectedly {n} times while running this job (it ran out of memory or "
    "crashed), so LongDoc will not try it again. The file may be damaged or too large for this "
    "machine; see the worker's log for job {job_id}."
)
_UNEXPECTED = "An unexpected error stopped this job; see the worker's log for job {job_id}."


class _NoPerAttemptRetryLines(logging.Filter):
    """Leaves out Celery's line for each retry of a job task ("Task longdoc.summarize[...] retry:
    Retry in 3.5s"), hundreds when summaries wait for a slot or the database is busy: JobTask
    and worker/jobs/batch_slots.py log a job's retries themselves, once, with their count."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        return not (
            record.msg == LOG_RETRY and isinstance(args, dict) and args.get("name") in _JOB_TASKS
        )


_JOB_TASKS = frozenset(TASK_FOR_KIND.values())
_RETRY_LINES = _NoPerAttemptRetryLines()


def quiet_retry_lines() -> None:
    """Install the filter on Celery's task log (once; the worker's tasks module calls it)."""
    trace_logger = logging.getLogger(celery_trace.__name__)
    if _RETRY_LINES not in trace_logger.filters:
        trace_logger.addFilter(_RETRY_LINES)


class JobTask(Task):
    """The base of the tasks that take a job id: counts runs, and ends the job on a failure.
    A job's retries (Celery's autoretry, on database errors) are logged once when the first
    happens and once with their count when the job's task ends."""

    def on_retry(
        self, exc: BaseException | None, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        if exc is None:
            return  # a summary waiting for a batch slot: worker/jobs/batch_slots.py logs those
        job_id, retries = job_id_of(args, kwargs), self.request.retries + 1
        # One line for the first, and the count when the task ends (after_return); no more.
        log = logger.warning if retries == 1 else logger.debug
        log("job %s: %s, its task runs again (retry %d)", job_id, type(exc).__name__, retries)

    def after_return(
        self, status: str, retval: Any, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        retries = self.request.retries
        if retries and status != "RETRY":
            job_id = job_id_of(args, kwargs)
            logger.info("job %s: its task ended (%s) after %d retries", job_id, status, retries)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        job_id = job_id_of(args, kwargs)
        if job_id is None:
            return super().__call__(*args, **kwargs)
        sessions = resources.sessions()
        if not begin_run(job_id, sessions=sessions, max_deaths=_max_deaths()):
            return {"job_id": job_id, "status": "failed"}
        try:
            return super().__call__(*args, **kwargs)
        finally:
            end_run(job_id, sessions=sessions)

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        # Celery gave up on the task (retries spent, or an error outside the job's run): the job
        # must not stay "running" or "queued" for ever.
        job_id = job_id_of(args, kwargs)
        if job_id is not None:
            end_job_after_error(job_id, exc, sessions=resources.sessions())


def begin_run(job_id: int, *, sessions: sessionmaker[Session], max_deaths: int) -> bool:
    """Count a run of the job; False (and the job failed) when N runs died before it."""

    def attempt() -> bool:
        with sessions() as session:
            write_transaction(session)
            job = session.get(Job, job_id)
            if job is None or job.status == JobStatus.SUCCEEDED:
                return True  # the job's run skips it
            deaths = job.num_unfinished_runs or 0
            if deaths >= max_deaths:
                sentence = _DIED.format(n=deaths, job_id=job_id)
                jobs.fail_job(
                    session=session, job_id=job_id, error_code=WORKER_DIED, sentence=sentence
                )
                session.commit()
                logger.error("job %s failed: its worker died %d times", job_id, deaths)
                return False
            job.num_unfinished_runs = deaths + 1
            session.commit()
            return True

    try:
        return with_lock_retries(attempt, what="starting this job")
    except DatabaseBusy:
        logger.warning("job %s: runs not counted, the database is busy", job_id)
        return True  # the job's own retries deal with the database


def end_run(job_id: int, *, sessions: sessionmaker[Session]) -> None:
    """Take the run off the count: this process lived to the end of it."""

    def attempt() -> None:
        with sessions() as session:
            write_transaction(session)
            job = session.get(Job, job_id)
            if job is not None:
                job.num_unfinished_runs = max(0, (job.num_unfinished_runs or 0) - 1)
                session.commit()

    try:
        with_lock_retries(attempt, what="finishing this job")
    except DatabaseBusy:
        logger.warning("job %s: run not uncounted, the database is busy", job_id)


def end_job_after_error(job_id: int, error: BaseException, *, sessions: sessionmaker) -> None:
    """Fail the job unless it already ended; with a DatabaseBusy sentence for a lock error."""
    if is_lock_error(error):
        code, sentence = DatabaseBusy.code, DatabaseBusy("running this job").sentence
    else:
        code, sentence = "internal_error", _UNEXPECTED.format(job_id=job_id)

    def attempt() -> None:
        with sessions() as session:
            write_transaction(session)
            job = session.get(Job, job_id)
            if job is not None and job.status in (JobStatus.QUEUED, JobStatus.RUNNING):
                jobs.fail_job(session=session, job_id=job_id, error_code=code, sentence=sentence)
                session.commit()

    try:
        with_lock_retries(attempt, what="recording why this job failed")
    except Exception:  # the last resort: never raise out of Celery's failure handler
        logger.error("job %s: could not record its failure (%s)", job_id, type(error).__name__)
    else:
        logger.error("job %s failed: %s (%s)", job_id, code, type(error).__name__)


def _max_deaths() -> int:
    return resources.settings().max_worker_deaths


def job_id_of(args: Any, kwargs: Any) -> int | None:
    job_id = (kwargs or {}).get("job_id", args[0] if args else None)
    return job_id if isinstance(job_id, int) else None
