import threading
import time
from datetime import UTC
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import (
    Answer,
    Document,
    DocumentKind,
    DocumentStatus,
    Job,
    JobKind,
    JobStatus,
    Page,
    Passage,
    Summary,
    SummaryMethod,
)
from app.errors import DuplicateDocument
from app.services import documents, file_store, jobs
from app.services.documents import NewDocument
from tests.app.new_documents import new_document


def _summary(document_id: int, job_id: int | None) -> Summary:
    return Summary(
        document_id=document_id, job_id=job_id, method=SummaryMethod.ONE_PASS, text="s", model="m"
    )


def _count(session: Session, model: type, document_id: int) -> int:
    query = select(func.count()).select_from(model).where(model.document_id == document_id)
    return session.scalar(query)


def test_store_document_round_trip(session: Session) -> None:
    document_id = documents.store_document(session=session, new=new_document()).id
    session.commit()
    session.expunge_all()

    document = documents.get_document(session=session, document_id=document_id)
    assert document is not None
    assert (document.status, document.kind) == (DocumentStatus.READY, DocumentKind.LEGAL)
    assert (document.num_pages, document.num_chars, document.num_tokens) == (2, 31, 14)
    assert document.created_at.tzinfo == UTC
    assert documents.find_by_hash(session=session, content_hash=document.content_hash) == document
    pages = documents.get_pages(session=session, document_id=document.id)
    assert [(p.number, p.text) for p in pages] == [(1, "First page."), (2, "Second page, longer.")]
    assert [
        p.number for p in documents.get_pages(session=session, document_id=document.id, number=2)
    ] == [2]
    passages = documents.get_passages(session=session, document_id=document.id)
    assert [(p.ordinal, p.first_page, p.last_page) for p in passages] == [
        (0, 1, 1),
        (1, 1, 2),
        (2, 2, 2),
    ]
    on_page_1 = documents.get_passages(session=session, document_id=document.id, page_number=1)
    assert [p.ordinal for p in on_page_1] == [0, 1]
    by_id = documents.get_passages(
        session=session, document_id=document.id, passage_ids=[passages[2].id, 10**6]
    )
    assert [p.ordinal for p in by_id] == [2]


def test_missing_rows_are_none_or_empty(session: Session, tmp_path: Path) -> None:
    assert documents.get_document(session=session, document_id=999) is None
    assert documents.find_by_hash(session=session, content_hash="0" * 64) is None
    assert documents.get_pages(session=session, document_id=999) == []
    assert documents.delete_document(session=session, document_id=999, files_dir=tmp_path) is False


def test_duplicate_content_hash_is_refused_and_session_stays_usable(session: Session) -> None:
    first = documents.store_document(session=session, new=new_document("same"))
    session.commit()
    with pytest.raises(DuplicateDocument) as caught:
        documents.store_document(session=session, new=new_document("same"))
    assert caught.value.document_id == first.id
    documents.store_document(session=session, new=new_document("other"))
    session.commit()
    assert len(documents.list_documents(session=session)) == 2


def _until_waiting_or_done(engine, thread: threading.Thread, *, limit_s: float = 30.0) -> None:
    """Until `thread` ends or waits for an advisory lock (pg_locks), at most `limit_s`."""
    query = text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
    deadline = time.monotonic() + limit_s
    with engine.connect() as watcher:
        while thread.is_alive() and time.monotonic() < deadline:
            if watcher.execute(query).scalar():
                return
            watcher.rollback()
            time.sleep(0.02)


def test_a_store_begun_while_another_stores_the_file_waits_and_finds_it(
    session: Session, db_engine
) -> None:
    # One document a file is no longer the database's rule (migration 0015): on PostgreSQL the
    # second store waits for the first's transaction (an advisory lock) and then finds its row.
    if db_engine.dialect.name != "postgresql":
        pytest.skip("SQLite writes one transaction at a time (store_read begins IMMEDIATE)")
    first = documents.store_document(session=session, new=new_document("race"))  # not committed
    caught: list[BaseException] = []

    def other_process() -> None:
        with Session(db_engine) as other:
            try:
                documents.store_document(session=other, new=new_document("race"))
                other.commit()
            except DuplicateDocument as error:
                caught.append(error)

    thread = threading.Thread(target=other_process)
    thread.start()
    _until_waiting_or_done(db_engine, thread)  # its look-up must not come after our commit
    session.commit()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert [getattr(error, "document_id", None) for error in caught] == [first.id]
    assert session.scalar(select(func.count()).select_from(Document)) == 1


