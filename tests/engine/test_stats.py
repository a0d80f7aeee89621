import json

import pytest

from engine.stats import FALLBACK_OOM_HALVED, RequestStats


def test_rates():
    stats = RequestStats(
        num_prompt_tokens=1000,
        num_cached_tokens=200,
        prefill_seconds=2.0,
        num_decode_tokens=50,
        decode_seconds=2.5,
    )
    assert stats.decode_tokens_per_second == 20.0
    assert stats.prefill_tokens_per_second == 400.0  # only the 800 computed tokens count
    assert RequestStats().decode_tokens_per_second == 0.0


def test_to_dict_is_json_safe():
    stats = RequestStats(num_prompt_tokens=10, chunk_sizes=[8, 2], device="cpu")
    stats.record_fallback(FALLBACK_OOM_HALVED, {"from": 8, "to": 4, "why": ValueError("x")})
    stats.record_fallback("cpu", float("inf"))
    data = json.loads(json.dumps(stats.to_dict(), allow_nan=False))
    assert data["chunk_sizes"] == [8, 2]
    assert data["fallbacks"][0] == {
        "kind": "oom_halved",
        "detail": {"from": 8, "to": 4, "why": "x"},
    }
    assert data["fallbacks"][1]["detail"] == "inf"
    assert data["decode_tokens_per_second"] == 0.0
    assert data["loop"] is None


def test_a_loop_is_recorded_as_json():
    from engine.loop_detector import KIND_SPAN, Loop

    loop = Loop(KIND_SPAN, start=30, cut_at=33, period=6, num_copies=5)
    stats = RequestStats(finish_reason="loop", loop=loop.to_dict())
    data = json.loads(json.dumps(stats.to_dict()))
    assert data["finish_reason"] == "loop"
    assert data["loop"] == {
        "kind": "repeated_span",
        "start": 30,
        "cut_at": 33,
        "period": 6,
        "num_copies": 5,
    }


def test_fallback_needs_a_kind():
    with pytest.raises(ValueError):
        RequestStats().record_fallback("")
