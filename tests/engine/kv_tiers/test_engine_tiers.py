"""The lower KV tiers end to end on the CPU: restarts, corruption, a full disk, deletion during
writes, two engines on one folder, and a model change. Every answer is compared with a cold run."""

from __future__ import annotations

import resource
import signal
import threading
import time

from app.kv_cache_files import document_cache_tag, forget_document_kv
from engine.kv_tiers import block_loads
from engine.kv_tiers.block_loads import host_runs
from tests.engine.conftest import save_tiny_model
from tests.engine.kv_tiers.conftest import (
    BLOCK_SIZE,
    FP8_KV_BYTES_PER_TOKEN,
    GREEDY,
    KV_BYTES_PER_TOKEN,
    document,
    kv_files,
    question,
    tiered_engine,
)

TAG = document_cache_tag(1)


def test_a_restarted_engine_answers_from_the_disk_tier_as_a_cold_run(
    llama, cold_engine, tmp_path, monkeypatch
) -> None:
    doc = document(300, 0)
    first = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    assert first.generate(question(doc, 1), GREEDY, cache_tag=TAG).stats.num_cached_tokens == 0
    first.close()
    files = kv_files(tmp_path)
    assert len(files) == 307 // BLOCK_SIZE  # every full block of the prompt

    restarted = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    runs = []  # per copy into the cache, the runs of blocks adjacent in host memory
    copy_up = block_loads.copy_blocks_from_host

    def counting_copy_up(cache, block_ids, kvs, expected=None):
        runs.append(host_runs(kvs))
        return copy_up(cache, block_ids, kvs, expected)

    monkeypatch.setattr(block_loads, "copy_blocks_from_host", counting_copy_up)
    second = restarted.generate(question(doc, 2), GREEDY, cache_tag=TAG)
    # The 18 blocks read by 4 threads lie in key order: each copy up moves one run.
    assert all(len(copy) == 1 for copy in runs)
    assert sum(end - start for copy in runs for start, end in copy) == 18
    stats = second.stats.to_dict()
    assert stats["disk_tier_num_tokens"] == 288 and stats["num_gpu_cached_tokens"] == 0
    assert stats["num_computed_prompt_tokens"] == 307 - 288
    assert stats["disk_tier_num_bytes"] == 288 * KV_BYTES_PER_TOKEN
    # The wait is what the engine's thread spent waiting for reads (0 when every read was done
    # before it looked: a matter of timing, which a test must not depend on).
    assert 0 <= stats["disk_tier_wait_seconds"] <= stats["disk_tier_seconds"]
    assert second.token_ids == cold_engine.generate(question(doc, 2), GREEDY).token_ids
    counters = restarted.kv_tier_counters()["disk"]
    assert counters.num_hit_blocks == 18 and counters.num_loaded_bytes == 288 * 512
    restarted.close()


def test_blocks_evicted_from_the_device_come_back_from_the_cpu_tier(
    llama, cold_engine, tmp_path
) -> None:
    # 40 blocks of device cache: a second document of 500 tokens evicts the first one's.
    engine = tiered_engine(
        llama, kv_cpu_tier_bytes=1 << 20, max_kv_cache_bytes=40 * BLOCK_SIZE * KV_BYTES_PER_TOKEN
    )
    doc, other = document(300, 3), document(500, 4)
    engine.generate(question(doc, 1), GREEDY, cache_tag=TAG)
    engine.generate(question(other, 1), GREEDY, cache_tag=document_cache_tag(2))
    again = engine.generate(question(doc, 2), GREEDY, cache_tag=TAG)
    assert again.stats.tier_tokens("cpu") > 0
    assert again.stats.num_cached_tokens == 288
    assert again.token_ids == cold_engine.generate(question(doc, 2), GREEDY).token_ids


def test_corrupted_and_truncated_files_are_dropped_and_recomputed(
    llama, cold_engine, tmp_path
) -> None:
    doc = document(300, 5)
    writer = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    writer.generate(question(doc, 1), GREEDY, cache_tag=TAG)
    writer.close()
    hashes = _block_hashes(doc)
    expected = cold_engine.generate(question(doc, 2), GREEDY).token_ids

    # One damage per engine: the read stops at the first bad block, and whether the read-ahead
    # reached a later one is a matter of thread timing, which a test must not depend on.
    for damaged, damage in ((5, "flip a byte"), (9, "cut the end")):
        reader = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
        disk = reader._main.tiers.disk
        path = tmp_path / disk.relative_path(hashes[damaged])
        data = bytearray(path.read_bytes())
        if damage == "flip a byte":
            data[-100] ^= 0x40
        else:
            data = data[:-7]
        path.write_bytes(bytes(data))
        result = reader.generate(question(doc, 2), GREEDY, cache_tag=TAG)
        assert result.stats.tier_tokens("disk") == damaged * BLOCK_SIZE, damage
        assert result.token_ids == expected, damage
        # The damaged file was read and deleted; computed again, it is written again.
        assert disk.counts.num_corrupt_dropped == 1, damage
        reader.close()
    restarted = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    result = restarted.generate(question(doc, 2), GREEDY, cache_tag=TAG)
    assert result.stats.tier_tokens("disk") == 19 * BLOCK_SIZE  # every full block
    assert result.token_ids == expected
    assert restarted._main.tiers.disk.counts.num_corrupt_dropped == 0
    restarted.close()


