"""Background jobs: one row per unit of work, its progress and its outcome."""

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import NEVER_REUSED, Base, JsonType, UTCDateTime, str_enum, utc_now


class JobKind(enum.StrEnum):
    INGEST = "ingest"
    SUMMARIZE = "summarize"
    ANSWER = "answer"
    FACTS = "facts"


class JobStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Job(Base):
    """One unit of background work. Failed ingests have no document: their error lives here.

    document_id is ON DELETE CASCADE: deleting a document removes everything derived from it,
    including its jobs, whose params hold the user's questions (private, like the document).
    """

    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint("progress_done >= 0 AND progress_total >= 0", name="progress_counts"),
        NEVER_REUSED,
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[JobKind] = mapped_column(str_enum(JobKind, "job_kind"))
    status: Mapped[JobStatus] = mapped_column(str_enum(JobStatus, "job_status"), index=True)
    stage: Mapped[str | None] = mapped_column(Text)
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    document_id: Mapped[int | None] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), index=True
    )
    error_code: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    stats: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    task_id: Mapped[str | None] = mapped_column(String(255), index=True)  # Celery's task id
    params: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    # The CLI process that runs this job itself (`longdoc ingest`); None: the workers run it.
    owner_host: Mapped[str | None] = mapped_column(String(255))
    owner_pid: Mapped[int | None] = mapped_column(Integer)
    # Task runs that started and never ended: their worker died (worker/jobs/poison.py).
    num_unfinished_runs: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # A question across a collection (document_id is then None): deleting the collection
    # deletes the job, whose params hold the question.
    collection_id: Mapped[int | None] = mapped_column(
        ForeignKey("collections.id", ondelete="CASCADE"), index=True
    )
