"""Jobs left behind by a worker that died, for brokers that cannot give their tasks back.

Redis gives an unacknowledged task to another worker after the visibility timeout. The
embedded broker (kombu's filesystem transport, and its SQLAlchemy one alike) forgets a task
once a worker took it: the worker keeps it in memory until acknowledged, and returns it when
it shuts down or when one of its pool children dies (reject_on_worker_lost), but a SIGKILL of
the whole worker loses it. So a worker on such a broker, when it starts, queues again the jobs marked
running: with one worker per data folder (`longdoc up`), none of them can still be running.
Tasks are idempotent, so a job that did run to the end is merely skipped.

Only jobs the workers own are queued again. `longdoc ingest` runs its jobs in its own process
(owner_host, owner_pid on the row): such a job was never on the broker, and a worker given it
would fail on a path it never had. A worker that starts (on any broker) and `longdoc ingest`
fail instead the running jobs of CLI processes on this host that are gone, with a sentence.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path

from celery import Celery
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import JobKind, JobStatus
from app.services import dispatch, jobs
from app.settings import Settings

logger = logging.getLogger(__name__)

# Message files the filesystem broker moved to processed/ (already read) older than this go.
PROCESSED_MAX_AGE_S = 24 * 3600
_OWNER_GONE = (
    "The `longdoc ingest` process that was reading this file stopped before it finished (it "
    "was interrupted or killed); nothing was stored. Run the ingest again."
)


def orphaned_jobs(
    *, sessions: sessionmaker[Session], kinds: tuple[JobKind, ...]
) -> list[tuple[JobKind, int]]:
    """(kind, job id) of each job marked running that the workers own, oldest first. A job a
    CLI process runs itself (owner_pid set) was never on the broker: not queued again."""
    with sessions() as session:
        rows = jobs.list_jobs(session=session, status=JobStatus.RUNNING, limit=10_000)
        return sorted(
            (job.kind, job.id) for job in rows if job.kind in kinds and job.owner_pid is None
        )


def queue_again(
    job_ids: Sequence[int],
    *,
    sessions: sessionmaker[Session],
    settings: Settings,
    client: Celery | None = None,
) -> list[int]:
    """Send the tasks of jobs left running again, as every client queues a job
    (app.services.dispatch.queue_job: a new task id committed, then sent by name); those sent.
    One the broker refuses is failed with its sentence and the rest are still tried."""
    queued = []
    for job_id in job_ids:
        with sessions() as session, contextlib.suppress(dispatch.BrokerUnavailable):
            job = jobs.get_job(session=session, job_id=job_id)
            if job is not None:
                dispatch.queue_job(settings=settings, session=session, job=job, client=client)
                queued.append(job_id)
    return queued


def fail_jobs_of_dead_processes(*, sessions: sessionmaker[Session]) -> list[int]:
    """Fail the running jobs of CLI processes on this host that are gone; their ids."""
    with sessions() as session:
        failed = jobs.fail_abandoned_jobs(
            session=session, host=this_host(), is_alive=process_is_alive, sentence=_OWNER_GONE
        )
        session.commit()
    if failed:
        logger.warning("failed %d job(s) whose `longdoc ingest` process is gone", len(failed))
    return failed


def this_host() -> str:
    return socket.gethostname()


def process_is_alive(pid: int) -> bool:
    """Whether a process with this id exists (a reused id counts: the job then waits)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, run by another user
    return True


def prune_processed(folder: Path, max_age_s: float = PROCESSED_MAX_AGE_S) -> int:
    """Delete read message files older than max_age_s; returns how many."""
    if not folder.is_dir():
        return 0
    cutoff = time.time() - max_age_s
    removed = 0
    for path in folder.iterdir():
        if path.is_file() and path.stat().st_mtime < cutoff:
            path.unlink(missing_ok=True)
            removed += 1
    return removed
