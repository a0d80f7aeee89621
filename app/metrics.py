"""LongDoc's Prometheus metrics, all defined here; every process records into them.

The worker (both pools), the UI and the CLI record through the functions below; each exporting
process serves them on LONGDOC_METRICS_PORT (app/metrics_export.py). The metric objects are
made on first use, not at import: a prefork worker must set PROMETHEUS_MULTIPROC_DIR before
prometheus_client picks its value store, and the CLI imports this module long before that.

Labels are kinds, statuses and queue names only; never document text, questions or answers.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Seconds: a question's prefill is under a second on a GPU, a 2,000-page summary takes hours.
_SECONDS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600)
_TOKENS_PER_SECOND_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


@dataclass(frozen=True)
class Metrics:
    jobs: Any  # Counter: jobs by kind and status (queued, not_queued, succeeded, failed, ...)
    job_duration: Any  # Histogram: a task's seconds, by kind and status
    prefill_seconds: Any  # Histogram: one model request's prefill
    decode_seconds: Any  # Histogram: one model request's decoding
    time_to_first_token: Any  # Histogram: arrival to first token of one request
    decode_tokens_per_second: Any  # Histogram: one request's decoding speed
    prompt_tokens: Any  # Counter: prompt tokens, by whether the prefix cache held them
    generated_tokens: Any  # Counter: tokens written, counted as they come
    kv_blocks_used: Any  # Gauge: the KV cache's blocks in use, when a request began writing
    kv_blocks_free: Any  # Gauge: its free blocks then
    fallbacks: Any  # Counter: the engine's fallbacks (oom_halved, truncated, cpu), by kind
    ocr_pages: Any  # Counter: pages read by OCR
    redactions: Any  # Counter: redactions found in documents
    serve_requests: Any  # Counter: `longdoc serve` requests, by endpoint and outcome
    serve_running: Any  # Gauge: `longdoc serve` requests in the engine now
    kv_tier_tokens: Any  # Counter: prompt tokens looked up in a lower KV tier, by tier and result
    kv_tier_loaded_bytes: Any  # Counter: bytes loaded from a lower KV tier, by tier
    kv_tier_stored_bytes: Any  # Counter: bytes copied down to a lower KV tier, by tier
    kv_tier_load_seconds: Any  # Histogram: one request's load time from a lower tier, by tier


# The engine's lower KV tiers (engine/kv_tiers/), as its request stats name them.
KV_TIERS = ("cpu", "disk")
_LOAD_SECONDS_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

# The queue-depth gauge is collected at each scrape (app/metrics_export.py), not recorded.
QUEUE_DEPTH = "longdoc_queue_depth"

_lock = threading.Lock()
_metrics: Metrics | None = None


def get() -> Metrics:
    """The process's metrics, made on first use."""
    global _metrics
    with _lock:
        if _metrics is None:
            _metrics = _make()
        return _metrics


def _make() -> Metrics:
    from prometheus_client import Counter, Gauge, Histogram

    return Metrics(
        jobs=Counter(
            "longdoc_jobs", "Jobs queued and ended, by kind and status.", ["kind", "status"]
        ),
        job_duration=Histogram(
            "longdoc_job_duration_seconds",
            "Seconds a job's task ran, by kind and how it ended.",
            ["kind", "status"],
            buckets=_SECONDS_BUCKETS,
        ),
        prefill_seconds=Histogram(
            "longdoc_prefill_seconds",
            "Seconds of one model request's prefill.",
            buckets=_SECONDS_BUCKETS,
        ),
        decode_seconds=Histogram(
            "longdoc_decode_seconds",
            "Seconds of one model request's decoding.",
            buckets=_SECONDS_BUCKETS,
        ),
        time_to_first_token=Histogram(
            "longdoc_time_to_first_token_seconds",
            "Seconds from a model request's arrival to its first token.",
            buckets=_SECONDS_BUCKETS,
        ),
        decode_tokens_per_second=Histogram(
            "longdoc_decode_tokens_per_second",
            "Tokens per second of one request's decoding.",
            buckets=_TOKENS_PER_SECOND_BUCKETS,
        ),
        prompt_tokens=Counter(
            "longdoc_prompt_tokens",
            "Prompt tokens, by whether the prefix cache held them.",
            ["cached"],
        ),
        generated_tokens=Counter("longdoc_generated_tokens", "Tokens the model wrote."),
        kv_blocks_used=Gauge(
            "longdoc_kv_cache_blocks_used",
            "KV cache blocks in use when the latest request began writing.",
            multiprocess_mode="mostrecent",
        ),
        kv_blocks_free=Gauge(
            "longdoc_kv_cache_blocks_free",
            "KV cache blocks free when the latest request began writing.",
            multiprocess_mode="mostrecent",
        ),
        fallbacks=Counter("longdoc_engine_fallbacks", "The engine's fallbacks, by kind.", ["kind"]),
        ocr_pages=Counter("longdoc_ocr_pages", "Pages whose text was read by OCR."),
        redactions=Counter("longdoc_redactions_found", "Redactions found in documents."),
        serve_requests=Counter(
            "longdoc_serve_requests",
            "Requests to `longdoc serve`, by endpoint and outcome (a finish reason, "
            "disconnected, or an HTTP error status).",
            ["endpoint", "outcome"],
        ),
        serve_running=Gauge(
            "longdoc_serve_running_requests",
            "Requests of `longdoc serve` in the engine now.",
            multiprocess_mode="livesum",
        ),
        kv_tier_tokens=Counter(
            "longdoc_kv_tier_tokens",
            "Prompt tokens looked up in a lower KV tier (below the GPU's prefix cache), by tier "
            "and whether it held them (hit) or not (miss).",
            ["tier", "result"],
        ),
        kv_tier_loaded_bytes=Counter(
            "longdoc_kv_tier_loaded_bytes", "Bytes of KV loaded from a lower tier.", ["tier"]
        ),
        kv_tier_stored_bytes=Counter(
            "longdoc_kv_tier_stored_bytes", "Bytes of KV copied down to a lower tier.", ["tier"]
        ),
        kv_tier_load_seconds=Histogram(
            "longdoc_kv_tier_load_seconds",
            "Seconds one request spent loading its prompt's KV from a lower tier.",
            ["tier"],
            buckets=_LOAD_SECONDS_BUCKETS,
        ),
    )