def test_a_file_may_be_several_documents_each_found_by_its_readers(session: Session) -> None:
    first = documents.store_document(session=session, new=new_document("shared"))
    session.flush()
    with pytest.raises(DuplicateDocument):  # found by whoever may read it
        documents.store_document(session=session, new=new_document("shared"))
    others = Document.id.not_in([first.id])  # a reader of every document but the first
    second = documents.store_document(session=session, new=new_document("shared"), readable=others)
    session.commit()
    assert second.id != first.id
    found = documents.find_by_hash(
        session=session, content_hash=first.content_hash, readable=others
    )
    assert found is not None and found.id == second.id


def test_list_documents_filters(session: Session) -> None:
    documents.store_document(session=session, new=new_document("1", title="Lease 100% final"))
    documents.store_document(
        session=session,
        new=new_document("2", kind=DocumentKind.MEDICAL, title=None, file_name="Discharge.pdf"),
    )
    documents.store_document(session=session, new=new_document("3", title="Purchase lease"))
    session.commit()

    def titles(**filters: object) -> list[str]:
        rows = documents.list_documents(session=session, **filters)
        return [row.title or row.file_name for row in rows]

    assert titles() == ["Purchase lease", "Discharge.pdf", "Lease 100% final"]  # newest first
    assert titles(kind=DocumentKind.MEDICAL) == ["Discharge.pdf"]
    assert titles(title_query="LEASE") == ["Purchase lease", "Lease 100% final"]
    assert titles(title_query="100%") == ["Lease 100% final"]
    assert titles(title_query="0%f") == []  # "%" is a character here, not a wildcard
    assert titles(title_query="discharge") == ["Discharge.pdf"]
    assert titles(status=DocumentStatus.FAILED) == []


def test_delete_cascades_to_everything_derived_and_removes_the_file(
    session: Session, tmp_path: Path
) -> None:
    files_dir = tmp_path / "files"
    new = new_document("doomed")
    path = file_store.store_file(files_dir=files_dir, content_hash=new.content_hash, data=b"doomed")
    document = documents.store_document(
        session=session, new=new_document("doomed", stored_path=str(path))
    )
    kept = documents.store_document(session=session, new=new_document("kept"))
    job = jobs.create_job(session=session, kind=JobKind.ANSWER, document_id=document.id)
    session.add_all(
        [
            _summary(document.id, job.id),
            Answer(document_id=document.id, question="q", answer="a", model="m"),
            Answer(document_id=kept.id, question="q", answer="a", model="m"),
        ]
    )
    session.commit()
    document_id, kept_id = document.id, kept.id

    assert documents.delete_document(session=session, document_id=document_id, files_dir=files_dir)
    session.commit()
    session.expunge_all()
    for model in (Page, Passage, Summary, Answer, Job):
        assert _count(session, model, document_id) == 0, model.__name__
    assert documents.get_document(session=session, document_id=document_id) is None
    assert not path.exists()
    assert _count(session, Page, kept_id) == 2
    assert _count(session, Answer, kept_id) == 1


def test_delete_never_touches_a_file_outside_files_dir(session: Session, tmp_path: Path) -> None:
    outside = tmp_path / "mine.pdf"
    outside.write_bytes(b"not ours")
    document = documents.store_document(
        session=session, new=new_document("outside", stored_path=str(outside))
    )
    session.commit()
    assert documents.delete_document(
        session=session, document_id=document.id, files_dir=tmp_path / "files"
    )
    assert outside.exists()


