"""Monitoring: how the engine behaves, charted from the jobs' stats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import streamlit as st

from app.errors import AppError
from app.services import monitoring
from app.services.ingest_counts import IngestCounts, ingest_counts
from ui import context as ctx
from ui.components import charts

MAX_JOBS = 2000


def _bucket(records: list[monitoring.JobRecord]) -> timedelta:
    """About 30 throughput points over the span the jobs cover, at least a minute each."""
    times = [r.finished_at for r in records if r.finished_at is not None]
    if len(times) < 2:
        return timedelta(minutes=1)
    span = max(times) - min(times)
    return max(timedelta(minutes=1), span / 30)


def _metrics(points: list[monitoring.RequestPoint], spread: monitoring.Spread) -> None:
    fallbacks = monitoring.fallback_counts(points)
    peaks = [p.peak_memory_bytes for p in points if p.peak_memory_bytes]
    cells = st.columns(5)
    cells[0].metric("Model requests", len(points))
    cells[1].metric(
        "Median prefill", f"{spread.median:.2f} s" if spread.median is not None else "—"
    )
    cells[2].metric("P99 prefill", f"{spread.p99:.2f} s" if spread.p99 is not None else "—")
    cells[3].metric("Highest peak memory", ctx.human_bytes(max(peaks)) if peaks else "—")
    cells[4].metric("Fallbacks taken", sum(fallbacks.values()))


def _prompt_sources(points: list[monitoring.RequestPoint]) -> None:
    sources = monitoring.prompt_token_sources(points)
    cells = st.columns(4)
    cells[0].metric("Prompt tokens computed", f"{sources['computed']:,}")
    cells[1].metric("From the GPU cache", f"{sources['gpu']:,}")
    cells[2].metric(
        "From the CPU tier", f"{sources['cpu']:,}", help="KV kept in the worker's memory."
    )
    cells[3].metric(
        "From the disk tier",
        f"{sources['disk']:,}",
        help="KV kept on disk: what a question after a restart loads instead of reading.",
    )


def _ingest_metrics(counts: IngestCounts) -> None:
    st.markdown("##### Ingests: scanned pages and hidden text")
    cells = st.columns(5)
    cells[0].metric("Documents stored", f"{counts.num_stored:,}")
    cells[1].metric("With scanned pages", f"{counts.num_with_ocr:,}")
    cells[2].metric("Pages read by OCR", f"{counts.num_ocr_pages:,}")
    confidence = counts.ocr_mean_confidence
    cells[3].metric("OCR confidence", f"{confidence:.0%}" if confidence is not None else "—")
    cells[4].metric(
        "With hidden text",
        f"{counts.num_with_redactions:,}",
        help=f"{counts.num_redactions:,} boxes drawn over {counts.num_hidden_chars:,} readable "
        "characters, found at ingest.",
    )


def render() -> None:
    st.title("Monitoring")
    st.caption(
        "How the engine behaves on real work: every summary and answer records its prefill "
        "chunks, timings, memory and fallbacks. Charts cover the last "
        f"{MAX_JOBS:,} jobs."
    )
    try:
        with ctx.session() as db:
            records = monitoring.load_job_records(session=db, limit=MAX_JOBS)
    except AppError as error:
        ctx.show_error(error)
        return
    _ingest_metrics(ingest_counts(records))
    points = monitoring.request_points(records)
    spread = monitoring.prefill_spread(points)
    _metrics(points, spread)
    _prompt_sources(points)
    depth = monitoring.queue_depth(records, now=datetime.now(UTC))
    if not points:
        st.info(
            "No model requests yet. Charts appear once a document has been summarized or "
            "a question answered.",
            icon=":material/monitoring:",
        )
        if depth:
            st.altair_chart(charts.queue_depth(depth), width="stretch")
        return
    frame = charts.requests_frame(points)
    left, right = st.columns(2)
    left.altair_chart(charts.prefill_vs_tokens(frame), width="stretch")
    right.altair_chart(charts.prefill_distribution(frame, spread), width="stretch")
    left, right = st.columns(2)
    left.altair_chart(charts.chunks_per_request(frame), width="stretch")
    sizes = monitoring.chunk_size_counts(points)
    if sizes:
        right.altair_chart(charts.chunk_sizes(sizes), width="stretch")
    else:
        right.info("No per-chunk sizes recorded yet.")
    left, right = st.columns(2)
    if frame["peak memory MB"].notna().any():
        left.altair_chart(charts.peak_memory(frame), width="stretch")
    else:
        left.info("No peak memory recorded (the CPU does not report it).", icon=":material/memory:")
    fallbacks = monitoring.fallback_counts(points)
    if fallbacks:
        right.altair_chart(charts.fallbacks(fallbacks), width="stretch")
    else:
        right.success(
            "No fallbacks taken: no prompt was truncated, halved after running out of memory, "
            "or moved to the CPU.",
            icon=":material/check_circle:",
        )
    left, right = st.columns(2)
    left.altair_chart(
        charts.throughput(monitoring.throughput(records, bucket=_bucket(records))),
        width="stretch",
    )
    right.altair_chart(charts.queue_depth(depth), width="stretch")


render()