def test_a_full_disk_skips_the_writes_and_the_answer_is_still_right(
    llama, cold_engine, tmp_path
) -> None:
    doc = document(300, 6)
    engine = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    # Files past 2,000 bytes cannot grow: every block's write fails (EFBIG), as on a full disk.
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, hard))
    try:
        result = engine.generate(question(doc, 1), GREEDY, cache_tag=TAG)
        engine.flush_kv_tiers()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous_handler)
    assert result.token_ids == cold_engine.generate(question(doc, 1), GREEDY).token_ids
    disk = engine._main.tiers.disk
    assert disk.counts.num_write_failures == 19 and disk.counts.num_written == 0
    assert kv_files(tmp_path) == [] and list(tmp_path.rglob("*.tmp")) == []
    again = engine.generate(question(doc, 2), GREEDY, cache_tag=TAG)  # the device cache still
    assert again.stats.num_gpu_cached_tokens == 288
    engine.close()


def test_a_document_deleted_while_its_blocks_are_written_leaves_nothing(
    llama, cold_engine, tmp_path
) -> None:
    doc = document(480, 7)
    engine = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    # The web side deletes the document as soon as the first block file lands.
    deleted = threading.Event()

    def delete_when_writing() -> None:
        deadline = time.monotonic() + 30
        while not kv_files(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.0005)
        forget_document_kv(kv_cache_dir=tmp_path, document_id=1)
        deleted.set()

    deleter = threading.Thread(target=delete_when_writing)
    deleter.start()
    engine.generate(question(doc, 1), GREEDY, cache_tag=TAG)
    deleter.join()
    engine.flush_kv_tiers()
    assert deleted.is_set()
    assert kv_files(tmp_path) == []
    time.sleep(1.05)  # the engine looks for other processes' deletions once a second
    again = engine.generate(question(doc, 2), GREEDY, cache_tag=TAG)
    assert again.stats.num_cached_tokens == 0  # gone from the device's cache too
    assert again.token_ids == cold_engine.generate(question(doc, 2), GREEDY).token_ids
    engine.close()
    assert kv_files(tmp_path) == []  # and never written again
    fresh = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    assert fresh.generate(question(doc, 3), GREEDY, cache_tag=TAG).stats.num_cached_tokens == 0
    fresh.close()


def test_forgetting_a_tag_empties_every_tier_of_this_engine(llama, tmp_path) -> None:
    engine = tiered_engine(llama, kv_disk_tier_dir=tmp_path, kv_cpu_tier_bytes=1 << 20)
    doc = document(300, 8)
    engine.generate(question(doc, 1), GREEDY, cache_tag=TAG)
    engine.flush_kv_tiers()
    assert len(engine._main.tiers.cpu) == 19 and len(kv_files(tmp_path)) == 19
    engine.forget_cache_tag(TAG)
    assert len(engine._main.tiers.cpu) == 0 and kv_files(tmp_path) == []
    assert engine.generate(question(doc, 2), GREEDY, cache_tag=TAG).stats.num_cached_tokens == 0
    engine.close()


def test_two_engines_share_one_folder(llama, cold_engine, tmp_path) -> None:
    a = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    b = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    doc1, doc2 = document(300, 9), document(200, 10)
    a.generate(question(doc1, 1), GREEDY, cache_tag=TAG)
    a.flush_kv_tiers()
    from_a = b.generate(question(doc1, 2), GREEDY, cache_tag=TAG)
    assert from_a.stats.tier_tokens("disk") == 288
    assert from_a.token_ids == cold_engine.generate(question(doc1, 2), GREEDY).token_ids
    # Both write the same blocks at once: one writer per file, every file whole.
    tag2 = document_cache_tag(2)
    a.generate(question(doc2, 1), GREEDY, cache_tag=tag2)
    b.generate(question(doc2, 1), GREEDY, cache_tag=tag2)
    a.close()
    b.close()
    c = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    result = c.generate(question(doc2, 2), GREEDY, cache_tag=tag2)
    assert result.stats.tier_tokens("disk") == 192
    assert c._main.tiers.disk.counts.num_corrupt_dropped == 0
    assert result.token_ids == cold_engine.generate(question(doc2, 2), GREEDY).token_ids
    c.close()


