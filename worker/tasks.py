"""The Celery tasks: thin shells over the job modules of worker/jobs/, by explicit name, taking only job ids.

Each task re-reads its job row, so it runs the same when delivered twice. Database errors are
retried with backoff; everything else is recorded on the job by its run (worker/jobs/job_run.py). The job tasks share
the base worker/jobs/poison.py's JobTask: a job whose worker died under it N times is failed, and a
task Celery gives up on still ends its job.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from celery import Task, shared_task
from celery.signals import worker_process_init, worker_process_shutdown, worker_ready
from sqlalchemy.exc import OperationalError

from app import metrics, metrics_export
from app.db.models import JobKind
from app.services import dispatch, jobs
from app.services.dispatch import TASK_FACTS
from worker import resources, schedule
from worker.celery_app import (
    QUEUE_FOR_TASK,
    TASK_ANSWER,
    TASK_FOR_KIND,
    TASK_INGEST,
    TASK_PRUNE_AUDIT,
    TASK_SCAN_INBOX,
    TASK_SUMMARIZE,
    TASK_SUMMARIZE_MISSING,
    broker_folders,
    broker_redelivers,
)
from worker.ingest.store import IngestOptions
from worker.jobs import answer as answer_job
from worker.jobs import batch_slots, job_run, poison
from worker.jobs import facts as facts_job
from worker.jobs import ingest as ingest_job
from worker.jobs import summary as summary_job
from worker.jobs.batch_slots import BatchJobTask
from worker.jobs.poison import JobTask
from worker.jobs.recovery import (
    fail_jobs_of_dead_processes,
    orphaned_jobs,
    prune_processed,
    queue_again,
)
from worker.model import engine_holder
from worker.model import kv_control as kv_control  # registers its remote-control commands
from worker.model.adapter import PRIORITY_BATCH, PRIORITY_INTERACTIVE

logger = logging.getLogger(__name__)
# A job's retries are logged by the job tasks, once with their count; not a line per attempt.
poison.quiet_retry_lines()
batch_slots.quiet_wait_lines()

_RETRY = {
    "bind": True,
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "retry_backoff_max": 300,
    "max_retries": 8,
}


def _model(settings: Any, priority: int, job_id: int | None = None) -> Any:
    """The process's shared model for one task: its priority, ending at the task's limit. With
    job_id (questions: people come back to a document with more), the KV of its document's
    prompts is kept in the engine's lower tiers under the document's tag (engine/kv_tiers/);
    summaries and key facts are read once, and would only crowd the tiers. The KV of documents
    deleted since this process served them goes first, and from then on a timer drops it in an idle
    process too (worker/model/kv_control.py)."""
    with resources.sessions()() as session:
        kv_control.forget_deleted_documents(session=session)
    kv_control.start_forget_sweeper(
        interval_s=settings.kv_forget_sweep_s, sessions=resources.sessions()
    )
    return engine_holder.get_chat_model(
        settings,
        priority=priority,
        time_limit_s=settings.model_time_limit_s,
        document_id=_document_of(job_id),
    )


def _document_of(job_id: int | None) -> int | None:
    """The job's document (None: a collection's job, or no job)."""
    if job_id is None:
        return None
    with resources.sessions()() as session:
        job = jobs.get_job(session=session, job_id=job_id)
        return job.document_id if job is not None else None


def _queue(task: Task, settings: Any, job_ids: list[int]) -> None:
    """Queue committed jobs as every client does (app.services.dispatch.queue_job), through this
    worker's app; one the broker refuses is failed with its sentence."""
    if not job_ids:
        return
    with resources.sessions()() as session:
        dispatch.queue_jobs(settings=settings, session=session, job_ids=job_ids, client=task.app)


def _result(outcome: job_run.RunOutcome, kind: JobKind, started: float) -> dict[str, Any]:
    """The task's result, the job's end counted in the metrics (by kind, status and seconds)."""
    metrics.record_job_ended(kind.value, outcome.status, time.perf_counter() - started)
    return {"job_id": outcome.job_id, "status": outcome.status}


def _count_page_sources(job_id: int) -> None:
    """The stored document's pages read by OCR and its bad redactions, into the metrics. The
    parse ran in a child process; its counts came back in the job's stats (a document already
    in the library has none: it was not parsed for this job)."""
    with resources.sessions()() as session:
        job = jobs.get_job(session=session, job_id=job_id)
        stats = dict(job.stats or {}) if job is not None else {}
    metrics.record_ocr_pages(int(stats.get("num_ocr_pages") or 0))
    metrics.record_redactions(int(stats.get("num_redactions") or 0))


