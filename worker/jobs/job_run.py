"""A job's life, for every job kind: claimed, its progress recorded, finished or failed.

`claim_job` takes a job in one transaction: the row read once, skipped when it succeeded
before (or its result was saved by an earlier delivery), else marked running, with what the run
started on (run_claim.Claim). `record_progress` and `ThrottledProgress` (worker/jobs/progress.py)
record its stage; `finish` its success and `fail` its failure, with the code and sentence
`failure` gives any error. The model jobs (summary.py, answer.py, facts.py, collection.py) share
one skeleton, `run_model_job`; the ingest job (ingest.py) uses the same steps.

Each job is safe to run again for the same job id (a redelivered task): a job that already
succeeded is skipped, and a result is saved at most once per job (app.services.results). A
failure the user can act on becomes a sentence on the job and the run returns normally, so the
worker goes on with the next task; only database errors propagate.

Nothing here logs document text, questions or answers: ids, counts and timings only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Document, DocumentStatus, Job, JobKind, JobStatus
from app.db.retry import is_lock_error
from app.db.session import write_transaction
from app.errors import DatabaseBusy
from app.services import collection_answers, documents, jobs, results
from app.services import facts as fact_service
from engine import EngineError, OutOfMemoryError, PromptTooLongError
from pipelines.errors import DocumentError
from pipelines.inputs import DocumentInput
from pipelines.protocols import ChatModel, Embedder
from worker import resources
from worker.jobs import run_claim
from worker.jobs.document_inputs import input_of_rows
from worker.jobs.progress import JobGone as JobGone
from worker.jobs.progress import ThrottledProgress as ThrottledProgress
from worker.jobs.progress import record_progress as record_progress
from worker.model.server_api import ModelServerError
from worker.model.vector_store import vectors_of_rows

logger = logging.getLogger(__name__)

SUCCEEDED, FAILED, SKIPPED, MISSING = "succeeded", "failed", "skipped", "missing"
_UNEXPECTED = "An unexpected error stopped this job; see the worker's log for job {job_id}."
_TIMED_OUT = (
    "This {kind} job ran longer than its time limit of {limit} and was stopped; "
    "{setting} allows more."
)
# The time-limit sentence's name for a job, by the `what` its run passes, and the setting of
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
# Whether a job's result was saved already (a redelivery that lost only the finish).
IsSaved = Callable[..., object]


@dataclass(frozen=True)
class RunOutcome:
    job_id: int
    status: str  # SUCCEEDED, FAILED, SKIPPED (done before) or MISSING (no such job any more)
    # Jobs this run created that the caller must queue once it has committed (ingest -> summarize).
    follow_up_job_ids: tuple[int, ...] = ()
    # The key-facts job this ingest created (queued before the summary: it is the shorter one).
    facts_job_id: int | None = None


class JobFailure(Exception):
    """A failure the user can act on: recorded on the job as `code` and `sentence`."""

    def __init__(self, code: str, sentence: str) -> None:
        super().__init__(sentence)
        self.code = code
        self.sentence = sentence


@dataclass(frozen=True)
class Saved:
    """What a model job's `save` gives back."""

    stats: dict  # the finished job's (JSON: timings, counts)
    log_details: str  # for the log line: ids, methods, seconds; never text


@dataclass(frozen=True)
class ClaimedJob:
    """A job this run started: its row (detached, columns loaded) and what the run started on."""

    job: Job
    claim: run_claim.Claim


def run_model_job(
    job_id: int,
    kind: JobKind,
    what: str,
    sessions: sessionmaker[Session],
    task_id: str | None,
    *,
    compute: Callable[[Job], T],
    save: Callable[[Session, T], Saved],
    is_saved: IsSaved | None = None,
) -> RunOutcome:
    """What every model job does: claim it (or skip a job done before), `compute` outside any
    transaction, then `save` the result and finish the job in one commit (run_claimed).
    `is_saved(session=, job_id=)`: whether an earlier delivery saved the result (default: the
    kind's, saved_result)."""
    claimed = claim_job(job_id, kind, sessions, task_id, is_saved=is_saved)
    if isinstance(claimed, RunOutcome):
        return claimed
    return run_claimed(claimed, what, sessions, compute=compute, save=save)


