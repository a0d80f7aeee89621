"""Block files checked on the cache's device ("sum64x2", block_sums.py): the device's sums equal
the host's, a damaged file is found after its copy up and never used, and either side can read
the other's files. The CPU engine stands in for a GPU one here (kv_device_checksums on)."""

from __future__ import annotations

import json

import pytest
import torch

from app.kv_cache_files import document_cache_tag
from engine.kv_tiers.block_file import PAYLOAD_ALIGN, SUMS, payload_sums
from engine.kv_tiers.block_sums import block_sums
from engine.kv_tiers.disk_tier import DiskTier
from tests.engine.kv_tiers.conftest import (
    BLOCK_SIZE,
    GREEDY,
    document,
    kv_files,
    question,
    tiered_engine,
)
from tests.engine.kv_tiers.test_engine_tiers import _block_hashes

TAG = document_cache_tag(9)


def _payload(tensor: torch.Tensor) -> memoryview:
    return memoryview(tensor.contiguous().view(-1).view(torch.uint8).numpy())


def test_the_device_sums_are_the_host_sums_and_any_change_moves_them() -> None:
    generator = torch.Generator().manual_seed(0)
    # Random 64-bit words: the sums wrap many times over.
    blocks = torch.randint(-(2**62), 2**62, (5, 2, 3, 16, 4), generator=generator)
    blocks = blocks.view(torch.bfloat16)  # any dtype: the words are the bytes
    sums = block_sums(blocks).tolist()
    assert sums == [payload_sums(_payload(block)) for block in blocks]
    flipped = blocks.clone()
    flipped.view(torch.uint8).view(-1)[1234] ^= 1  # one bit of block 0 (3,072 bytes a block)
    swapped = blocks.clone()
    words = swapped[1].view(-1).view(torch.int64)
    words[[3, 7]] = words[[7, 3]]  # two words of block 1 change places
    assert block_sums(flipped)[0].tolist() != sums[0]
    assert block_sums(swapped)[1].tolist() != sums[1]
    assert block_sums(swapped)[1, 0].item() == sums[1][0]  # same words: only the weights tell


def test_a_file_with_sums_is_checked_by_a_host_reader_or_left_to_the_caller(tmp_path) -> None:
    disk = DiskTier(tmp_path, "n" * 32, max_bytes=1 << 30)
    kv = torch.randn(2, 4, 8)
    sums = tuple(block_sums(kv[None])[0].tolist())
    assert disk.write(7, (1, 2), _payload(kv), dtype="float32", shape=(2, 4, 8), tag="t", sums=sums)
    path = tmp_path / disk.relative_path(7)
    header = json.loads(path.read_bytes()[9:PAYLOAD_ALIGN])
    assert header[SUMS] == list(sums) and "xxh3_64" not in header
    expect = ("float32", (2, 4, 8), kv.numel() * 4)
    deferred = disk.read(7, (1, 2), expect=expect, defer_sums=True)
    assert deferred is not None and deferred.sums == sums
    checked = disk.read(7, (1, 2), expect=expect)
    assert checked is not None and checked.sums is None  # checked here, on the host
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x10
    path.write_bytes(bytes(data))
    assert disk.read(7, (1, 2), expect=expect, defer_sums=True).sums == sums  # not looked at
    assert disk.read(7, (1, 2), expect=expect) is None  # the host's check finds it
    assert not path.exists() and disk.counts.num_corrupt_dropped == 1


def _engine(llama, folder, *, device_sums: bool):
    return tiered_engine(
        llama, kv_disk_tier_dir=folder, kv_cpu_tier_bytes=1 << 20, kv_device_checksums=device_sums
    )


