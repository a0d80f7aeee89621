"""What the tasks do, as plain functions: re-read the job row, do the work, record the outcome.

Every job row is kept by the steps here, for every job kind (worker/jobs/ingest.py,
runner_facts.py and runner_collection.py use them): `_begin` marks it running, `_progress`
records its stage, `_finish` its success and `_fail` its failure, with the code and sentence
`_failure` gives any error. The model jobs share one skeleton, `_run_model_job`.

Each function takes a job id and is safe to call again for the same job (a redelivered task):
a job that already succeeded is skipped, and a summary or answer is saved at most once per job
(app.services.results). Progress goes into the job row (stage, done of total) so the CLI and UI
can poll it. A failure the user can act on becomes a sentence on the job and the function
returns normally, so the worker goes on with the next task; only database errors propagate.

Nothing here logs document text, questions or answers: ids, counts and timings only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Document, DocumentStatus, Job, JobKind, JobStatus
from app.db.retry import is_lock_error
from app.db.session import write_transaction
from app.display import typed_text
from app.errors import DatabaseBusy
from app.services import documents, jobs, results
from app.services import facts as fact_service
from engine import EngineError, OutOfMemoryError, PromptTooLongError
from pipelines.answer.question import AnswerResult, answer_question
from pipelines.errors import DocumentError
from pipelines.inputs import DocumentInput
from pipelines.protocols import ChatModel, Embedder
from pipelines.retrieval.evidence import Evidence
from pipelines.retrieval.hybrid import index_for
from pipelines.summary.key_passages import key_passages
from pipelines.summary.summarize import SummaryResult, summarize
from worker import resources
from worker.jobs import run_claim
from worker.jobs.document_inputs import document_input
from worker.jobs.known_facts import known_facts, lead_rows
from worker.jobs.progress import STAGE_WRITING, JobGone, SummaryWriting, ThrottledProgress
from worker.jobs.progress import record_progress as _progress
from worker.jobs.result_rows import quote_rows, sentence_rows
from worker.model.server_api import ModelServerError
from worker.model.vector_store import ensure_vectors

logger = logging.getLogger(__name__)

SUCCEEDED, FAILED, SKIPPED, MISSING = "succeeded", "failed", "skipped", "missing"
_UNEXPECTED = "An unexpected error stopped this job; see the worker's log for job {job_id}."
_TIMED_OUT = (
    "This {kind} job ran longer than its time limit of {limit} and was stopped; "
    "{setting} allows more."
)
# The time-limit sentence's name for a job, by the `what` its runner passes, and the setting of
# its limit (worker/celery_app.py: ingest_time_limit_s for ingests, model_time_limit_s else).
_KIND_OF_WORK = {
    "ingest": "ingest",
    "summarize": "summary",
    "answer": "question",
    "collection question": "collection question",
    "key facts": "key-facts",
}

ModelFactory = Callable[[], ChatModel]
T = TypeVar("T")
# The names runner_facts.py and runner_collection.py take from here.
_JobGone, _Throttled = JobGone, ThrottledProgress


@dataclass(frozen=True)
class RunOutcome:
    job_id: int
    status: str  # SUCCEEDED, FAILED, SKIPPED (done before) or MISSING (no such job any more)
    # Jobs this run created that the caller must queue once it has committed (ingest -> summarize).
    follow_up_job_ids: tuple[int, ...] = ()
    # The key-facts job this ingest created (queued before the summary: it is the shorter one).
    facts_job_id: int | None = None


class _Failure(Exception):
    def __init__(self, code: str, sentence: str) -> None:
        super().__init__(sentence)
        self.code = code
        self.sentence = sentence


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
        document_id, document = _load_document(job, sessions, embedder)
        _progress(sessions, job_id, "key passages", 0, 0)
        started = time.perf_counter()
        key = key_passages(document.pages, document.passages, embedder=embedder)
        key_seconds = round(time.perf_counter() - started, 3)
        model = _build_model(model_factory, sessions, job)
        _progress(sessions, job_id, "summarizing", 0, 0)
        started = time.perf_counter()
        result = summarize(
            document,
            model,
            max_new_tokens=max_new_tokens,
            on_progress=_Throttled(sessions, job_id, "summarizing"),
            on_writing=SummaryWriting(sessions, job_id),
            index=index_for(document, embedder),
            embedder=embedder,
        )
        seconds = round(time.perf_counter() - started, 3)
        result = replace(result, stats={**result.stats, **planted_stats(document)})
        return _Summarized(document_id, model.name, key, key_seconds, result, seconds, document)

    def save(session: Session, done: _Summarized) -> _Saved:
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
        return _Saved(
            stats,
            f"document={done.document_id} method={result.method} seconds={done.seconds:.1f}",
        )

    return _run_model_job(
        job_id, JobKind.SUMMARIZE, "summarize", sessions, task_id, compute=compute, save=save
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

    def compute(job: Job) -> _Answered:
        question = typed_text(str(job.params.get("question") or ""))  # as the services read it
        if not question:
            raise _Failure("no_question", "This job holds no question to answer.")
        document_id, document = _load_document(job, sessions, embedder)
        model = _build_model(model_factory, sessions, job)
        _progress(sessions, job_id, "answering", 0, 0)
        started = time.perf_counter()
        result = answer_question(
            document,
            question,
            model,
            max_new_tokens=max_new_tokens,
            index=index_for(document, embedder),
            on_progress=_Throttled(sessions, job_id, "answering"),
            on_tokens=_Throttled(sessions, job_id, STAGE_WRITING),
            facts=known_facts(sessions, document_id),
            fact_embedder=embedder,
        )
        seconds = round(time.perf_counter() - started, 3)
        result = replace(result, stats={**result.stats, **planted_stats(document)})
        return _Answered(document_id, model.name, question, result, seconds)

    def save(session: Session, done: _Answered) -> _Saved:
        result = done.result
        ids_by_ordinal = {
            p.ordinal: p.id
            for p in documents.get_passages(session=session, document_id=done.document_id)
        }
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
        return _Saved(
            stats,
            f"document={done.document_id} method={result.method} seconds={done.seconds:.1f}",
        )

    return _run_model_job(
        job_id, JobKind.ANSWER, "answer", sessions, task_id, compute=compute, save=save
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


@dataclass(frozen=True)
class _Answered:
    document_id: int
    model_name: str
    question: str
    result: AnswerResult
    seconds: float


# ---- helpers ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Saved:
    stats: dict  # the finished job's (JSON: timings, counts)
    log_details: str  # for the log line: ids, methods, seconds; never text


def _run_model_job(
    job_id: int,
    kind: JobKind,
    what: str,
    sessions: sessionmaker[Session],
    task_id: str | None,
    *,
    compute: Callable[[Job], T],
    save: Callable[[Session, T], _Saved],
    is_saved: Callable[..., object] | None = None,
) -> RunOutcome:
    """What every model job does: begin (or skip a job done before), `compute` outside any
    transaction, then `save` the result and finish the job in one commit, only while the run's
    claim holds (worker/jobs/run_claim.py: job and document or collection still there, the
    same; otherwise the result is discarded). `compute` builds its model with _build_model,
    which stops the model's calls once the job is gone. A failure of
    `compute` becomes the job's sentence (_failure); a database error while saving propagates,
    for Celery to run the task again. `is_saved(session=, job_id=)`: whether an earlier delivery
    saved the result (default: the kind's, _SAVED_FOR_JOB)."""
    job = _begin_model_job(job_id, kind, sessions, task_id, is_saved or _SAVED_FOR_JOB[kind])
    if isinstance(job, RunOutcome):
        return job
    claim = run_claim.claim_of(sessions, job)
    try:
        result = compute(job)
    except _JobGone:
        logger.info(
            "%s job %s stopped: its job or document was deleted, or another run took the job "
            "over, while it ran",
            what,
            job_id,
        )
        return RunOutcome(job_id, MISSING)
    except Exception as error:
        return _fail_from(error, job_id, sessions, what)
    with sessions() as session:
        write_transaction(session)
        # In the saving transaction: a result is never saved for a job or document that was
        # deleted (or a job another run took over) while this run computed it.
        if not run_claim.holds(session, claim):
            is_gone = session.get(Job, job_id) is None
            session.rollback()
            logger.info(
                "%s job %s: result discarded, its job or document was deleted, or another run "
                "took the job over, while it ran",
                what,
                job_id,
            )
            return RunOutcome(job_id, MISSING if is_gone else SKIPPED)
        saved = save(session, result)
        _finish(session, job_id, saved.stats)
        session.commit()
    logger.info("%s job %s done: %s", what, job_id, saved.log_details)
    return RunOutcome(job_id, SUCCEEDED)


# Whether a job's result was saved already, by job kind (a redelivery that lost only the finish).
_SAVED_FOR_JOB: dict[JobKind, Callable[..., object]] = {
    JobKind.SUMMARIZE: results.get_summary_for_job,
    JobKind.ANSWER: results.get_answer_for_job,
    JobKind.FACTS: fact_service.facts_for_job,
}


def _begin_model_job(
    job_id: int,
    kind: JobKind,
    sessions: sessionmaker[Session],
    task_id: str | None,
    is_saved: Callable[..., object],
) -> Job | RunOutcome:
    """The started job, or the outcome when there is nothing to do: the job is gone, already
    succeeded, or its result was saved on an earlier delivery that lost only the bookkeeping."""
    job = _begin(job_id, kind, sessions, task_id)
    if job is None or job.status == JobStatus.SUCCEEDED:
        return RunOutcome(job_id, MISSING if job is None else SKIPPED)
    with sessions() as session:
        write_transaction(session)
        if is_saved(session=session, job_id=job_id):
            jobs.finish_job(session=session, job_id=job_id)
            session.commit()
            return RunOutcome(job_id, SUCCEEDED)
    return job


def _begin(
    job_id: int, kind: JobKind, sessions: sessionmaker[Session], task_id: str | None
) -> Job | None:
    """The job, marked running unless it already succeeded; detached with its columns loaded."""
    with sessions() as session:
        write_transaction(session)
        job = jobs.get_job(session=session, job_id=job_id)
        if job is None:
            logger.warning("job %s does not exist (its document was deleted?)", job_id)
            return None
        if job.kind != kind:
            raise ValueError(f"job {job_id} is a {job.kind.value} job, not {kind.value}")
        if job.status != JobStatus.SUCCEEDED:
            jobs.start_job(session=session, job_id=job_id, task_id=task_id)
            job.stage, job.progress_done, job.progress_total = "starting", 0, 0
        session.commit()
        session.refresh(job)
        session.expunge(job)
        return job


def _load_document(
    job: Job, sessions: sessionmaker[Session], embedder: Embedder | None = None
) -> tuple[int, DocumentInput]:
    """The job's document as pipeline input; with an embedder, with its passage vectors (those
    missing are computed and stored first, stage "embedding")."""
    vectors = None
    if embedder is not None and job.document_id is not None:

        def on_embedding(count: int) -> None:
            _progress(sessions, job.id, "embedding", 0, count)

        try:
            vectors = ensure_vectors(sessions, job.document_id, embedder, on_embedding=on_embedding)
        except (RuntimeError, ValueError) as error:  # torch's errors, out of memory included
            # The question is still answered, from BM25 alone, rather than failed.
            logger.error("job %s: embedding failed (%s); BM25 alone", job.id, type(error).__name__)
    with sessions() as session:
        document = session.get(Document, job.document_id) if job.document_id is not None else None
        if document is None:
            raise _Failure("not_found", "The document of this job does not exist any more.")
        if document.status != DocumentStatus.READY:
            raise _Failure(
                "document_not_ready",
                f"Document {document.id} is {document.status.value}, not ready; ingest it first.",
            )
        return document.id, document_input(session, document, vectors)


def planted_stats(document: DocumentInput) -> dict[str, int]:
    """The count of instruction-like stretches left out of the document's text (pipelines.planted),
    for the stats of what was made from it; nothing when there were none."""
    count = document.num_instruction_spans
    return {"num_instruction_spans_left_out": count} if count else {}


def _build_model(
    model_factory: ModelFactory, sessions: sessionmaker[Session], job: Job
) -> ChatModel:
    """The job's model: it raises JobGone, and its engine requests are aborted, at its next
    check once the job row is gone (its document or collection deleted) or taken over."""
    try:
        model = model_factory()
    except EngineError as error:
        raise _Failure("model_unavailable", f"The model could not be loaded: {error}") from None
    except ModelServerError as error:
        raise _Failure(error.code, error.sentence) from None
    claim = run_claim.Claim(job.id, job.started_at)  # is_current reads the job row only
    return run_claim.StopWhenGone(model, lambda: run_claim.is_current(sessions, claim))


def _finish(session: Session, job_id: int, stats: dict, *, document_id: int | None = None) -> None:
    """Mark the job succeeded (stage "done") with its stats; flushed, the caller commits."""
    jobs.finish_job(session=session, job_id=job_id, stats=stats, document_id=document_id)


def _fail_from(
    error: Exception, job_id: int, sessions: sessionmaker[Session], what: str
) -> RunOutcome:
    """Record `error` on the job as its code and sentence (_failure)."""
    return _fail(job_id, sessions, *_failure(error, job_id, what))


def _failure(
    error: Exception, job_id: int, what: str, *, unexpected: str | None = None
) -> tuple[str, str]:
    """The code and sentence a job's failure is recorded with, for every job kind; `what` names
    the work in the log and in the time-limit sentence. An unexpected error is logged by type
    (never its text: it may quote the document) and told as `unexpected`, by default a sentence
    naming the job. A database lock error is raised again: Celery runs the task again (tasks._RETRY).
    """
    if isinstance(error, _Failure):
        return error.code, error.sentence
    if isinstance(error, DocumentError):
        return error.code, error.message
    if isinstance(error, DatabaseBusy):
        return error.code, error.sentence
    if isinstance(error, EngineError):
        # Engine sentences talk about tokens and memory, never about the text.
        return _engine_code(error), str(error)
    if isinstance(error, ModelServerError):
        # The model server's faults (down, the key, busy, a bad reply): host and status only.
        return error.code, error.sentence
    if isinstance(error, SoftTimeLimitExceeded):
        return "timed_out", timed_out_sentence(what)
    if is_lock_error(error):
        raise error
    logger.error("%s job %s failed unexpectedly: %s", what, job_id, type(error).__name__)
    logger.debug("%s job %s traceback", what, job_id, exc_info=True)
    return "internal_error", unexpected or _UNEXPECTED.format(job_id=job_id)


def timed_out_sentence(what: str) -> str:
    """The sentence of a job stopped at its Celery time limit, naming its own kind and limit."""
    settings = resources.settings()
    field = "ingest_time_limit_s" if what == "ingest" else "model_time_limit_s"
    return _TIMED_OUT.format(
        kind=_KIND_OF_WORK.get(what, what),
        limit=_duration(float(getattr(settings, field))),
        setting=f"LONGDOC_{field.upper()}",
    )


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        hours = int(seconds // 3600)
        return f"{hours} hour{'' if hours == 1 else 's'}"
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return f"{minutes} minute{'' if minutes == 1 else 's'}"
    return f"{seconds:g} seconds"


def _engine_code(error: EngineError) -> str:
    if isinstance(error, PromptTooLongError):
        return "prompt_too_long"
    if isinstance(error, OutOfMemoryError):
        return "out_of_memory"
    return "engine_error"


def _fail(job_id: int, sessions: sessionmaker[Session], code: str, sentence: str) -> RunOutcome:
    with sessions() as session:
        job = jobs.fail_job(session=session, job_id=job_id, error_code=code, sentence=sentence)
        session.commit()
    logger.info("job %s failed: %s", job_id, code)
    return RunOutcome(job_id, FAILED if job is not None else MISSING)
