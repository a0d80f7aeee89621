"""The disk tier's files alone: checks, eviction, the index after a restart, permissions, tags."""

from __future__ import annotations

import os
import stat
import time

import pytest

from app.kv_cache_files import forget_document_kv
from engine.kv_tiers import InvalidCacheTag, block_file, disk_tier, forget_tag_files
from engine.kv_tiers.block_file import BlockMisfit
from engine.kv_tiers.disk_tier import STALE_TMP_S, DiskTier
from engine.kv_tiers.disk_writer import DiskWriter
from engine.kv_tiers.tombstones import read_tombstone

NAMESPACE = "0123456789abcdef0123456789abcdef"
TOKENS = tuple(range(16))


def _write(disk: DiskTier, block_hash: int, tag: str = "document-1", size: int = 1000) -> bool:
    payload = memoryview(bytes([block_hash % 251]) * size)
    return disk.write(block_hash, TOKENS, payload, dtype="uint8", shape=(size,), tag=tag)


@pytest.fixture(params=["general", "expected", "expected without preadv"])
def expecting(request, monkeypatch) -> bool:
    """Each check runs for a reader that knows the block it expects (the tiers: one preadv, or
    the general way where os has no preadv) and for one that does not (the header tells)."""
    if request.param == "expected without preadv":
        monkeypatch.setattr(disk_tier, "HAS_PREADV", False)
    return request.param != "general"


def _read(disk: DiskTier, block_hash: int, expecting: bool, tokens=TOKENS, size: int = 1000):
    return disk.read(block_hash, tokens, expect=("uint8", (size,), size) if expecting else None)


def test_a_block_reads_back_only_under_its_own_hash_tokens_and_namespace(tmp_path) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    assert _write(disk, 7)
    block = disk.read(7, TOKENS)
    assert block is not None and bytes(block.payload) == bytes([7]) * 1000
    assert disk.read(8, TOKENS) is None  # absent
    assert disk.read(7, (1, *TOKENS[1:])) is None  # other tokens under the same hash
    assert disk.counts.num_corrupt_dropped == 1 and not disk.contains(7)  # dropped as a misfit
    other = DiskTier(tmp_path, "f" * 32, max_bytes=1 << 20)
    assert _write(disk, 9) and other.read(9, TOKENS) is None


def test_negative_hashes_name_files_too(tmp_path) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    assert _write(disk, -5) and disk.read(-5, TOKENS) is not None


def test_least_recently_used_files_go_first_past_the_cap(tmp_path) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=26_000)  # five blocks of ~5.1 KB, not six
    for block_hash in range(5):
        assert _write(disk, block_hash)
        os.utime(tmp_path / disk.relative_path(block_hash), (1000 + block_hash,) * 2)
    disk.rebuild_index()  # as a restart reads the folder: the files are old
    disk.read(0, TOKENS)  # 0 becomes the most recent (its time moves before the eviction looks)
    assert _write(disk, 5)
    kept = [h for h in range(6) if disk.contains(h)]
    assert 0 in kept and 5 in kept and 1 not in kept
    assert disk.total_bytes <= 26_000 * 0.9 and disk.counts.num_evicted == 6 - len(kept)


def test_a_restart_reads_the_index_and_deletes_dead_writers_files(tmp_path) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    for block_hash in range(3):
        _write(disk, block_hash)
    stale = (tmp_path / disk.relative_path(3)).with_suffix(".tmp")
    stale.write_bytes(b"half")
    old = time.time() - STALE_TMP_S - 1
    os.utime(stale, (old, old))
    restarted = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    assert restarted.total_bytes == disk.total_bytes > 0
    assert not stale.exists() and restarted.read(2, TOKENS) is not None


def test_a_block_another_process_is_writing_is_left_to_it(tmp_path) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    busy = (tmp_path / disk.relative_path(4)).with_suffix(".tmp")
    busy.parent.mkdir(parents=True)
    busy.write_bytes(b"")
    assert not _write(disk, 4) and disk.counts.num_write_failures == 0


