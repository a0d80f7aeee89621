"""The beat schedule and its jobs' bodies: the inbox scan, the missing summaries and the audit
log's retention (no processes)."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

from app.db.models import Job, JobKind, JobStatus, utc_now
from app.services import access, audit, documents, jobs, results
from app.settings import Settings
from tests.app.new_documents import new_document
from worker import schedule
from worker.celery_app import QUEUE_FOR_TASK, make_celery


def settings(tmp_path: Path, **values) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "data", **values)


def test_beat_schedule_follows_the_switches_and_intervals(tmp_path: Path) -> None:
    both = make_celery(settings(tmp_path, inbox_scan_interval_s=60)).conf.beat_schedule
    neither = make_celery(
        settings(tmp_path, inbox_scan_enabled=False, auto_summarize_enabled=False)
    ).conf.beat_schedule

    assert set(both) == {"scan-inbox", "summarize-missing", "prune-audit"}
    assert both["scan-inbox"]["schedule"].total_seconds() == 60
    assert both["scan-inbox"]["options"]["queue"] == QUEUE_FOR_TASK[both["scan-inbox"]["task"]]
    assert set(neither) == {"prune-audit"}  # the audit retention holds whatever is switched off
    assert neither["prune-audit"]["schedule"].total_seconds() == 24 * 3600


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


def test_missing_summaries_are_queued_once(sessions, tmp_path: Path) -> None:
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

    queued = schedule.queue_missing_summaries(sessions=sessions, settings=settings(tmp_path))
    again = schedule.queue_missing_summaries(sessions=sessions, settings=settings(tmp_path))

    with sessions() as session:
        assert [session.get(Job, j).document_id for j in queued] == [first]
    assert again == []


def test_audit_rows_older_than_the_retention_are_pruned(sessions, tmp_path: Path) -> None:
    with sessions() as session:
        audit.record(
            session=session, who=access.local_admin().who, action="view_document", target_ids=[1]
        )
        session.commit()
    keep_30_days = settings(tmp_path, audit_keep_days=30)
    assert schedule.prune_audit(sessions=sessions, settings=keep_30_days) == 0
    # Rows cannot be updated (append-only): the same row, as seen 31 days later.
    later = utc_now() + timedelta(days=31)
    assert schedule.prune_audit(sessions=sessions, settings=keep_30_days, now=later) == 1
    with sessions() as session:
        assert audit.list_events(session=session) == []
