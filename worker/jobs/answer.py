"""The question job: answer params["question"] about the job's document
(pipelines.answer.question) and save the answer once per job, on job_run.py's model-job
skeleton. `run_question` is the task's entry: it claims the job, reading its row once, and
hands a question about a collection to worker/jobs/collection.py. Nothing here logs document
text, questions or answers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobKind
from app.display import typed_text
from app.services import results
from pipelines.answer.question import answer_question
from pipelines.answer.result import AnswerResult
from pipelines.protocols import Embedder
from pipelines.retrieval.hybrid import index_for
from worker.jobs import collection, job_run
from worker.jobs.job_run import ClaimedJob, ModelFactory, RunOutcome, Saved, ThrottledProgress
from worker.jobs.known_facts import known_facts
from worker.jobs.progress import STAGE_WRITING
from worker.jobs.result_rows import quote_rows


def run_question(
    job_id: int,
    *,
    sessions: sessionmaker[Session],
    model_factory: ModelFactory,
    max_new_tokens: int,
    task_id: str | None = None,
    embedder: Embedder | None = None,
) -> RunOutcome:
    """A question job about one document (as run_answer) or about a collection (its row has a
    collection_id: collection.answer_claimed), told apart by the row claimed."""
    claimed = job_run.claim_job(job_id, JobKind.ANSWER, sessions, task_id)
    if isinstance(claimed, RunOutcome):
        return claimed
    run = collection.answer_claimed if claimed.job.collection_id is not None else answer_claimed
    return run(
        claimed,
        sessions=sessions,
        model_factory=model_factory,
        max_new_tokens=max_new_tokens,
        embedder=embedder,
    )


def run_answer(
    job_id: int,
    *,
    sessions: sessionmaker[Session],
    model_factory: ModelFactory,
    max_new_tokens: int,
    task_id: str | None = None,
    embedder: Embedder | None = None,
) -> RunOutcome:
    """Answer params["question"] about the job's document and save the answer once. With an
    `embedder`, retrieval is hybrid (BM25 + the passages' vectors, computed here if missing)."""
    claimed = job_run.claim_job(job_id, JobKind.ANSWER, sessions, task_id)
    if isinstance(claimed, RunOutcome):
        return claimed
    return answer_claimed(
        claimed,
        sessions=sessions,
        model_factory=model_factory,
        max_new_tokens=max_new_tokens,
        embedder=embedder,
    )


def answer_claimed(
    claimed: ClaimedJob,
    *,
    sessions: sessionmaker[Session],
    model_factory: ModelFactory,
    max_new_tokens: int,
    embedder: Embedder | None = None,
) -> RunOutcome:
    """run_answer for a job this run has claimed (job_run.claim_job)."""
    job_id = claimed.job.id

    def compute(job: Job) -> _Answered:
        question = typed_text(str(job.params.get("question") or ""))  # as the services read it
        if not question:
            raise job_run.JobFailure("no_question", "This job holds no question to answer.")
        loaded = job_run.load_document(job, sessions, embedder)
        document = loaded.document
        model = job_run.build_model(model_factory, sessions, job)
        job_run.record_progress(sessions, job_id, "answering", 0, 0)
        started = time.perf_counter()
        result = answer_question(
            document,
            question,
            model,
            max_new_tokens=max_new_tokens,
            index=index_for(document, embedder),
            on_progress=ThrottledProgress(sessions, job_id, "answering"),
            on_tokens=ThrottledProgress(sessions, job_id, STAGE_WRITING),
            facts=known_facts(sessions, loaded.document_id),
            fact_embedder=embedder,
        )
        seconds = round(time.perf_counter() - started, 3)
        result = replace(result, stats={**result.stats, **job_run.planted_stats(document)})
        return _Answered(
            loaded.document_id, model.name, question, result, seconds, loaded.passage_ids
        )

    def save(session: Session, done: _Answered) -> Saved:
        result = done.result
        ids_by_ordinal = done.passage_ids
        results.save_answer(
            session=session,
            job_id=job_id,
            document_id=done.document_id,
            question=done.question,
            answer=result.text,
            cited_pages=result.cited_pages,
            cited_passage_ids=[
                ids_by_ordinal[o] for o in result.used_passage_ordinals if o in ids_by_ordinal
            ],
            model=done.model_name,
            stats={**result.stats, "method": result.method},
            quotes=quote_rows(result.quotes),
            support=result.support,
            model_answer=result.model_text,
            unsupported_claims=result.unsupported_claims,
        )
        stats = {**result.stats, "method": result.method, "seconds": done.seconds}
        stats.pop("calls", None)
        return Saved(
            stats,
            f"document={done.document_id} method={result.method} seconds={done.seconds:.1f}",
        )

    return job_run.run_claimed(claimed, "answer", sessions, compute=compute, save=save)


@dataclass(frozen=True)
class _Answered:
    document_id: int
    model_name: str
    question: str
    result: AnswerResult
    seconds: float
    passage_ids: dict[int, int]  # by ordinal, as read with the document
