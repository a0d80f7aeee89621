"""A task whose worker dies under it: redelivered until LONGDOC_MAX_WORKER_DEATHS (2) runs have
died, then failed with a sentence and never run again, while the other queues go on. A real
worker on the embedded broker; the pool child is SIGKILLed while it parses, as the OOM killer
would (with the parse child it started)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from datetime import datetime
from pathlib import Path

import pytest

from app.db.models import Job, JobStatus
from tests.pipelines import pdf_factory
from tests.worker import celery_support
from tests.worker.celery_support import Harness, WorkerProcess, worker_env
from worker.ingest.store import IngestOptions
from worker.jobs.ingest import ingest_file

start_worker = celery_support.start_worker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


def _descendants(pid: int) -> list[int]:
    """Children first listed deepest: every thread's children (the pool forks a replacement
    child from a thread of its own, not from the main one)."""
    children = []
    for thread in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(FileNotFoundError):
            children += map(int, (thread / "children").read_text().split())
    return [p for child in children for p in (*_descendants(child), child)]


def _kill_pool_child_while_parsing(
    harness: Harness, worker: WorkerProcess, job_id: int, after: datetime | None
) -> datetime:
    """Wait until a run of the job that started after `after` is parsing, then SIGKILL the
    pool child and what it started; returns that run's start."""

    def parsing(session) -> bool:
        job = session.get(Job, job_id)
        return job.stage == "parsing" and (after is None or job.started_at > after)

    # A hang guard only: the one pool child may first finish the lease's summary, which takes
    # minutes on a busy 2-core machine.
    harness.wait_for(parsing, 900, "the poison job to be parsing")
    started = harness.job(job_id).started_at
    for pid in _descendants(worker.process.pid):  # grandchildren first: the parse child
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return started


def test_a_task_that_kills_its_worker_twice_is_failed_and_the_queues_go_on(
    tmp_path: Path, converted_model_cache: Path, start_worker, count_tokens
) -> None:
    env = worker_env(
        tmp_path,
        converted_model_cache,
        database_url=f"sqlite:///{tmp_path / 'longdoc.db'}",
        LONGDOC_PARSE_TIMEOUT_S="300",
    )
    harness = Harness(env)
    try:
        lease = pdf_factory.text_pdf(
            tmp_path, ["The tenant pays 900 dollars a month.", "Notice is 30 days."], name="a.pdf"
        )
        stored = ingest_file(
            lease, sessions=harness.sessions, options=IngestOptions(files_dir=tmp_path / "f"),
            count_tokens=count_tokens,
        )  # fmt: skip
        # Three million text operators: tens of seconds of parsing, time enough to be killed.
        poison = pdf_factory.heavy_page_pdf(tmp_path, num_operators=3_000_000, name="poison.pdf")
        # One prefork worker for every queue: its parent sees the child die and requeues.
        worker = start_worker(env, "--pool=prefork")
        poison_id = harness.queue_ingest(poison, then_summarize=False)
        summary_id = harness.queue_summary(stored.document_id)

        first = _kill_pool_child_while_parsing(harness, worker, poison_id, None)
        _kill_pool_child_while_parsing(harness, worker, poison_id, first)

        harness.wait_for(
            lambda s: s.get(Job, poison_id).status == JobStatus.FAILED, 900, "the guard"
        )
        harness.wait_for(
            lambda s: s.get(Job, summary_id).status == JobStatus.SUCCEEDED, 900, "the summary"
        )
        time.sleep(3)  # a third delivery, were there one, would be parsing by now
        job = harness.job(poison_id)
        assert job.status == JobStatus.FAILED and job.error_code == "worker_died"
        assert job.error.startswith("The worker stopped unexpectedly 2 times")
        assert job.stage == "parsing" and job.num_unfinished_runs == 2  # not run a third time
        assert worker.log().count("SIGKILL") >= 2
        assert worker.process.poll() is None  # the worker itself lives on
    finally:
        harness.close()
