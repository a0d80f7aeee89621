"""Altair charts of the engine's behaviour, from app/services/monitoring.py's figures."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from app.services.monitoring import QueueDepthPoint, RequestPoint, Spread, ThroughputBucket

HEIGHT = 260
KIND_COLORS = alt.Scale(domain=["summarize", "answer"], range=["#4C78A8", "#F58518"])


def requests_frame(points: Sequence[RequestPoint]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "request": i + 1,
                "job": p.job_id,
                "kind": p.kind,
                "prompt tokens": p.num_prompt_tokens,
                "prefill s": p.prefill_seconds,
                "chunks": p.num_chunks,
                "peak memory MB": (p.peak_memory_bytes or 0) / 2**20
                if p.peak_memory_bytes
                else None,
                "device": p.device or "?",
            }
            for i, p in enumerate(points)
        ]
    )


def prefill_vs_tokens(frame: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(frame, height=HEIGHT, title="Prefill time against prompt tokens")
        .mark_circle(size=70, opacity=0.8)
        .encode(
            x=alt.X("prompt tokens:Q", title="prompt tokens"),
            y=alt.Y("prefill s:Q", title="prefill time (s)"),
            color=alt.Color("kind:N", scale=KIND_COLORS),
            tooltip=["job", "kind", "prompt tokens", "prefill s", "chunks", "device"],
        )
    )


def prefill_distribution(frame: pd.DataFrame, spread: Spread) -> alt.LayerChart:
    bars = (
        alt.Chart(frame, height=HEIGHT, title="Prefill time distribution")
        .mark_bar(opacity=0.85)
        .encode(
            x=alt.X("prefill s:Q", bin=alt.Bin(maxbins=30), title="prefill time (s)"),
            y=alt.Y("count():Q", title="requests"),
        )
    )
    labels = [f"median {spread.median:.2f} s", f"P99 {spread.p99:.2f} s"]
    marks = pd.DataFrame(
        [{"stat": labels[0], "seconds": spread.median}, {"stat": labels[1], "seconds": spread.p99}]
    )
    rules = (
        alt.Chart(marks)
        .mark_rule(strokeWidth=2, strokeDash=[6, 3])
        .encode(
            x="seconds:Q",
            color=alt.Color(
                "stat:N",
                scale=alt.Scale(domain=labels, range=["#2CA02C", "#D62728"]),
                legend=alt.Legend(title=None, orient="top"),
            ),
        )
    )
    return alt.layer(bars, rules)


def chunks_per_request(frame: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(frame, height=HEIGHT, title="Prefill chunks per request")
        .mark_bar()
        .encode(
            x=alt.X("chunks:O", title="chunks in the request"),
            y=alt.Y("count():Q", title="requests"),
            color=alt.Color("kind:N", scale=KIND_COLORS),
        )
    )


def chunk_sizes(counts: dict[int, int]) -> alt.Chart:
    """How many prefill chunks had a size in each range: a histogram of the sizes (weighted by
    how often each was used). One bar per exact size would be a row of ones, as the last chunk
    of each prompt has a size of its own."""
    frame = pd.DataFrame([{"chunk size": k, "times used": v} for k, v in counts.items()])
    return (
        alt.Chart(frame, height=HEIGHT, title="Chunk sizes used")
        .mark_bar(color="#54A24B")
        .encode(
            x=alt.X("chunk size:Q", bin=alt.Bin(maxbins=20), title="chunk size (tokens)"),
            y=alt.Y(
                "sum(times used):Q",
                title="chunks",
                axis=alt.Axis(format="d", tickMinStep=1),
            ),
            tooltip=[
                alt.Tooltip("chunk size:Q", bin=alt.Bin(maxbins=20), title="chunk size"),
                alt.Tooltip("sum(times used):Q", title="chunks"),
            ],
        )
    )


def peak_memory(frame: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(frame.dropna(subset=["peak memory MB"]), height=HEIGHT, title="Peak memory")
        .mark_bar()
        .encode(
            x=alt.X("request:O", title="request", axis=alt.Axis(labelOverlap=True)),
            y=alt.Y("peak memory MB:Q", title="peak memory (MB)"),
            color=alt.Color("kind:N", scale=KIND_COLORS),
            tooltip=["job", "kind", "peak memory MB", "device"],
        )
    )


def fallbacks(counts: dict[str, int]) -> alt.Chart:
    frame = pd.DataFrame([{"fallback": k, "times": v} for k, v in counts.items()])
    return (
        alt.Chart(frame, height=HEIGHT, title="Fallbacks taken")
        .mark_bar(color="#E45756")
        .encode(
            x=alt.X("fallback:N", title=None),
            y=alt.Y("times:Q", title="times"),
            tooltip=["fallback", "times"],
        )
    )


def throughput(buckets: Sequence[ThroughputBucket]) -> alt.Chart:
    frame = pd.DataFrame(
        [
            {"time": b.start, "tokens/s": round(b.tokens_per_second, 1), "jobs": b.num_jobs}
            for b in buckets
        ]
    )
    return (
        alt.Chart(frame, height=HEIGHT, title="Throughput over time")
        .mark_line(point=True, color="#4C78A8")
        .encode(
            x=alt.X("time:T", title=None),
            y=alt.Y("tokens/s:Q", title="tokens per second"),
            tooltip=["time:T", "tokens/s", "jobs"],
        )
    )


def queue_depth(points: Sequence[QueueDepthPoint]) -> alt.Chart:
    frame = pd.DataFrame(
        [{"time": p.at, "jobs": p.num_waiting, "state": "waiting"} for p in points]
        + [{"time": p.at, "jobs": p.num_running, "state": "running"} for p in points]
    )
    return (
        alt.Chart(frame, height=HEIGHT, title="Queue depth")
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("time:T", title=None),
            y=alt.Y("jobs:Q", title="jobs"),
            color=alt.Color(
                "state:N",
                scale=alt.Scale(domain=["waiting", "running"], range=["#F58518", "#72B7B2"]),
            ),
            tooltip=["time:T", "state", "jobs"],
        )
    )