def test_folders_and_files_take_the_data_folders_permissions(tmp_path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    os.chmod(data, 0o750)
    disk = DiskTier(data / "kv_cache", NAMESPACE, max_bytes=1 << 20)
    _write(disk, 1)
    assert stat.S_IMODE((data / "kv_cache").stat().st_mode) == 0o750
    assert stat.S_IMODE((data / "kv_cache" / NAMESPACE).stat().st_mode) == 0o750
    assert stat.S_IMODE((data / "kv_cache" / disk.relative_path(1)).stat().st_mode) == 0o640


@pytest.mark.parametrize("forget", ["engine", "app"])
def test_forgetting_a_tag_deletes_its_files_in_every_namespace_and_refuses_more(
    tmp_path, forget
) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    other_model = DiskTier(tmp_path, "e" * 32, max_bytes=1 << 20)
    _write(disk, 1)
    _write(other_model, 1)
    _write(disk, 2, tag="document-2")
    disk.list_under("document-1", 2)  # a block both documents' prompts hold
    if forget == "engine":
        assert len(forget_tag_files(tmp_path, "document-1")) == 3
    else:
        assert forget_document_kv(kv_cache_dir=tmp_path, document_id=1) == 3
    assert not disk.contains(1) and not other_model.contains(1) and not disk.contains(2)
    assert not _write(disk, 1) and not disk.contains(1)
    assert disk.forgotten_tags() == {"document-1"}
    listed = read_tombstone(tmp_path, "document-1")
    assert listed is not None and sorted(disk.hashes_in_namespace(listed)) == [1, 2]


def test_a_tag_must_be_a_plain_name(tmp_path) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    for tag in ("../x", "", "a/b", "..", "x" * 101):
        with pytest.raises(InvalidCacheTag):
            _write(disk, 1, tag=tag)


@pytest.fixture(params=["xxh3_64", "crc32"])
def checksum_kind(request, monkeypatch) -> str:
    """Each check runs with the checksum a writer picks with xxhash installed and without."""
    if request.param == "crc32":
        monkeypatch.setattr(block_file, "xxhash", None)
    return request.param


@pytest.mark.parametrize("damage", ["flipped byte", "cut short", "a byte more"])
def test_a_damaged_file_is_dropped_whatever_its_checksum(
    tmp_path, checksum_kind, damage, expecting
) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    assert _write(disk, 3)
    path = tmp_path / disk.relative_path(3)
    assert checksum_kind.encode() in path.read_bytes()[:300]
    data = bytearray(path.read_bytes())
    if damage == "flipped byte":
        data[-10] ^= 0xFF
    elif damage == "cut short":
        del data[-10:]
    else:
        data.append(0)
    path.write_bytes(bytes(data))
    assert _read(disk, 3, expecting) is None
    assert disk.counts.num_corrupt_dropped == 1 and not path.exists()


def test_a_crc32_file_of_an_older_writer_still_reads(tmp_path, monkeypatch) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    with monkeypatch.context() as patch:
        patch.setattr(block_file, "xxhash", None)
        assert _write(disk, 4)
    assert block_file.xxhash is not None
    block = disk.read(4, TOKENS)
    assert block is not None and bytes(block.payload) == bytes([4]) * 1000


def test_a_file_whose_checksum_cannot_be_computed_is_left_for_one_that_can(
    tmp_path, monkeypatch
) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    assert _write(disk, 5)
    monkeypatch.setattr(block_file, "xxhash", None)
    assert disk.read(5, TOKENS) is None
    assert disk.counts.num_corrupt_dropped == 0 and disk.contains(5)


def test_the_payload_is_read_straight_into_the_callers_memory(tmp_path) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    assert _write(disk, 6)
    target = bytearray(1000)
    asked = []

    def take(dtype: str, shape: tuple[int, ...], num_bytes: int) -> memoryview:
        asked.append((dtype, shape, num_bytes))
        return memoryview(target)

    block = disk.read(6, TOKENS, take)
    assert block is not None and asked == [("uint8", (1000,), 1000)]
    assert target == bytes([6]) * 1000 and block.payload.obj is target

    def misfit(dtype: str, shape: tuple[int, ...], num_bytes: int) -> memoryview:
        raise BlockMisfit

    assert disk.read(6, TOKENS, misfit) is None
    assert disk.counts.num_corrupt_dropped == 0 and disk.contains(6)


def _unpad(path) -> None:
    """Rewrite a block file as a writer before the padding wrote it: the payload right after the
    header's JSON, at an odd offset."""
    data = path.read_bytes()
    length = data[len(block_file.MAGIC) : block_file.HEAD_PREFIX]
    start = block_file.HEAD_PREFIX + int.from_bytes(length, "little")
    header = data[block_file.HEAD_PREFIX : start].rstrip(b" ")
    path.write_bytes(block_file.MAGIC + len(header).to_bytes(4, "little") + header + data[start:])


@pytest.mark.parametrize("num_tokens", [16, 1500])  # a header under a page, one over it
@pytest.mark.parametrize("size", [1000, 10_000])  # a payload within the first page, one past it
def test_the_payload_starts_on_a_page_and_an_unpadded_file_still_reads(
    tmp_path, num_tokens, size, expecting
) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    tokens = tuple(range(num_tokens))
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert disk.write(1, tokens, memoryview(payload), dtype="uint8", shape=(size,), tag="d")
    path = tmp_path / disk.relative_path(1)
    assert (path.stat().st_size - size) % block_file.PAYLOAD_ALIGN == 0
    block = _read(disk, 1, expecting, tokens, size)
    assert block is not None and bytes(block.payload) == payload
    _unpad(path)
    assert (path.stat().st_size - size) % block_file.PAYLOAD_ALIGN != 0
    block = _read(disk, 1, expecting, tokens, size)
    assert block is not None and bytes(block.payload) == payload
    assert disk.counts.num_corrupt_dropped == 0


def test_a_file_damaged_in_its_padding_is_dropped(tmp_path, expecting) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    assert _write(disk, 2)
    path = tmp_path / disk.relative_path(2)
    data = bytearray(path.read_bytes())
    data[block_file.PAYLOAD_ALIGN - 1] = ord("x")  # the last byte of the padding
    path.write_bytes(bytes(data))
    assert _read(disk, 2, expecting) is None and not path.exists()


def test_an_expected_block_is_read_in_one_call_into_the_callers_memory(
    tmp_path, monkeypatch
) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    assert _write(disk, 6)
    calls = []
    preadv = os.preadv
    monkeypatch.setattr(os, "preadv", lambda *args: calls.append(args) or preadv(*args))
    monkeypatch.setattr(disk_tier, "read_block", None)  # the general path would fail
    target = bytearray(1000)
    block = disk.read(6, TOKENS, lambda *_: memoryview(target), ("uint8", (1000,), 1000))
    assert block is not None and block.payload.obj is target and target == bytes([6]) * 1000
    assert len(calls) == 1


def test_a_block_of_another_shape_than_expected_is_left_alone(tmp_path) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    assert _write(disk, 7)
    written = (tmp_path / disk.relative_path(7)).read_bytes()
    assert disk.read(7, TOKENS, expect=("uint8", (500,), 500)) is None
    assert disk.read(7, TOKENS, expect=("float16", (500,), 1000)) is None
    assert disk.contains(7) and disk.counts.num_corrupt_dropped == 0
    assert (tmp_path / disk.relative_path(7)).read_bytes() == written
    assert _read(disk, 7, True) is not None


def test_a_short_read_of_the_head_is_read_again_not_dropped(tmp_path, monkeypatch) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    assert _write(disk, 10)

    def short_preadv(fd: int, buffers: list, offset: int) -> int:  # as a network filesystem may
        data = os.pread(fd, 100, offset)
        buffers[0][: len(data)] = data
        return len(data)

    monkeypatch.setattr(os, "preadv", short_preadv)
    block = _read(disk, 10, True)
    assert block is not None and bytes(block.payload) == bytes([10]) * 1000
    assert disk.counts.num_corrupt_dropped == 0 and disk.contains(10)


def test_the_index_knows_the_files_written_here_or_found_at_start(tmp_path) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    other = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    assert _write(disk, 12) and disk.knows(12)
    assert not other.knows(12)  # written by another process since it read the folder
    other.rebuild_index()
    assert other.knows(12) and not other.knows(13)


def test_a_read_moves_an_old_files_time_later_and_once_a_minute(tmp_path) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    assert _write(disk, 8)
    path = tmp_path / disk.relative_path(8)
    os.utime(path, (1000, 1000))
    disk.rebuild_index()  # a restart: the file is old
    assert disk.read(8, TOKENS) is not None
    assert path.stat().st_mtime == 1000  # not on the reader's thread
    assert disk.apply_touches() == 1 and path.stat().st_mtime > time.time() - 60
    assert disk.read(8, TOKENS) is not None and disk.apply_touches() == 0


def test_the_writer_thread_moves_the_times_of_files_read(tmp_path) -> None:
    disk = DiskTier(tmp_path, NAMESPACE, max_bytes=1 << 20)
    assert _write(disk, 9)
    path = tmp_path / disk.relative_path(9)
    os.utime(path, (1000, 1000))
    disk.rebuild_index()
    writer = DiskWriter(disk)
    try:
        assert disk.read(9, TOKENS) is not None
        writer.submit_touches()
        writer.flush()
        assert path.stat().st_mtime > time.time() - 60
    finally:
        writer.close()
