"""A restarted worker's recovery: the running jobs it finds orphaned, the broker's processed
messages it prunes, and the jobs a `longdoc ingest` process runs itself, which the sweep never
queues and fails with a sentence once their process is gone (issue 15, item 8)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobKind, JobStatus
from app.db.session import make_engine
from app.migrate import upgrade
from app.services import jobs
from tests.pipelines import pdf_factory
from tests.worker import celery_support
from worker.jobs.recovery import fail_jobs_of_dead_processes, orphaned_jobs, prune_processed

start_worker = celery_support.start_worker
LONGDOC = str(Path(sys.executable).parent / "longdoc")


def _wait_for(sessions, predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with sessions() as session:
            found = predicate(session)
            if found:
                return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def killed_cli_ingest(tmp_path: Path, env: dict[str, str], sessions) -> int:
    """Start `longdoc ingest` on a slow PDF, SIGKILL it mid-parse; the id of its job."""
    slow = pdf_factory.heavy_page_pdf(tmp_path, num_operators=3_000_000, name="slow.pdf")
    log = (tmp_path / "cli.log").open("wb")
    cli = subprocess.Popen(
        [LONGDOC, "ingest", str(slow)], env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:
        job = _wait_for(
            sessions,
            lambda s: s.scalars(select(Job).where(Job.status == JobStatus.RUNNING)).first(),
            120,
            "the CLI ingest to start",
        )
        assert job.owner_pid == cli.pid
        time.sleep(1)  # into the parse, which takes tens of seconds for this file
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cli.pid, signal.SIGKILL)  # the CLI and its parse child
        cli.wait(timeout=30)
        log.close()
    return job.id


@pytest.fixture
def env_and_sessions(tmp_path: Path, converted_model_cache: Path):
    env = celery_support.worker_env(
        tmp_path, converted_model_cache, database_url=f"sqlite:///{tmp_path / 'longdoc.db'}"
    )
    upgrade(env["LONGDOC_DATABASE_URL"])
    engine = make_engine(env["LONGDOC_DATABASE_URL"])
    yield env, sessionmaker(bind=engine, expire_on_commit=False)
    engine.dispose()


@pytest.mark.slow
def test_a_killed_cli_ingest_is_failed_not_queued_to_a_worker(
    env_and_sessions, tmp_path: Path
) -> None:
    env, sessions = env_and_sessions
    cli_job = killed_cli_ingest(tmp_path, env, sessions)
    with sessions() as session:
        worker_job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=None)
        jobs.start_job(session=session, job_id=worker_job.id)
        session.commit()

    orphans = orphaned_jobs(sessions=sessions, kinds=tuple(JobKind))
    failed = fail_jobs_of_dead_processes(sessions=sessions)

    assert orphans == [(JobKind.SUMMARIZE, worker_job.id)]  # only the worker's job
    assert failed == [cli_job]
    with sessions() as session:
        job = session.get(Job, cli_job)
        assert job.status == JobStatus.FAILED and job.error_code == "owner_gone"
        assert job.error.startswith("The `longdoc ingest` process that was reading this file")
        assert session.get(Job, worker_job.id).status == JobStatus.RUNNING


def test_a_live_cli_process_keeps_its_job(session: Session) -> None:
    sessions = sessionmaker(bind=session.get_bind(), expire_on_commit=False)
    with sessions() as db:
        job = jobs.create_job(
            session=db,
            kind=JobKind.INGEST,
            owner_host=os.uname().nodename,
            owner_pid=os.getpid(),  # this test's own process: alive
        )
        jobs.start_job(session=db, job_id=job.id)
        other_host = jobs.create_job(
            session=db, kind=JobKind.INGEST, owner_host="elsewhere", owner_pid=1
        )
        jobs.start_job(session=db, job_id=other_host.id)
        db.commit()

    assert fail_jobs_of_dead_processes(sessions=sessions) == []
    assert orphaned_jobs(sessions=sessions, kinds=(JobKind.INGEST,)) == []


@pytest.mark.slow
def test_a_restarted_worker_leaves_a_cli_job_alone(
    env_and_sessions, start_worker, tmp_path: Path
) -> None:
    env, sessions = env_and_sessions
    cli_job = killed_cli_ingest(tmp_path, env, sessions)

    worker = start_worker(env, "--queues=ingest")

    job = _wait_for(
        sessions,
        lambda s: (j := s.get(Job, cli_job)).status == JobStatus.FAILED and j,
        30,
        "the sweep of the ready worker",
    )
    assert job.error_code == "owner_gone"
    assert "Is a directory" not in worker.log()
    assert "queued 1 job(s) again" not in worker.log()


def test_orphans_are_running_jobs_of_the_kinds_asked(sessions, tmp_path: Path) -> None:
    with sessions() as session:
        running = jobs.create_job(session=session, kind=JobKind.SUMMARIZE)
        jobs.start_job(session=session, job_id=running.id)
        ingest = jobs.create_job(session=session, kind=JobKind.INGEST)
        jobs.start_job(session=session, job_id=ingest.id)
        jobs.create_job(session=session, kind=JobKind.ANSWER)  # queued: still in the broker
        session.commit()

    found = orphaned_jobs(sessions=sessions, kinds=(JobKind.SUMMARIZE, JobKind.ANSWER))

    assert found == [(JobKind.SUMMARIZE, running.id)]
    old = tmp_path / "old.msg"
    old.write_text("{}")
    os.utime(old, (time.time() - 10, time.time() - 10))
    (tmp_path / "new.msg").write_text("{}")
    assert prune_processed(tmp_path, max_age_s=5) == 1
    assert not old.exists() and (tmp_path / "new.msg").exists()


def test_an_orphan_is_sent_again_as_every_client_queues_a_job(sessions, tmp_path: Path) -> None:
    from app.settings import Settings
    from tests.app.test_dispatch import take_message
    from worker.jobs.recovery import queue_again

    settings = Settings(_env_file=None, data_dir=tmp_path / "data")
    with sessions() as session:
        running = jobs.create_job(session=session, kind=JobKind.SUMMARIZE)
        jobs.start_job(session=session, job_id=running.id, task_id="the-dead-workers")
        session.commit()
        job_id = running.id

    assert queue_again([job_id, job_id + 1000], sessions=sessions, settings=settings) == [job_id]

    with sessions() as session:
        task_id = session.get(Job, job_id).task_id
    assert task_id not in (None, "the-dead-workers")  # committed before it was sent
    message = take_message(settings, "gpu_batch")
    assert (message["headers"]["id"], message["body"][0]) == (task_id, [job_id])
