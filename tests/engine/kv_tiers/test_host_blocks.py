"""Host blocks cut from slabs: distinct memory per block, a new slab when one is used up, and a
slab's memory kept exactly as long as one of its blocks is."""

import gc
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor

import torch

from engine.kv_tiers.block_loads import (
    copy_blocks_from_host,
    copy_blocks_to_host,
    host_runs,
    lower_hits,
    run_view,
)
from engine.kv_tiers.cache_blocks import CacheBlocks
from engine.kv_tiers.disk_tier import DiskTier
from engine.kv_tiers.host_blocks import HostBlocks


def test_blocks_are_distinct_views_of_few_slabs() -> None:
    host = HostBlocks((2, 3, 4), torch.bfloat16, pinned=False, slab_blocks=4)
    blocks = [host.take() for _ in range(10)]
    for i, block in enumerate(blocks):
        assert block.shape == (2, 3, 4) and block.dtype == torch.bfloat16
        assert block.is_contiguous()
        block.fill_(i)
    assert [int(b[0, 0, 0]) for b in blocks] == list(range(10))  # no two share memory
    storages = {b.untyped_storage().data_ptr() for b in blocks}
    assert len(storages) == 3  # 10 blocks from slabs of 4


def test_a_slab_lives_while_one_of_its_blocks_does() -> None:
    host = HostBlocks((8,), torch.float32, pinned=False, slab_blocks=2)
    first, second = host.take(), host.take()
    host.take()  # starts the next slab: the first is no longer the allocator's
    first_slab = first.untyped_storage()
    alive = weakref.ref(first_slab)
    del first_slab
    del first
    gc.collect()
    assert alive() is not None  # second still uses it
    second.fill_(3.0)
    assert float(second.sum()) == 24.0
    del second
    gc.collect()
    assert alive() is None


def test_the_pinner_allocates_the_pool_at_start_then_keeps_slabs_ahead() -> None:
    # 4 blocks of 8 float32 a slab: 128 bytes. A pool of 3 slabs, then 2 kept ready.
    host = HostBlocks(
        (8,), torch.float32, pinned=False, slab_blocks=4, pool_bytes=384, ahead_bytes=256
    )
    try:
        assert host.wait_pool(timeout_s=60)
        assert host.num_ready() == 3
        blocks = [host.take() for _ in range(4 * 3)]  # uses up the pool's three slabs
        assert host.counters.num_slabs_ready == 3
        assert host.counters.num_slabs_on_demand == 0
        deadline = time.monotonic() + 60
        while host.num_ready() < 2 and time.monotonic() < deadline:  # refilled to 2, no more
            time.sleep(0.01)
        time.sleep(0.05)
        assert host.num_ready() == 2
        assert len({b.untyped_storage().data_ptr() for b in blocks}) == 3
    finally:
        host.close()


def test_take_allocates_itself_when_no_slab_is_ready() -> None:
    host = HostBlocks((8,), torch.float32, pinned=False, slab_blocks=2)
    host.take()
    assert host.counters.num_slabs_on_demand == 1
    assert host.counters.num_slabs_ready == 0
    assert host.wait_pool(timeout_s=0)  # no pool asked for: ready at once
    host.close()


def test_close_stops_the_pinner_and_drops_its_ready_slabs() -> None:
    host = HostBlocks((8,), torch.float32, pinned=False, slab_blocks=2, ahead_bytes=64 * 4)
    assert host.wait_pool(timeout_s=60)
    host.close()
    assert host._pinner is not None and not host._pinner.is_alive()
    assert host.num_ready() == 0
    host.take()  # still usable after close: allocates itself


def test_runs_of_adjacent_blocks_move_as_one_tensor() -> None:
    host = HostBlocks((2, 3), torch.float32, pinned=False, slab_blocks=4)
    blocks = [host.take() for _ in range(6)]  # slab one: 0-3, slab two: 4-5
    blocks.insert(2, torch.zeros(2, 3))  # a block from elsewhere breaks the first run
    runs = host_runs(blocks)
    assert runs == [(0, 2), (2, 3), (3, 5), (5, 7)]
    for start, end in runs:
        view = run_view(blocks, start, end)
        assert view.shape == (end - start, 2, 3)
        view.copy_(torch.arange(start, end, dtype=torch.float32).view(-1, 1, 1).expand(-1, 2, 3))
    assert [int(b[1, 2]) for b in blocks] == list(range(7))  # each block written through its run
    assert host_runs([]) == []
    assert host_runs(list(reversed(blocks[:2]))) == [(0, 1), (1, 2)]  # out of order: no run


