"""Forgetting a tag (a deleted document) leaves nothing of it in the device's prefix cache
either: its generated text's blocks, blocks a request still running registers afterwards, and,
with no lower tier at all, every cached prefix."""

from __future__ import annotations

from app.kv_cache_files import document_cache_tag
from engine import SamplingParams
from tests.engine.kv_tiers.conftest import GREEDY, document, question, tiered_engine

TAG = document_cache_tag(1)
EMPTY = {"num_device_cached_blocks": 0, "num_cpu_blocks": 0, "num_cpu_bytes": 0}


def test_forgetting_a_tag_drops_its_generated_blocks_from_the_device_too(llama) -> None:
    engine = tiered_engine(llama, kv_cpu_tier_bytes=1 << 20)
    engine.generate(
        question(document(300, 21), 1), SamplingParams(max_new_tokens=40), cache_tag=TAG
    )
    engine.flush_kv_tiers()
    sizes = engine.kv_tier_sizes()
    # 307 prompt tokens: 19 full blocks kept down; the answer's full blocks stay on the device.
    assert sizes["num_cpu_blocks"] == 19 and sizes["num_device_cached_blocks"] > 19
    engine.forget_cache_tag(TAG)
    assert engine.kv_tier_sizes() == EMPTY
    engine.close()


def test_a_request_running_when_its_tag_is_forgotten_leaves_no_block_behind(llama) -> None:
    engine = tiered_engine(llama, kv_cpu_tier_bytes=1 << 20)
    engine.add_request(question(document(300, 22), 1), GREEDY, cache_tag=TAG)
    engine.step()  # the first 64-token chunk of the prompt, registered and kept down
    engine.flush_kv_tiers()
    assert engine.kv_tier_sizes()["num_cpu_blocks"] == 4
    engine.forget_cache_tag(TAG)
    while engine.has_unfinished_requests():
        engine.step()
    engine.flush_kv_tiers()
    assert engine.kv_tier_sizes() == EMPTY
    engine.close()


def test_without_lower_tiers_forgetting_a_tag_empties_the_device_prefix_cache(llama) -> None:
    engine = tiered_engine(llama)  # no CPU tier, no disk folder: no tiers, no tag recorded
    assert engine._main.tiers is None
    engine.generate(question(document(300, 23), 1), GREEDY, cache_tag=TAG)
    assert engine.kv_tier_sizes()["num_device_cached_blocks"] >= 19
    engine.forget_cache_tag(TAG)
    assert engine.kv_tier_sizes() == EMPTY
    engine.close()
