"""What a model job's run started on, and whether it still holds: its job row (still there,
running, started by this run) and its document or collection (still there, the same one).

A document or collection deleted while a task runs takes its jobs with it (ON DELETE CASCADE).
The task then stops using the model at its next check (`StopWhenGone`: before every model call
and, at most every CHECK_INTERVAL_S, while the model reads and writes; the engine's requests
are aborted and their blocks freed) and saves nothing (`holds`, in the saving transaction).
Nothing here sees document text.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Collection, Document, Job, JobStatus
from pipelines.protocols import ChatModel, ProgressCallback, TokenProgressCallback
from worker.jobs.progress import JobGone

# How often, at most, a run looks at its job row while the model reads or writes.
CHECK_INTERVAL_S = 0.25


@dataclass(frozen=True)
class Claim:
    job_id: int
    started_at: datetime | None  # set by this run's start (app.services.jobs.start_job)
    document_id: int | None = None
    document_key: tuple[str, datetime] | None = None  # content hash and creation time
    collection_id: int | None = None
    collection_created_at: datetime | None = None


def claim_of(sessions: sessionmaker[Session], job: Job) -> Claim:
    """The claim of the run that has just started `job` (a detached row, as begun)."""
    with sessions() as session:
        return claim_in(session, job)


def claim_in(session: Session, job: Job) -> Claim:
    """claim_of, read in the transaction that starts the job (worker/jobs/job_run.claim_job)."""
    document_key = collection_created_at = None
    if job.document_id is not None:
        row = session.execute(
            select(Document.content_hash, Document.created_at).where(Document.id == job.document_id)
        ).one_or_none()
        document_key = None if row is None else (row.content_hash, row.created_at)
    if job.collection_id is not None:
        collection_created_at = session.scalar(
            select(Collection.created_at).where(Collection.id == job.collection_id)
        )
    return Claim(
        job.id,
        job.started_at,
        job.document_id,
        document_key,
        job.collection_id,
        collection_created_at,
    )


def holds(session: Session, claim: Claim) -> bool:
    """Whether the run may still save: its job row is there, running, started by this run, for
    the same document or collection, which is there and the same. Locks those rows until the
    transaction ends (PostgreSQL: a delete waits, then removes what was saved; SQLite has one
    writer at a time), parent first, in the order a delete takes them."""
    if claim.document_id is not None:
        row = session.execute(
            select(Document.content_hash, Document.created_at)
            .where(Document.id == claim.document_id)
            .with_for_update(read=True)
        ).one_or_none()
        if row is None or (row.content_hash, row.created_at) != claim.document_key:
            return False
    if claim.collection_id is not None:
        created_at = session.scalar(
            select(Collection.created_at)
            .where(Collection.id == claim.collection_id)
            .with_for_update(read=True)
        )
        if created_at is None or created_at != claim.collection_created_at:
            return False
    job = session.scalars(select(Job).where(Job.id == claim.job_id).with_for_update()).first()
    return (
        job is not None
        and job.status == JobStatus.RUNNING
        and job.started_at == claim.started_at
        and job.document_id == claim.document_id
        and job.collection_id == claim.collection_id
    )


def is_current(sessions: sessionmaker[Session], claim: Claim) -> bool:
    """Whether the job row is still there, running and started by this run (a plain read)."""
    with sessions() as session:
        row = session.execute(
            select(Job.status, Job.started_at).where(Job.id == claim.job_id)
        ).one_or_none()
        return (
            row is not None
            and row.status == JobStatus.RUNNING
            and row.started_at == (claim.started_at)
        )


class StopWhenGone:
    """A run's ChatModel: the model given, which raises JobGone instead of going on once
    `is_current()` is False, checked before every call and, at most every `interval_s`, at the
    engine's progress and token events. Raised from those callbacks it ends the call: the
    adapter aborts every request of the call (worker/model/adapter.py)."""

    def __init__(
        self,
        model: ChatModel,
        is_current: Callable[[], bool],
        *,
        interval_s: float | None = None,
    ) -> None:
        self._model = model
        self._is_current = is_current
        self._interval_s = CHECK_INTERVAL_S if interval_s is None else interval_s
        self._last_check = 0.0

    @property
    def name(self) -> str:
        return self._model.name

    @property
    def max_context_tokens(self) -> int:
        return self._model.max_context_tokens

    def count_tokens(self, texts: Sequence[str], /) -> list[int]:
        return self._model.count_tokens(texts)

    def count_chat_tokens(self, messages: Sequence[dict[str, str]], /) -> int:
        return self._model.count_chat_tokens(messages)

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_new_tokens: int,
        on_progress: ProgressCallback | None = None,
        on_tokens: TokenProgressCallback | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> Any:
        self._check(now=True)
        return self._model.complete(
            messages,
            max_new_tokens=max_new_tokens,
            on_progress=self._checked(on_progress),
            on_tokens=self._checked(on_tokens),
            **_schema(response_schema),
        )

    def complete_many(
        self,
        conversations: Sequence[Sequence[dict[str, str]]],
        *,
        max_new_tokens: int,
        on_progress: ProgressCallback | None = None,
        on_tokens: TokenProgressCallback | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> list[Any]:
        many = getattr(self._model, "complete_many", None)
        if many is None:  # a model without batching: one call after another, each checked
            return [
                self.complete(
                    m,
                    max_new_tokens=max_new_tokens,
                    on_progress=on_progress,
                    on_tokens=on_tokens,
                    response_schema=response_schema,
                )
                for m in conversations
            ]
        self._check(now=True)
        return many(
            conversations,
            max_new_tokens=max_new_tokens,
            on_progress=self._checked(on_progress),
            on_tokens=self._checked(on_tokens),
            **_schema(response_schema),
        )

    def _checked(self, callback: Callable[[int, int], None] | None) -> Callable[[int, int], None]:
        def checked(done: int, total: int) -> None:
            self._check(now=False)
            if callback is not None:
                callback(done, total)

        return checked

    def _check(self, *, now: bool) -> None:
        moment = time.monotonic()
        if not now and moment - self._last_check < self._interval_s:
            return
        self._last_check = moment
        if not self._is_current():
            raise JobGone()


def _schema(response_schema: dict[str, Any] | None) -> dict[str, Any]:
    """The keyword passed on only when a schema is asked for (pipelines.model_calls does the
    same), so a wrapped model of the calls that never ask need not know it."""
    return {} if response_schema is None else {"response_schema": response_schema}
