"""A model job whose document (or collection) is deleted while it runs: it saves nothing, a
document stored meanwhile never gets its result, and, with the real default model, its model
calls stop at once and the engine's requests are freed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobKind, JobStatus, Summary
from app.services import collections, documents, jobs, results
from engine import EngineConfig, LLMEngine
from tests.app.new_documents import new_document
from tests.pipelines import pdf_factory
from tests.worker import celery_support
from worker.ingest.store import IngestOptions
from worker.jobs import ingest as runner_ingest
from worker.jobs import job_run, run_claim
from worker.jobs import summary as summary_run
from worker.model.adapter import EngineChatModel

MAX_NEW_TOKENS = 160
DELETE_AT_TOKEN = 8
PAGES = [
    "Lease agreement.\nThe tenant pays rent of 1,200 dollars on the first day of each month. "
    "The landlord repairs the roof and the heating. The lease runs for two years.",
    "Termination.\nEither party may end the lease with 60 days of written notice. A tenant who "
    "leaves early pays two months of rent. The deposit is returned within 30 days.",
]


@pytest.fixture
def sessions(session: Session) -> sessionmaker[Session]:
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


def _document_and_job(sessions, seed: str) -> tuple[int, int]:
    with sessions() as session:
        document = documents.store_document(session=session, new=new_document(seed))
        job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=document.id)
        session.commit()
        return document.id, job.id


def _summaries(sessions) -> list[tuple[int, int | None]]:
    with sessions() as session:
        return [(s.document_id, s.job_id) for s in session.scalars(select(Summary))]


def _save_summary(job_id: int):
    def save(session: Session, document_id: int) -> job_run.Saved:
        results.save_summary(
            session=session,
            job_id=job_id,
            document_id=document_id,
            method="one_pass",
            text="The deleted lease.",
            model="m",
        )
        return job_run.Saved({}, f"document={document_id}")

    return save


def test_a_job_whose_document_is_deleted_while_it_runs_saves_nothing(
    sessions, tmp_path: Path
) -> None:
    document_id, job_id = _document_and_job(sessions, "old")
    new_ids: list[tuple[int, int]] = []

    def compute(job: Job) -> int:
        # While the model works: the document (and its job) is deleted, a new one is stored.
        with sessions() as session:
            documents.delete_document(session=session, document_id=document_id, files_dir=tmp_path)
            session.commit()
        new_ids.append(_document_and_job(sessions, "new"))
        return job.document_id

    outcome = job_run.run_model_job(
        job_id,
        JobKind.SUMMARIZE,
        "summarize",
        sessions,
        None,
        compute=compute,
        save=_save_summary(job_id),
    )

    assert outcome.status == job_run.MISSING
    assert _summaries(sessions) == []
    ((new_document_id, new_job_id),) = new_ids
    assert (new_document_id, new_job_id) != (document_id, job_id)
    with sessions() as session:
        assert session.get(Job, new_job_id).status == JobStatus.QUEUED
        assert results.get_summary_for_job(session=session, job_id=new_job_id) is None


def test_a_job_another_run_took_over_is_saved_by_that_run_only(sessions) -> None:
    _, job_id = _document_and_job(sessions, "taken")

    def compute(job: Job) -> int:
        time.sleep(0.01)  # the other run's start is a later moment
        with sessions() as session:  # a redelivery starts the job again meanwhile
            jobs.start_job(session=session, job_id=job_id)
            session.commit()
        return job.document_id

    outcome = job_run.run_model_job(
        job_id,
        JobKind.SUMMARIZE,
        "summarize",
        sessions,
        None,
        compute=compute,
        save=_save_summary(job_id),
    )

    assert outcome.status == job_run.SKIPPED
    assert _summaries(sessions) == []
    with sessions() as session:
        assert session.get(Job, job_id).status == JobStatus.RUNNING  # the other run's


def test_a_collection_question_whose_collection_is_deleted_saves_nothing(sessions) -> None:
    with sessions() as session:
        collection = collections.create_collection(session=session, name="Leases")
        session.flush()
        job = jobs.create_job(session=session, kind=JobKind.ANSWER)
        job.collection_id = collection.id
        session.commit()
        collection_id, job_id = collection.id, job.id
    saved: list[int] = []

    def compute(job: Job) -> int:
        with sessions() as session:
            collections.delete_collection(session=session, collection_id=collection_id)
            collections.create_collection(session=session, name="Leases")
            session.commit()
        return 0

    def save(session: Session, _: int) -> job_run.Saved:
        saved.append(job_id)
        return job_run.Saved({}, "")

    outcome = job_run.run_model_job(
        job_id, JobKind.ANSWER, "collection question", sessions, None, compute=compute, save=save,
        is_saved=lambda **_: None,
    )  # fmt: skip

    assert outcome.status == job_run.MISSING
    assert saved == []


def test_a_run_saves_when_nothing_was_deleted(sessions) -> None:
    document_id, job_id = _document_and_job(sessions, "kept")

    outcome = job_run.run_model_job(
        job_id,
        JobKind.SUMMARIZE,
        "summarize",
        sessions,
        None,
        compute=lambda job: job.document_id,
        save=_save_summary(job_id),
    )

    assert outcome.status == job_run.SUCCEEDED
    assert _summaries(sessions) == [(document_id, job_id)]


# ---- with the real default model -------------------------------------------------------------


@pytest.fixture(scope="module")
def model(converted_model_cache: Path) -> EngineChatModel:
    """One engine and its one loop thread for the module (two loops must never step one engine)."""
    gguf = celery_support.default_gguf()
    config = EngineConfig(model_path=gguf, model_cache_dir=converted_model_cache, device="cpu")
    return EngineChatModel(LLMEngine(config), "smollm2-135m-instruct")


class _Watched:
    """The real model, watched: its calls and the tokens it writes are counted, and the job's
    document is deleted as its DELETE_AT_TOKEN-th token comes (in the task's own thread, as a
    person's delete lands between two of the model's tokens)."""

    def __init__(self, model: EngineChatModel, delete) -> None:
        self.model, self.delete = model, delete
        self.name, self.max_context_tokens = model.name, model.max_context_tokens
        self.count_tokens, self.count_chat_tokens = model.count_tokens, model.count_chat_tokens
        self.tokens = self.calls_after_delete = self.tokens_after_delete = 0
        self.steps_at_delete: int | None = None

    def complete(self, messages, **kwargs):
        (completion,) = self.complete_many([messages], **kwargs)
        return completion

    def complete_many(self, conversations, *, on_tokens=None, **kwargs):
        if self.steps_at_delete is not None:
            self.calls_after_delete += 1

        def counted(written: int, limit: int) -> None:
            self.tokens += 1
            if self.steps_at_delete is not None:
                self.tokens_after_delete += 1
            elif self.tokens == DELETE_AT_TOKEN:
                self.steps_at_delete = self.model._engine.num_steps
                self.delete()
            if on_tokens is not None:
                on_tokens(written, limit)

        return self.model.complete_many(conversations, on_tokens=counted, **kwargs)


@pytest.mark.slow
def test_a_summary_of_a_deleted_document_stops_the_model_at_once(
    sessions, tmp_path, count_tokens, model, monkeypatch
) -> None:
    monkeypatch.setattr(run_claim, "CHECK_INTERVAL_S", 0.0)  # every token is checked
    pdf = pdf_factory.text_pdf(tmp_path, PAGES, name="lease.pdf")
    stored = pdf.rename(tmp_path / f"{'0' * 64}.pdf")
    with sessions() as session:
        ingest = jobs.create_job(
            session=session,
            kind=JobKind.INGEST,
            params={"path": str(stored), "file_name": "lease.pdf", "then_summarize": True},
        )
        session.commit()
    ingested = runner_ingest.run_ingest(
        ingest.id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=64),
        count_tokens=count_tokens,
    )
    (job_id,) = ingested.follow_up_job_ids
    with sessions() as session:
        document_id = session.get(Job, job_id).document_id

    def delete() -> None:
        with sessions() as session:
            documents.delete_document(
                session=session, document_id=document_id, files_dir=tmp_path / "files"
            )
            session.commit()

    engine = model._engine
    watched = _Watched(model, delete)
    outcome = summary_run.run_summary(
        job_id, sessions=sessions, model_factory=lambda: watched, max_new_tokens=MAX_NEW_TOKENS
    )

    assert outcome.status == job_run.MISSING
    assert watched.steps_at_delete is not None, "the model wrote fewer tokens than expected"
    assert (watched.calls_after_delete, watched.tokens_after_delete) == (0, 0)
    deadline = time.monotonic() + 60  # only catches a hang
    while engine.has_unfinished_requests() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not engine.has_unfinished_requests()  # its requests were aborted, their blocks freed
    # The engine's loop stepped on only until it read the abort: far fewer steps than the
    # MAX_NEW_TOKENS the summary could still have written.
    assert engine.num_steps - watched.steps_at_delete < MAX_NEW_TOKENS // 4
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Summary)) == 0
