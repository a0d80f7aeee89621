"""The monitoring figures: pure functions of job records, and the one query that loads them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.db.models import JobKind
from app.services import jobs, monitoring, results
from app.services.monitoring import JobRecord

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def call(tokens: int, seconds: float, chunks: list[int], **extra) -> dict:
    return {
        "num_prompt_tokens": tokens,
        "prefill_seconds": seconds,
        "chunk_sizes": chunks,
        "num_decode_tokens": 10,
        "decode_seconds": 0.5,
        "peak_memory_bytes": extra.pop("peak", None),
        "fallbacks": extra.pop("fallbacks", []),
        "device": extra.pop("device", "cuda:0"),
        "attention_backend": extra.pop("backend", "flash"),
        **extra,
    }


def record(job_id: int, kind: str = "summarize", status: str = "succeeded", **fields) -> JobRecord:
    return JobRecord(
        job_id=job_id,
        kind=kind,
        status=status,
        created_at=fields.pop("created_at", T0),
        started_at=fields.pop("started_at", T0 + timedelta(seconds=1)),
        finished_at=fields.pop("finished_at", T0 + timedelta(seconds=10)),
        **fields,
    )


def test_points_come_per_call_where_known_else_from_the_job_totals() -> None:
    hierarchical = record(
        1,
        calls=(call(1000, 0.5, [512, 488], peak=2_000_000), call(300, 0.2, [300])),
        stats={"num_prompt_tokens": 1300},
    )
    totals_only = record(
        2,
        kind="answer",
        stats={"num_prompt_tokens": 800, "prefill_seconds": 0.4, "num_chunks": 2},
    )
    failed = record(3, status="failed", stats={"num_prompt_tokens": 5})
    ingest = record(4, kind="ingest", stats={"num_pages": 3})
    points = monitoring.request_points([hierarchical, totals_only, failed, ingest])
    assert [(p.job_id, p.num_prompt_tokens, p.num_chunks) for p in points] == [
        (1, 1000, 2),
        (1, 300, 1),
        (2, 800, 2),
    ]
    assert points[0].chunk_sizes == (512, 488) and points[2].chunk_sizes == ()
    assert points[0].peak_memory_bytes == 2_000_000 and points[2].peak_memory_bytes is None
    assert monitoring.latest_engine(points) == ("cuda:0", "flash")
    assert monitoring.latest_engine(points[2:]) is None


def test_bad_values_in_stats_count_as_missing() -> None:
    broken = record(1, calls=({"num_prompt_tokens": "many", "prefill_seconds": float("nan")},))
    (point,) = monitoring.request_points([broken])
    assert (point.num_prompt_tokens, point.prefill_seconds, point.chunk_sizes) == (0, 0.0, ())


def test_percentiles_interpolate_between_ranks() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert monitoring.percentile(values, 50) == pytest.approx(50.5)
    assert monitoring.percentile(values, 99) == pytest.approx(99.01)
    assert monitoring.percentile(values, 0) == 1 and monitoring.percentile(values, 100) == 100
    assert monitoring.percentile([], 50) is None
    assert monitoring.percentile([3.0], 99) == 3.0
    with pytest.raises(ValueError):
        monitoring.percentile(values, 101)


def test_prefill_spread_ignores_requests_without_a_prompt() -> None:
    calls = (*tuple(call(100, s, [100]) for s in (0.1, 0.2, 0.3, 4.0)), call(0, 9.0, []))
    spread = monitoring.prefill_spread(monitoring.request_points([record(1, calls=calls)]))
    assert spread.count == 4
    assert spread.median == pytest.approx(0.25)
    assert spread.p99 == pytest.approx(0.3 + 0.97 * 3.7)


def test_chunk_sizes_and_fallbacks_are_counted() -> None:
    calls = (
        call(1024, 1.0, [512, 512], fallbacks=[{"kind": "oom_halved", "detail": {"to": 256}}]),
        call(700, 1.0, [512, 188], fallbacks=[{"kind": "truncated"}, {"kind": "cpu"}]),
        call(10, 0.1, [10], fallbacks=[{"kind": "oom_halved"}]),
    )
    points = monitoring.request_points([record(1, calls=calls)])
    assert monitoring.chunk_size_counts(points) == {10: 1, 188: 1, 512: 3}
    assert monitoring.fallback_counts(points) == {"cpu": 1, "oom_halved": 2, "truncated": 1}


def test_throughput_is_tokens_over_engine_seconds_per_bucket() -> None:
    stats = {"num_prompt_tokens": 900, "num_decode_tokens": 100, "prefill_seconds": 1.5}
    stats["decode_seconds"] = 0.5
    records = [
        record(1, stats=stats, finished_at=T0 + timedelta(seconds=10)),
        record(2, stats=stats, finished_at=T0 + timedelta(seconds=50)),
        record(3, stats=stats, finished_at=T0 + timedelta(minutes=5, seconds=1)),
        record(4, kind="ingest", stats=stats),  # not a model job
        record(5, status="failed", stats=stats),
    ]
    buckets = monitoring.throughput(records, bucket=timedelta(minutes=1))
    assert [(b.start, b.num_jobs, b.num_tokens) for b in buckets] == [
        (T0, 2, 2000),
        (T0 + timedelta(minutes=5), 1, 1000),
    ]
    assert buckets[0].tokens_per_second == pytest.approx(500.0)
    with pytest.raises(ValueError):
        monitoring.throughput(records, bucket=timedelta(0))


def test_queue_depth_follows_arrivals_starts_and_finishes() -> None:
    s = timedelta(seconds=1)
    records = [
        record(1, created_at=T0, started_at=T0 + 2 * s, finished_at=T0 + 5 * s),
        record(2, created_at=T0 + s, started_at=T0 + 5 * s, finished_at=T0 + 9 * s),
        record(3, status="failed", created_at=T0 + 3 * s, started_at=None, finished_at=T0 + 4 * s),
        record(4, status="queued", created_at=T0 + 6 * s, started_at=None, finished_at=None),
    ]
    depth = monitoring.queue_depth(records, now=T0 + 20 * s)
    assert [(int((p.at - T0).total_seconds()), p.num_waiting, p.num_running) for p in depth] == [
        (0, 1, 0),
        (1, 2, 0),
        (2, 1, 1),
        (3, 2, 1),
        (4, 1, 1),
        (5, 0, 1),  # job 1 finished and job 2 started at the same moment
        (6, 1, 1),
        (9, 1, 0),
        (20, 1, 0),
    ]
    assert monitoring.queue_depth([], now=T0) == []


def test_load_job_records_reads_jobs_and_the_calls_their_results_kept(session) -> None:
    ingest = jobs.create_job(session=session, kind=JobKind.INGEST)
    summary_job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE)
    answer_job = jobs.create_job(session=session, kind=JobKind.ANSWER)
    # Results need a document; store a tiny one.
    from app.services import documents

    document = documents.store_document(
        session=session,
        new=documents.NewDocument(
            content_hash="a" * 64,
            file_name="x.pdf",
            kind="other",
            num_tokens=1,
            pages=[documents.NewPage(1, "x")],
            passages=[],
        ),
    )
    calls = [call(100, 0.1, [100]), call(50, 0.05, [50])]
    results.save_summary(
        session=session,
        job_id=summary_job.id,
        document_id=document.id,
        method="hierarchical",
        text="secret summary text",
        model="m",
        stats={"calls": calls},
    )
    jobs.finish_job(session=session, job_id=summary_job.id, stats={"num_prompt_tokens": 150})
    session.commit()

    records = monitoring.load_job_records(session=session)
    assert [r.job_id for r in records] == [ingest.id, summary_job.id, answer_job.id]
    by_id = {r.job_id: r for r in records}
    assert by_id[summary_job.id].calls == tuple(calls)
    assert by_id[summary_job.id].stats == {"num_prompt_tokens": 150}
    assert by_id[answer_job.id].calls == () and by_id[answer_job.id].status == "queued"
    model_only = monitoring.load_job_records(session=session, kinds=monitoring.MODEL_KINDS, limit=1)
    assert [r.job_id for r in model_only] == [answer_job.id]  # the newest one
    assert "secret" not in repr(records)
