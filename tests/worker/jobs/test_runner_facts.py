"""The key-facts job (worker/jobs/facts.py) called directly, without Celery: created after
ingest, progress per field, saved once, a redelivery skipped; and once with the real model."""

from __future__ import annotations

from pathlib import Path

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import FactSource, Job, JobKind, JobStatus
from app.services import facts as fact_service
from app.services import jobs
from app.settings import get_settings
from pipelines.facts.fields import schema_for
from tests.pipelines import pdf_factory
from tests.pipelines.facts_documents import CONTRACT_PAGES, ScriptedModel
from tests.worker import celery_support
from worker.ingest.store import IngestOptions
from worker.jobs import answer as answer_run
from worker.jobs import facts as runner_facts
from worker.jobs import ingest as runner_ingest
from worker.jobs import job_run
from worker.jobs import summary as summary_run


@pytest.fixture
def sessions(session: Session) -> sessionmaker[Session]:
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


def _ingest_with_facts(sessions, tmp_path: Path, count_tokens) -> job_run.RunOutcome:
    path = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="supply.pdf")
    with sessions() as session:
        job = jobs.create_job(
            session=session,
            kind=JobKind.INGEST,
            params={"path": str(path), "file_name": path.name, "then_facts": True},
        )
        session.commit()
    return runner_ingest.run_ingest(
        job.id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=96),
        count_tokens=count_tokens,
    )


def _no_model():
    raise AssertionError("the model must not be needed")


def test_ingest_creates_the_facts_job_and_it_saves_each_field_once(
    sessions, tmp_path, count_tokens
) -> None:
    ingest = _ingest_with_facts(sessions, tmp_path, count_tokens)
    assert ingest.follow_up_job_ids == () and ingest.facts_job_id is not None
    job_id = ingest.facts_job_id
    progress: list[tuple[int, int]] = []

    def record(_session: Session) -> None:
        with sessions() as reader:
            job = reader.get(Job, job_id)
            if job.stage == runner_facts.STAGE and job.progress_total:
                progress.append((job.progress_done, job.progress_total))

    model = ScriptedModel({"Which state's or country's law governs this agreement?": "Oregon"})
    event.listen(sessions, "after_commit", record)
    try:
        first = runner_facts.run_facts(job_id, sessions=sessions, model_factory=lambda: model)
    finally:
        event.remove(sessions, "after_commit", record)
    again = runner_facts.run_facts(job_id, sessions=sessions, model_factory=_no_model)

    assert (first.status, again.status) == (job_run.SUCCEEDED, job_run.SKIPPED)
    num_fields = len(schema_for("contract"))
    # Written at most once a second (worker/jobs/progress.py), the end always.
    assert progress[-1] == (num_fields, num_fields)
    with sessions() as session:
        job = session.get(Job, job_id)
        assert job.status == JobStatus.SUCCEEDED and job.stats["subkind"] == "contract"
        rows = fact_service.list_facts(session=session, document_id=job.document_id)
        assert len(rows) == num_fields and [r.position for r in rows] == list(range(num_fields))
        law = next(r for r in rows if r.field == "governing_law")
        assert (law.value, law.source, law.page, law.model) == (
            "Oregon",
            FactSource.MODEL,
            3,
            "scripted-test",
        )
        assert "laws of the State of Oregon" in law.evidence[0]["text"]


def test_a_redelivery_after_the_facts_were_saved_needs_no_model(
    sessions, tmp_path, count_tokens
) -> None:
    ingest = _ingest_with_facts(sessions, tmp_path, count_tokens)
    job_id = ingest.facts_job_id
    with sessions() as session:
        document_id = session.get(Job, job_id).document_id
        jobs.start_job(session=session, job_id=job_id)
        fact_service.save_facts(
            session=session,
            job_id=job_id,
            document_id=document_id,
            facts=[fact_service.NewFact("parties", "Parties", 0, "A; B", "A; B", 0.5, "rule")],
            model="m",
        )
        session.commit()

    outcome = runner_facts.run_facts(job_id, sessions=sessions, model_factory=_no_model)

    assert outcome.status == job_run.SUCCEEDED
    with sessions() as session:
        assert session.get(Job, job_id).status == JobStatus.SUCCEEDED