def run_claimed(
    claimed: ClaimedJob,
    what: str,
    sessions: sessionmaker[Session],
    *,
    compute: Callable[[Job], T],
    save: Callable[[Session, T], Saved],
) -> RunOutcome:
    """`compute` outside any transaction, then `save` its result and finish the job in one
    commit, only while the run's claim holds (worker/jobs/run_claim.py: job and document or
    collection still there, the same; otherwise the result is discarded). `compute` builds its
    model with build_model, which stops the model's calls once the job is gone. A failure of
    `compute` becomes the job's sentence (failure); a database error while saving propagates,
    for Celery to run the task again."""
    job_id = claimed.job.id
    try:
        result = compute(claimed.job)
    except JobGone:
        logger.info(
            "%s job %s stopped: its job or document was deleted, or another run took the job "
            "over, while it ran",
            what,
            job_id,
        )
        return RunOutcome(job_id, MISSING)
    except Exception as error:
        return fail_from(error, job_id, sessions, what)
    with sessions() as session:
        write_transaction(session)
        # In the saving transaction: a result is never saved for a job or document that was
        # deleted (or a job another run took over) while this run computed it.
        if not run_claim.holds(session, claimed.claim):
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
        finish(session, job_id, saved.stats)
        session.commit()
    logger.info("%s job %s done: %s", what, job_id, saved.log_details)
    return RunOutcome(job_id, SUCCEEDED)


def saved_result(session: Session, job: Job) -> object:
    """The result an earlier delivery of this model job saved, if any (by job id)."""
    if job.kind == JobKind.ANSWER:
        if job.collection_id is not None:
            return collection_answers.get_for_job(session=session, job_id=job.id)
        return results.get_answer_for_job(session=session, job_id=job.id)
    if job.kind == JobKind.SUMMARIZE:
        return results.get_summary_for_job(session=session, job_id=job.id)
    if job.kind == JobKind.FACTS:
        return fact_service.facts_for_job(session=session, job_id=job.id)
    return None


def claim_job(
    job_id: int,
    kind: JobKind,
    sessions: sessionmaker[Session],
    task_id: str | None,
    *,
    is_saved: IsSaved | None = None,
) -> ClaimedJob | RunOutcome:
    """The job, started by this run, in one write transaction (its row read once); or the
    outcome when there is nothing to do: the job is gone, already succeeded, or its result was
    saved on an earlier delivery that lost only the bookkeeping (the job is then finished)."""
    with sessions() as session:
        write_transaction(session)
        job = begin(session, job_id, kind, task_id)
        if job is None or job.status == JobStatus.SUCCEEDED:
            session.commit()
            return RunOutcome(job_id, MISSING if job is None else SKIPPED)
        was_saved = (
            is_saved(session=session, job_id=job_id)
            if is_saved is not None
            else saved_result(session, job)
        )
        if was_saved:
            jobs.finish_job(session=session, job_id=job_id)
            session.commit()
            return RunOutcome(job_id, SUCCEEDED)
        claim = run_claim.claim_in(session, job)
        session.flush()
        session.expunge(job)  # detached as written: the commit expires nothing of it
        session.commit()
        return ClaimedJob(job, claim)


def begin_job(
    job_id: int, kind: JobKind, sessions: sessionmaker[Session], task_id: str | None
) -> Job | None:
    """begin, in a write transaction of its own; the job detached with its columns loaded."""
    with sessions() as session:
        write_transaction(session)
        job = begin(session, job_id, kind, task_id)
        session.commit()
        if job is None:
            return None
        session.refresh(job)
        session.expunge(job)
        return job


def begin(session: Session, job_id: int, kind: JobKind, task_id: str | None) -> Job | None:
    """The job, marked running unless it already succeeded (flushed; the caller commits and
    detaches it); None when it does not exist."""
    job = jobs.get_job(session=session, job_id=job_id)
    if job is None:
        logger.warning("job %s does not exist (its document was deleted?)", job_id)
        return None
    if job.kind != kind:
        raise ValueError(f"job {job_id} is a {job.kind.value} job, not {kind.value}")
    if job.status != JobStatus.SUCCEEDED:
        jobs.start_job(session=session, job_id=job_id, task_id=task_id)
        job.stage, job.progress_done, job.progress_total = "starting", 0, 0
    return job


