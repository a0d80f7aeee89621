"""The task bodies (worker/jobs/summary.py, answer.py) called directly, without Celery, with the real model."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Answer, Document, Job, JobKind, JobStatus, Summary
from app.services import jobs, results
from engine import EngineConfig, LLMEngine
from tests.pipelines import pdf_factory
from tests.worker import celery_support
from worker.ingest.store import IngestOptions
from worker.jobs import answer as answer_run
from worker.jobs import ingest as runner_ingest
from worker.jobs import job_run
from worker.jobs import summary as summary_run
from worker.model.adapter import EngineChatModel

MAX_NEW_TOKENS = 24
PAGES = [
    "Discharge summary.\nThe patient received amoxicillin 500 mg three times daily.",
    "Follow-up.\nThe patient should return in 14 days for a blood test.",
]


@pytest.fixture(scope="module")
def model(converted_model_cache: Path) -> EngineChatModel:
    gguf = celery_support.default_gguf()
    config = EngineConfig(model_path=gguf, model_cache_dir=converted_model_cache, device="cpu")
    return EngineChatModel(LLMEngine(config), "smollm2-135m-instruct")


@pytest.fixture
def sessions(session: Session) -> sessionmaker[Session]:
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


def _ingest_job(sessions, tmp_path, path: Path, **params) -> int:
    with sessions() as session:
        job = jobs.create_job(
            session=session,
            kind=JobKind.INGEST,
            params={"path": str(path), "file_name": path.name} | params,
        )
        session.commit()
        return job.id


def _stored_document(sessions, tmp_path, count_tokens) -> tuple[int, job_run.RunOutcome]:
    path = pdf_factory.text_pdf(tmp_path, PAGES, name="discharge.pdf")
    # As the CLI and the inbox do: the file sits in the store under its content hash.
    stored = path.rename(tmp_path / f"{'0' * 64}.pdf")
    job_id = _ingest_job(sessions, tmp_path, stored, then_summarize=True, file_name=path.name)
    outcome = runner_ingest.run_ingest(
        job_id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=32),
        count_tokens=count_tokens,
    )
    with sessions() as session:
        return session.get(Job, job_id).document_id, outcome


def _count(sessions, model_class) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).select_from(model_class))


def test_ingest_stores_and_creates_the_follow_up_summary_job(
    sessions, tmp_path, count_tokens
) -> None:
    document_id, outcome = _stored_document(sessions, tmp_path, count_tokens)

    assert outcome.status == job_run.SUCCEEDED and document_id is not None
    with sessions() as session:
        assert session.get(Document, document_id).file_name == "discharge.pdf"
    (follow_up,) = outcome.follow_up_job_ids
    with sessions() as session:
        job = session.get(Job, follow_up)
        assert (job.kind, job.status, job.document_id) == (
            JobKind.SUMMARIZE,
            JobStatus.QUEUED,
            document_id,
        )
        assert session.get(Job, outcome.job_id).stats["follow_up_job_id"] == follow_up


def test_no_commit_shows_the_ingest_job_done_without_its_summary_job(
    sessions, tmp_path, count_tokens
) -> None:
    # The upload page stops polling once none of its jobs is open: had the ingest job been
    # committed as done before its follow-up existed, a page reading in between would never
    # show the summary job (seen once in the browser test).
    path = pdf_factory.text_pdf(tmp_path, PAGES, name="discharge.pdf")
    job_id = _ingest_job(sessions, tmp_path, path, then_summarize=True)
    seen: list[tuple[JobStatus, int | None]] = []

    def read_after_commit(_session: Session) -> None:
        with sessions() as reader:  # another connection: what any reader sees now
            job = reader.get(Job, job_id)
            seen.append((job.status, (job.stats or {}).get("follow_up_job_id")))

    event.listen(sessions, "after_commit", read_after_commit)
    try:
        outcome = runner_ingest.run_ingest(
            job_id,
            sessions=sessions,
            options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=32),
            count_tokens=count_tokens,
        )
    finally:
        event.remove(sessions, "after_commit", read_after_commit)

    (follow_up,) = outcome.follow_up_job_ids
    done = [follow_up_id for status, follow_up_id in seen if status == JobStatus.SUCCEEDED]
    assert done and all(follow_up_id == follow_up for follow_up_id in done), seen


def test_a_bad_pdf_fails_its_job_with_a_sentence(sessions, tmp_path, count_tokens) -> None:
    job_id = _ingest_job(sessions, tmp_path, pdf_factory.garbage_pdf(tmp_path))

    outcome = runner_ingest.run_ingest(
        job_id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files"),
        count_tokens=count_tokens,
    )

    assert outcome.status == job_run.FAILED
    with sessions() as session:
        job = session.get(Job, job_id)
        assert job.status == JobStatus.FAILED and job.error_code == "damaged_pdf"
        assert job.error.endswith(".")


@pytest.mark.parametrize(("password", "status"), [("s3cret", "succeeded"), ("wrong", "failed")])
def test_the_password_leaves_the_job_row_once_ingest_ends(
    sessions, tmp_path, count_tokens, password, status
) -> None:
    plain = pdf_factory.text_pdf(tmp_path, PAGES, name="plain.pdf")
    locked = pdf_factory.encrypted_pdf(plain, user_password="s3cret", owner_password="owner")
    job_id = _ingest_job(sessions, tmp_path, locked, password=password)

    outcome = runner_ingest.run_ingest(
        job_id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files"),
        count_tokens=count_tokens,
    )

    assert outcome.status == status
    with sessions() as session:
        job = session.get(Job, job_id)
        assert "password" not in job.params
        assert job.params["file_name"] == "locked.pdf"


def test_summary_is_saved_once_and_a_second_delivery_is_skipped(
    sessions, tmp_path, count_tokens, model
) -> None:
    document_id, ingest = _stored_document(sessions, tmp_path, count_tokens)
    (job_id,) = ingest.follow_up_job_ids

    first = summary_run.run_summary(
        job_id, sessions=sessions, model_factory=lambda: model, max_new_tokens=MAX_NEW_TOKENS
    )
    again = summary_run.run_summary(
        job_id, sessions=sessions, model_factory=lambda: model, max_new_tokens=MAX_NEW_TOKENS
    )

    assert (first.status, again.status) == (job_run.SUCCEEDED, job_run.SKIPPED)
    assert _count(sessions, Summary) == 1
    with sessions() as session:
        job = session.get(Job, job_id)
        assert job.status == JobStatus.SUCCEEDED and job.stage == "done"
        assert job.progress_total > 0 and job.progress_done == job.progress_total
        summary = results.get_summary_for_job(session=session, job_id=job_id)
        assert summary.document_id == document_id and summary.text
        assert summary.model == "smollm2-135m-instruct"


def test_redelivery_after_the_summary_was_saved_needs_no_model(
    sessions, tmp_path, count_tokens
) -> None:
    # The worker died between saving the summary and marking the job: the job is still running.
    document_id, ingest = _stored_document(sessions, tmp_path, count_tokens)
    (job_id,) = ingest.follow_up_job_ids
    with sessions() as session:
        jobs.start_job(session=session, job_id=job_id)
        results.save_summary(
            session=session,
            job_id=job_id,
            document_id=document_id,
            method="one_pass",
            text="Saved by the first delivery.",
            model="m",
        )
        session.commit()

    def no_model():
        raise AssertionError("the model must not run again")

    outcome = summary_run.run_summary(
        job_id, sessions=sessions, model_factory=no_model, max_new_tokens=MAX_NEW_TOKENS
    )

    assert outcome.status == job_run.SUCCEEDED
    assert _count(sessions, Summary) == 1


def test_answer_is_saved_with_pages_of_the_document(
    sessions, tmp_path, count_tokens, model
) -> None:
    document_id, _ = _stored_document(sessions, tmp_path, count_tokens)
    with sessions() as session:
        job = jobs.create_job(
            session=session,
            kind=JobKind.ANSWER,
            document_id=document_id,
            params={"question": "When should the patient come back?"},
        )
        session.commit()

    outcome = answer_run.run_answer(
        job.id, sessions=sessions, model_factory=lambda: model, max_new_tokens=MAX_NEW_TOKENS
    )

    assert outcome.status == job_run.SUCCEEDED
    with sessions() as session:
        (answer,) = session.scalars(select(Answer)).all()
        assert answer.job_id == job.id and answer.question.startswith("When")
        assert set(answer.cited_pages) <= {1, 2}
        assert session.get(Job, job.id).status == JobStatus.SUCCEEDED


def test_a_question_reads_its_job_and_passages_once_and_tokenizes_its_prompt_once(
    sessions, tmp_path, count_tokens, model, monkeypatch
) -> None:
    document_id, _ = _stored_document(sessions, tmp_path, count_tokens)
    with sessions() as session:
        job = jobs.create_job(
            session=session,
            kind=JobKind.ANSWER,
            document_id=document_id,
            params={"question": "When should the patient come back?"},
        )
        session.commit()
    statements: list[str] = []
    templated: list[str] = []
    sent: list[str] = []
    engine = model._engine
    apply_chat_template = engine.apply_chat_template
    complete_many = model.complete_many

    def counted_template(messages):
        templated.append(repr(messages))
        return apply_chat_template(messages)

    def counted_complete_many(conversations, **options):
        sent.extend(repr(list(m)) for m in conversations)
        return complete_many(conversations, **options)

    def on_execute(conn, cursor, statement, parameters, context, executemany) -> None:
        statements.append(" ".join(statement.split()).lower())

    monkeypatch.setattr(engine, "apply_chat_template", counted_template)
    monkeypatch.setattr(model, "complete_many", counted_complete_many)
    bind = sessions.kw["bind"]
    event.listen(bind, "before_cursor_execute", on_execute)
    try:
        outcome = answer_run.run_answer(
            job.id, sessions=sessions, model_factory=lambda: model, max_new_tokens=MAX_NEW_TOKENS
        )
    finally:
        event.remove(bind, "before_cursor_execute", on_execute)

    assert outcome.status == job_run.SUCCEEDED
    passage_reads = [s for s in statements if s.startswith("select") and " from passages" in s]
    assert len(passage_reads) == 1, passage_reads
    # Claimed in one transaction before the document is read: the job's row read once.
    before_work = statements[: statements.index(passage_reads[0])]
    job_reads = [s for s in before_work if s.startswith("select jobs.id")]
    assert len(job_reads) == 1, job_reads
    assert sent and all(templated.count(prompt) == 1 for prompt in sent)


def test_a_job_without_question_or_document_fails_with_a_sentence(sessions, model) -> None:
    with sessions() as session:
        no_question = jobs.create_job(session=session, kind=JobKind.ANSWER, document_id=None)
        no_document = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=None)
        session.commit()

    asked = answer_run.run_answer(
        no_question.id, sessions=sessions, model_factory=lambda: model, max_new_tokens=8
    )
    summarized = summary_run.run_summary(
        no_document.id, sessions=sessions, model_factory=lambda: model, max_new_tokens=8
    )
    missing = summary_run.run_summary(
        10_000, sessions=sessions, model_factory=lambda: model, max_new_tokens=8
    )

    assert (asked.status, summarized.status, missing.status) == (
        job_run.FAILED,
        job_run.FAILED,
        job_run.MISSING,
    )
    with sessions() as session:
        assert session.get(Job, no_question.id).error_code == "no_question"
        assert session.get(Job, no_document.id).error == (
            "The document of this job does not exist any more."
        )
