"""The Celery application: queues, task names and settings fit for long model tasks.

Settings and why:
- acks_late + reject_on_worker_lost: a task is acknowledged only when it has finished, and a
  pool child that dies mid-task (SIGKILL, OOM killer) puts it back on the queue. Tasks are
  idempotent (worker/jobs/job_run.py), so running one again is safe.
- prefetch multiplier 1: a worker holds one task beyond what it runs, so a question queued
  behind a 40-minute summary is not stuck in a busy worker's buffer.
- visibility timeout (Redis) longer than the longest task: else Redis hands a running summary to
  a second worker.
- JSON only, explicit task names: the CLI and the UI queue tasks by name (send_task), importing
  nothing of the worker.
- Queues: `ingest` (CPU: parse and split, and the scheduled scans), `gpu` (questions) and
  `gpu_batch` (summaries). A GPU worker consumes `gpu,gpu_batch`: Redis checks them in that
  order ("priority" queue order), so a waiting question goes before every queued summary; the
  embedded broker alternates fairly between them, so a question waits for at most one summary.
- Embedded broker (no broker_url): kombu's filesystem transport in data_dir/broker, results in
  the database. Production: redis:// and PostgreSQL. bench/results/embedded_broker.md compares
  the filesystem and SQLAlchemy transports.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

# Re-exported (`X as X`): worker modules take the shared names from here.
from app.services.dispatch import ALL_QUEUES as ALL_QUEUES
from app.services.dispatch import QUEUE_FOR_TASK as CLIENT_QUEUE_FOR_TASK
from app.services.dispatch import QUEUE_GPU as QUEUE_GPU
from app.services.dispatch import QUEUE_GPU_BATCH as QUEUE_GPU_BATCH
from app.services.dispatch import QUEUE_INGEST as QUEUE_INGEST
from app.services.dispatch import TASK_ANSWER as TASK_ANSWER
from app.services.dispatch import TASK_FACTS as TASK_FACTS
from app.services.dispatch import TASK_FOR_KIND as TASK_FOR_KIND
from app.services.dispatch import TASK_INGEST as TASK_INGEST
from app.services.dispatch import TASK_SUMMARIZE as TASK_SUMMARIZE
from app.services.dispatch import broker_folders as broker_folders
from app.services.dispatch import broker_url as broker_url
from app.services.dispatch import transport_options as transport_options
from app.settings import Settings
from worker.schedule import (
    QUEUE_FOR_SCHEDULED_TASK,
    TASK_PRUNE_AUDIT,
    TASK_SCAN_INBOX,
    TASK_SUMMARIZE_MISSING,
    beat_schedule,
)

GPU_QUEUES = (QUEUE_GPU, QUEUE_GPU_BATCH)
QUEUE_FOR_TASK = {**CLIENT_QUEUE_FOR_TASK, **QUEUE_FOR_SCHEDULED_TASK}
# A soft limit raises inside the task this long before the hard limit kills it, so the job row
# gets its sentence.
SOFT_LIMIT_MARGIN_S = 60.0


def broker_redelivers(settings: Settings) -> bool:
    """Whether the broker itself gives back tasks of a worker that died (Redis: after the
    visibility timeout; AMQP: when the connection drops). kombu's virtual transports that keep
    messages in files or SQL tables do not (see worker/jobs/recovery.py)."""
    return broker_url(settings).startswith(("redis", "rediss", "amqp", "pyamqp", "sentinel"))


def result_backend(settings: Settings) -> str:
    return settings.result_backend or f"db+{settings.database_url}"


def _limits(hard_s: float) -> dict[str, float]:
    soft = hard_s - SOFT_LIMIT_MARGIN_S if hard_s > 2 * SOFT_LIMIT_MARGIN_S else hard_s * 0.9
    return {"time_limit": hard_s, "soft_time_limit": soft}


def celery_config(settings: Settings) -> dict[str, Any]:
    is_virtual = not broker_redelivers(settings)
    ingest_limits = _limits(settings.ingest_time_limit_s)
    model_limits = _limits(settings.model_time_limit_s)
    return {
        "broker_url": broker_url(settings),
        "broker_transport_options": transport_options(settings),
        "broker_connection_retry_on_startup": True,
        "result_backend": result_backend(settings),
        # The database backend on SQLite: wait for the worker's writes instead of failing.
        "database_engine_options": {"connect_args": {"timeout": 30}}
        if "sqlite" in result_backend(settings)
        else {},
        "result_expires": 7 * 24 * 3600,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "worker_lost_wait": settings.worker_lost_wait_s,
        "task_routes": {name: {"queue": queue} for name, queue in QUEUE_FOR_TASK.items()},
        "task_default_queue": QUEUE_INGEST,
        "task_annotations": {
            TASK_INGEST: ingest_limits,
            TASK_SCAN_INBOX: ingest_limits,
            TASK_SUMMARIZE_MISSING: ingest_limits,
            TASK_PRUNE_AUDIT: ingest_limits,
            TASK_SUMMARIZE: model_limits,
            TASK_ANSWER: model_limits,
            TASK_FACTS: model_limits,
        },
        # Flower and `celery events` need events; the embedded broker has no one to read them.
        "worker_send_task_events": not is_virtual,
        "task_send_sent_event": not is_virtual,
        "worker_hijack_root_logger": False,
        "beat_schedule_filename": str(settings.data_dir / "celerybeat-schedule"),
        "timezone": "UTC",
    }


def make_celery(settings: Settings) -> Celery:
    """The app for `settings`, with the tasks of worker/tasks.py and the beat schedule."""
    app = Celery("longdoc", include=["worker.tasks"])
    app.conf.update(celery_config(settings))
    app.conf.beat_schedule = beat_schedule(settings)
    return app
