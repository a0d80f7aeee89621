"""Queueing by task name: the job row is committed with its task id and the message reaches the
real broker (the embedded filesystem transport, and Redis where it runs), with no worker."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from kombu import Connection
from sqlalchemy.orm import Session

from app.db.models import Job, JobKind, JobStatus
from app.migrate import upgrade
from app.services import dispatch, jobs
from app.settings import Settings
from tests.redis_db import claimed_redis_db


def make_settings(tmp_path: Path, broker_url: str = "") -> Settings:
    return Settings(
        _env_file=None,
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'longdoc.db'}",
        broker_url=broker_url,
    )


@pytest.fixture
def redis_url():
    with claimed_redis_db() as url:
        yield url


def take_message(settings: Settings, queue: str, timeout_s: float = 5.0) -> dict:
    """The next message on `queue`, read the way a worker would (then acknowledged)."""
    client = dispatch.make_client(settings)
    with Connection(
        dispatch.broker_url(settings), transport_options=dispatch.transport_options(settings)
    ) as connection:
        simple = connection.SimpleQueue(queue, no_ack=False)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                message = simple.get(timeout=0.5)
                break
            except simple.Empty:
                if time.monotonic() > deadline:
                    raise AssertionError(f"no message on {queue} within {timeout_s} s") from None
        message.ack()
        simple.close()
    client.close()
    body = message.body if isinstance(message.body, (list, tuple)) else json.loads(message.body)
    return {"headers": message.headers, "body": body}


def queued_job(session: Session, kind: JobKind, **params) -> Job:
    return jobs.create_job(session=session, kind=kind, params=params)


def test_the_names_match_the_worker_contract() -> None:
    assert dispatch.TASK_FOR_KIND == {
        JobKind.INGEST: "longdoc.ingest",
        JobKind.SUMMARIZE: "longdoc.summarize",
        JobKind.ANSWER: "longdoc.answer",
        JobKind.FACTS: "longdoc.facts",
    }
    assert dispatch.QUEUE_FOR_TASK == {
        "longdoc.ingest": "ingest",
        "longdoc.summarize": "gpu_batch",
        "longdoc.answer": "gpu",
        "longdoc.facts": "gpu_batch",
    }


@pytest.mark.parametrize(
    ("kind", "queue"),
    [
        (JobKind.INGEST, "ingest"),
        (JobKind.SUMMARIZE, "gpu_batch"),
        (JobKind.ANSWER, "gpu"),
        (JobKind.FACTS, "gpu_batch"),
    ],
)
def test_embedded_broker_gets_the_task_by_name_after_the_row_is_committed(
    tmp_path: Path, kind: JobKind, queue: str
) -> None:
    settings = make_settings(tmp_path)
    upgrade(settings.database_url)
    from app.db.session import make_engine, session_factory

    engine = make_engine(settings.database_url)
    with session_factory(engine)() as session:
        job = queued_job(session, kind, question="private")
        task_id = dispatch.queue_job(settings=settings, session=session, job=job)
        job_id = job.id
    # A second connection sees the row with its task id: it was committed before sending.
    with session_factory(engine)() as other:
        row = jobs.get_job(session=other, job_id=job_id)
        assert (row.task_id, row.status) == (task_id, JobStatus.QUEUED)
    engine.dispose()

    assert dispatch.queue_lengths(settings) == {
        name: int(name == queue) for name in dispatch.ALL_QUEUES
    }
    message = take_message(settings, queue)
    assert message["headers"]["task"] == dispatch.TASK_FOR_KIND[kind]
    assert message["headers"]["id"] == task_id
    assert message["body"][0] == [job_id]  # args: only the job id, never the question
    assert "private" not in json.dumps(message["body"])
    assert dispatch.queue_lengths(settings)[queue] == 0


def test_redis_broker_gets_the_task_and_counts_it(tmp_path: Path, redis_url: str) -> None:
    settings = make_settings(tmp_path, broker_url=redis_url)
    upgrade(settings.database_url)
    from app.db.session import make_engine, session_factory

    engine = make_engine(settings.database_url)
    with session_factory(engine)() as session:
        first = queued_job(session, JobKind.ANSWER, question="q")
        dispatch.queue_job(settings=settings, session=session, job=first)
        second = queued_job(session, JobKind.SUMMARIZE)
        task_id = dispatch.queue_job(settings=settings, session=session, job=second)
        second_id = second.id
    engine.dispose()
    assert dispatch.queue_lengths(settings) == {"ingest": 0, "gpu": 1, "gpu_batch": 1}
    message = take_message(settings, "gpu_batch")
    assert (message["headers"]["task"], message["headers"]["id"]) == ("longdoc.summarize", task_id)
    assert message["body"][0] == [second_id]
    status = dispatch.broker_status(settings, timeout_s=0.3)
    assert status.worker_names == ()  # reachable, and no worker runs here
    assert status.queue_lengths == {"ingest": 0, "gpu": 1, "gpu_batch": 0}


def test_an_unreachable_broker_fails_the_job_with_a_sentence(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, broker_url="redis://127.0.0.1:1/0")  # nothing listens
    upgrade(settings.database_url)
    from app.db.session import make_engine, session_factory

    engine = make_engine(settings.database_url)
    with session_factory(engine)() as session:
        job = queued_job(session, JobKind.SUMMARIZE)
        with pytest.raises(dispatch.BrokerUnavailable, match="could not reach its task queue"):
            dispatch.queue_job(settings=settings, session=session, job=job)
        job_id = job.id
    with session_factory(engine)() as other:
        row = jobs.get_job(session=other, job_id=job_id)
        assert (row.status, row.error_code) == (JobStatus.FAILED, "broker_unavailable")
    engine.dispose()
    assert dispatch.queue_lengths(settings) is None
    assert dispatch.broker_status(settings, timeout_s=0.3).worker_names is None


def test_queue_jobs_sends_only_the_jobs_never_sent(tmp_path: Path) -> None:
    # A task whose follow-ups' queueing failed (the database locked as a task id was written)
    # runs again and names them again: those already sent must not go twice.
    settings = make_settings(tmp_path)
    upgrade(settings.database_url)
    from app.db.session import make_engine, session_factory

    engine = make_engine(settings.database_url)
    with session_factory(engine)() as session:
        sent = queued_job(session, JobKind.SUMMARIZE)
        dispatch.queue_job(settings=settings, session=session, job=sent)
        unsent = queued_job(session, JobKind.SUMMARIZE)
        done = queued_job(session, JobKind.SUMMARIZE)
        jobs.finish_job(session=session, job_id=done.id)
        session.commit()
        ids = [sent.id, unsent.id, done.id]
        assert dispatch.queue_jobs(settings=settings, session=session, job_ids=ids) == [unsent.id]
        session.refresh(unsent)
        assert unsent.task_id is not None
    engine.dispose()
    assert dispatch.queue_lengths(settings)["gpu_batch"] == 2


def test_submit_job_creates_and_queues_a_job_for_a_collection(tmp_path: Path) -> None:
    from app.db.session import make_engine, session_factory
    from app.services import collections

    settings = make_settings(tmp_path)
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    with session_factory(engine)() as session:
        collection = collections.create_collection(session=session, name="Leases")
        session.commit()
        job = dispatch.submit_job(
            settings=settings,
            session=session,
            kind=JobKind.ANSWER,
            collection_id=collection.id,
            params={"question": "private"},
        )
        job_id, task_id, collection_id = job.id, job.task_id, collection.id
    with session_factory(engine)() as other:
        row = jobs.get_job(session=other, job_id=job_id)
        assert (row.status, row.task_id, row.collection_id) == (
            JobStatus.QUEUED,
            task_id,
            collection_id,
        )
        assert row.params == {"question": "private"}
    engine.dispose()
    message = take_message(settings, "gpu")
    assert (message["headers"]["task"], message["body"][0]) == ("longdoc.answer", [job_id])


def test_submit_job_names_the_job_an_unreachable_broker_failed(tmp_path: Path) -> None:
    from app.db.session import make_engine, session_factory

    settings = make_settings(tmp_path, broker_url="redis://127.0.0.1:1/0")  # nothing listens
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    with session_factory(engine)() as session:
        with pytest.raises(dispatch.BrokerUnavailable) as raised:
            dispatch.submit_job(settings=settings, session=session, kind=JobKind.FACTS)
        row = jobs.get_job(session=session, job_id=raised.value.job_id)
        assert (row.kind, row.status) == (JobKind.FACTS, JobStatus.FAILED)
    engine.dispose()
