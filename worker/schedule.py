"""The beat schedule and what its two jobs do: ingest the inbox, summarize what has no summary.

Both are switched and timed by settings (inbox_scan_*, auto_summarize_*). The scheduled tasks
only create job rows and queue the real tasks, so they are quick and run on the ingest queue.
"""

from __future__ import annotations

import logging
import shutil
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.db.models import JobKind
from app.services import documents, jobs, results
from app.settings import Settings

logger = logging.getLogger(__name__)

PROCESSED_FOLDER = "processed"
# A file younger than this may still be being copied into the inbox; the next scan takes it.
MIN_FILE_AGE_S = 5.0
MAX_SUMMARIES_PER_TICK = 50


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    from worker.celery_app import (
        QUEUE_FOR_TASK,
        TASK_SCAN_INBOX,
        TASK_SUMMARIZE_MISSING,
    )

    schedule: dict[str, dict[str, Any]] = {}
    if settings.inbox_scan_enabled:
        schedule["scan-inbox"] = {
            "task": TASK_SCAN_INBOX,
            "schedule": timedelta(seconds=settings.inbox_scan_interval_s),
            "options": {"queue": QUEUE_FOR_TASK[TASK_SCAN_INBOX]},
        }
    if settings.auto_summarize_enabled:
        schedule["summarize-missing"] = {
            "task": TASK_SUMMARIZE_MISSING,
            "schedule": timedelta(seconds=settings.auto_summarize_interval_s),
            "options": {"queue": QUEUE_FOR_TASK[TASK_SUMMARIZE_MISSING]},
        }
    return schedule


def scan_inbox(
    *,
    sessions: sessionmaker[Session],
    inbox_dir: Path,
    files_dir: Path,
    min_age_s: float = MIN_FILE_AGE_S,
) -> list[int]:
    """Create an ingest job for each PDF in the inbox (top level only) and move the file into
    inbox/processed/. Returns the new job ids, committed; the caller queues them.

    The file is first copied into the document store (files_dir, by content hash), so the worker
    that ingests it need not see the inbox.
    """
    if not inbox_dir.is_dir():
        return []
    now = time.time()
    candidates = sorted(
        p
        for p in inbox_dir.iterdir()
        if p.is_file() and p.suffix.lower() == ".pdf" and now - p.stat().st_mtime >= min_age_s
    )
    job_ids: list[int] = []
    for path in candidates:
        content_hash = documents.content_hash_of(path)
        stored = documents.store_file(files_dir=files_dir, content_hash=content_hash, data=path)
        with sessions() as session:
            job = jobs.create_job(
                session=session,
                kind=JobKind.INGEST,
                params={"path": str(stored), "file_name": path.name, "source": "inbox"},
            )
            session.commit()
            job_ids.append(job.id)
        _move_to_processed(path)
    if job_ids:
        logger.info("inbox scan: %d new file(s)", len(job_ids))
    return job_ids


def queue_missing_summaries(
    *, sessions: sessionmaker[Session], limit: int = MAX_SUMMARIES_PER_TICK
) -> list[int]:
    """Create a summarize job for each ready document that has none; returns the job ids."""
    with sessions() as session:
        document_ids = results.documents_needing_summary(session=session, limit=limit)
        job_ids = [
            jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=doc_id).id
            for doc_id in document_ids
        ]
        session.commit()
    if job_ids:
        logger.info("auto-summarize: %d document(s) queued", len(job_ids))
    return job_ids


def _move_to_processed(path: Path) -> None:
    target_dir = path.parent / PROCESSED_FOLDER
    target_dir.mkdir(exist_ok=True)
    target = target_dir / path.name
    counter = 1
    while target.exists():
        target = target_dir / f"{path.stem}-{counter}{path.suffix}"
        counter += 1
    shutil.move(str(path), str(target))
