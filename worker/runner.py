"""What the tasks do, as plain functions: re-read the job row, do the work, record the outcome.

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
from dataclasses import dataclass
from pathlib import Path

from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Document, DocumentStatus, Job, JobKind, JobStatus
from app.services import documents, jobs, results
from engine import EngineError, OutOfMemoryError, PromptTooLongError
from pipelines.answer import answer_question
from pipelines.documents import PageText, Passage
from pipelines.errors import DocumentError
from pipelines.inputs import DocumentInput
from pipelines.protocols import ChatModel, TokenCounter
from pipelines.summarize import summarize
from worker.ingest import IngestOptions, ingest_into_job

logger = logging.getLogger(__name__)

SUCCEEDED, FAILED, SKIPPED, MISSING = "succeeded", "failed", "skipped", "missing"
# Progress rows are committed at most this often: a 2,000-page summary reports thousands of steps.
PROGRESS_INTERVAL_S = 0.5
_UNEXPECTED = "An unexpected error stopped this job; see the worker's log for job {job_id}."
_TIMED_OUT = "This job ran longer than the time limit ({limit}) and was stopped."

ModelFactory = Callable[[], ChatModel]


@dataclass(frozen=True)
class RunOutcome:
    job_id: int
    status: str  # SUCCEEDED, FAILED, SKIPPED (done before) or MISSING (no such job any more)
    # Jobs this run created that the caller must queue once it has committed (ingest -> summarize).
    follow_up_job_ids: tuple[int, ...] = ()


class _JobGone(Exception):
    """The job row vanished while the task ran (its document was deleted)."""


class _Failure(Exception):
    def __init__(self, code: str, sentence: str) -> None:
        super().__init__(sentence)
        self.code = code
        self.sentence = sentence


def run_ingest(
    job_id: int,
    *,
    sessions: sessionmaker[Session],
    options: IngestOptions,
    count_tokens: TokenCounter,
    task_id: str | None = None,
) -> RunOutcome:
    """Parse, split and store the PDF at the job's params["path"]. With params["then_summarize"],
    a summarize job for the stored (or already present) document is created as a follow-up."""
    job = _begin(job_id, JobKind.INGEST, sessions, task_id)
    if job is None or job.status == JobStatus.SUCCEEDED:
        return RunOutcome(job_id, MISSING if job is None else SKIPPED)
    path = Path(job.params.get("path", ""))

    def on_stage(stage: str) -> None:
        with sessions() as session:
            jobs.update_progress(session=session, job_id=job_id, stage=stage, done=0, total=0)
            session.commit()

    try:
        outcome = ingest_into_job(
            path,
            job_id,
            sessions=sessions,
            options=_with_job_options(options, job.params),
            count_tokens=count_tokens,
            on_stage=on_stage,
            file_name=job.params.get("file_name"),
            then_summarize=bool(job.params.get("then_summarize")),
        )
    except DocumentError as error:
        return _fail(job_id, sessions, error.code, error.message)
    except OSError as error:
        sentence = f"LongDoc cannot read this file ({error.strerror or type(error).__name__})."
        return _fail(job_id, sessions, "unreadable_file", sentence)
    except SoftTimeLimitExceeded:
        return _fail(job_id, sessions, "timed_out", _TIMED_OUT.format(limit="ingest"))
    except Exception:
        logger.error("ingest job %s failed unexpectedly", job_id)
        logger.debug("ingest job %s traceback", job_id, exc_info=True)
        return _fail(job_id, sessions, "internal_error", _UNEXPECTED.format(job_id=job_id))
    finally:
        if "password" in job.params:
            _forget_password(job_id, sessions)
    # The follow-up summarize job was created in the commit that finished the ingest job.
    follow_ups = () if outcome.follow_up_job_id is None else (outcome.follow_up_job_id,)
    return RunOutcome(job_id, SUCCEEDED, follow_ups)


def _begin_model_job(
    job_id: int, kind: JobKind, sessions: sessionmaker[Session], task_id: str | None
) -> Job | RunOutcome:
    """The started job, or the outcome when there is nothing to do: the job is gone, already
    succeeded, or its result was saved on an earlier delivery that lost only the bookkeeping."""
    job = _begin(job_id, kind, sessions, task_id)
    if job is None or job.status == JobStatus.SUCCEEDED:
        return RunOutcome(job_id, MISSING if job is None else SKIPPED)
    saved = results.get_summary_for_job if kind == JobKind.SUMMARIZE else results.get_answer_for_job
    with sessions() as session:
        if saved(session=session, job_id=job_id) is not None:
            jobs.finish_job(session=session, job_id=job_id)
            session.commit()
            return RunOutcome(job_id, SUCCEEDED)
    return job


def run_summary(
    job_id: int,
    *,
    sessions: sessionmaker[Session],
    model_factory: ModelFactory,
    max_new_tokens: int,
    task_id: str | None = None,
) -> RunOutcome:
    """Summarize the job's document and save the summary once (upsert by job id)."""
    job = _begin_model_job(job_id, JobKind.SUMMARIZE, sessions, task_id)
    if isinstance(job, RunOutcome):
        return job
    try:
        document_id, document = _load_document(job, sessions)
        model = _build_model(model_factory)
        _progress(sessions, job_id, "summarizing", 0, 0)
        started = time.perf_counter()
        result = summarize(
            document,
            model,
            max_new_tokens=max_new_tokens,
            on_progress=_Throttled(sessions, job_id, "summarizing"),
        )
        seconds = round(time.perf_counter() - started, 3)
    except _JobGone:
        return RunOutcome(job_id, MISSING)
    except Exception as error:
        return _fail_from(error, job_id, sessions, "summarize")
    stats = {**result.stats, "seconds": seconds, "num_sections": result.num_sections}
    stats.pop("calls", None)  # per-call details stay on the summary only
    with sessions() as session:
        results.save_summary(
            session=session,
            job_id=job_id,
            document_id=document_id,
            method=result.method,
            text=result.text,
            model=model.name,
            stats={**result.stats, "section_pages": result.section_pages},
        )
        _finish(session, job_id, stats)
        session.commit()
    logger.info(
        "summarize job %s done: document=%s method=%s seconds=%.1f",
        job_id,
        document_id,
        result.method,
        seconds,
    )
    return RunOutcome(job_id, SUCCEEDED)


