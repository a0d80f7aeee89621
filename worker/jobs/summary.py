"""The summary job: summarize the job's document (pipelines.summary.summarize) with its key
passages, and save the summary once per job (upsert by job id), on job_run.py's model-job
skeleton. Nothing here logs document text: ids, counts and timings only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobKind
from app.services import results
from pipelines.inputs import DocumentInput
from pipelines.protocols import Embedder
from pipelines.retrieval.evidence import Evidence
from pipelines.retrieval.hybrid import index_for
from pipelines.summary.key_passages import key_passages
from pipelines.summary.summarize import SummaryResult, summarize
from worker.jobs import job_run
from worker.jobs.job_run import ModelFactory, RunOutcome, Saved, ThrottledProgress
from worker.jobs.known_facts import lead_rows
from worker.jobs.progress import SummaryWriting
from worker.jobs.result_rows import quote_rows, sentence_rows


def run_summary(
    job_id: int,
    *,
    sessions: sessionmaker[Session],
    model_factory: ModelFactory,
    max_new_tokens: int,
    task_id: str | None = None,
    embedder: Embedder | None = None,
) -> RunOutcome:
    """Summarize the job's document and save the summary once (upsert by job id), with its key
    passages (extractive, no model: computed first, in well under a second for 100 pages). With
    an `embedder`, passages without vectors get them first (documents from before embeddings)
    and the key passages are ranked over sentence embeddings."""

    def compute(job: Job) -> _Summarized:
        loaded = job_run.load_document(job, sessions, embedder)
        document = loaded.document
        job_run.record_progress(sessions, job_id, "key passages", 0, 0)
        started = time.perf_counter()
        key = key_passages(document.pages, document.passages, embedder=embedder)
        key_seconds = round(time.perf_counter() - started, 3)
        model = job_run.build_model(model_factory, sessions, job)
        job_run.record_progress(sessions, job_id, "summarizing", 0, 0)
        started = time.perf_counter()
        result = summarize(
            document,
            model,
            max_new_tokens=max_new_tokens,
            on_progress=ThrottledProgress(sessions, job_id, "summarizing"),
            on_writing=SummaryWriting(sessions, job_id),
            index=index_for(document, embedder),
            embedder=embedder,
        )
        seconds = round(time.perf_counter() - started, 3)
        result = replace(result, stats={**result.stats, **job_run.planted_stats(document)})
        return _Summarized(
            loaded.document_id, model.name, key, key_seconds, result, seconds, document
        )

    def save(session: Session, done: _Summarized) -> Saved:
        result = done.result
        key_stats = {"num_key_passages": len(done.key), "key_passages_seconds": done.key_seconds}
        results.save_summary(
            session=session,
            job_id=job_id,
            document_id=done.document_id,
            method=result.method,
            text=result.text,
            model=done.model_name,
            stats={**result.stats, "section_pages": result.section_pages, **key_stats},
            key_passages=quote_rows(done.key),
            sentence_support=sentence_rows(result.sentence_support),
            # The facts as they stand when the summary is saved; a later facts job replaces it.
            lead=lead_rows(session, done.document_id, done.document),
        )
        stats = {**result.stats, "seconds": done.seconds, "num_sections": result.num_sections}
        stats = {**stats, **key_stats}
        stats.pop("calls", None)  # per-call details stay on the summary only
        return Saved(
            stats,
            f"document={done.document_id} method={result.method} seconds={done.seconds:.1f}",
        )

    return job_run.run_model_job(
        job_id, JobKind.SUMMARIZE, "summarize", sessions, task_id, compute=compute, save=save
    )


@dataclass(frozen=True)
class _Summarized:
    document_id: int
    model_name: str
    key: list[Evidence]
    key_seconds: float
    result: SummaryResult
    seconds: float
    document: DocumentInput
