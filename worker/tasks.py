"""The Celery tasks: thin shells over worker/runner.py, by explicit name, taking only job ids.

Each task re-reads its job row, so it runs the same when delivered twice. Database errors are
retried with backoff; everything else is recorded on the job by the runner.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Task, shared_task
from celery.signals import worker_process_init, worker_ready
from sqlalchemy.exc import OperationalError

from app.db.models import JobKind
from worker import engine_holder, resources, runner, schedule
from worker.celery_app import (
    QUEUE_FOR_TASK,
    TASK_ANSWER,
    TASK_FOR_KIND,
    TASK_INGEST,
    TASK_SCAN_INBOX,
    TASK_SUMMARIZE,
    TASK_SUMMARIZE_MISSING,
    broker_folders,
    broker_redelivers,
    send_job,
)
from worker.recovery import orphaned_jobs, prune_processed

logger = logging.getLogger(__name__)

_RETRY = {
    "bind": True,
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "retry_backoff_max": 300,
    "max_retries": 8,
}


def _result(outcome: runner.RunOutcome) -> dict[str, Any]:
    return {"job_id": outcome.job_id, "status": outcome.status}


@shared_task(name=TASK_INGEST, **_RETRY)
def ingest_task(self: Task, job_id: int) -> dict[str, Any]:
    settings = resources.settings()
    outcome = runner.run_ingest(
        job_id,
        sessions=resources.sessions(),
        options=resources.ingest_options(settings),
        count_tokens=resources.count_tokens(),
        task_id=self.request.id,
    )
    for follow_up in outcome.follow_up_job_ids:  # committed by the runner already
        send_job(self.app, JobKind.SUMMARIZE, follow_up)
    return _result(outcome)


@shared_task(name=TASK_SUMMARIZE, **_RETRY)
def summarize_task(self: Task, job_id: int) -> dict[str, Any]:
    settings = resources.settings()
    outcome = runner.run_summary(
        job_id,
        sessions=resources.sessions(),
        model_factory=lambda: engine_holder.get_chat_model(settings),
        max_new_tokens=settings.summary_max_new_tokens,
        task_id=self.request.id,
    )
    return _result(outcome)


@shared_task(name=TASK_ANSWER, **_RETRY)
def answer_task(self: Task, job_id: int) -> dict[str, Any]:
    settings = resources.settings()
    outcome = runner.run_answer(
        job_id,
        sessions=resources.sessions(),
        model_factory=lambda: engine_holder.get_chat_model(settings),
        max_new_tokens=settings.answer_max_new_tokens,
        task_id=self.request.id,
    )
    return _result(outcome)


@shared_task(name=TASK_SCAN_INBOX, **_RETRY)
def scan_inbox_task(self: Task) -> dict[str, Any]:
    settings = resources.settings()
    job_ids = schedule.scan_inbox(
        sessions=resources.sessions(), inbox_dir=settings.inbox_dir, files_dir=settings.files_dir
    )
    for job_id in job_ids:
        send_job(self.app, JobKind.INGEST, job_id)
    return {"num_jobs": len(job_ids)}


@shared_task(name=TASK_SUMMARIZE_MISSING, **_RETRY)
def summarize_missing_task(self: Task) -> dict[str, Any]:
    job_ids = schedule.queue_missing_summaries(sessions=resources.sessions())
    for job_id in job_ids:
        send_job(self.app, JobKind.SUMMARIZE, job_id)
    return {"num_jobs": len(job_ids)}


@worker_process_init.connect
def _fresh_child(**_: Any) -> None:
    # A pool child starts with nothing of its parent's: no engine, no database connections.
    engine_holder.reset()
    resources.reset()


@worker_ready.connect
def _recover_on_start(sender: Any = None, **_: Any) -> None:
    settings = resources.settings()
    if broker_redelivers(settings):
        return  # Redis redelivers by itself after the visibility timeout
    app = sender.app
    queues = _consumed_queues(sender)
    kinds = tuple(k for k, name in TASK_FOR_KIND.items() if QUEUE_FOR_TASK[name] in queues)
    orphans = orphaned_jobs(sessions=resources.sessions(), kinds=kinds)
    for kind, job_id in orphans:
        send_job(app, kind, job_id)
    if orphans:
        logger.warning("queued %d job(s) again that a stopped worker left running", len(orphans))
    prune_processed(broker_folders(settings)["processed"])
    resources.reset()  # the pool children must not share the connections opened here


def _consumed_queues(sender: Any) -> set[str]:
    try:
        return {queue.name for queue in sender.task_consumer.queues}
    except AttributeError:
        return set(QUEUE_FOR_TASK.values())
