"""Jobs left behind by a worker that died, for brokers that cannot give their tasks back.

Redis gives an unacknowledged task to another worker after the visibility timeout. The
embedded broker (kombu's filesystem transport, and its SQLAlchemy one alike) forgets a task
once a worker took it: the worker keeps it in memory until acknowledged, and returns it when
it shuts down or when one of its pool children dies (reject_on_worker_lost), but a SIGKILL of
the whole worker loses it. So a worker on such a broker, when it starts, queues again the jobs marked
running: with one worker per data folder (`longdoc up`), none of them can still be running.
Tasks are idempotent, so a job that did run to the end is merely skipped.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from app.db.models import JobKind, JobStatus
from app.services import jobs

logger = logging.getLogger(__name__)

# Message files the filesystem broker moved to processed/ (already read) older than this go.
PROCESSED_MAX_AGE_S = 24 * 3600


def orphaned_jobs(
    *, sessions: sessionmaker[Session], kinds: tuple[JobKind, ...]
) -> list[tuple[JobKind, int]]:
    """(kind, job id) of each job marked running, oldest first."""
    with sessions() as session:
        rows = jobs.list_jobs(session=session, status=JobStatus.RUNNING, limit=10_000)
        return sorted((job.kind, job.id) for job in rows if job.kind in kinds)


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
