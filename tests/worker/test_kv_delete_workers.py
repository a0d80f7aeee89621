"""Deleting a document empties its KV from every worker's engine, the disk tier off: two real
workers, on a Redis broker and on the embedded one, each hold the document's blocks in their CPU
tier and device prefix cache after a question; the app's delete service broadcasts, and then
both hold none."""

from __future__ import annotations

import contextlib
import socket
import time
from pathlib import Path

import pytest

from app.db.models import JobStatus
from app.services import dispatch, documents
from tests.app.new_documents import new_document
from tests.engine.conftest import save_tiny_model
from tests.redis_db import claimed_redis_db
from tests.worker import celery_support
from tests.worker.celery_support import Harness, worker_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

start_worker = celery_support.start_worker
REPLY_TIMEOUT_S = 2.0
WAIT_S = 120.0


@pytest.fixture(params=["redis", "embedded"])
def harness(request, tmp_path: Path):
    model = tmp_path / "tiny-model"
    # Long enough for a question's prompt in bytes (the tiny model's tokenizer is byte-level).
    save_tiny_model(model, "llama", max_position_embeddings=8192)
    with contextlib.ExitStack() as stack:
        # The production broker, and the embedded one (kombu's filesystem transport).
        broker_url = stack.enter_context(claimed_redis_db()) if request.param == "redis" else ""
        env = worker_env(
            tmp_path,
            tmp_path / "model-cache",
            database_url=f"sqlite:///{tmp_path / 'longdoc.db'}",
            broker_url=broker_url,
            LONGDOC_MODEL=str(model),
            LONGDOC_KV_DISK_TIER_ENABLED="false",
            LONGDOC_KV_CPU_TIER_BYTES=str(64 << 20),
            LONGDOC_ENGINE_MAX_KV_CACHE_BYTES=str(16 << 20),
            LONGDOC_MODEL_WORKER_CONCURRENCY="2",
            # sdpa: no CPU attention kernel to build (a minute on two cores).
            LONGDOC_ENGINE_ATTENTION_BACKEND="sdpa",
        )
        made = Harness(env)
        yield made
        made.close()


def _kv_tiers(harness: Harness, worker: str) -> dict[str, int]:
    replies = harness.app.control.broadcast(
        dispatch.INSPECT_KV_TIERS, reply=True, destination=[worker], timeout=REPLY_TIMEOUT_S
    )
    answers = [reply[worker]["ok"] for reply in replies or [] if worker in reply]
    assert answers, f"{worker} did not answer"
    return answers[0]


def _answer_once(harness: Harness, document_id: int) -> None:
    job_id = harness.queue_answer(document_id, "Which page is longer?")
    harness.wait_for(
        lambda s: harness.all_jobs_finished(s, 1),
        timeout_s=WAIT_S,
        what="the question",
    )
    assert harness.job(job_id).status in (JobStatus.SUCCEEDED, JobStatus.FAILED)


def test_deleting_a_document_empties_every_workers_kv_tiers_without_a_disk_tier(
    harness: Harness, start_worker
) -> None:
    assert harness.settings.kv_cache_dir is None
    with harness.sessions() as session:
        document_id = documents.store_document(session=session, new=new_document("kv")).id
        session.commit()
    host = socket.gethostname()
    # Hostnames follow the queues (worker/cli/services.py): the first answers the first
    # question, then stops taking questions so that the second answers the next.
    first, second = f"longdoc-gpu@{host}", f"longdoc-gpu-gpu_batch@{host}"
    start_worker(harness.env, "--queues=gpu")
    _answer_once(harness, document_id)
    harness.app.control.cancel_consumer(
        dispatch.QUEUE_GPU, destination=[first], reply=True, timeout=REPLY_TIMEOUT_S
    )
    start_worker(harness.env, "--queues=gpu,gpu_batch")
    _answer_once(harness, document_id)
    held = {worker: _kv_tiers(harness, worker) for worker in (first, second)}
    for sizes in held.values():
        assert sizes["num_cpu_blocks"] > 0 and sizes["num_device_cached_blocks"] > 0, held

    with harness.sessions() as session:
        assert documents.delete_document(
            session=session,
            document_id=document_id,
            files_dir=harness.settings.files_dir,
            kv_cache_dir=harness.settings.kv_cache_dir,
            broker=dispatch.client_for(harness.settings),
        )
        session.commit()

    deadline = time.monotonic() + WAIT_S
    while True:
        now = {worker: _kv_tiers(harness, worker) for worker in (first, second)}
        emptied = all(
            sizes["num_cpu_blocks"] == sizes["num_cpu_bytes"] == 0
            and sizes["num_device_cached_blocks"] == 0
            for sizes in now.values()
        )
        if emptied or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert emptied, f"before the delete {held}, after it {now}"