def run_answer(
    job_id: int,
    *,
    sessions: sessionmaker[Session],
    model_factory: ModelFactory,
    max_new_tokens: int,
    task_id: str | None = None,
) -> RunOutcome:
    """Answer params["question"] about the job's document and save the answer once."""
    job = _begin_model_job(job_id, JobKind.ANSWER, sessions, task_id)
    if isinstance(job, RunOutcome):
        return job
    question = str(job.params.get("question") or "").strip()
    if not question:
        return _fail(job_id, sessions, "no_question", "This job holds no question to answer.")
    try:
        document_id, document = _load_document(job, sessions)
        model = _build_model(model_factory)
        _progress(sessions, job_id, "answering", 0, 0)
        started = time.perf_counter()
        result = answer_question(
            document,
            question,
            model,
            max_new_tokens=max_new_tokens,
            on_progress=_Throttled(sessions, job_id, "answering"),
        )
        seconds = round(time.perf_counter() - started, 3)
    except _JobGone:
        return RunOutcome(job_id, MISSING)
    except Exception as error:
        return _fail_from(error, job_id, sessions, "answer")
    with sessions() as session:
        ids_by_ordinal = {
            p.ordinal: p.id
            for p in documents.get_passages(session=session, document_id=document_id)
        }
        results.save_answer(
            session=session,
            job_id=job_id,
            document_id=document_id,
            question=question,
            answer=result.text,
            cited_pages=result.cited_pages,
            cited_passage_ids=[
                ids_by_ordinal[o] for o in result.used_passage_ordinals if o in ids_by_ordinal
            ],
            model=model.name,
            stats={**result.stats, "method": result.method},
        )
        stats = {**result.stats, "method": result.method, "seconds": seconds}
        stats.pop("calls", None)
        _finish(session, job_id, stats)
        session.commit()
    logger.info(
        "answer job %s done: document=%s method=%s seconds=%.1f",
        job_id,
        document_id,
        result.method,
        seconds,
    )
    return RunOutcome(job_id, SUCCEEDED)


