"""A job's progress in its row (stage, done of total), committed so the CLI and the UI can poll
it: while the model reads a prompt (prefill tokens), and while it writes (tokens written of
the most it may write; for a summary by sections, also the model calls done of those planned).

Stages of a summary job: "summarizing" (reading the prompt, or calls done by sections), then
"writing" (one pass) or "writing sections (3 of 13 calls done)" and "combining (12 of 13 calls
done)". Nothing here sees document text.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.services import jobs
from pipelines.summary.writing import WritingProgress

# A job's progress row is committed at most this often (a 2,000-page summary reports thousands
# of steps, and on SQLite each commit takes the one write lock every job and upload shares),
# whichever of its callbacks reports: a new stage and a stage's end are committed at once.
PROGRESS_INTERVAL_S = 1.0
_MAX_REMEMBERED_JOBS = 256
STAGE_WRITING = "writing"
STAGE_WRITING_SECTIONS = "writing sections"
STAGE_COMBINING = "combining"
_STAGE_OF_STEP = {
    "summary": STAGE_WRITING,
    "sections": STAGE_WRITING_SECTIONS,
    "combine": STAGE_COMBINING,
}


class JobGone(Exception):
    """The job row vanished while the task ran (its document was deleted)."""


class _PerJob:
    """When each job's progress was last committed, and in which stage, by database (the
    sessionmaker it went through: job ids are one database's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_database: weakref.WeakKeyDictionary[Any, dict[int, tuple[float, str]]] = (
            weakref.WeakKeyDictionary()
        )

    def should_write(self, sessions: Any, job_id: int, stage: str, done: int, total: int) -> bool:
        now = _clock()
        with self._lock:
            last_writes = self._by_database.setdefault(sessions, {})
            last = last_writes.get(job_id)
            is_end = total > 0 and done >= total
            is_same_stage = last is not None and last[1] == stage
            if is_same_stage and not is_end and now - last[0] < PROGRESS_INTERVAL_S:
                return False
            if len(last_writes) >= _MAX_REMEMBERED_JOBS:  # forget jobs long quiet (ended)
                for key in [k for k, v in last_writes.items() if now - v[0] > 60.0]:
                    del last_writes[key]
            last_writes[job_id] = (now, stage)
            return True


_clock = time.monotonic
_per_job = _PerJob()


def record_progress(
    sessions: sessionmaker[Session], job_id: int, stage: str, done: int, total: int
) -> bool:
    """Commit `done` of `total` in `stage`, unless this job's progress in the same stage was
    committed less than PROGRESS_INTERVAL_S ago (a new stage, or a stage's end, is committed at
    once); False when the job row is gone (a skipped update returns True)."""
    if not _per_job.should_write(sessions, job_id, stage, done, total):
        return True
    with sessions() as session:
        job = jobs.update_progress(
            session=session, job_id=job_id, stage=stage, done=max(done, 0), total=max(total, 0)
        )
        session.commit()
        return job is not None


class ThrottledProgress:
    """A (done, total) callback that commits to the job row at most every PROGRESS_INTERVAL_S
    (always when done reaches total), in `stage`; raises JobGone when the row is gone."""

    def __init__(self, sessions: sessionmaker[Session], job_id: int, stage: str) -> None:
        self.sessions, self.job_id, self.stage = sessions, job_id, stage
        self._last = 0.0

    def __call__(self, done: int, total: int, stage: str | None = None) -> None:
        now = time.monotonic()
        if done < total and now - self._last < PROGRESS_INTERVAL_S:
            return
        self._last = now
        if not record_progress(self.sessions, self.job_id, stage or self.stage, done, total):
            raise JobGone()


def writing_stage(progress: WritingProgress) -> str:
    """The job's stage while a summary is written, with the calls done when it has several."""
    stage = _STAGE_OF_STEP.get(progress.step, STAGE_WRITING)
    if progress.num_calls <= 1:
        return stage
    return f"{stage} ({progress.num_calls_done} of {progress.num_calls} calls done)"


class SummaryWriting:
    """The summary pipeline's on_writing callback: tokens written of the limit, in the row."""

    def __init__(self, sessions: sessionmaker[Session], job_id: int) -> None:
        self._throttled = ThrottledProgress(sessions, job_id, STAGE_WRITING)

    def __call__(self, progress: WritingProgress) -> None:
        self._throttled(progress.written_tokens, progress.max_tokens, writing_stage(progress))
