"""Host blocks cut from slabs: distinct memory per block, a new slab when one is used up, and a
slab's memory kept exactly as long as one of its blocks is."""

import gc
import weakref

import torch

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
