"""Per-request measurements, returned with every result and stored as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Kinds of fallback; others may be added, each with a "detail" a person can read.
FALLBACK_OOM_HALVED = "oom_halved"  # a chunk ran out of memory and was retried at half size
FALLBACK_TRUNCATED = "truncated"  # the prompt was cut to what fitted (oom_policy "truncate")
FALLBACK_CPU = "cpu"  # the rest of the request ran on the CPU (oom_policy "cpu")


# The KV tiers below the device's prefix cache (engine/kv_tiers/), by name.
KV_TIERS = ("cpu", "disk")


@dataclass
class TierLoad:
    """What one request's prompt took from one lower KV tier before its prefill."""

    num_tokens: int = 0
    num_bytes: int = 0
    seconds: float = 0.0
    num_missed_tokens: int = 0  # looked for in this tier and not found (computed or lower)
    # Of seconds: the engine's thread waiting for the tier's reads (the rest: placing the
    # blocks in the cache, the copies up queued meanwhile).
    wait_seconds: float = 0.0


@dataclass
class RequestStats:
    num_prompt_tokens: int = 0
    num_cached_tokens: int = 0
    chunk_sizes: list[int] = field(default_factory=list)
    prefill_seconds: float = 0.0
    num_decode_tokens: int = 0
    decode_seconds: float = 0.0
    peak_memory_bytes: int | None = None
    fallbacks: list[dict[str, Any]] = field(default_factory=list)
    attention_backend: str = ""
    device: str = ""
    request_id: int | None = None
    # Serving: seconds from arrival to admission and to the first token (after the GPU
    # finished), the gaps between tokens, how often the request was preempted.
    queue_seconds: float = 0.0
    time_to_first_token_seconds: float | None = None
    inter_token_latency_p50_seconds: float | None = None
    inter_token_latency_p99_seconds: float | None = None
    num_preemptions: int = 0
    num_loop_tokens_dropped: int = 0
    # The KV cache's blocks in use and free when the request's first token came (its prompt's
    # blocks held): the pool's state as a serving dashboard shows it. None: never got that far.
    num_kv_blocks_used: int | None = None
    num_kv_blocks_free: int | None = None
    finish_reason: str | None = None  # "stop", "length", "loop" or "abort"
    loop: dict[str, Any] | None = None  # the loop detector's finding (Loop.to_dict())
    # Of num_cached_tokens, those loaded from a lower KV tier (by name) before the prefill.
    tier_loads: dict[str, TierLoad] = field(default_factory=dict)

    @property
    def num_computed_prompt_tokens(self) -> int:
        return self.num_prompt_tokens - self.num_cached_tokens

    def tier_tokens(self, tier: str) -> int:
        load = self.tier_loads.get(tier)
        return load.num_tokens if load is not None else 0

    @property
    def num_gpu_cached_tokens(self) -> int:
        """Prompt tokens the device's own prefix cache held (not loaded from a lower tier)."""
        return self.num_cached_tokens - sum(self.tier_tokens(tier) for tier in KV_TIERS)

    @property
    def decode_tokens_per_second(self) -> float:
        return self.num_decode_tokens / self.decode_seconds if self.decode_seconds > 0 else 0.0

    @property
    def prefill_tokens_per_second(self) -> float:
        if self.prefill_seconds <= 0:
            return 0.0
        return self.num_computed_prompt_tokens / self.prefill_seconds

    def set_inter_token_latencies(self, gaps: list[float]) -> None:
        if not gaps:
            return
        ordered = sorted(gaps)
        self.inter_token_latency_p50_seconds = _percentile(ordered, 0.50)
        self.inter_token_latency_p99_seconds = _percentile(ordered, 0.99)

    def record_fallback(self, kind: str, detail: Any = None) -> None:
        if not kind:
            raise ValueError("a fallback needs a kind, such as 'oom_halved'.")
        self.fallbacks.append({"kind": kind, "detail": detail})

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe copy: values json.dumps cannot write become strings."""
        return {
            "request_id": self.request_id,
            "num_prompt_tokens": self.num_prompt_tokens,
            "num_cached_tokens": self.num_cached_tokens,
            "chunk_sizes": list(self.chunk_sizes),
            "prefill_seconds": self.prefill_seconds,
            "prefill_tokens_per_second": self.prefill_tokens_per_second,
            "num_decode_tokens": self.num_decode_tokens,
            "decode_seconds": self.decode_seconds,
            "decode_tokens_per_second": self.decode_tokens_per_second,
            "peak_memory_bytes": self.peak_memory_bytes,
            "fallbacks": [_json_safe(fallback) for fallback in self.fallbacks],
            "attention_backend": self.attention_backend,
            "device": self.device,
            "finish_reason": self.finish_reason,
            "queue_seconds": self.queue_seconds,
            "time_to_first_token_seconds": self.time_to_first_token_seconds,
            "inter_token_latency_p50_seconds": self.inter_token_latency_p50_seconds,
            "inter_token_latency_p99_seconds": self.inter_token_latency_p99_seconds,
            "num_preemptions": self.num_preemptions,
            "num_loop_tokens_dropped": self.num_loop_tokens_dropped,
            "num_kv_blocks_used": self.num_kv_blocks_used,
            "num_kv_blocks_free": self.num_kv_blocks_free,
            "loop": _json_safe(self.loop),
            "num_computed_prompt_tokens": self.num_computed_prompt_tokens,
            "num_gpu_cached_tokens": self.num_gpu_cached_tokens,
            **{
                f"{tier}_tier_{what}": getattr(self.tier_loads.get(tier, TierLoad()), what)
                for tier in KV_TIERS
                for what in (
                    "num_tokens",
                    "num_bytes",
                    "seconds",
                    "wait_seconds",
                    "num_missed_tokens",
                )
            },
        }


def _percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted values."""
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        # NaN and infinities are not JSON.
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    return str(value)
