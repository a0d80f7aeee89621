"""The read-only lookups the pages use (jobs by id, a document's jobs, counts by status, answers,
summarized documents), on SQLite and PostgreSQL."""

from datetime import timedelta

from sqlalchemy.orm import Session

from app.db.models import Answer, Job, JobKind, JobStatus, Summary, SummaryMethod, utc_now
from app.services import documents, jobs, results
from tests.app.test_services import new_document


def _document(session: Session, seed: str = "a") -> int:
    document = documents.store_document(session=session, new=new_document(seed))
    session.flush()
    return document.id


def test_get_jobs_returns_those_that_exist_by_id(session: Session) -> None:
    first = jobs.create_job(session=session, kind=JobKind.INGEST)
    second = jobs.create_job(session=session, kind=JobKind.INGEST)
    session.commit()

    found = jobs.get_jobs(session=session, job_ids=[second.id, first.id, second.id + 100])

    assert set(found) == {first.id, second.id}
    assert found[first.id] is first
    assert jobs.get_jobs(session=session, job_ids=[]) == {}


def test_list_document_jobs_is_the_newest_of_a_kind_oldest_first(session: Session) -> None:
    document_id = _document(session)
    other_id = _document(session, "b")
    start = utc_now()
    asked = []
    for minutes in range(4):
        job = jobs.create_job(session=session, kind=JobKind.ANSWER, document_id=document_id)
        job.created_at = start + timedelta(minutes=minutes)
        asked.append(job.id)
    jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=document_id)
    jobs.create_job(session=session, kind=JobKind.ANSWER, document_id=other_id)
    session.commit()

    listed = jobs.list_document_jobs(session=session, document_id=document_id, kind=JobKind.ANSWER)
    newest_two = jobs.list_document_jobs(
        session=session, document_id=document_id, kind=JobKind.ANSWER, limit=2
    )

    assert [job.id for job in listed] == asked
    assert [job.id for job in newest_two] == asked[2:]


def test_count_by_status_names_every_status(session: Session) -> None:
    assert jobs.count_by_status(session=session) == {status: 0 for status in JobStatus}
    for _ in range(2):
        jobs.create_job(session=session, kind=JobKind.INGEST)
    failed = jobs.create_job(session=session, kind=JobKind.INGEST)
    jobs.fail_job(session=session, job_id=failed.id, error_code="x", sentence="Failed.")
    session.commit()

    counts = jobs.count_by_status(session=session)

    assert counts[JobStatus.QUEUED] == 2 and counts[JobStatus.FAILED] == 1
    assert counts[JobStatus.RUNNING] == 0 and set(counts) == set(JobStatus)


def test_list_answers_is_a_document_s_conversation_oldest_first(session: Session) -> None:
    document_id = _document(session)
    other_id = _document(session, "b")
    start = utc_now()
    for minutes, question in ((2, "later"), (1, "earlier")):
        session.add(
            Answer(
                document_id=document_id,
                question=question,
                answer="a",
                model="m",
                created_at=start + timedelta(minutes=minutes),
            )
        )
    session.add(Answer(document_id=other_id, question="elsewhere", answer="a", model="m"))
    session.commit()

    answers = results.list_answers(session=session, document_id=document_id)

    assert [answer.question for answer in answers] == ["earlier", "later"]


def test_summarized_document_ids_counts_each_document_once(session: Session) -> None:
    summarized, unsummarized = _document(session), _document(session, "b")
    for _ in range(2):
        job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=summarized)
        session.add(
            Summary(
                document_id=summarized,
                job_id=job.id,
                method=SummaryMethod.ONE_PASS,
                text="s",
                model="m",
            )
        )
    session.add(Job(kind=JobKind.SUMMARIZE, status=JobStatus.QUEUED, document_id=unsummarized))
    session.commit()

    assert results.summarized_document_ids(session=session) == {summarized}
