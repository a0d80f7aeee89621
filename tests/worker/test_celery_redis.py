"""Real worker processes on the production pair: a Redis broker and PostgreSQL.

Skips, saying why, when either server is absent. Each test gets an empty Redis database (flushed
afterwards) and its own PostgreSQL database (dropped afterwards)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from sqlalchemy import select

from app.db.models import Document, Job, JobKind, JobStatus, Summary
from tests.pipelines import pdf_factory
from tests.redis_db import claimed_redis_db
from tests.worker import celery_support
from tests.worker.celery_support import Harness, worker_env
from tests.worker.test_celery_embedded import (
    QUEUES_OF_TWO_WORKERS,
    _assert_done_once,
    _stored_document,
    _wait_until_summarizing,
    batch_of_pdfs,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(900)]

start_worker = celery_support.start_worker
# Summaries run together here (batch slots on PostgreSQL): twenty cost little more than a few.
NUM_DOCUMENTS = 20
# Short, so a task of a killed worker comes back within the test, yet far longer than the
# second worker needs to build its engine and write the summary on a busy machine: a task still
# running past it would be handed out again (a second delivery, which the poison guard counts).
SHORT_VISIBILITY_S = "45"


@pytest.fixture
def redis_url():
    with claimed_redis_db() as url:
        yield url


@pytest.fixture
def harness_for(tmp_path, converted_model_cache, postgres_url, redis_url):
    made: list[Harness] = []

    def make(**extra: str) -> Harness:
        env = worker_env(
            tmp_path,
            converted_model_cache,
            database_url=postgres_url,
            broker_url=redis_url,
            **extra,
        )
        made.append(Harness(env))
        return made[-1]

    yield make
    for harness in made:
        harness.close()


def test_twenty_documents_in_twenty_summaries_out_and_a_bad_one_fails_alone(
    harness_for, start_worker, tmp_path
) -> None:
    harness = harness_for()
    pdfs = batch_of_pdfs(tmp_path / "in", NUM_DOCUMENTS)
    broken = pdf_factory.garbage_pdf(tmp_path / "in", name="broken.pdf")
    workers = [start_worker(harness.env, q, wait=False) for q in QUEUES_OF_TWO_WORKERS]
    for worker in workers:
        worker.wait_ready()

    ingest_ids = [harness.queue_ingest(path) for path in [broken, *pdfs]]
    harness.wait_for(
        lambda s: (
            harness.num_summaries(s) >= NUM_DOCUMENTS
            and harness.all_jobs_finished(s, 2 * NUM_DOCUMENTS + 1)
        ),
        timeout_s=600,
        what=f"{NUM_DOCUMENTS} summaries",
    )

    with harness.sessions() as session:
        rows = session.scalars(select(Job).order_by(Job.id)).all()
        summaries = session.scalars(select(Summary)).all()
        documents = session.scalars(select(Document)).all()
    failed = [j for j in rows if j.status == JobStatus.FAILED]
    assert [(j.id, j.error_code) for j in failed] == [(ingest_ids[0], "damaged_pdf")]
    assert len(documents) == NUM_DOCUMENTS
    assert sorted(s.document_id for s in summaries) == sorted(d.id for d in documents)
    summarize_jobs = [j for j in rows if j.kind == JobKind.SUMMARIZE]
    assert {s.job_id for s in summaries} == {j.id for j in summarize_jobs}
    assert all(j.status == JobStatus.SUCCEEDED for j in summarize_jobs)


def test_killed_pool_child_gives_its_summary_back(harness_for, start_worker, tmp_path) -> None:
    harness = harness_for()
    # Its parent requeues.
    document_id, gpu = _stored_document(harness, start_worker, tmp_path, "--pool=prefork")
    job_id = harness.queue_summary(document_id)
    _wait_until_summarizing(harness, job_id)
    (child,) = gpu.pool_children()

    os.kill(child, signal.SIGKILL)

    _assert_done_once(harness, job_id)
    assert "SIGKILL" in gpu.log()


def test_killed_worker_task_comes_back_after_the_visibility_timeout(
    harness_for, start_worker, tmp_path
) -> None:
    harness = harness_for(LONGDOC_VISIBILITY_TIMEOUT_S=SHORT_VISIBILITY_S)
    document_id, first = _stored_document(harness, start_worker, tmp_path)
    job_id = harness.queue_summary(document_id)
    _wait_until_summarizing(harness, job_id)

    first.kill_all()
    assert harness.job(job_id).status == JobStatus.RUNNING
    time.sleep(float(SHORT_VISIBILITY_S) + 1)  # Redis gives back only what is older than this
    second = start_worker(harness.env, "--queues=gpu,gpu_batch")  # restores it as it starts

    _assert_done_once(harness, job_id)
    assert "queued 1 job(s) again" not in second.log()  # Redis did it, not our start-up sweep


def test_three_summaries_queued_together_run_at_once_in_one_worker(
    harness_for, start_worker, tmp_path
) -> None:
    """On PostgreSQL the default batch slots (concurrency - 2) let one threads-pool worker run
    several summaries at once on its one engine; each is done once."""
    harness = harness_for(LONGDOC_SUMMARY_MAX_NEW_TOKENS="120")
    pdfs = batch_of_pdfs(tmp_path / "three", 3)
    ingest = start_worker(harness.env, "--queues=ingest")
    ingest_ids = [harness.queue_ingest(path, then_summarize=False) for path in pdfs]
    harness.wait_for(
        lambda s: all(s.get(Job, i).status == JobStatus.SUCCEEDED for i in ingest_ids),
        180,
        "the ingest jobs",
    )
    ingest.request_stop()  # idle from now on; reaped with the test
    summary_ids = [harness.queue_summary(harness.job(i).document_id) for i in ingest_ids]
    start_worker(harness.env, "--queues=gpu,gpu_batch")
    harness.wait_for(
        lambda s: all(s.get(Job, i).status == JobStatus.SUCCEEDED for i in summary_ids),
        300,
        "the three summaries",
    )
    rows = [harness.job(i) for i in summary_ids]
    # Together: every summary started before any of them ended.
    assert max(r.started_at for r in rows) < min(r.finished_at for r in rows)
    with harness.sessions() as session:
        summaries = session.scalars(select(Summary)).all()
    assert sorted(s.job_id for s in summaries) == sorted(summary_ids)
