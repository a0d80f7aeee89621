"""The ingest job: the worker's task for a queued file (`run_ingest`), the command line's own job
per file (`ingest_file`), and a file refused before any ingest ran (`record_refused_file`).
worker/ingest/store.py reads and stores the PDF; the job row is kept here with worker/jobs/job_run.py's
steps (begin, fail with a sentence), and finished in the commit that stores the document, with
its follow-up jobs, so no reader sees the one without the other.

Nothing here logs document text: ids, counts and error types only.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from app.db.models import JobKind, JobStatus
from app.db.retry import with_lock_retries
from app.db.session import write_transaction
from app.errors import DatabaseBusy
from app.services import acting, collections, jobs
from app.services.jobs import IngestParams
from pipelines.protocols import Embedder, TokenCounter
from worker.ingest import stored_copies
from worker.ingest.store import (
    REFUSED,
    STORED,
    IngestOptions,
    Progress,
    StoredDocument,
    read_pdf,
    store_read,
)
from worker.jobs import job_run

logger = logging.getLogger(__name__)

# The command line's sentence (the worker's names the job whose log to read).
_UNEXPECTED = "An unexpected error stopped LongDoc from reading this file; nothing was stored."


@dataclass(frozen=True)
class IngestOutcome:
    """What became of one file given to the command line."""

    path: Path
    status: str  # STORED, PRESENT or REFUSED
    document_id: int | None = None
    job_id: int | None = None
    error_code: str | None = None
    reason: str | None = None  # the sentence shown to people when refused
    num_pages: int = 0
    num_passages: int = 0
    stats: dict = field(default_factory=dict)
    follow_up_job_id: int | None = None  # the summarize job created with the document
    facts_job_id: int | None = None  # the key-facts job created with a newly stored document
    notice: str | None = None  # stored, but with something the user should know (pages lost)
    num_ocr_pages: int = 0
    num_redactions: int = 0  # boxes that hide text still in the file


@dataclass(frozen=True)
class _Ingested:
    document: StoredDocument
    stats: dict  # the finished job's, with the ids of its follow-up jobs


def run_ingest(
    job_id: int,
    *,
    sessions: sessionmaker[Session],
    options: IngestOptions,
    count_tokens: TokenCounter,
    task_id: str | None = None,
    embedder: Embedder | None = None,
) -> job_run.RunOutcome:
    """Parse, split and store the PDF of the job's params (app.services.jobs.IngestParams); a
    newly stored document gets a key-facts job as a follow-up, and with then_summarize a
    summarize job too. With an `embedder`, the passages are stored with their vectors."""
    job = job_run.begin_job(job_id, JobKind.INGEST, sessions, task_id)
    if job is None:
        return job_run.RunOutcome(job_id, job_run.MISSING)
    if job.status == JobStatus.SUCCEEDED:
        # Done before: a redelivery, or a retry after the follow-ups' queueing failed (the
        # database locked). Its follow-ups are named again; the task sends those never sent.
        stats = job.stats or {}
        follow_up, facts = stats.get("follow_up_job_id"), stats.get("facts_job_id")
        return job_run.RunOutcome(
            job_id, job_run.SKIPPED, () if follow_up is None else (int(follow_up),),
            None if facts is None else int(facts),
        )  # fmt: skip
    params = IngestParams.from_dict(job.params)

    def on_stage(stage: str) -> None:
        job_run.record_progress(sessions, job_id, stage, 0, 0)

    try:
        ingested = _ingest_into_job(
            Path(params.path or ""),
            job_id,
            params,
            sessions=sessions,
            options=options.for_file(kind=params.kind, password=params.password),
            count_tokens=count_tokens,
            on_stage=on_stage,
            embedder=embedder,
        )
    except Exception as error:
        return job_run.fail_from(error, job_id, sessions, "ingest")
    finally:
        if params.password is not None:
            _forget_password(job_id, sessions)
        _discard_refused_copy(job_id, sessions, options.files_dir)
    _into_collection(job_id, params.collection_id, ingested.document.document_id, sessions)
    if ingested.document.status == STORED:  # accounts (issue 25): what the upload stored
        _claim(params.owner_id, ingested.document.document_id, sessions)
    follow_up = ingested.stats.get("follow_up_job_id")
    return job_run.RunOutcome(
        job_id,
        job_run.SUCCEEDED,
        () if follow_up is None else (follow_up,),
        ingested.stats.get("facts_job_id"),
    )


def ingest_file(
    path: Path,
    *,
    sessions: sessionmaker[Session],
    options: IngestOptions,
    count_tokens: TokenCounter,
    on_stage: Progress | None = None,
    embedder: Embedder | None = None,
    owner_id: int | None = None,
) -> IngestOutcome:
    """Store one PDF for the command line, in a job this process owns, or say why not; never
    raises, so one file's failure never stops a batch. With an `embedder`, each passage is
    stored with its vector (hybrid retrieval). `owner_id`: the user it is ingested for (`--as`),
    who finds it PRESENT only as a document they may read.

    A database locked by another writer is waited for and retried (app/db/retry.py); past the
    retries the file is refused with a DatabaseBusy sentence and its job failed.
    """
    try:
        job_id = with_lock_retries(
            lambda: _start_owned_job(path, sessions), what="recording the ingest of this file"
        )
    except DatabaseBusy as busy:
        return IngestOutcome(path=path, status=REFUSED, error_code=busy.code, reason=busy.sentence)
    except Exception as error:  # the database is gone or broken: this file fails, not the batch
        logger.error("ingest could not record a job: %s", type(error).__name__)
        return IngestOutcome(
            path=path, status=REFUSED, error_code="internal_error", reason=_UNEXPECTED
        )
    params = IngestParams(file_name=path.name, owner_id=owner_id)
    try:
        ingested = with_lock_retries(
            lambda: _ingest_into_job(
                path,
                job_id,
                params,
                sessions=sessions,
                options=options,
                count_tokens=count_tokens,
                on_stage=on_stage,
                embedder=embedder,
            ),
            what="storing this file",
        )
    except Exception as error:
        code, sentence = job_run.failure(error, job_id, "ingest", unexpected=_UNEXPECTED)
        _record_refusal(job_id, sessions, code, sentence)
        return IngestOutcome(
            path=path, status=REFUSED, job_id=job_id, error_code=code, reason=sentence
        )
    document, stats = ingested.document, ingested.stats
    return IngestOutcome(
        path=path,
        status=document.status,
        document_id=document.document_id,
        job_id=job_id,
        num_pages=document.num_pages,
        num_passages=document.num_passages,
        stats=stats,
        follow_up_job_id=stats.get("follow_up_job_id"),
        facts_job_id=stats.get("facts_job_id"),
        notice=document.notice,
        num_ocr_pages=document.num_ocr_pages,
        num_redactions=document.num_redactions,
    )


def record_refused_file(
    params: IngestParams, *, sessions: sessionmaker[Session], code: str, sentence: str
) -> int:
    """A file refused before any ingest could run (the inbox's checks), recorded as a failed
    ingest job with its sentence, so the UI and `longdoc jobs` list it; the job's id."""
    with sessions() as session:
        job = jobs.create_ingest_job(session=session, params=params)
        jobs.fail_job(session=session, job_id=job.id, error_code=code, sentence=sentence)
        session.commit()
        return job.id


def _ingest_into_job(
    path: Path,
    job_id: int,
    params: IngestParams,
    *,
    sessions: sessionmaker[Session],
    options: IngestOptions,
    count_tokens: TokenCounter,
    on_stage: Progress | None,
    embedder: Embedder | None,
) -> _Ingested:
    """Read and store the file, and finish the started job with its follow-ups in one commit.
    Raises DocumentError (and database errors) for the caller to record. A file already stored
    is PRESENT only as a document its owner may read (accounts, issue 25): else it becomes
    their own document, so an upload tells nobody of another's document."""
    with sessions() as session:
        readable = acting.readable_by_owner(session=session, owner_id=params.owner_id)
    read = read_pdf(
        path,
        sessions=sessions,
        options=options,
        count_tokens=count_tokens,
        on_stage=on_stage,
        file_name=params.file_name or None,
        embedder=embedder,
        readable=readable,
    )
    with sessions() as session:
        if isinstance(read, StoredDocument):
            document = read
            write_transaction(session)  # finishing the job (store_read begins its own)
        else:
            document = store_read(
                session, read, files_dir=options.files_dir, on_stage=on_stage, readable=readable
            )
        stats = _finish_with_follow_ups(
            session, job_id, document, params, key_facts=options.key_facts
        )
        session.commit()
    return _Ingested(document, stats)


def _finish_with_follow_ups(
    session: Session,
    job_id: int,
    document: StoredDocument,
    params: IngestParams,
    *,
    key_facts: bool,
) -> dict:
    """Finish the ingest job and create its follow-ups (flushed, not committed); its stats.

    Every newly stored document gets its key-facts job here, whichever way it came in (upload,
    inbox, `longdoc ingest`): the one place that decides it, so none is created twice; unless
    `key_facts` is off (setting key_facts_after_ingest). The caller sends the follow-ups after
    this commit with app.services.dispatch.queue_jobs (worker/tasks.py's ingest task; the
    command line, worker/cli/ingest.py)."""
    stats = dict(document.stats)
    if key_facts and document.status == STORED:
        facts_job = jobs.create_job(
            session=session, kind=JobKind.FACTS, document_id=document.document_id
        )
        stats["facts_job_id"] = facts_job.id
    if params.then_summarize:
        follow_up = jobs.create_job(
            session=session, kind=JobKind.SUMMARIZE, document_id=document.document_id
        )
        stats["follow_up_job_id"] = follow_up.id
    job_run.finish(session, job_id, stats, document_id=document.document_id)
    return stats


def _start_owned_job(path: Path, sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        # Owned by this process: a worker's restart sweep must never queue it (worker/jobs/recovery.py).
        job = jobs.create_ingest_job(
            session=session,
            params=IngestParams(file_name=path.name),
            owner_host=socket.gethostname(),
            owner_pid=os.getpid(),
        )
        jobs.start_job(session=session, job_id=job.id)
        session.commit()
        return job.id


def _record_refusal(job_id: int, sessions: sessionmaker[Session], code: str, sentence: str) -> None:
    def fail() -> None:
        job_run.fail(job_id, sessions, code, sentence)

    try:
        with_lock_retries(fail, what="recording why this file was refused")
    except Exception:
        # Left running; once this process is gone its job is failed (worker/jobs/recovery.py).
        logger.warning("ingest job %s: could not record its failure", job_id)


def _forget_password(job_id: int, sessions: sessionmaker[Session]) -> None:
    """A PDF's password stays in the job row only until its ingest has an outcome."""
    with sessions() as session:
        jobs.forget_password(session=session, job_id=job_id)
        session.commit()


def _discard_refused_copy(job_id: int, sessions: sessionmaker[Session], files_dir: Path) -> None:
    # Best effort, in a finally: it must never replace the error that is propagating.
    try:
        stored_copies.discard_if_refused(job_id, sessions=sessions, files_dir=files_dir)
    except Exception:
        logger.warning("ingest job %s: could not check its stored copy", job_id)


def _claim(owner_id: int | None, document_id: int, sessions: sessionmaker[Session]) -> None:
    """An upload by a user: the stored document becomes theirs, unless it had an owner."""
    if owner_id is None:
        return
    with sessions() as session:
        acting.claim_documents(session=session, owner_id=owner_id, document_ids=[document_id])
        session.commit()


def _into_collection(
    job_id: int, collection_id: int | None, document_id: int, sessions: sessionmaker[Session]
) -> None:
    """An upload into a collection: the stored (or already present) document joins it."""
    if collection_id is None:
        return
    with sessions() as session:
        if collections.get_collection(session=session, collection_id=collection_id) is None:
            logger.info("ingest job %s: its collection was deleted meanwhile", job_id)
            return
        collections.add_documents(
            session=session, collection_id=collection_id, document_ids=[document_id]
        )
        session.commit()
