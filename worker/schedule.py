"""The beat schedule and what its jobs do: ingest the inbox, summarize what has no summary, and
once a day drop audit-log rows older than the retention setting (audit_keep_days).

The first two are switched and timed by settings (inbox_scan_*, auto_summarize_*). The scheduled tasks
only create job rows and queue the real tasks (app.services.dispatch), so they are quick and run
on the ingest queue.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime, timedelta
from typing import Any

from celery import Celery
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import JobKind
from app.services import audit, dispatch, results
from app.services.dispatch import QUEUE_INGEST
from app.settings import Settings

# Re-exported: the inbox scan lives in worker/inbox.py.
from worker.inbox import scan_inbox as scan_inbox

logger = logging.getLogger(__name__)

# The scheduled tasks: queued by beat only, so their names and queues are the worker's own (the
# user-facing ones are the contract in app.services.dispatch).
TASK_SCAN_INBOX = "longdoc.scan_inbox"
TASK_SUMMARIZE_MISSING = "longdoc.summarize_missing"
TASK_PRUNE_AUDIT = "longdoc.prune_audit"
QUEUE_FOR_SCHEDULED_TASK = {
    TASK_SCAN_INBOX: QUEUE_INGEST,
    TASK_SUMMARIZE_MISSING: QUEUE_INGEST,
    TASK_PRUNE_AUDIT: QUEUE_INGEST,
}
AUDIT_PRUNE_INTERVAL = timedelta(days=1)

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
    # Always: the retention setting is a promise (rows older than it are gone).
    schedule["prune-audit"] = {
        "task": TASK_PRUNE_AUDIT,
        "schedule": AUDIT_PRUNE_INTERVAL,
        "options": {"queue": QUEUE_FOR_SCHEDULED_TASK[TASK_PRUNE_AUDIT]},
    }
    return schedule


def prune_audit(
    *, sessions: sessionmaker[Session], settings: Settings, now: datetime | None = None
) -> int:
    """Delete the audit rows older than `audit_keep_days` (as of `now`); how many (logged)."""
    with sessions() as session:
        removed = audit.prune(session=session, keep_days=settings.audit_keep_days, now=now)
        session.commit()
    if removed:
        logger.info(
            "audit log: %d rows older than %s days removed", removed, settings.audit_keep_days
        )
    return removed


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
