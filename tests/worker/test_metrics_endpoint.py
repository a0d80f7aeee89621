"""The workers' Prometheus endpoints during a real job: a prefork ingest worker (its children's
metrics summed by its main process) and a threads-pool model worker running the real default
model, on a real redis-server. Their counters move while the job runs and after it."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from app.db.models import Job, JobKind, JobStatus
from tests.pipelines import pdf_factory
from tests.worker import celery_support
from tests.worker.celery_support import Harness, worker_env
from tests.worker.redis_server import redis_server, spare_port  # noqa: F401 (fixture)

start_worker = celery_support.start_worker
_SAMPLE = re.compile(r"^([a-z_]+)(\{[^}]*\})? (\S+)$")
PAGES = [
    "Lease agreement.\nThe tenant pays rent of 1,200 dollars on the first day of each month. "
    "The landlord repairs the roof and the heating. The lease runs for two years.",
    "Termination.\nEither party may end the lease with 60 days of written notice.",
]


def scrape(port: int) -> dict[str, float]:
    """Series name with labels -> value, from the endpoint as Prometheus reads it."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    samples = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            samples[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return samples


@pytest.mark.slow
def test_worker_metrics_move_during_a_real_summary_job(
    tmp_path,
    converted_model_cache,
    start_worker,
    redis_server,  # noqa: F811
) -> None:
    env = worker_env(
        tmp_path,
        converted_model_cache,
        database_url=f"sqlite:///{tmp_path / 'longdoc.db'}",
        broker_url=redis_server.url,
        LONGDOC_SUMMARY_MAX_NEW_TOKENS="96",
    )
    harness = Harness(env)
    ingest_port, model_port = spare_port(), spare_port()
    start_worker(env, "--queues=ingest", f"--metrics-port={ingest_port}")
    start_worker(env, "--queues=gpu,gpu_batch", f"--metrics-port={model_port}")
    ingested = 'longdoc_jobs_total{kind="ingest",status="succeeded"}'
    summarized = 'longdoc_jobs_total{kind="summarize",status="succeeded"}'
    tokens = "longdoc_generated_tokens_total"
    before = scrape(model_port)
    assert before[tokens] == 0 and before.get(summarized, 0) == 0
    assert scrape(ingest_port).get(ingested, 0) == 0
    assert 'longdoc_queue_depth{queue="gpu_batch"}' in before

    job_id = harness.queue_ingest(pdf_factory.text_pdf(tmp_path, PAGES, name="lease.pdf"))
    during: list[dict[str, float]] = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        with harness.sessions() as session:
            summaries = [
                j
                for j in session.query(Job).filter(Job.kind == JobKind.SUMMARIZE)
                if j.status in (JobStatus.SUCCEEDED, JobStatus.FAILED)
            ]
        if summaries:
            break
        if harness.job(job_id).status == JobStatus.RUNNING or during:
            during.append(scrape(model_port))
        time.sleep(0.2)
    (summary_job,) = summaries
    assert summary_job.status == JobStatus.SUCCEEDED, summary_job.error
    after = scrape(model_port)

    # The ingest job, run in a pool child, is counted by the ingest worker's main process.
    assert scrape(ingest_port)[ingested] == 1
    # While the summary job ran, its tokens were counted as they came, before it ended.
    moving = [s[tokens] for s in during if s.get(summarized, 0) == 0]
    assert any(count > 0 for count in moving), moving[-5:]
    assert after[tokens] >= max(moving) and after[summarized] == 1
    assert after["longdoc_prefill_seconds_count"] >= 1
    assert after["longdoc_time_to_first_token_seconds_count"] >= 1
    assert after["longdoc_decode_tokens_per_second_count"] >= 1
    assert after['longdoc_job_duration_seconds_count{kind="summarize",status="succeeded"}'] == 1
    assert after["longdoc_kv_cache_blocks_used"] > 0
    assert after['longdoc_prompt_tokens_total{cached="false"}'] > 0
    harness.close()