# ---- helpers ----------------------------------------------------------------------------------


def _begin(
    job_id: int, kind: JobKind, sessions: sessionmaker[Session], task_id: str | None
) -> Job | None:
    """The job, marked running unless it already succeeded; detached with its columns loaded."""
    with sessions() as session:
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


def _forget_password(job_id: int, sessions: sessionmaker[Session]) -> None:
    """A PDF's password stays in the job row only until its ingest has an outcome."""
    with sessions() as session:
        job = jobs.get_job(session=session, job_id=job_id)
        if job is not None and "password" in (job.params or {}):
            job.params = {key: value for key, value in job.params.items() if key != "password"}
            session.commit()


def _with_job_options(options: IngestOptions, params: dict) -> IngestOptions:
    kind = params.get("kind") or options.kind
    return IngestOptions(
        files_dir=options.files_dir,
        limits=options.limits,
        passage_max_tokens=options.passage_max_tokens,
        password=params.get("password") or options.password,
        kind=kind,
    )


def _load_document(job: Job, sessions: sessionmaker[Session]) -> tuple[int, DocumentInput]:
    with sessions() as session:
        document = session.get(Document, job.document_id) if job.document_id is not None else None
        if document is None:
            raise _Failure("not_found", "The document of this job does not exist any more.")
        if document.status != DocumentStatus.READY:
            raise _Failure(
                "document_not_ready",
                f"Document {document.id} is {document.status.value}, not ready; ingest it first.",
            )
        pages = documents.get_pages(session=session, document_id=document.id)
        passages = documents.get_passages(session=session, document_id=document.id)
        return document.id, DocumentInput(
            title=document.title,
            kind=document.kind.value,
            pages=tuple(PageText(number=p.number, text=p.text) for p in pages),
            passages=tuple(
                Passage(
                    ordinal=p.ordinal,
                    first_page=p.first_page,
                    last_page=p.last_page,
                    start_char=p.start_char,
                    end_char=p.end_char,
                    text=p.text,
                    num_tokens=p.num_tokens,
                )
                for p in passages
            ),
        )


def _build_model(model_factory: ModelFactory) -> ChatModel:
    try:
        return model_factory()
    except EngineError as error:
        raise _Failure("model_unavailable", f"The model could not be loaded: {error}") from None


class _Throttled:
    """An on_progress callback that commits progress to the job row at most every half second."""

    def __init__(self, sessions: sessionmaker[Session], job_id: int, stage: str) -> None:
        self.sessions, self.job_id, self.stage = sessions, job_id, stage
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < PROGRESS_INTERVAL_S:
            return
        self._last = now
        if not _progress(self.sessions, self.job_id, self.stage, done, total):
            raise _JobGone()


def _progress(
    sessions: sessionmaker[Session], job_id: int, stage: str, done: int, total: int
) -> bool:
    with sessions() as session:
        job = jobs.update_progress(
            session=session, job_id=job_id, stage=stage, done=max(done, 0), total=max(total, 0)
        )
        session.commit()
        return job is not None


def _finish(session: Session, job_id: int, stats: dict) -> None:
    job = jobs.finish_job(session=session, job_id=job_id, stats=stats)
    if job is not None:
        job.stage = "done"
        job.progress_done = max(job.progress_done, job.progress_total)


def _fail_from(
    error: Exception, job_id: int, sessions: sessionmaker[Session], what: str
) -> RunOutcome:
    if isinstance(error, _Failure):
        return _fail(job_id, sessions, error.code, error.sentence)
    if isinstance(error, DocumentError):
        return _fail(job_id, sessions, error.code, error.message)
    if isinstance(error, EngineError):
        # Engine sentences talk about tokens and memory, never about the text.
        return _fail(job_id, sessions, _engine_code(error), str(error))
    if isinstance(error, SoftTimeLimitExceeded):
        return _fail(job_id, sessions, "timed_out", _TIMED_OUT.format(limit=what))
    logger.error("%s job %s failed unexpectedly: %s", what, job_id, type(error).__name__)
    logger.debug("%s job %s traceback", what, job_id, exc_info=True)
    return _fail(job_id, sessions, "internal_error", _UNEXPECTED.format(job_id=job_id))


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
