"""The embedded database's writers queue for SQLite's write lock instead of failing: WAL, a busy
timeout, and BEGIN IMMEDIATE for write transactions (app/db/session.py), through the app's own
sessions and job services, from two threads at once."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import Engine, event

from app.db.models import JobKind
from app.db.session import make_engine, session_factory, write_transaction
from app.migrate import upgrade
from app.services import jobs

ROUNDS = 150


def _engine(tmp_path: Path) -> Engine:
    url = f"sqlite:///{tmp_path / 'longdoc.db'}"
    upgrade(url)
    return make_engine(url)


def _begins(engine: Engine) -> list[str]:
    """The BEGIN statements SQLite runs on the engine's new connections, in order."""
    seen: list[str] = []

    @event.listens_for(engine, "connect")
    def _trace(dbapi_connection, _record) -> None:
        dbapi_connection.set_trace_callback(
            lambda statement: seen.append(statement) if statement.startswith("BEGIN") else None
        )

    engine.dispose()  # connections opened from now on are traced
    return seen


def _hammer(sessions, job_ids: list[int], *, mark: bool) -> list[str]:
    """Two threads, each updating its job's progress ROUNDS times after reading the other's
    row in the same transaction (read, then write); the errors they met. `mark`: the read-first
    transactions are marked writes (write_transaction), as the workers' steps mark theirs."""
    errors: list[str] = []

    def work(own: int, other: int) -> None:
        for done in range(ROUNDS):
            try:
                with sessions() as session:
                    if mark:  # as the workers' read-then-write steps are
                        write_transaction(session)
                    jobs.get_job(session=session, job_id=other)
                    jobs.update_progress(
                        session=session, job_id=own, stage="writing", done=done, total=ROUNDS
                    )
                    session.commit()
            except Exception as error:  # what the test counts: any failure at all
                errors.append(f"{type(error).__name__}: {str(error).splitlines()[0]}")

    threads = [
        threading.Thread(target=work, args=(job_ids[0], job_ids[1])),
        threading.Thread(target=work, args=(job_ids[1], job_ids[0])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def _two_jobs(sessions) -> list[int]:
    with sessions() as session:
        ids = [jobs.create_job(session=session, kind=JobKind.SUMMARIZE).id for _ in range(2)]
        session.commit()
        return ids


def test_two_threads_writing_job_rows_never_meet_database_is_locked(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    sessions = session_factory(engine)
    job_ids = _two_jobs(sessions)
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"

    errors = _hammer(sessions, job_ids, mark=True)

    assert errors == []
    with sessions() as session:
        rows = [jobs.get_job(session=session, job_id=job_id) for job_id in job_ids]
        assert [row.progress_done for row in rows] == [ROUNDS - 1] * 2
    engine.dispose()


def test_a_transaction_that_reads_first_but_is_unmarked_is_what_fails(tmp_path: Path) -> None:
    """The case the mark exists for: the same work unmarked (a deferred BEGIN, then a read, then
    the write) fails under contention, so the test above would catch the mark's loss."""
    engine = _engine(tmp_path)
    sessions = session_factory(engine)
    job_ids = _two_jobs(sessions)
    begins = _begins(engine)

    errors = _hammer(sessions, job_ids, mark=False)

    assert errors and all("database is locked" in error for error in errors)
    assert set(begins) == {"BEGIN"}
    engine.dispose()


def test_begin_immediate_only_for_writes(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    sessions = session_factory(engine)
    job_id = _two_jobs(sessions)[0]
    begins = _begins(engine)

    with sessions() as session:  # a reader: no write lock taken
        jobs.list_jobs(session=session)
        session.rollback()
    with sessions() as session:  # a write first: immediate
        jobs.create_job(session=session, kind=JobKind.ANSWER)
        session.commit()
    with sessions() as session:  # marked before its read
        write_transaction(session)
        jobs.get_job(session=session, job_id=job_id)
        session.commit()

    assert begins == ["BEGIN", "BEGIN IMMEDIATE", "BEGIN IMMEDIATE"]
    engine.dispose()


def test_deleting_a_document_while_a_worker_writes_waits_for_the_lock(tmp_path: Path) -> None:
    """delete_document reads the document, then deletes: a worker's commit between the two
    failed the deletion at once with "database is locked" (seen in a test of workers under
    load). Here the worker's write comes exactly then: just after the deletion's first read."""
    from app.services import documents
    from tests.app.new_documents import new_document

    engine = _engine(tmp_path)
    sessions = session_factory(engine)
    job_id = _two_jobs(sessions)[0]
    with sessions() as session:
        document_id = documents.store_document(session=session, new=new_document("d")).id
        session.commit()
    errors: list[str] = []

    def worker_writes() -> None:
        try:
            with sessions() as session:
                jobs.update_progress(session=session, job_id=job_id, stage="w", done=1, total=2)
                session.commit()
        except Exception as error:
            errors.append(str(error))

    worker = threading.Thread(target=worker_writes)

    @event.listens_for(engine, "after_cursor_execute")
    def _after(_connection, _cursor, statement: str, *_args) -> None:
        if statement.lstrip().upper().startswith("SELECT") and worker.ident is None:
            worker.start()  # once, at the deletion's first read
            worker.join(timeout=1.0)  # without the lock taken, it commits in this second

    with sessions() as session:
        assert documents.delete_document(
            session=session, document_id=document_id, files_dir=tmp_path
        )
        session.commit()
    event.remove(engine, "after_cursor_execute", _after)
    worker.join(timeout=30)
    assert errors == [] and not worker.is_alive()
    with sessions() as session:
        assert documents.get_document(session=session, document_id=document_id) is None
        assert jobs.get_job(session=session, job_id=job_id).progress_done == 1
    engine.dispose()
