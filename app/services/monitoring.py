"""How the engine behaves, from the jobs' stats: what the monitoring page charts.

`load_job_records` is the only function that reads the database; everything else is a pure
function of its records, so the figures are tested without a worker. A "request" is one call
to the engine (a one-pass summary is one request, a hierarchical one is several); its
per-call stats live on the summary or answer the job saved, and its totals on the job.
Nothing here reads or returns document text, questions or answers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Answer, Job, JobKind, JobStatus, Summary

MODEL_KINDS = (JobKind.SUMMARIZE, JobKind.ANSWER)


@dataclass(frozen=True)
class JobRecord:
    """A job's timing and stats, detached from the database. `calls`: per-request stats."""

    job_id: int
    kind: str
    status: str
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    calls: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class RequestPoint:
    """One engine request. chunk_sizes is empty where only a job's totals are known."""

    job_id: int
    kind: str
    finished_at: datetime | None
    num_prompt_tokens: int
    prefill_seconds: float
    num_chunks: int
    chunk_sizes: tuple[int, ...]
    peak_memory_bytes: int | None
    fallback_kinds: tuple[str, ...]
    num_decode_tokens: int
    decode_seconds: float
    device: str = ""
    attention_backend: str = ""
    # Where the prompt's KV came from: the device's prefix cache, the engine's lower tiers
    # (engine/kv_tiers/), or computed. Zero where the request recorded none of them.
    num_gpu_cached_tokens: int = 0
    num_cpu_tier_tokens: int = 0
    num_disk_tier_tokens: int = 0


@dataclass(frozen=True)
class Spread:
    count: int
    median: float | None
    p99: float | None


@dataclass(frozen=True)
class ThroughputBucket:
    start: datetime
    num_jobs: int
    num_tokens: int  # prompt + generated tokens of the jobs that finished in this bucket
    tokens_per_second: float  # those tokens over the engine time they took


@dataclass(frozen=True)
class QueueDepthPoint:
    at: datetime
    num_waiting: int
    num_running: int


def load_job_records(
    *, session: Session, limit: int = 1000, kinds: Sequence[JobKind] = tuple(JobKind)
) -> list[JobRecord]:
    """The newest `limit` jobs of `kinds`, oldest first, with the per-request stats of the
    summaries and answers they saved."""
    rows = session.scalars(
        select(Job)
        .where(Job.kind.in_(list(kinds)))
        .order_by(Job.created_at.desc(), Job.id.desc())
        .limit(limit)
    ).all()
    job_ids = [job.id for job in rows]
    calls: dict[int, list[dict[str, Any]]] = {}
    for model in (Summary, Answer):
        for job_id, stats in session.execute(
            select(model.job_id, model.stats).where(model.job_id.in_(job_ids))
        ):
            calls[job_id] = [c for c in (stats or {}).get("calls") or () if isinstance(c, dict)]
    return [
        JobRecord(
            job_id=job.id,
            kind=JobKind(job.kind).value,
            status=JobStatus(job.status).value,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            stats=dict(job.stats or {}),
            calls=tuple(calls.get(job.id, ())),
        )
        for job in reversed(rows)
    ]


def request_points(records: Iterable[JobRecord]) -> list[RequestPoint]:
    """One point per engine request of the succeeded jobs, oldest job first."""
    points: list[RequestPoint] = []
    for record in records:
        if record.status != JobStatus.SUCCEEDED.value:
            continue
        if record.calls:
            points.extend(_point(record, call, per_call=True) for call in record.calls)
        elif record.stats.get("num_prompt_tokens") is not None:
            points.append(_point(record, record.stats, per_call=False))
    return points


def _point(record: JobRecord, stats: dict[str, Any], *, per_call: bool) -> RequestPoint:
    chunk_sizes = tuple(int(n) for n in stats.get("chunk_sizes") or () if _is_number(n))
    num_chunks = len(chunk_sizes) if per_call else int(_number(stats.get("num_chunks")))
    return RequestPoint(
        job_id=record.job_id,
        kind=record.kind,
        finished_at=record.finished_at,
        num_prompt_tokens=int(_number(stats.get("num_prompt_tokens"))),
        prefill_seconds=float(_number(stats.get("prefill_seconds"))),
        num_chunks=num_chunks,
        chunk_sizes=chunk_sizes,
        peak_memory_bytes=int(stats["peak_memory_bytes"])
        if _is_number(stats.get("peak_memory_bytes"))
        else None,
        fallback_kinds=_fallback_kinds(stats),
        num_decode_tokens=int(_number(stats.get("num_decode_tokens"))),
        decode_seconds=float(_number(stats.get("decode_seconds"))),
        device=str(stats.get("device") or ""),
        attention_backend=str(stats.get("attention_backend") or ""),
        num_gpu_cached_tokens=int(
            _number(stats.get("num_gpu_cached_tokens", stats.get("num_cached_tokens")))
        ),
        num_cpu_tier_tokens=int(_number(stats.get("cpu_tier_num_tokens"))),
        num_disk_tier_tokens=int(_number(stats.get("disk_tier_num_tokens"))),
    )


