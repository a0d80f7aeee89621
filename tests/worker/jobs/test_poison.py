"""The poison-task guard's bookkeeping on the real database (the worker-level test, with a real
worker child killed twice, is test_poison_guard.py)."""

from __future__ import annotations

import sqlite3

from sqlalchemy.exc import OperationalError

from app.db.models import Job, JobKind, JobStatus
from app.services import jobs
from worker.jobs.poison import begin_run, end_job_after_error, end_run


def new_job(sessions) -> int:
    with sessions() as session:
        job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE)
        session.commit()
        return job.id


def test_runs_that_end_are_never_counted_as_deaths(sessions) -> None:
    job_id = new_job(sessions)
    for _ in range(5):
        assert begin_run(job_id, sessions=sessions, max_deaths=2)
        end_run(job_id, sessions=sessions)
    with sessions() as session:
        assert session.get(Job, job_id).num_unfinished_runs == 0


def test_after_n_runs_that_never_ended_the_job_fails_and_is_not_run(sessions) -> None:
    job_id = new_job(sessions)
    assert begin_run(job_id, sessions=sessions, max_deaths=2)  # its worker died: no end_run
    assert begin_run(job_id, sessions=sessions, max_deaths=2)  # and again

    assert not begin_run(job_id, sessions=sessions, max_deaths=2)

    with sessions() as session:
        job = session.get(Job, job_id)
        assert (job.status, job.error_code) == (JobStatus.FAILED, "worker_died")
        assert job.error.startswith("The worker stopped unexpectedly 2 times")


def test_a_task_celery_gives_up_on_still_ends_its_job(sessions) -> None:
    busy, other = new_job(sessions), new_job(sessions)
    with sessions() as session:
        jobs.start_job(session=session, job_id=busy)
        session.commit()
    locked = OperationalError("UPDATE jobs", {}, sqlite3.OperationalError("database is locked"))

    end_job_after_error(busy, locked, sessions=sessions)
    end_job_after_error(other, RuntimeError("boom"), sessions=sessions)

    with sessions() as session:
        assert session.get(Job, busy).error_code == "database_busy"
        assert session.get(Job, busy).status == JobStatus.FAILED
        assert session.get(Job, other).error_code == "internal_error"
