"""app/metrics.py: a model request's KV tier figures, and the write-behind's bytes."""

from __future__ import annotations

from prometheus_client import REGISTRY

from app import metrics


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_request_that_loaded_from_the_disk_tier_counts_its_hits_misses_bytes_and_time() -> None:
    before = {
        "disk_hit": _value("longdoc_kv_tier_tokens_total", tier="disk", result="hit"),
        "disk_miss": _value("longdoc_kv_tier_tokens_total", tier="disk", result="miss"),
        "cpu_miss": _value("longdoc_kv_tier_tokens_total", tier="cpu", result="miss"),
        "bytes": _value("longdoc_kv_tier_loaded_bytes_total", tier="disk"),
        "loads": _value("longdoc_kv_tier_load_seconds_count", tier="disk"),
        "cpu_loads": _value("longdoc_kv_tier_load_seconds_count", tier="cpu"),
    }
    metrics.record_model_request(
        {
            "num_prompt_tokens": 307,
            "num_cached_tokens": 288,
            "cpu_tier_num_tokens": 0,
            "cpu_tier_num_missed_tokens": 304,
            "disk_tier_num_tokens": 288,
            "disk_tier_num_missed_tokens": 16,
            "disk_tier_num_bytes": 147456,
            "disk_tier_seconds": 0.002,
        }
    )
    metrics.record_kv_tier_stored("disk", 1000)
    assert (
        _value("longdoc_kv_tier_tokens_total", tier="disk", result="hit")
        == before["disk_hit"] + 288
    )
    assert _value("longdoc_kv_tier_tokens_total", tier="disk", result="miss") == (
        before["disk_miss"] + 16
    )
    assert _value("longdoc_kv_tier_tokens_total", tier="cpu", result="miss") == (
        before["cpu_miss"] + 304
    )
    assert _value("longdoc_kv_tier_loaded_bytes_total", tier="disk") == before["bytes"] + 147456
    assert _value("longdoc_kv_tier_load_seconds_count", tier="disk") == before["loads"] + 1
    assert _value("longdoc_kv_tier_load_seconds_count", tier="cpu") == before["cpu_loads"]
    assert _value("longdoc_kv_tier_stored_bytes_total", tier="disk") >= 1000
    assert "longdoc_kv_tier_tokens_total" in metrics.exposed_names()
