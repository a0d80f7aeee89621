"""A job's state, live: stage, done of total, and how it ended (a link or a readable error)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.db.models import Job, JobKind, JobStatus

STAGE_LABELS = {
    "starting": "Starting",
    "hashing": "Checking the file",
    "parsing": "Reading pages",
    "splitting": "Splitting into passages",
    "storing": "Saving",
    "summarizing": "Summarizing",
    "answering": "Answering",
    "done": "Done",
}
KIND_VERBS = {JobKind.INGEST: "Ingest", JobKind.SUMMARIZE: "Summary", JobKind.ANSWER: "Answer"}


@dataclass(frozen=True)
class JobView:
    """What a progress card shows, read from the row (plain values: no session needed later)."""

    job_id: int
    kind: JobKind
    status: JobStatus
    stage: str | None
    done: int
    total: int
    error: str | None
    document_id: int | None
    follow_up_job_id: int | None

    @classmethod
    def of(cls, job: Job) -> JobView:
        follow_up = (job.stats or {}).get("follow_up_job_id")
        return cls(
            job_id=job.id,
            kind=JobKind(job.kind),
            status=JobStatus(job.status),
            stage=job.stage,
            done=job.progress_done,
            total=job.progress_total,
            error=job.error,
            document_id=job.document_id,
            follow_up_job_id=int(follow_up) if follow_up is not None else None,
        )

    @property
    def is_open(self) -> bool:
        return self.status in (JobStatus.QUEUED, JobStatus.RUNNING)

    @property
    def label(self) -> str:
        if self.status == JobStatus.QUEUED:
            return "Waiting for a worker"
        if self.status == JobStatus.FAILED:
            return "Failed"
        if self.status == JobStatus.SUCCEEDED:
            return "Done"
        return STAGE_LABELS.get(self.stage or "", (self.stage or "Working").capitalize())

    @property
    def fraction(self) -> float | None:
        if self.status == JobStatus.SUCCEEDED:
            return 1.0
        if self.total > 0:
            return min(max(self.done / self.total, 0.0), 1.0)
        return None


def progress_line(view: JobView) -> None:
    """The stage and a bar: determinate when the worker reports done of total."""
    what = f"{KIND_VERBS[view.kind]} job {view.job_id}"
    if view.status == JobStatus.FAILED:
        st.error(
            f"{what} failed: {view.error or 'no reason was recorded.'}", icon=":material/error:"
        )
        return
    fraction = view.fraction
    counts = f" · {view.done:,} of {view.total:,}" if view.total and view.is_open else ""
    text = f"{what} · {view.label}{counts}"
    if fraction is None:
        st.progress(0.0 if view.status == JobStatus.QUEUED else 0.05, text=text)
    else:
        st.progress(fraction, text=text)
