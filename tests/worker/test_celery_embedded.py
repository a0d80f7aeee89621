"""Real worker processes on the embedded broker (no server): SQLite and kombu's filesystem
transport by default. The kill tests also run on kombu's SQLAlchemy transport (SQLite), the
alternative bench/results/embedded_broker.md weighs."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from app.db.models import Answer, Document, Job, JobKind, JobStatus, Summary
from tests.pipelines import pdf_factory
from tests.worker import celery_support
from tests.worker.celery_support import Harness, WorkerProcess, worker_env

# Fixtures shared with the Redis tests.
start_worker = celery_support.start_worker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# On SQLite one summary runs at a time (one batch slot), the others waiting their turn: eight
# are a batch that keeps several waiting at once, at less than half the time of twenty (the
# Redis/PostgreSQL test, whose summaries run together, keeps twenty).
NUM_DOCUMENTS = 8
QUEUES_OF_TWO_WORKERS = ("--queues=ingest", "--queues=gpu,gpu_batch")


def batch_of_pdfs(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [
        pdf_factory.text_pdf(
            folder,
            [
                f"Lease agreement number {i}.\nThe tenant pays {100 + i} dollars each month.",
                f"Clause {i}: either party may end this lease with {i + 1} months notice.",
            ],
            name=f"lease-{i:02d}.pdf",
        )
        for i in range(count)
    ]


def brokers(tmp_path: Path) -> dict[str, str]:
    return {"filesystem": "", "sqlalchemy": f"sqla+sqlite:///{tmp_path / 'broker.sqlite'}"}


@pytest.fixture
def harness_for(tmp_path, converted_model_cache):
    made: list[Harness] = []

    def make(broker: str = "filesystem", **extra: str) -> Harness:
        env = worker_env(
            tmp_path,
            converted_model_cache,
            database_url=f"sqlite:///{tmp_path / 'longdoc.db'}",
            broker_url=brokers(tmp_path)[broker],
            **extra,
        )
        made.append(Harness(env))
        return made[-1]

    yield make
    for harness in made:
        harness.close()


def test_a_batch_of_documents_in_as_many_summaries_out_and_a_bad_one_fails_alone(
    harness_for, start_worker, tmp_path
) -> None:
    harness = harness_for()
    pdfs = batch_of_pdfs(tmp_path / "in", NUM_DOCUMENTS)
    broken = pdf_factory.garbage_pdf(tmp_path / "in", name="broken.pdf")
    workers = [start_worker(harness.env, q, wait=False) for q in QUEUES_OF_TWO_WORKERS]
    for worker in workers:
        worker.wait_ready()

    half = NUM_DOCUMENTS // 2
    ingest_ids = [harness.queue_ingest(path) for path in [*pdfs[:half], broken, *pdfs[half:]]]
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
    assert [j.id for j in failed] == [ingest_ids[half]]
    assert failed[0].error_code == "damaged_pdf"
    assert failed[0].error.endswith(".") and "Traceback" not in failed[0].error
    assert len(documents) == NUM_DOCUMENTS
    # None lost, none twice: one summary per document, each from its own succeeded job.
    assert sorted(s.document_id for s in summaries) == sorted(d.id for d in documents)
    summarize_jobs = [j for j in rows if j.kind == JobKind.SUMMARIZE]
    assert len(summarize_jobs) == NUM_DOCUMENTS
    assert all(j.status == JobStatus.SUCCEEDED for j in summarize_jobs)
    assert {s.job_id for s in summaries} == {j.id for j in summarize_jobs}
    assert all(j.progress_total > 0 and j.stage == "done" for j in summarize_jobs)


def _stored_document(
    harness: Harness, start_worker, tmp_path: Path, *model_worker_args: str
) -> tuple[int, WorkerProcess]:
    """A document ingested by an ingest worker, and a model worker started with
    `model_worker_args` alongside it (the two start in parallel; the ingest worker, idle from
    then on, is stopped with the test)."""
    (pdf,) = batch_of_pdfs(tmp_path / "one", 1)
    ingest_worker = start_worker(harness.env, "--queues=ingest", wait=False)
    model_worker = start_worker(
        harness.env, "--queues=gpu,gpu_batch", *model_worker_args, wait=False
    )
    ingest_worker.wait_ready()
    job_id = harness.queue_ingest(pdf, then_summarize=False)
    harness.wait_for(
        lambda s: s.get(Job, job_id).status == JobStatus.SUCCEEDED, 120, "the ingest job"
    )
    model_worker.wait_ready()
    return harness.job(job_id).document_id, model_worker


def _wait_until_summarizing(harness: Harness, job_id: int) -> None:
    harness.wait_for(
        lambda s: s.get(Job, job_id).stage == "summarizing", 180, "the summary to start"
    )


def _assert_done_once(harness: Harness, job_id: int) -> None:
    harness.wait_for(
        lambda s: s.get(Job, job_id).status == JobStatus.SUCCEEDED, 240, "the summary job"
    )
    time.sleep(2)  # a duplicate delivery, if any, would now have had time to write
    with harness.sessions() as session:
        summaries = session.scalars(select(Summary)).all()
    assert [s.job_id for s in summaries] == [job_id]


@pytest.mark.parametrize("broker", ["filesystem", "sqlalchemy"])
def test_killed_pool_child_gives_its_summary_back(
    harness_for, start_worker, tmp_path, broker
) -> None:
    harness = harness_for(broker)
    # The prefork pool (the ingest worker's; a model worker may run it too): its parent
    # outlives the child and puts the task back.
    document_id, gpu = _stored_document(harness, start_worker, tmp_path, "--pool=prefork")
    job_id = harness.queue_summary(document_id)
    _wait_until_summarizing(harness, job_id)
    (child,) = gpu.pool_children()

    os.kill(child, signal.SIGKILL)

    _assert_done_once(harness, job_id)
    assert "SIGKILL" in gpu.log()  # the parent saw its child die, and requeued the task


@pytest.mark.parametrize("broker", ["filesystem", "sqlalchemy"])
def test_killed_worker_is_replaced_and_the_summary_runs_again(
    harness_for, start_worker, tmp_path, broker
) -> None:
    harness = harness_for(broker)
    document_id, first = _stored_document(harness, start_worker, tmp_path)
    job_id = harness.queue_summary(document_id)
    _wait_until_summarizing(harness, job_id)

    first.kill_all()  # parent and pool child at once: nobody is left to requeue the task
    assert harness.job(job_id).status == JobStatus.RUNNING
    second = start_worker(harness.env, "--queues=gpu,gpu_batch")

    _assert_done_once(harness, job_id)
    assert "queued 1 job(s) again" in second.log()


def test_a_question_queued_with_two_summaries_finishes_first_and_nothing_is_doubled(
    harness_for, start_worker, tmp_path
) -> None:
    """One threads-pool model worker, one engine: the summaries and the question run at once,
    the question at a higher priority, so it is done while the summaries still write."""
    harness = harness_for(LONGDOC_SUMMARY_MAX_NEW_TOKENS="200", LONGDOC_ANSWER_MAX_NEW_TOKENS="16")
    pdfs = batch_of_pdfs(tmp_path / "three", 3)
    ingest = start_worker(harness.env, "--queues=ingest")
    ingest_ids = [harness.queue_ingest(path, then_summarize=False) for path in pdfs]
    harness.wait_for(
        lambda s: all(s.get(Job, i).status == JobStatus.SUCCEEDED for i in ingest_ids),
        180,
        "the ingest jobs",
    )
    ingest.request_stop()  # idle from now on; reaped with the test
    doc_ids = [harness.job(i).document_id for i in ingest_ids]
    summary_ids = [harness.queue_summary(doc_ids[0]), harness.queue_summary(doc_ids[1])]
    question_id = harness.queue_answer(doc_ids[2], "How much does the tenant pay each month?")
    start_worker(harness.env, "--queues=gpu,gpu_batch")
    all_ids = [*summary_ids, question_id]
    harness.wait_for(
        lambda s: all(s.get(Job, i).status == JobStatus.SUCCEEDED for i in all_ids),
        300,
        "the two summaries and the question",
    )
    rows = {i: harness.job(i) for i in all_ids}
    assert all(rows[question_id].finished_at < rows[i].finished_at for i in summary_ids)
    # They ran together: the question started before either summary ended.
    assert all(rows[question_id].started_at < rows[i].finished_at for i in summary_ids)
    with harness.sessions() as session:
        summaries = session.scalars(select(Summary)).all()
        answers = session.scalars(select(Answer)).all()
    assert sorted(s.job_id for s in summaries) == sorted(summary_ids)
    assert [a.job_id for a in answers] == [question_id]
