"""The key-facts job: re-read the job row, extract the document's key facts (pipelines.facts.extract)
with progress per field, and save them once, replacing the document's earlier facts.

Safe to run again for the same job (a redelivered task): a job that succeeded is skipped, and
facts an earlier delivery saved are found by job id. Its row is kept by worker/jobs/job_run.py's
model-job skeleton (begin, fail with a sentence, save and finish in one commit). Saving also
replaces the lead of the document's summaries (pipelines.summary.lead). Nothing here
logs document text: ids, counts and timings only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobKind
from app.services import facts as fact_service
from app.services import results
from pipelines.facts.extract import Fact, FactsResult, extract_facts
from pipelines.inputs import DocumentInput
from worker.jobs import job_run
from worker.jobs.known_facts import lead_rows

STAGE = "key facts"


def _new_fact(position: int, fact: Fact) -> fact_service.NewFact:
    return fact_service.NewFact(
        field=fact.field,
        label=fact.label,
        position=position,
        value=fact.value,
        normalized_value=fact.normalized,
        confidence=fact.confidence,
        source=fact.source,
        page=fact.page,
        evidence=[
            {
                "text": quote.text,
                "page": quote.page,
                "start_char": quote.start_char,
                "end_char": quote.end_char,
            }
            for quote in fact.evidence
        ],
        origin=fact.origin,
        value_table=[dict(row) for row in fact.table],
    )


class _FieldProgress:
    """Commits "key facts: done of total fields" to the job row after each field."""

    def __init__(self, sessions: sessionmaker[Session], job_id: int) -> None:
        self.sessions, self.job_id = sessions, job_id

    def __call__(self, done: int, total: int) -> None:
        if not job_run.record_progress(self.sessions, self.job_id, STAGE, done, total):
            raise job_run.JobGone()


def run_facts(
    job_id: int,
    *,
    sessions: sessionmaker[Session],
    model_factory: job_run.ModelFactory,
    task_id: str | None = None,
) -> job_run.RunOutcome:
    """Extract the key facts of the job's document and save them (once per job)."""

    def compute(job: Job) -> _Extracted:
        loaded = job_run.load_document(job, sessions)
        document_id, document = loaded.document_id, loaded.document
        model = job_run.build_model(model_factory, sessions, job)
        job_run.record_progress(sessions, job_id, STAGE, 0, 0)
        started = time.perf_counter()
        result = extract_facts(document, model, on_progress=_FieldProgress(sessions, job_id))
        seconds = round(time.perf_counter() - started, 3)
        return _Extracted(document_id, model.name, result, seconds, document)

    def save(session: Session, done: _Extracted) -> job_run.Saved:
        result = done.result
        fact_service.save_facts(
            session=session,
            job_id=job_id,
            document_id=done.document_id,
            facts=[_new_fact(position, fact) for position, fact in enumerate(result.facts)],
            model=done.model_name,
        )
        session.flush()
        # The document's summaries lead with its facts: with these now.
        results.set_summary_leads(
            session=session,
            document_id=done.document_id,
            lead=lead_rows(session, done.document_id, done.document),
        )
        stats = {**result.stats, "seconds": done.seconds}
        stats.pop("calls", None)  # per-call details are many and say nothing a reader needs
        return job_run.Saved(
            stats,
            f"document={done.document_id} subkind={result.subkind} "
            f"found={stats.get('num_found', 0)} of {stats.get('num_fields', 0)} "
            f"seconds={done.seconds:.1f}",
        )

    return job_run.run_model_job(
        job_id, JobKind.FACTS, "key facts", sessions, task_id, compute=compute, save=save
    )


@dataclass(frozen=True)
class _Extracted:
    document_id: int
    model_name: str
    result: FactsResult
    seconds: float
    document: DocumentInput
