"""The Celery configuration, the beat schedule and the scheduled jobs' bodies (no processes)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobKind, JobStatus
from app.services import documents, jobs, results
from app.settings import Settings
from tests.app.test_services import new_document
from worker import schedule
from worker.celery_app import (
    QUEUE_FOR_TASK,
    TASK_ANSWER,
    TASK_INGEST,
    TASK_SUMMARIZE,
    broker_redelivers,
    celery_config,
    make_celery,
)
from worker.recovery import orphaned_jobs, prune_processed


def settings(tmp_path: Path, **values) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "data", **values)


def test_settings_fit_for_long_gpu_tasks(tmp_path: Path) -> None:
    config = celery_config(settings(tmp_path, model_time_limit_s=3600))

    assert config["task_acks_late"] and config["task_reject_on_worker_lost"]
    assert config["worker_prefetch_multiplier"] == 1
    assert config["accept_content"] == ["json"]
    assert config["task_serializer"] == config["result_serializer"] == "json"
    limits = config["task_annotations"][TASK_SUMMARIZE]
    assert limits["time_limit"] == 3600 and 0 < limits["soft_time_limit"] < 3600
    assert config["task_routes"][TASK_ANSWER] == {"queue": "gpu"}
    assert config["task_routes"][TASK_SUMMARIZE] == {"queue": "gpu_batch"}
    assert config["task_routes"][TASK_INGEST] == {"queue": "ingest"}


def test_embedded_default_is_the_filesystem_broker_with_results_in_the_database(
    tmp_path: Path,
) -> None:
    current = settings(tmp_path)
    config = celery_config(current)

    assert config["broker_url"] == "filesystem://"
    assert config["result_backend"] == f"db+{current.database_url}"
    options = config["broker_transport_options"]
    assert Path(options["data_folder_in"]).is_dir()
    # Messages taken from the queue are renamed within the broker's folder (atomic), not moved
    # to /tmp, which may be another filesystem (a copy that two workers could both make).
    assert Path(options["processed_folder"]).parent == Path(options["data_folder_in"]).parent
    assert not broker_redelivers(current)
    assert not config["worker_send_task_events"]


def test_redis_gets_a_visibility_timeout_longer_than_the_longest_task(tmp_path: Path) -> None:
    current = settings(tmp_path, broker_url="redis://redis:6379/0", model_time_limit_s=7200)
    options = celery_config(current)["broker_transport_options"]

    assert options["visibility_timeout"] > 7200
    assert options["queue_order_strategy"] == "priority"  # gpu (questions) before gpu_batch
    assert broker_redelivers(current)


def test_beat_schedule_follows_the_switches_and_intervals(tmp_path: Path) -> None:
    both = make_celery(settings(tmp_path, inbox_scan_interval_s=60)).conf.beat_schedule
    neither = make_celery(
        settings(tmp_path, inbox_scan_enabled=False, auto_summarize_enabled=False)
    ).conf.beat_schedule

    assert set(both) == {"scan-inbox", "summarize-missing"}
    assert both["scan-inbox"]["schedule"].total_seconds() == 60
    assert both["scan-inbox"]["options"]["queue"] == QUEUE_FOR_TASK[both["scan-inbox"]["task"]]
    assert neither == {}


@pytest.fixture
def sessions(session: Session) -> sessionmaker[Session]:
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


def test_scan_inbox_makes_one_job_per_settled_pdf_and_moves_it_away(
    sessions, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for name in ("a.pdf", "b.PDF", "notes.txt", "fresh.pdf"):
        (inbox / name).write_bytes(f"%PDF-1.4 {name}".encode())
    settled = time.time() - 60
    for name in ("a.pdf", "b.PDF", "notes.txt"):
        os.utime(inbox / name, (settled, settled))

    job_ids = schedule.scan_inbox(sessions=sessions, inbox_dir=inbox, files_dir=tmp_path / "f")
    again = schedule.scan_inbox(sessions=sessions, inbox_dir=inbox, files_dir=tmp_path / "f")

    assert len(job_ids) == 2 and again == []
    assert sorted(p.name for p in (inbox / "processed").iterdir()) == ["a.pdf", "b.PDF"]
    assert (inbox / "fresh.pdf").exists() and (inbox / "notes.txt").exists()
    with sessions() as session:
        rows = [session.get(Job, job_id) for job_id in job_ids]
    assert all(j.kind == JobKind.INGEST and j.status == JobStatus.QUEUED for j in rows)
    assert all(Path(j.params["path"]).is_relative_to(tmp_path / "f") for j in rows)
    assert sorted(j.params["file_name"] for j in rows) == ["a.pdf", "b.PDF"]


def test_missing_summaries_are_queued_once(sessions) -> None:
    with sessions() as session:
        first = documents.store_document(session=session, new=new_document("one")).id
        summarized = documents.store_document(session=session, new=new_document("two")).id
        job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=summarized)
        results.save_summary(
            session=session,
            job_id=job.id,
            document_id=summarized,
            method="one_pass",
            text="s",
            model="m",
        )
        session.commit()

    queued = schedule.queue_missing_summaries(sessions=sessions)
    again = schedule.queue_missing_summaries(sessions=sessions)

    with sessions() as session:
        assert [session.get(Job, j).document_id for j in queued] == [first]
    assert again == []


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


def test_the_apps_client_uses_the_same_task_and_queue_names() -> None:
    # app/services/dispatch.py (the UI's sender) mirrors these names without importing worker/.
    dispatch = pytest.importorskip("app.services.dispatch")
    from worker import celery_app

    assert dispatch.TASK_FOR_KIND == celery_app.TASK_FOR_KIND
    assert set(dispatch.ALL_QUEUES) == set(celery_app.ALL_QUEUES)
    for name in celery_app.TASK_FOR_KIND.values():
        assert (
            getattr(dispatch, "QUEUE_FOR_TASK", celery_app.QUEUE_FOR_TASK)[name]
            == (celery_app.QUEUE_FOR_TASK[name])
        )
