"""The scheduled tasks queue their jobs through app.services.dispatch.queue_job: each job gets
its task id and reaches the real broker, and with the broker stopped each is failed with its
sentence (it would else say "queued" forever). The ingest task counts the stored document's
OCR'd pages and bad redactions in the metrics."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from app.db.models import Job, JobKind, JobStatus
from app.migrate import upgrade
from app.services import dispatch, jobs
from app.settings import get_settings
from tests.app.test_dispatch import take_message
from tests.pipelines import pdf_factory, scan_factory
from tests.ui.seed import add_document
from tests.worker.redis_server import redis_server  # noqa: F401 (fixture)
from worker import resources, tasks
from worker.celery_app import make_celery


@pytest.fixture
def worker_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, redis_server):  # noqa: F811
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LONGDOC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LONGDOC_BROKER_URL", redis_server.url)
    get_settings.cache_clear()
    resources.reset()
    settings = get_settings()
    upgrade(settings.database_url)
    app = make_celery(settings)  # the current app: the tasks' self.app
    yield settings
    app.close()
    resources.reset()
    get_settings.cache_clear()


def _add_documents(settings, count: int) -> None:
    with resources.sessions()() as session:
        for number in range(count):
            add_document(session, settings.files_dir, title=f"Lease {number}")
        session.commit()


def _jobs() -> list[Job]:
    with resources.sessions()() as session:
        return list(session.scalars(select(Job).order_by(Job.id)))


def test_summarize_missing_queues_each_job_on_the_broker(worker_settings, redis_server) -> None:  # noqa: F811
    _add_documents(worker_settings, 2)

    assert tasks.summarize_missing_task() == {"num_jobs": 2}

    rows = _jobs()
    assert [(j.kind, j.status) for j in rows] == [(JobKind.SUMMARIZE, JobStatus.QUEUED)] * 2
    assert all(j.task_id for j in rows)  # given by queue_job before the message was sent
    assert redis_server.llen(dispatch.QUEUE_GPU_BATCH) == 2


def test_with_the_broker_stopped_each_scheduled_job_fails_with_a_sentence(
    worker_settings,
    redis_server,  # noqa: F811
) -> None:
    _add_documents(worker_settings, 2)
    redis_server.stop()

    tasks.summarize_missing_task()

    rows = _jobs()
    assert [(j.status, j.error_code) for j in rows] == [
        (JobStatus.FAILED, "broker_unavailable")
    ] * 2
    assert all("could not reach its task queue" in j.error for j in rows)


@pytest.fixture
def ingest_worker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model_cache_dir: Path):
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LONGDOC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LONGDOC_MODEL_CACHE_DIR", str(model_cache_dir))
    monkeypatch.setenv("LONGDOC_EMBEDDING_MODEL", "none")
    get_settings.cache_clear()
    resources.reset()
    upgrade(get_settings().database_url)
    app = make_celery(get_settings())  # the current app: its embedded broker gets the follow-ups
    yield
    app.close()
    resources.reset()
    get_settings.cache_clear()


def _ingest_job(path: Path) -> int:
    with resources.sessions()() as session:
        job = jobs.create_job(session=session, kind=JobKind.INGEST, params={"path": str(path)})
        session.commit()
        return job.id


def _page_source_counts() -> tuple[float, float]:
    return tuple(
        REGISTRY.get_sample_value(name) or 0.0
        for name in ("longdoc_ocr_pages_total", "longdoc_redactions_found_total")
    )


def test_an_ingest_counts_its_bad_redactions_once(ingest_worker, tmp_path: Path) -> None:
    boxed = scan_factory.boxed_text_pdf(tmp_path, box="black", name="boxed.pdf")
    ocr_before, redactions_before = _page_source_counts()
    job_id = _ingest_job(boxed)

    assert tasks.ingest_task(job_id)["status"] == "succeeded"
    assert tasks.ingest_task(job_id)["status"] == "skipped"  # delivered twice: counted once

    assert _page_source_counts() == (ocr_before, redactions_before + 1)


@pytest.mark.slow
def test_an_ingest_counts_its_ocr_pages(ingest_worker, tmp_path: Path) -> None:
    text_page = "The cover page of the exhibit bundle has a real text layer that pypdf reads."
    mixed = scan_factory.scan_pdf(tmp_path, [text_page, scan_factory.scan_image()], name="m.pdf")
    ocr_before, redactions_before = _page_source_counts()

    assert tasks.ingest_task(_ingest_job(mixed))["status"] == "succeeded"

    assert _page_source_counts() == (ocr_before + 1, redactions_before)


def test_an_inbox_file_is_ingested_and_its_key_facts_job_queued_once(
    ingest_worker, tmp_path: Path
) -> None:
    settings = get_settings()
    settings.inbox_dir.mkdir(parents=True, exist_ok=True)
    pdf = pdf_factory.text_pdf(
        settings.inbox_dir, ["Governed by the laws of Oregon."], name="a.pdf"
    )
    past = time.time() - 60  # settled: the scan takes it now
    os.utime(pdf, (past, past))

    assert tasks.scan_inbox_task() == {"num_jobs": 1}
    ingest = take_message(settings, dispatch.QUEUE_INGEST)
    assert ingest["headers"]["task"] == dispatch.TASK_INGEST
    (ingest_id,) = ingest["body"][0]
    assert tasks.ingest_task(ingest_id)["status"] == "succeeded"
    assert tasks.ingest_task(ingest_id)["status"] == "skipped"  # delivered twice: sent once

    rows = _jobs()
    (facts,) = [j for j in rows if j.kind == JobKind.FACTS]
    (document_id,) = {j.document_id for j in rows if j.kind == JobKind.INGEST}
    assert (facts.status, facts.document_id) == (JobStatus.QUEUED, document_id)
    message = take_message(settings, dispatch.QUEUE_GPU_BATCH)
    assert (message["headers"]["task"], message["body"][0]) == (dispatch.TASK_FACTS, [facts.id])
    with pytest.raises(AssertionError, match="no message"):
        take_message(settings, dispatch.QUEUE_GPU_BATCH, timeout_s=1.0)