def test_a_facts_job_for_a_deleted_document_fails_with_a_sentence(sessions) -> None:
    with sessions() as session:
        job_id = jobs.create_job(session=session, kind=JobKind.FACTS).id
        session.commit()
    outcome = runner_facts.run_facts(job_id, sessions=sessions, model_factory=_no_model)
    assert outcome.status == job_run.FAILED
    with sessions() as session:
        assert session.get(Job, job_id).error == "The document of this job does not exist any more."


@pytest.mark.slow
def test_the_real_model_finds_the_governing_law_on_its_page(
    sessions, tmp_path, count_tokens, converted_model_cache
) -> None:
    if sessions.kw["bind"].dialect.name != "sqlite":
        pytest.skip("the model's part is the same on both databases: once, on SQLite, is enough")
    from engine import EngineConfig, LLMEngine
    from worker.model.adapter import EngineChatModel

    gguf = celery_support.default_gguf()
    config = EngineConfig(model_path=gguf, model_cache_dir=converted_model_cache, device="cpu")
    model = EngineChatModel(LLMEngine(config), "smollm2-135m-instruct")
    job_id = _ingest_with_facts(sessions, tmp_path, count_tokens).facts_job_id

    outcome = runner_facts.run_facts(job_id, sessions=sessions, model_factory=lambda: model)

    assert outcome.status == job_run.SUCCEEDED
    with sessions() as session:
        document_id = session.get(Job, job_id).document_id
        facts = {
            f.field: f for f in fact_service.list_facts(session=session, document_id=document_id)
        }
    law = facts["governing_law"]
    # Whatever the small model wrote, the stored value is the quoted one, on its page.
    assert (law.normalized_value, law.page) == ("Oregon", 3)
    assert law.source in (FactSource.MODEL, FactSource.RULE)
    assert (facts["agreement_date"].normalized_value, facts["agreement_date"].page) == (
        "2021-03-14",
        1,
    )
    assert "Quillfeather Instruments, Inc." in facts["parties"].value


def test_a_job_stopped_at_its_time_limit_says_its_own_kind_and_limit(
    sessions, tmp_path, count_tokens, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LONGDOC_MODEL_TIME_LIMIT_S", "7200")
    get_settings.cache_clear()
    ingest = _ingest_with_facts(sessions, tmp_path, count_tokens)
    with sessions() as session:
        document_id = session.get(Job, ingest.facts_job_id).document_id
        summary = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=document_id)
        answer = jobs.create_job(
            session=session,
            kind=JobKind.ANSWER,
            document_id=document_id,
            params={"question": "Which law governs?"},
        )
        session.commit()

    def stopped():  # Celery's soft time limit, raised in the task where it stands
        raise SoftTimeLimitExceeded()

    try:
        runner_facts.run_facts(ingest.facts_job_id, sessions=sessions, model_factory=stopped)
        summary_run.run_summary(
            summary.id, sessions=sessions, model_factory=stopped, max_new_tokens=8
        )
        answer_run.run_answer(answer.id, sessions=sessions, model_factory=stopped, max_new_tokens=8)
    finally:
        get_settings.cache_clear()

    with sessions() as session:
        rows = [session.get(Job, i) for i in (ingest.facts_job_id, summary.id, answer.id)]
        assert {(row.status, row.error_code) for row in rows} == {(JobStatus.FAILED, "timed_out")}
        assert [row.error for row in rows] == [
            f"This {kind} job ran longer than its time limit of 2 hours and was stopped; "
            "LONGDOC_MODEL_TIME_LIMIT_S allows more."
            for kind in ("key-facts", "summary", "question")
        ]


def test_with_key_facts_after_ingest_off_no_facts_job_follows(
    sessions, tmp_path, count_tokens
) -> None:
    path = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="supply.pdf")
    with sessions() as session:
        job = jobs.create_job(
            session=session, kind=JobKind.INGEST, params={"path": str(path), "file_name": "s.pdf"}
        )
        session.commit()
    options = IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=96, key_facts=False)

    outcome = runner_ingest.run_ingest(
        job.id, sessions=sessions, options=options, count_tokens=count_tokens
    )

    assert outcome.status == job_run.SUCCEEDED and outcome.facts_job_id is None
    with sessions() as session:
        assert jobs.list_jobs(session=session, kind=JobKind.FACTS) == []