@pytest.mark.parametrize("damaged", [4, 11])
def test_a_damaged_file_is_found_after_its_copy_up_and_never_used(
    llama, cold_engine, tmp_path, damaged
) -> None:
    doc = document(300, 31)
    writer = _engine(llama, tmp_path, device_sums=True)
    writer.generate(question(doc, 1), GREEDY, cache_tag=TAG)
    writer.close()
    assert all(SUMS.encode() in path.read_bytes()[:PAYLOAD_ALIGN] for path in kv_files(tmp_path))
    reader = _engine(llama, tmp_path, device_sums=True)
    tiers = reader._main.tiers
    bad_hash = _block_hashes(doc)[damaged]
    path = tmp_path / tiers.disk.relative_path(bad_hash)
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x40  # the payload only: the read itself finds nothing wrong
    path.write_bytes(bytes(data))
    result = reader.generate(question(doc, 2), GREEDY, cache_tag=TAG)
    # Every block came up; the damaged one was caught on the device: the prefix used stops there.
    assert result.stats.tier_tokens("disk") == damaged * BLOCK_SIZE
    assert result.stats.num_cached_tokens == damaged * BLOCK_SIZE
    assert result.token_ids == cold_engine.generate(question(doc, 2), GREEDY).token_ids
    assert tiers.disk.counts.num_corrupt_dropped == 1
    # The CPU tier let the damaged copy go (it may hold the block computed again since).
    kept = tiers.cpu.get(bad_hash, tuple(doc[damaged * BLOCK_SIZE : (damaged + 1) * BLOCK_SIZE]))
    damaged_payload = bytes(data[PAYLOAD_ALIGN:])
    assert kept is None or bytes(_payload(kept)) != damaged_payload
    # Computed again and written again: the next engine loads the whole document.
    reader.close()
    again = _engine(llama, tmp_path, device_sums=True)
    result = again.generate(question(doc, 3), GREEDY, cache_tag=TAG)
    assert result.stats.tier_tokens("disk") >= 18 * BLOCK_SIZE
    assert result.token_ids == cold_engine.generate(question(doc, 3), GREEDY).token_ids
    again.close()


def test_engines_read_each_others_files(llama, cold_engine, tmp_path) -> None:
    """A GPU worker's files (sums) on a CPU worker, and a CPU worker's (XXH3) on a GPU one."""
    for writes_sums in (True, False):
        folder = tmp_path / str(writes_sums)
        doc = document(300, 40 + writes_sums)
        writer = _engine(llama, folder, device_sums=writes_sums)
        writer.generate(question(doc, 1), GREEDY, cache_tag=TAG)
        writer.close()
        reader = _engine(llama, folder, device_sums=not writes_sums)
        result = reader.generate(question(doc, 2), GREEDY, cache_tag=TAG)
        assert result.stats.tier_tokens("disk") == 18 * BLOCK_SIZE, writes_sums
        assert result.token_ids == cold_engine.generate(question(doc, 2), GREEDY).token_ids
        reader.close()


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@needs_cuda
def test_on_a_gpu_the_sums_match_the_host_and_a_damaged_file_is_caught(llama, tmp_path) -> None:
    blocks = torch.randint(-(2**62), 2**62, (3, 2, 4, 16, 8), device="cuda")
    assert block_sums(blocks).tolist() == [payload_sums(_payload(b.cpu())) for b in blocks]
    doc, damaged = document(300, 50), 6
    cold = tiered_engine(llama, device="cuda", enable_prefix_cache=False)
    expected = cold.generate(question(doc, 2), GREEDY).token_ids
    on_gpu = {"device": "cuda", "kv_disk_tier_dir": tmp_path, "kv_device_checksums": True}
    writer = tiered_engine(llama, **on_gpu)
    writer.generate(question(doc, 1), GREEDY, cache_tag=TAG)
    writer.close()
    reader = tiered_engine(llama, **on_gpu)
    whole = reader.generate(question(doc, 2), GREEDY, cache_tag=TAG)
    assert whole.stats.tier_tokens("disk") == 18 * BLOCK_SIZE
    assert whole.token_ids == expected
    path = tmp_path / reader._main.tiers.disk.relative_path(_block_hashes(doc)[damaged])
    reader.close()
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x40
    path.write_bytes(bytes(data))
    again = tiered_engine(llama, **on_gpu)
    result = again.generate(question(doc, 2), GREEDY, cache_tag=TAG)
    assert result.stats.tier_tokens("disk") == damaged * BLOCK_SIZE
    assert result.token_ids == expected
    assert again._main.tiers.disk.counts.num_corrupt_dropped == 1
    again.close()
