"""Queue background work by task name: a thin Celery client that imports nothing of the worker.

Every client (the UI, the CLI, beat's scheduled tasks) creates and queues a job with `submit_job`;
the ingest task's follow-ups and a restarted worker's orphans, whose rows exist, with `queue_jobs`
and `queue_job`. `queue_job` gives the job a task id, commits, and only then sends the task, so a
worker that picks it up at once finds the row; a broker that is down fails the job.
Task and queue names here are the contract with worker/celery_app.py and must stay identical.

The client sends only: it has no result backend (job rows are the source of truth) and never
opens the database through Celery.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from uuid import uuid4

from celery import Celery
from sqlalchemy.orm import Session

from app import broker_files, metrics
from app.db.models import Job, JobKind, JobStatus
from app.errors import AppError
from app.services import jobs
from app.settings import Settings

# "filesystem://" (the embedded broker) writes whole messages only: app/broker_files.py.
broker_files.register()

TASK_INGEST = "longdoc.ingest"
TASK_SUMMARIZE = "longdoc.summarize"
TASK_ANSWER = "longdoc.answer"
TASK_FACTS = "longdoc.facts"

QUEUE_INGEST = "ingest"
QUEUE_GPU = "gpu"
QUEUE_GPU_BATCH = "gpu_batch"
ALL_QUEUES = (QUEUE_INGEST, QUEUE_GPU, QUEUE_GPU_BATCH)

TASK_FOR_KIND = {
    JobKind.INGEST: TASK_INGEST,
    JobKind.SUMMARIZE: TASK_SUMMARIZE,
    JobKind.ANSWER: TASK_ANSWER,
    JobKind.FACTS: TASK_FACTS,
}
QUEUE_FOR_TASK = {
    TASK_INGEST: QUEUE_INGEST,
    TASK_SUMMARIZE: QUEUE_GPU_BATCH,
    TASK_ANSWER: QUEUE_GPU,
    # Key facts are a model job like a summary, but short: queued ahead of the summary.
    TASK_FACTS: QUEUE_GPU_BATCH,
}
# Remote-control commands every worker registers (worker/model/kv_control.py): drop a deleted
# document's KV from the engine's tiers, and say what those hold.
CONTROL_FORGET_DOCUMENT_KV = "longdoc_forget_document_kv"
INSPECT_KV_TIERS = "longdoc_kv_tiers"
EMBEDDED_POLLING_INTERVAL_S = 0.5

logger = logging.getLogger(__name__)


class BrokerUnavailable(AppError):
    """The task could not be handed to the broker; the job (`job_id`) is marked failed."""

    code = "broker_unavailable"

    def __init__(self, sentence: str, job_id: int | None = None) -> None:
        super().__init__(sentence)
        self.job_id = job_id


@dataclass(frozen=True)
class BrokerStatus:
    """What the broker says now. None where it could not be asked (e.g. broker down)."""

    worker_names: tuple[str, ...] | None
    queue_lengths: dict[str, int] | None


def broker_url(settings: Settings) -> str:
    return settings.broker_url or "filesystem://"


def broker_folders(settings: Settings) -> dict[str, Path]:
    """The embedded broker's folders, under data_dir/broker (shared with the worker)."""
    root = settings.data_dir / "broker"
    return {"queue": root / "queue", "processed": root / "processed", "control": root / "control"}


def transport_options(settings: Settings) -> dict[str, Any]:
    url = broker_url(settings)
    if url.startswith("filesystem://"):
        folders = broker_folders(settings)
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True)
        return {
            "data_folder_in": str(folders["queue"]),
            "data_folder_out": str(folders["queue"]),
            "control_folder": str(folders["control"]),
            "store_processed": True,
            "processed_folder": str(folders["processed"]),
            "polling_interval": EMBEDDED_POLLING_INTERVAL_S,
        }
    if url.startswith(("sqla+", "sqlalchemy+")):
        return {}
    return {
        "visibility_timeout": settings.effective_visibility_timeout_s,
        "queue_order_strategy": "priority",
    }


def make_client(settings: Settings) -> Celery:
    """A send-only Celery app for `settings`' broker."""
    client = Celery("longdoc-client", set_as_current=False)
    client.conf.update(
        broker_url=broker_url(settings),
        broker_transport_options=transport_options(settings),
        broker_connection_retry_on_startup=True,
        # Fail within seconds with a sentence when the broker is down, not after minutes.
        broker_connection_timeout=5,
        broker_connection_max_retries=2,
        task_serializer="json",
        accept_content=["json"],
        task_routes={name: {"queue": queue} for name, queue in QUEUE_FOR_TASK.items()},
        task_default_queue=QUEUE_INGEST,
        timezone="UTC",
    )
    return client


@lru_cache(maxsize=8)
def _cached_client(url: str, data_dir: Path, visibility_timeout_s: float) -> Celery:
    return make_client(
        Settings(
            _env_file=None,  # type: ignore[call-arg]
            broker_url=url,
            data_dir=data_dir,
            visibility_timeout_s=visibility_timeout_s,
        )
    )


def client_for(settings: Settings) -> Celery:
    """One client per broker for the life of the process (it holds a connection pool)."""
    return _cached_client(
        settings.broker_url, settings.data_dir, settings.effective_visibility_timeout_s
    )


def new_task_id() -> str:
    return str(uuid4())


