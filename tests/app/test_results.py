"""Saving summaries and answers once per job, on SQLite and PostgreSQL."""

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Answer, JobKind, Summary, SummaryMethod
from app.services import documents, jobs, results
from tests.app.test_services import new_document


def _document_and_job(session: Session, kind: JobKind = JobKind.SUMMARIZE) -> tuple[int, int]:
    document = documents.store_document(session=session, new=new_document())
    job = jobs.create_job(session=session, kind=kind, document_id=document.id)
    session.commit()
    return document.id, job.id


def test_a_second_save_for_the_same_job_returns_the_first(session: Session) -> None:
    document_id, job_id = _document_and_job(session)

    first = results.save_summary(
        session=session,
        job_id=job_id,
        document_id=document_id,
        method=SummaryMethod.ONE_PASS,
        text="one",
        model="m",
        stats={"num_sections": 1},
    )
    session.commit()
    again = results.save_summary(
        session=session,
        job_id=job_id,
        document_id=document_id,
        method="hierarchical",
        text="two",
        model="m",
    )
    session.commit()

    assert again.id == first.id and again.text == "one"
    assert session.scalar(select(func.count()).select_from(Summary)) == 1
    assert results.get_summary_for_job(session=session, job_id=job_id).stats == {"num_sections": 1}


def test_a_concurrent_save_loses_quietly(session: Session) -> None:
    # Two deliveries of one job in two sessions: both miss the other's row before inserting.
    if session.get_bind().dialect.name == "sqlite":
        pytest.skip("SQLite serializes writers: a reader with a stale snapshot cannot write")
    document_id, job_id = _document_and_job(session, JobKind.ANSWER)
    sessions = sessionmaker(bind=session.get_bind())
    kwargs = dict(
        job_id=job_id,
        document_id=document_id,
        question="q",
        cited_pages=[2],
        cited_passage_ids=[],
        model="m",
    )
    with sessions() as one, sessions() as two:
        assert results.get_answer_for_job(session=two, job_id=job_id) is None
        first = results.save_answer(session=one, answer="first", **kwargs)
        one.commit()
        second = results.save_answer(session=two, answer="second", **kwargs)
        two.commit()
        assert second.id == first.id and second.answer == "first"
    assert session.scalar(select(func.count()).select_from(Answer)) == 1


def test_documents_needing_summary_skips_summarized_and_already_tried(session: Session) -> None:
    plain = documents.store_document(session=session, new=new_document("plain"))
    summarized = documents.store_document(session=session, new=new_document("summarized"))
    tried = documents.store_document(session=session, new=new_document("tried"))
    job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=summarized.id)
    results.save_summary(
        session=session,
        job_id=job.id,
        document_id=summarized.id,
        method="one_pass",
        text="s",
        model="m",
    )
    failed = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=tried.id)
    jobs.fail_job(session=session, job_id=failed.id, error_code="x", sentence="It failed.")
    jobs.create_job(session=session, kind=JobKind.ANSWER, document_id=plain.id)
    session.commit()

    assert results.documents_needing_summary(session=session) == [plain.id]
    assert [s.id for s in results.list_summaries(session=session, document_id=summarized.id)] == [
        results.get_summary_for_job(session=session, job_id=job.id).id
    ]