def prompt_token_sources(points: Iterable[RequestPoint]) -> dict[str, int]:
    """Prompt tokens of the requests by where their KV came from: computed, the GPU's prefix
    cache, the CPU tier or the disk tier."""
    totals = {"computed": 0, "gpu": 0, "cpu": 0, "disk": 0}
    for point in points:
        reused = point.num_gpu_cached_tokens + point.num_cpu_tier_tokens
        reused += point.num_disk_tier_tokens
        totals["computed"] += max(0, point.num_prompt_tokens - reused)
        totals["gpu"] += point.num_gpu_cached_tokens
        totals["cpu"] += point.num_cpu_tier_tokens
        totals["disk"] += point.num_disk_tier_tokens
    return totals


def _fallback_kinds(stats: dict[str, Any]) -> tuple[str, ...]:
    kinds = []
    for fallback in stats.get("fallbacks") or ():
        kind = fallback.get("kind") if isinstance(fallback, dict) else fallback
        if kind:
            kinds.append(str(kind))
    return tuple(kinds)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _number(value: Any) -> float:
    return value if _is_number(value) else 0


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation between ranks; None when empty."""
    if not 0 <= q <= 100:
        raise ValueError(f"q must be between 0 and 100, got {q}")
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def spread(values: Sequence[float]) -> Spread:
    return Spread(len(values), percentile(values, 50), percentile(values, 99))


def prefill_spread(points: Sequence[RequestPoint]) -> Spread:
    """Median and P99 prefill time over requests that prefilled anything."""
    return spread([p.prefill_seconds for p in points if p.num_prompt_tokens > 0])


def chunk_size_counts(points: Iterable[RequestPoint]) -> dict[int, int]:
    """How often each prefill chunk size was used, smallest size first."""
    counts = Counter(size for point in points for size in point.chunk_sizes)
    return dict(sorted(counts.items()))


def fallback_counts(points: Iterable[RequestPoint]) -> dict[str, int]:
    """How many times each fallback (oom_halved, truncated, cpu, ...) was taken."""
    counts = Counter(kind for point in points for kind in point.fallback_kinds)
    return dict(sorted(counts.items()))


def throughput(records: Iterable[JobRecord], *, bucket: timedelta) -> list[ThroughputBucket]:
    """Tokens per second of engine time, per bucket of finish time, for succeeded model jobs."""
    if bucket <= timedelta(0):
        raise ValueError("bucket must be positive")
    sums: dict[datetime, list[float]] = {}
    model_kinds = {kind.value for kind in MODEL_KINDS}
    for record in records:
        if record.kind not in model_kinds or record.status != JobStatus.SUCCEEDED.value:
            continue
        if record.finished_at is None:
            continue
        stats = record.stats
        tokens = _number(stats.get("num_prompt_tokens")) + _number(stats.get("num_decode_tokens"))
        seconds = _number(stats.get("prefill_seconds")) + _number(stats.get("decode_seconds"))
        start = _floor(record.finished_at, bucket)
        entry = sums.setdefault(start, [0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += tokens
        entry[2] += seconds
    return [
        ThroughputBucket(start, int(n), int(tokens), tokens / seconds if seconds > 0 else 0.0)
        for start, (n, tokens, seconds) in sorted(sums.items())
    ]


def _floor(moment: datetime, bucket: timedelta) -> datetime:
    epoch = datetime(1970, 1, 1, tzinfo=moment.tzinfo)
    return epoch + ((moment - epoch) // bucket) * bucket


def queue_depth(records: Iterable[JobRecord], *, now: datetime) -> list[QueueDepthPoint]:
    """Jobs waiting (created, not started) and running after each start, finish or arrival.

    A job that failed before it started leaves the queue when it finished; one still queued at
    `now` is waiting at the last point.
    """
    events: list[tuple[datetime, int, int]] = []  # (when, change in waiting, change in running)
    for record in records:
        events.append((record.created_at, 1, 0))
        leaves_queue = record.started_at or record.finished_at
        if leaves_queue is not None:
            events.append((leaves_queue, -1, 1 if record.started_at else 0))
        if record.started_at is not None and record.finished_at is not None:
            events.append((record.finished_at, 0, -1))
    events.sort(key=lambda event: event[0])
    points: list[QueueDepthPoint] = []
    waiting = running = 0
    for when, d_waiting, d_running in events:
        waiting, running = waiting + d_waiting, running + d_running
        if points and points[-1].at == when:
            points[-1] = QueueDepthPoint(when, waiting, running)
        else:
            points.append(QueueDepthPoint(when, waiting, running))
    if points:
        points.append(QueueDepthPoint(now, waiting, running))
    return points


def latest_engine(points: Sequence[RequestPoint]) -> tuple[str, str] | None:
    """(device, attention backend) of the newest request that recorded them."""
    for point in reversed(points):
        if point.device or point.attention_backend:
            return point.device, point.attention_backend
    return None
