"""Copies in the document store that no document will ever own: removed once refused.

The inbox, the UI and `longdoc summarize FILE` copy a file into the store (files_dir, named by
its content hash) before its ingest job runs, so the worker need not see where it came from.
When the worker then refuses it (damaged, too much text, a password needed), nothing points at
the copy any more and, left alone, every refused upload would stay on disk for good.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from app.db.models import JobKind, JobStatus
from app.services import documents, jobs

logger = logging.getLogger(__name__)

_STORED_NAME = re.compile(r"[0-9a-f]{64}\.pdf")


def discard_if_refused(job_id: int, *, sessions: sessionmaker[Session], files_dir: Path) -> bool:
    """Delete the stored copy of a failed ingest job's file; True when one was deleted.

    Kept when the job did not fail (a database error is retried with the copy), when the path is
    not a copy inside files_dir (a CLI ingest reads the user's own file: never touched), when a
    document has the same content, or when another unfinished job will read the same copy.
    """
    with sessions() as session:
        job = jobs.get_job(session=session, job_id=job_id)
        if job is None or job.kind != JobKind.INGEST or job.status != JobStatus.FAILED:
            return False
        raw = jobs.IngestParams.from_dict(job.params).path
        path = _stored_copy(raw, files_dir)
        if path is None:
            return False
        if documents.find_by_hash(session=session, content_hash=path.stem) is not None:
            return False
        if any(
            other.id != job_id and jobs.IngestParams.from_dict(other.params).path == raw
            for status in (JobStatus.QUEUED, JobStatus.RUNNING)
            for other in jobs.list_jobs(
                session=session, status=status, kind=JobKind.INGEST, limit=10_000
            )
        ):
            return False
    path.unlink(missing_ok=True)
    logger.info("removed the stored copy of refused ingest job %s", job_id)
    return True


def _stored_copy(raw: str | None, files_dir: Path) -> Path | None:
    if not raw:
        return None
    path = Path(raw).resolve()
    if not _STORED_NAME.fullmatch(path.name) or not path.is_relative_to(files_dir.resolve()):
        return None
    return path