def test_job_lifecycle(session: Session) -> None:
    document_id = documents.store_document(session=session, new=new_document()).id
    job = jobs.create_job(session=session, kind=JobKind.ANSWER, params={"question": "Who pays?"})
    session.commit()
    assert (job.status, job.params, job.stats) == (JobStatus.QUEUED, {"question": "Who pays?"}, {})
    job_id = job.id

    jobs.start_job(session=session, job_id=job_id, task_id="celery-1")
    jobs.update_progress(session=session, job_id=job_id, stage="prefill", done=3, total=10)
    session.commit()
    session.expunge_all()
    running = jobs.get_job(session=session, job_id=job_id)
    assert running is not None
    assert (running.status, running.task_id, running.stage) == (
        JobStatus.RUNNING,
        "celery-1",
        "prefill",
    )
    assert (running.progress_done, running.progress_total) == (3, 10)
    assert running.started_at is not None and running.started_at.tzinfo == UTC

    jobs.finish_job(session=session, job_id=job_id, stats={"seconds": 1.5}, document_id=document_id)
    failed_id = jobs.create_job(session=session, kind=JobKind.INGEST).id
    jobs.fail_job(
        session=session, job_id=failed_id, error_code="encrypted", sentence="The PDF is locked."
    )
    session.commit()
    session.expunge_all()

    done = jobs.get_job(session=session, job_id=job_id)
    assert (done.status, done.stats, done.document_id) == (
        JobStatus.SUCCEEDED,
        {"seconds": 1.5},
        document_id,
    )
    assert done.finished_at is not None and done.finished_at >= done.started_at
    failed = jobs.get_job(session=session, job_id=failed_id)
    assert (failed.status, failed.error_code, failed.error) == (
        JobStatus.FAILED,
        "encrypted",
        "The PDF is locked.",
    )
    assert [j.id for j in jobs.list_jobs(session=session)] == [failed_id, job_id]
    assert [j.id for j in jobs.list_jobs(session=session, status=JobStatus.FAILED)] == [failed_id]
    assert [j.id for j in jobs.list_jobs(session=session, document_id=document_id)] == [job_id]
    assert jobs.list_jobs(session=session, kind=JobKind.SUMMARIZE) == []


def test_job_functions_return_none_for_a_missing_job(session: Session) -> None:
    assert jobs.get_job(session=session, job_id=404) is None
    assert jobs.start_job(session=session, job_id=404) is None
    assert jobs.update_progress(session=session, job_id=404, stage="s", done=0, total=1) is None
    assert jobs.finish_job(session=session, job_id=404) is None
    assert jobs.fail_job(session=session, job_id=404, error_code="x", sentence="x") is None


def test_one_summary_per_job(session: Session) -> None:
    document = documents.store_document(session=session, new=new_document())
    job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=document.id)
    # Several results without a job are fine; a second one for the same job is not.
    session.add_all([_summary(document.id, None), _summary(document.id, None)])
    session.add(_summary(document.id, job.id))
    session.commit()
    session.add(_summary(document.id, job.id))
    with pytest.raises(IntegrityError):
        session.commit()


def test_new_document_checks_the_hash_format() -> None:
    with pytest.raises(ValueError, match="sha256"):
        NewDocument(
            content_hash="ABC",
            file_name="x.pdf",
            kind=DocumentKind.OTHER,
            num_tokens=0,
            pages=(),
            passages=(),
        )


def test_progress_never_moves_backwards_within_a_stage(session: Session) -> None:
    job_id = jobs.create_job(session=session, kind=JobKind.SUMMARIZE).id
    jobs.start_job(session=session, job_id=job_id)

    def progress(stage: str, done: int, total: int) -> tuple[str | None, int, int]:
        job = jobs.update_progress(
            session=session, job_id=job_id, stage=stage, done=done, total=total
        )
        assert job is not None
        return job.stage, job.progress_done, job.progress_total

    assert progress("writing", 61, 512) == ("writing", 61, 512)
    # The same stage starting over (a redelivered task, another call) keeps 61 of 512 ...
    assert progress("writing", 3, 512) == ("writing", 61, 512)
    assert progress("writing", 62, 512) == ("writing", 62, 512)
    # ... and a smaller fraction of a new total too, while the stage's details move on.
    assert progress("combining (3 of 5 calls done)", 100, 256) == (
        "combining (3 of 5 calls done)",
        100,
        256,
    )
    assert progress("combining (4 of 5 calls done)", 10, 128) == (
        "combining (4 of 5 calls done)",
        100,
        256,
    )
    # Another stage measures something else: it starts from its own beginning.
    assert progress("parsing", 1, 7) == ("parsing", 1, 7)