@shared_task(name=TASK_INGEST, base=JobTask, **_RETRY)
def ingest_task(self: Task, job_id: int) -> dict[str, Any]:
    settings = resources.settings()
    started = time.perf_counter()
    outcome = ingest_job.run_ingest(
        job_id,
        sessions=resources.sessions(),
        options=IngestOptions.from_settings(settings),
        count_tokens=resources.count_tokens(),
        task_id=self.request.id,
        embedder=resources.embedder(),
    )
    if outcome.status == job_run.SUCCEEDED:
        _count_page_sources(job_id)
    # Committed by the run already; key facts first, they are the shorter job.
    follow_ups = [outcome.facts_job_id] if outcome.facts_job_id is not None else []
    _queue(self, settings, [*follow_ups, *outcome.follow_up_job_ids])
    return _result(outcome, JobKind.INGEST, started)


@shared_task(name=TASK_SUMMARIZE, base=BatchJobTask, **_RETRY)
def summarize_task(self: Task, job_id: int) -> dict[str, Any]:
    settings = resources.settings()
    started = time.perf_counter()
    outcome = summary_job.run_summary(
        job_id,
        sessions=resources.sessions(),
        model_factory=lambda: _model(settings, PRIORITY_BATCH),
        max_new_tokens=settings.summary_max_new_tokens,
        task_id=self.request.id,
        embedder=resources.embedder(),
    )
    return _result(outcome, JobKind.SUMMARIZE, started)


@shared_task(name=TASK_ANSWER, base=JobTask, **_RETRY)
def answer_task(self: Task, job_id: int) -> dict[str, Any]:
    settings = resources.settings()
    started = time.perf_counter()
    # About a document or a collection: its row, read once, tells (worker/jobs/answer.py).
    outcome = answer_job.run_question(
        job_id,
        sessions=resources.sessions(),
        model_factory=lambda: _model(settings, PRIORITY_INTERACTIVE, job_id),
        max_new_tokens=settings.answer_max_new_tokens,
        task_id=self.request.id,
        embedder=resources.embedder(),
    )
    return _result(outcome, JobKind.ANSWER, started)


@shared_task(name=TASK_FACTS, base=BatchJobTask, **_RETRY)
def facts_task(self: Task, job_id: int) -> dict[str, Any]:
    settings = resources.settings()
    started = time.perf_counter()
    outcome = facts_job.run_facts(
        job_id,
        sessions=resources.sessions(),
        model_factory=lambda: _model(settings, PRIORITY_BATCH),
        task_id=self.request.id,
    )
    return _result(outcome, JobKind.FACTS, started)


@shared_task(name=TASK_SCAN_INBOX, **_RETRY)
def scan_inbox_task(self: Task) -> dict[str, Any]:
    settings = resources.settings()
    job_ids = schedule.scan_inbox(
        sessions=resources.sessions(),
        inbox_dir=settings.inbox_dir,
        files_dir=settings.files_dir,
        max_bytes=settings.max_upload_bytes,
        keep_s=settings.inbox_keep_days * 24 * 3600,
        owner_name=settings.inbox_user,  # accounts (issue 25)
    )
    _queue(self, settings, job_ids)
    return {"num_jobs": len(job_ids)}


@shared_task(name=TASK_SUMMARIZE_MISSING, **_RETRY)
def summarize_missing_task(self: Task) -> dict[str, Any]:
    job_ids = schedule.queue_missing_summaries(
        sessions=resources.sessions(), settings=resources.settings(), client=self.app
    )
    return {"num_jobs": len(job_ids)}


@shared_task(name=TASK_PRUNE_AUDIT, **_RETRY)
def prune_audit_task(self: Task) -> dict[str, Any]:
    removed = schedule.prune_audit(sessions=resources.sessions(), settings=resources.settings())
    return {"num_removed": removed}


@worker_process_init.connect
def _fresh_child(**_: Any) -> None:
    # A pool child starts with nothing of its parent's: no engine, no database connections.
    engine_holder.reset()
    resources.reset()


@worker_process_shutdown.connect
def _child_ended(pid: int | None = None, **_: Any) -> None:
    # Its live gauges leave the worker's sum of the pool's metric files; its counters stay.
    metrics_export.mark_process_dead(pid or os.getpid())


@worker_ready.connect
def _recover_on_start(sender: Any = None, **_: Any) -> None:
    settings = resources.settings()
    fail_jobs_of_dead_processes(sessions=resources.sessions())
    if broker_redelivers(settings):
        resources.reset()
        return  # Redis redelivers by itself after the visibility timeout
    app = sender.app
    queues = _consumed_queues(sender)
    kinds = tuple(k for k, name in TASK_FOR_KIND.items() if QUEUE_FOR_TASK[name] in queues)
    orphans = orphaned_jobs(sessions=resources.sessions(), kinds=kinds)
    queue_again(
        [job_id for _, job_id in orphans],
        sessions=resources.sessions(),
        settings=settings,
        client=app,
    )
    if orphans:
        logger.warning("queued %d job(s) again that a stopped worker left running", len(orphans))
    prune_processed(broker_folders(settings)["processed"])
    resources.reset()  # the pool children must not share the connections opened here


def _consumed_queues(sender: Any) -> set[str]:
    try:
        return {queue.name for queue in sender.task_consumer.queues}
    except AttributeError:
        return set(QUEUE_FOR_TASK.values())