def queue_job(
    *, settings: Settings, session: Session, job: Job, client: Celery | None = None
) -> str:
    """Give `job` a task id, commit, then send its task by name; returns the task id.

    The job row is committed before the message is sent: a worker may take the task at once.
    When the broker cannot be reached the job is marked failed and BrokerUnavailable raised.
    """
    name = TASK_FOR_KIND[JobKind(job.kind)]
    job.task_id = new_task_id()
    session.commit()
    sender = client or client_for(settings)
    try:
        sender.send_task(name, args=[job.id], task_id=job.task_id, queue=QUEUE_FOR_TASK[name])
    except Exception as error:  # kombu raises many types; all mean "not queued"
        # Else the row would say "queued" forever with no message behind it.
        sentence = (
            f"LongDoc could not reach its task queue ({type(error).__name__}); "
            "check that the broker and `longdoc up` are running, then try again."
        )
        fail_not_queued(session=session, job=job, sentence=sentence)
        raise BrokerUnavailable(sentence, job.id) from error
    metrics.record_job_queued(JobKind(job.kind).value)
    return job.task_id


def fail_not_queued(*, session: Session, job: Job, sentence: str) -> None:
    """Fail and commit a job whose task could not be sent, with the broker's `sentence`: what
    queue_job does when the broker refuses, and what a client that already met a refusal in
    this batch does with the next jobs rather than wait on the broker again."""
    jobs.fail_job(
        session=session, job_id=job.id, error_code=BrokerUnavailable.code, sentence=sentence
    )
    session.commit()
    metrics.record_job_not_queued(JobKind(job.kind).value)


def submit_job(
    *,
    settings: Settings,
    session: Session,
    kind: JobKind,
    document_id: int | None = None,
    collection_id: int | None = None,
    params: dict[str, Any] | None = None,
    client: Celery | None = None,
) -> Job:
    """Create a job and queue it (queue_job: committed, then sent by name): the one way a job
    is created and queued, for the UI, the CLI and the scheduler. `params` are JSON (an
    answer's {"question": ...}, checked by the caller; an ingest's IngestParams.to_dict()).
    When the broker cannot be reached the job is failed and BrokerUnavailable raised.

    Jobs created inside a larger transaction (an ingest's follow-ups, with the document they
    follow) are queued after its commit with queue_jobs instead."""
    job = jobs.create_job(session=session, kind=kind, document_id=document_id, params=params)
    if collection_id is not None:
        job.collection_id = collection_id
        session.flush()
    queue_job(settings=settings, session=session, job=job, client=client)
    return job


def queue_jobs(
    *, settings: Settings, session: Session, job_ids: Sequence[int], client: Celery | None = None
) -> list[int]:
    """queue_job for each committed job of `job_ids` that still exists and was never sent (still
    queued, with no task id); returns those queued. One the broker refuses is failed with its
    sentence and the rest are still tried.

    A task that created follow-up jobs calls this after its own commit; when it fails there (the
    database was locked as the task id was written) and runs again, its job is done and it only
    sends the follow-ups that never went out. One with a task id was sent: sending it again
    would run it twice."""
    queued = []
    for job_id in job_ids:
        job = jobs.get_job(session=session, job_id=job_id)
        if job is None or job.status != JobStatus.QUEUED or job.task_id is not None:
            continue
        with contextlib.suppress(BrokerUnavailable):
            queue_job(settings=settings, session=session, job=job, client=client)
            queued.append(job_id)
    return queued


def tell_workers_to_forget_document_kv(*, client: Celery, document_id: int) -> bool:
    """Broadcast to every worker connected to the broker that the document is deleted: each
    drops its KV from its engine's tiers, in memory too (no reply is awaited). A worker not
    connected now holds none in memory when it comes back (it restarted) or is not one
    (app/kv_cache_files.py covers the disk folder). False, logged, when the broker is down."""
    try:
        client.control.broadcast(
            CONTROL_FORGET_DOCUMENT_KV, arguments={"document_id": int(document_id)}
        )
    except Exception as error:  # broker down or unreachable: the delete itself stands
        logger.warning(
            "could not tell the workers to drop document %s's KV (%s)",
            document_id,
            type(error).__name__,
        )
        return False
    return True


def broker_status(settings: Settings, *, timeout_s: float = 1.0) -> BrokerStatus:
    """Workers answering a ping, and messages waiting in each queue, as the broker sees them."""
    client = client_for(settings)
    names: tuple[str, ...] | None
    try:
        replies = client.control.ping(timeout=timeout_s) or []
        names = tuple(sorted(name for reply in replies for name in reply))
    except Exception:  # broker down or unreachable: say "unknown", never break the page
        names = None
    return BrokerStatus(worker_names=names, queue_lengths=queue_lengths(settings))


def queue_lengths(settings: Settings) -> dict[str, int] | None:
    """Messages waiting (not yet taken by a worker) in each of our queues; None if unreachable."""
    try:
        with client_for(settings).connection_for_read() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, timeout=2)
            channel = connection.default_channel
            return {queue: _queue_length(channel, queue) for queue in ALL_QUEUES}
    except Exception:
        return None


def _queue_length(channel: Any, queue: str) -> int:
    # passive: only ask. A queue nobody declared yet (or an empty Redis list) holds nothing.
    with contextlib.suppress(Exception):
        return int(channel.queue_declare(queue=queue, passive=True).message_count)
    return 0