def record_job_queued(kind: str) -> None:
    get().jobs.labels(kind=kind, status="queued").inc()


def record_job_not_queued(kind: str) -> None:
    """The broker could not be reached: the job was failed before any worker saw it."""
    get().jobs.labels(kind=kind, status="not_queued").inc()


def record_job_ended(kind: str, status: str, seconds: float) -> None:
    """A job's task ended: "succeeded", "failed", "skipped" (done before) or "missing"."""
    metrics = get()
    metrics.jobs.labels(kind=kind, status=status).inc()
    metrics.job_duration.labels(kind=kind, status=status).observe(max(seconds, 0.0))


def record_generated_tokens(count: int = 1) -> None:
    get().generated_tokens.inc(count)


def record_model_request(stats: Mapping[str, Any]) -> None:
    """One model request's engine stats (engine.RequestStats.to_dict())."""
    metrics = get()
    if _number(stats.get("prefill_seconds")) is not None:
        metrics.prefill_seconds.observe(stats["prefill_seconds"])
    if _number(stats.get("decode_seconds")) is not None and stats.get("num_decode_tokens"):
        metrics.decode_seconds.observe(stats["decode_seconds"])
    if _number(stats.get("time_to_first_token_seconds")) is not None:
        metrics.time_to_first_token.observe(stats["time_to_first_token_seconds"])
    if (speed := _number(stats.get("decode_tokens_per_second"))) is not None and speed > 0:
        metrics.decode_tokens_per_second.observe(speed)
    prompt = int(_number(stats.get("num_prompt_tokens")) or 0)
    cached = min(int(_number(stats.get("num_cached_tokens")) or 0), prompt)
    metrics.prompt_tokens.labels(cached="true").inc(cached)
    metrics.prompt_tokens.labels(cached="false").inc(prompt - cached)
    if (used := _number(stats.get("num_kv_blocks_used"))) is not None:
        metrics.kv_blocks_used.set(used)
    if (free := _number(stats.get("num_kv_blocks_free"))) is not None:
        metrics.kv_blocks_free.set(free)
    _record_kv_tiers(metrics, stats)
    for fallback in stats.get("fallbacks") or ():
        kind = fallback.get("kind") if isinstance(fallback, Mapping) else None
        metrics.fallbacks.labels(kind=str(kind or "unknown")).inc()


def _record_kv_tiers(metrics: Metrics, stats: Mapping[str, Any]) -> None:
    for tier in KV_TIERS:
        hit = int(_number(stats.get(f"{tier}_tier_num_tokens")) or 0)
        missed = int(_number(stats.get(f"{tier}_tier_num_missed_tokens")) or 0)
        if hit == 0 and missed == 0:
            continue  # the tier is off, or the device's own cache held the whole prompt
        metrics.kv_tier_tokens.labels(tier=tier, result="hit").inc(hit)
        metrics.kv_tier_tokens.labels(tier=tier, result="miss").inc(missed)
        if hit:
            loaded = int(_number(stats.get(f"{tier}_tier_num_bytes")) or 0)
            metrics.kv_tier_loaded_bytes.labels(tier=tier).inc(loaded)
            seconds = _number(stats.get(f"{tier}_tier_seconds")) or 0.0
            metrics.kv_tier_load_seconds.labels(tier=tier).observe(max(seconds, 0.0))


def record_kv_tier_stored(tier: str, num_bytes: int) -> None:
    """Bytes the engine copied down a lower KV tier (the write-behind), since the last call."""
    get().kv_tier_stored_bytes.labels(tier=tier).inc(max(num_bytes, 0))


def record_serve_request(endpoint: str, outcome: str) -> None:
    get().serve_requests.labels(endpoint=endpoint, outcome=outcome).inc()


def set_serve_running(count: int) -> None:
    get().serve_running.set(count)


def record_ocr_pages(count: int) -> None:
    """Pages of a newly stored document read by OCR (the ingest task, from its job's stats)."""
    get().ocr_pages.inc(max(count, 0))


def record_redactions(count: int) -> None:
    """Bad redactions found in a newly stored document (the ingest task, likewise)."""
    get().redactions.inc(max(count, 0))


def exposed_names() -> frozenset[str]:
    """Every series name a scrape can show (counters' _total, histograms' _bucket/_sum/_count),
    for checking dashboards and alerts against what exists."""
    names = {QUEUE_DEPTH}
    for metric in vars(get()).values():
        for family in metric.describe():
            for sample_suffix in _SUFFIXES[family.type]:
                names.add(family.name + sample_suffix)
    return frozenset(names)


_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
