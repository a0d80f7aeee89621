"""The Monitoring page's prompt tokens by where their KV came from (engine/kv_tiers/)."""

from __future__ import annotations

from app.services import monitoring
from tests.app.test_monitoring import call, record


def test_prompt_tokens_are_split_by_where_their_kv_came_from() -> None:
    after_restart = call(
        307,
        0.1,
        [19],
        num_cached_tokens=288,
        num_gpu_cached_tokens=0,
        cpu_tier_num_tokens=0,
        disk_tier_num_tokens=288,
    )
    warm = call(307, 0.05, [19], num_cached_tokens=288, num_gpu_cached_tokens=288)
    before_tiers = call(500, 1.0, [500], num_cached_tokens=96)  # older stats: no tier fields
    points = monitoring.request_points(
        [record(1, kind="answer", calls=(after_restart, warm, before_tiers))]
    )
    assert monitoring.prompt_token_sources(points) == {
        "computed": 19 + 19 + 404,
        "gpu": 288 + 96,
        "cpu": 0,
        "disk": 288,
    }