@dataclass(frozen=True)
class LoadedDocument:
    """A model job's document, read once: its id, its pipeline input and its passages' ids."""

    document_id: int
    document: DocumentInput
    passage_ids: dict[int, int]  # by passage ordinal


def load_document(
    job: Job, sessions: sessionmaker[Session], embedder: Embedder | None = None
) -> LoadedDocument:
    """The job's document as pipeline input, its pages and passages read once; with an
    embedder, with its passage vectors (those missing are computed and stored first, stage
    "embedding", with no transaction open)."""
    with sessions() as session:
        document = session.get(Document, job.document_id) if job.document_id is not None else None
        if document is None:
            raise JobFailure("not_found", "The document of this job does not exist any more.")
        if document.status != DocumentStatus.READY:
            raise JobFailure(
                "document_not_ready",
                f"Document {document.id} is {document.status.value}, not ready; ingest it first.",
            )
        pages = documents.get_pages(session=session, document_id=document.id)
        passages = documents.get_passages(session=session, document_id=document.id)
    vectors = None
    if embedder is not None:

        def on_embedding(count: int) -> None:
            record_progress(sessions, job.id, "embedding", 0, count)

        try:
            vectors = vectors_of_rows(
                sessions, document.id, passages, embedder, on_embedding=on_embedding
            )
        except (RuntimeError, ValueError) as error:  # torch's errors, out of memory included
            # The question is still answered, from BM25 alone, rather than failed.
            logger.error("job %s: embedding failed (%s); BM25 alone", job.id, type(error).__name__)
    return LoadedDocument(
        document.id,
        input_of_rows(document, pages, passages, vectors),
        {p.ordinal: p.id for p in passages},
    )


def planted_stats(document: DocumentInput) -> dict[str, int]:
    """The count of instruction-like stretches left out of the document's text (pipelines.planted),
    for the stats of what was made from it; nothing when there were none."""
    count = document.num_instruction_spans
    return {"num_instruction_spans_left_out": count} if count else {}


def build_model(
    model_factory: ModelFactory, sessions: sessionmaker[Session], job: Job
) -> ChatModel:
    """The job's model: it raises JobGone, and its engine requests are aborted, at its next
    check once the job row is gone (its document or collection deleted) or taken over."""
    try:
        model = model_factory()
    except EngineError as error:
        raise JobFailure("model_unavailable", f"The model could not be loaded: {error}") from None
    except ModelServerError as error:
        raise JobFailure(error.code, error.sentence) from None
    claim = run_claim.Claim(job.id, job.started_at)  # is_current reads the job row only
    return run_claim.StopWhenGone(model, lambda: run_claim.is_current(sessions, claim))


def finish(session: Session, job_id: int, stats: dict, *, document_id: int | None = None) -> None:
    """Mark the job succeeded (stage "done") with its stats; flushed, the caller commits."""
    jobs.finish_job(session=session, job_id=job_id, stats=stats, document_id=document_id)


def fail_from(
    error: Exception, job_id: int, sessions: sessionmaker[Session], what: str
) -> RunOutcome:
    """Record `error` on the job as its code and sentence (failure)."""
    return fail(job_id, sessions, *failure(error, job_id, what))


def fail(job_id: int, sessions: sessionmaker[Session], code: str, sentence: str) -> RunOutcome:
    """Mark the job failed with `code` and `sentence`, committed."""
    with sessions() as session:
        job = jobs.fail_job(session=session, job_id=job_id, error_code=code, sentence=sentence)
        session.commit()
    logger.info("job %s failed: %s", job_id, code)
    return RunOutcome(job_id, FAILED if job is not None else MISSING)


def failure(
    error: Exception, job_id: int, what: str, *, unexpected: str | None = None
) -> tuple[str, str]:
    """The code and sentence a job's failure is recorded with, for every job kind; `what` names
    the work in the log and in the time-limit sentence. An unexpected error is logged by type
    (never its text: it may quote the document) and told as `unexpected`, by default a sentence
    naming the job. A database lock error is raised again: Celery runs the task again (tasks._RETRY).
    """
    if isinstance(error, JobFailure):
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
