"""`longdoc worker --serve-port`: the OpenAI-compatible API in a real model worker, on the one
engine its own tasks use, so API requests and LongDoc's jobs share its batches."""

from __future__ import annotations

import time

import httpx
import openai
import pytest
from sqlalchemy import select

from app.db.models import Job, JobKind, JobStatus
from tests.pipelines import pdf_factory
from tests.worker import celery_support
from tests.worker.celery_support import Harness, worker_env
from tests.worker.redis_server import spare_port

start_worker = celery_support.start_worker

pytestmark = [pytest.mark.slow]

KEY = "worker-test-key"


def test_a_model_worker_serves_the_api_on_the_engine_of_its_tasks(
    tmp_path, converted_model_cache, start_worker
) -> None:
    env = worker_env(
        tmp_path,
        converted_model_cache,
        database_url=f"sqlite:///{tmp_path / 'longdoc.db'}",
        LONGDOC_SERVE_API_KEYS=KEY,
    )
    harness = Harness(env)
    try:
        port = spare_port()
        url = f"http://127.0.0.1:{port}"
        worker = start_worker(env, "--queues=ingest,gpu,gpu_batch", f"--serve-port={port}")
        deadline = time.monotonic() + 300
        while True:
            try:
                health = httpx.get(f"{url}/health", timeout=5).json()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, worker.log()[-3000:]
                time.sleep(0.5)
        assert health["engine_steps"] == 0

        (tmp_path / "in").mkdir()
        pdf = pdf_factory.text_pdf(
            tmp_path / "in",
            ["Lease agreement.\nThe tenant pays 900 dollars each month."],
            name="lease.pdf",
        )
        harness.queue_ingest(pdf, then_summarize=True)
        harness.wait_for(
            lambda s: any(
                j.kind == JobKind.SUMMARIZE and j.status == JobStatus.SUCCEEDED
                for j in s.scalars(select(Job))
            ),
            300,
            "the summary job",
        )
        # The job's steps ran on the engine the API serves: one engine in the worker.
        steps_after_job = httpx.get(f"{url}/health", timeout=5).json()["engine_steps"]
        assert steps_after_job > 0

        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=120)
        answer = client.chat.completions.create(
            model="smollm2-135m-instruct",
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=8,
        )
        assert answer.choices[0].message.content and answer.usage.completion_tokens > 0
        assert httpx.get(f"{url}/health", timeout=5).json()["engine_steps"] > steps_after_job
        assert "Traceback" not in worker.log()
    finally:
        harness.close()
