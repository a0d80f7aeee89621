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
    # While the model writes (worker/jobs/progress.py): done of total count tokens written.
    "writing": "Writing",
    "writing sections": "Writing section summaries",
    "combining": "Combining section summaries",
    "key facts": "Reading key facts",
    "retrieving": "Finding the passages",
    "reading documents": "Reading the documents",
    "done": "Done",
}
# Stages whose done of total are tokens the model wrote, of the most it may write.
TOKEN_STAGES = frozenset({"writing", "writing sections", "combining"})
KIND_VERBS = {
    JobKind.INGEST: "Ingest",
    JobKind.SUMMARIZE: "Summary",
    JobKind.ANSWER: "Answer",
    JobKind.FACTS: "Key facts",
}


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
        if (self.stage or "").startswith("ocr page "):  # "ocr page 3 of 11", while OCR reads
            return "Reading scanned " + self.stage.removeprefix("ocr ")
        # "combining (12 of 13 calls done)": the label of "combining", then the calls done.
        base, _, rest = (self.stage or "").partition(" (")
        label = STAGE_LABELS.get(base, (base or "Working").capitalize())
        return f"{label} ({rest}" if rest else label

    @property
    def unit(self) -> str:
        base = (self.stage or "").partition(" (")[0]
        return " tokens" if base in TOKEN_STAGES else ""

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
    counts = f" · {view.done:,} of {view.total:,}{view.unit}" if view.total and view.is_open else ""
    text = f"{what} · {view.label}{counts}"
    if fraction is None:
        st.progress(0.0 if view.status == JobStatus.QUEUED else 0.05, text=text)
    else:
        st.progress(fraction, text=text)