def test_other_weights_never_hit(llama, tmp_path) -> None:
    doc = document(300, 11)
    writer = tiered_engine(llama, kv_disk_tier_dir=tmp_path / "kv")
    writer.generate(question(doc, 1), GREEDY, cache_tag=TAG)
    writer.close()
    # The same architecture and tokenizer, other weights (a fine-tune): nothing is reused.
    save_tiny_model(tmp_path / "other", "llama", seed=1)
    other = tiered_engine(tmp_path / "other", kv_disk_tier_dir=tmp_path / "kv")
    result = other.generate(question(doc, 2), GREEDY, cache_tag=TAG)
    assert result.stats.num_cached_tokens == 0
    assert result.stats.tier_loads["disk"].num_missed_tokens == 304  # 19 full blocks
    other.close()
    renamed = tiered_engine(llama, kv_disk_tier_dir=tmp_path / "kv", kv_model_identity="v2")
    assert renamed.generate(question(doc, 3), GREEDY, cache_tag=TAG).stats.num_cached_tokens == 0
    renamed.close()


def test_untagged_prompts_stay_on_the_device(llama, tmp_path) -> None:
    engine = tiered_engine(llama, kv_disk_tier_dir=tmp_path, kv_cpu_tier_bytes=1 << 20)
    engine.generate(question(document(300, 12), 1), GREEDY)
    engine.flush_kv_tiers()
    assert kv_files(tmp_path) == [] and len(engine._main.tiers.cpu) == 0
    engine.close()


def _block_hashes(tokens: list[int]) -> list[int]:
    from engine.block_manager import NO_PARENT_HASH, compute_block_hash

    hashes, parent = [], NO_PARENT_HASH
    for start in range(0, len(tokens) - BLOCK_SIZE + 1, BLOCK_SIZE):
        parent = compute_block_hash(tokens[start : start + BLOCK_SIZE], parent)
        hashes.append(parent)
    return hashes


def test_a_deletion_elsewhere_reaches_blocks_an_untagged_request_loaded(llama, tmp_path) -> None:
    doc = document(300, 13)
    writer = tiered_engine(llama, kv_disk_tier_dir=tmp_path)
    writer.generate(question(doc, 1), GREEDY, cache_tag=TAG)
    writer.close()
    reader = tiered_engine(llama, kv_disk_tier_dir=tmp_path, kv_cpu_tier_bytes=1 << 20)
    loaded = reader.generate(question(doc, 2), GREEDY)  # no tag: `longdoc serve`, say
    assert loaded.stats.tier_tokens("disk") == 288 and len(reader._main.tiers.cpu) == 18
    assert forget_document_kv(kv_cache_dir=tmp_path, document_id=1) == 19
    time.sleep(1.05)  # the engine looks for other processes' deletions once a second
    reader.poll_kv_tiers()
    assert len(reader._main.tiers.cpu) == 0
    assert reader.generate(question(doc, 3), GREEDY).stats.num_cached_tokens == 0
    reader.close()


def test_an_fp8_cache_keeps_its_scales_in_the_tiers_and_answers_as_cold_after_a_restart(
    llama, tmp_path
) -> None:
    """An FP8 cache's blocks go down with their scales (values and scales as bytes: 128 + 32
    bytes a token for the tiny Llama) and come back from the disk and the CPU tier to the same
    answer as a cold FP8 engine; the FP8 files are not hits for a cache of the model's dtype."""
    doc = document(300, seed=7)
    cold = tiered_engine(llama, kv_dtype="fp8", enable_prefix_cache=False)
    expected = cold.generate(question(doc, 2), GREEDY).token_ids
    first = tiered_engine(llama, kv_disk_tier_dir=tmp_path, kv_dtype="fp8")
    assert first.generate(question(doc, 1), GREEDY, cache_tag=TAG).token_ids == (
        cold.generate(question(doc, 1), GREEDY).token_ids
    )
    first.close()
    assert len(kv_files(tmp_path)) == 307 // BLOCK_SIZE

    restarted = tiered_engine(llama, kv_disk_tier_dir=tmp_path, kv_dtype="fp8")
    second = restarted.generate(question(doc, 2), GREEDY, cache_tag=TAG)
    stats = second.stats.to_dict()
    assert stats["disk_tier_num_tokens"] == 288
    assert stats["disk_tier_num_bytes"] == 288 * FP8_KV_BYTES_PER_TOKEN
    assert second.token_ids == expected
    restarted.close()

    in_cpu = tiered_engine(llama, kv_dtype="fp8", kv_cpu_tier_bytes=1 << 20,
                           max_kv_cache_bytes=40 * BLOCK_SIZE * FP8_KV_BYTES_PER_TOKEN)  # fmt: skip
    in_cpu.generate(question(doc, 1), GREEDY, cache_tag=TAG)
    in_cpu.generate(question(document(500, 8), 1), GREEDY, cache_tag=document_cache_tag(2))
    again = in_cpu.generate(question(doc, 2), GREEDY, cache_tag=TAG)
    assert again.stats.tier_tokens("cpu") > 0 and again.token_ids == expected
    in_cpu.close()

    wider = tiered_engine(llama, kv_disk_tier_dir=tmp_path)  # the model's dtype
    assert wider.generate(question(doc, 2), GREEDY, cache_tag=TAG).stats.tier_tokens("disk") == 0
    wider.close()