def test_blocks_go_down_and_come_back_by_runs_to_the_right_places() -> None:
    # A cache [K/V, layers, blocks, block size, KV heads, head dim]; blocks chosen out of order.
    cache = torch.randn(2, 3, 12, 4, 2, 5)
    block_ids = [7, 2, 9, 0, 11, 5, 3]
    host = HostBlocks((2, 3, 4, 2, 5), torch.float32, pinned=False, slab_blocks=3)
    hosts = [host.take() for _ in block_ids]  # runs of 3, 3 and 1
    assert host_runs(hosts) == [(0, 3), (3, 6), (6, 7)]
    copy_blocks_to_host(CacheBlocks(cache), block_ids, hosts)
    for block_id, kv in zip(block_ids, hosts, strict=True):
        assert torch.equal(kv, cache[:, :, block_id])
    target = torch.zeros_like(cache)
    places = [4, 1, 10, 6, 8, 2, 0]
    mixed = [*hosts[:4], cache[:, :, 5].clone(), *hosts[5:]]  # one block from elsewhere
    copy_blocks_from_host(CacheBlocks(target), places, mixed)
    for place, kv in zip(places, mixed, strict=True):
        assert torch.equal(target[:, :, place], kv)
    untouched = [b for b in range(12) if b not in places]
    assert not target[:, :, untouched].any()


def test_blocks_read_from_disk_lie_in_key_order_whatever_order_the_reads_end_in(
    tmp_path,
) -> None:
    disk = DiskTier(tmp_path, "n" * 32, max_bytes=1 << 30)
    host = HostBlocks((2, 8), torch.float32, pinned=False, slab_blocks=8)
    keys = [(index + 1, (index,)) for index in range(24)]
    for block_hash, token_ids in keys:
        payload = memoryview(
            torch.full((2, 8), float(block_hash)).view(-1).view(torch.uint8).numpy()
        )
        disk.write(block_hash, token_ids, payload, dtype="float32", shape=(2, 8), tag="t")
    delays = [0.004 * ((7 * index) % 5) for index in range(len(keys))]  # later keys end first

    def read(block_hash: int, token_ids: tuple[int, ...], into: torch.Tensor | None):
        time.sleep(delays[block_hash - 1])
        assert into is not None
        block = disk.read(
            block_hash, token_ids, lambda *_: memoryview(into.view(-1).view(torch.uint8).numpy())
        )
        return into if block is not None else None

    takers = set()

    def reserve(block_hash: int) -> torch.Tensor:
        takers.add(threading.get_ident())
        return host.take()

    waited = {"cpu": 0.0, "disk": 0.0}
    with ThreadPoolExecutor(4) as pool:
        hits = list(
            lower_hits(
                keys,
                cpu=None,
                disk=disk,
                read_disk=read,
                pool=pool,
                waited=waited,
                reserve=reserve,
            )
        )
    kvs = [kv for *_, kv in hits]
    assert [int(kv[0, 0]) for kv in kvs] == [block_hash for block_hash, _ in keys]
    assert host_runs(kvs) == [(0, 8), (8, 16), (16, 24)]  # a copy up per slab, not per block
    assert takers == {threading.get_ident()}  # reserved here, in key order, not by the readers


def test_an_fp8_cache_moves_its_values_and_scales_packed_block_by_block() -> None:
    # An FP8 cache [K/V, layers, blocks, block size, KV heads, head dim] and its scales.
    values = torch.randn(2, 3, 9, 4, 2, 8).to(torch.float8_e4m3fn)
    scales = torch.rand(2, 3, 9, 4, 2) + 0.5
    blocks = CacheBlocks(values, scales)
    assert blocks.dtype == torch.uint8 and blocks.block_shape == (2, 3, 4 * 2 * 8 + 4 * 2 * 4)
    assert blocks.block_bytes == 2 * 3 * (64 + 32)
    host = HostBlocks(blocks.block_shape, blocks.dtype, pinned=False, slab_blocks=2)
    hosts = [host.take() for _ in range(3)]
    copy_blocks_to_host(blocks, [6, 1, 4], hosts)
    packed = hosts[0].view(2, 3, -1)
    assert torch.equal(packed[..., :64], values[:, :, 6].reshape(2, 3, -1).view(torch.uint8))
    assert torch.equal(packed[..., 64:].contiguous().view(torch.float32).view(2, 3, 4, 2),
                       scales[:, :, 6])  # fmt: skip
    target = CacheBlocks(torch.zeros_like(values), torch.zeros_like(scales))
    copy_blocks_from_host(target, [0, 8, 3], hosts)
    for place, block_id in ((0, 6), (8, 1), (3, 4)):
        assert torch.equal(target.values[:, :, place].view(torch.uint8),
                           values[:, :, block_id].view(torch.uint8))  # fmt: skip
        assert torch.equal(target.scales[:, :, place], scales[:, :, block_id])
    assert not target.scales[:, :, [1, 2, 4, 5, 6, 7]].any()
