"""The beat schedule and what its two jobs do: ingest the inbox, summarize what has no summary.

Both are switched and timed by settings (inbox_scan_*, auto_summarize_*). The scheduled tasks
only create job rows and queue the real tasks (app.services.dispatch), so they are quick and run
on the ingest queue.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import timedelta
from typing import Any

from celery import Celery
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import JobKind
from app.services import dispatch, results
from app.services.dispatch import QUEUE_INGEST
from app.settings import Settings

# Re-exported: the inbox scan lives in worker/inbox.py.
from worker.inbox import scan_inbox as scan_inbox

logger = logging.getLogger(__name__)

# The scheduled tasks: queued by beat only, so their names and queues are the worker's own (the
# user-facing ones are the contract in app.services.dispatch).
TASK_SCAN_INBOX = "longdoc.scan_inbox"
TASK_SUMMARIZE_MISSING = "longdoc.summarize_missing"
QUEUE_FOR_SCHEDULED_TASK = {TASK_SCAN_INBOX: QUEUE_INGEST, TASK_SUMMARIZE_MISSING: QUEUE_INGEST}

MAX_SUMMARIES_PER_TICK = 50


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    schedule: dict[str, dict[str, Any]] = {}
    if settings.inbox_scan_enabled:
        schedule["scan-inbox"] = {
            "task": TASK_SCAN_INBOX,
            "schedule": timedelta(seconds=settings.inbox_scan_interval_s),
            "options": {"queue": QUEUE_FOR_SCHEDULED_TASK[TASK_SCAN_INBOX]},
        }
    if settings.auto_summarize_enabled:
        schedule["summarize-missing"] = {
            "task": TASK_SUMMARIZE_MISSING,
            "schedule": timedelta(seconds=settings.auto_summarize_interval_s),
            "options": {"queue": QUEUE_FOR_SCHEDULED_TASK[TASK_SUMMARIZE_MISSING]},
        }
    return schedule


def queue_missing_summaries(
    *,
    sessions: sessionmaker[Session],
    settings: Settings,
    client: Celery | None = None,
    limit: int = MAX_SUMMARIES_PER_TICK,
) -> list[int]:
    """Create and queue (app.services.dispatch.submit_job) a summarize job for each ready
    document that has none; returns the ids of those queued. One the broker refuses is failed
    with its sentence (it then has a summary job: not created again) and the rest are tried."""
    with sessions() as session:
        document_ids = results.documents_needing_summary(session=session, limit=limit)
    job_ids = []
    for document_id in document_ids:
        with sessions() as session, contextlib.suppress(dispatch.BrokerUnavailable):
            job = dispatch.submit_job(
                settings=settings,
                session=session,
                kind=JobKind.SUMMARIZE,
                document_id=document_id,
                client=client,
            )
            job_ids.append(job.id)
    if job_ids:
        logger.info("auto-summarize: %d document(s) queued", len(job_ids))
    return job_ids
