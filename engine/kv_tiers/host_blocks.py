"""Host memory for KV blocks, cut from slabs: one pinned allocation per SLAB_BLOCKS blocks.

Pinning memory (cudaHostAlloc) costs about a millisecond a call and the driver serializes the
calls across threads: one pinned tensor per 2 MB block held the H200's copies to the lower tiers
at about 2 GB/s, and the write-behind then cost the first answer as much as the prefill itself
(bench/results/kv_tiers_h200.md). A block here is a view of its slab; the slab goes back to
torch's pinned-memory cache when its last block is dropped (the views share its storage), and a
new slab of the same size is taken from that cache without pinning again. A slab stays whole
while any of its blocks is kept, so a tier may hold up to one slab more than its blocks' bytes
per run of blocks kept out of order; blocks of one document are written and dropped together,
so in practice it is about one slab.
"""

from __future__ import annotations

import threading

import torch

SLAB_BLOCKS = 32  # 64 MB at the 8B shape in bf16 (2 MB a block of 16 tokens)


class HostBlocks:
    def __init__(
        self,
        block_shape: tuple[int, ...],
        dtype: torch.dtype,
        *,
        pinned: bool,
        slab_blocks: int = SLAB_BLOCKS,
    ) -> None:
        self.block_shape = block_shape
        self.dtype = dtype
        self.pinned = pinned
        self.slab_blocks = slab_blocks
        self._lock = threading.Lock()  # the read pool's threads take blocks too
        self._slab: torch.Tensor | None = None
        self._next = 0

    def take(self) -> torch.Tensor:
        """An uninitialized host block of block_shape (pinned when `pinned`)."""
        with self._lock:
            if self._slab is None or self._next == self.slab_blocks:
                self._slab = torch.empty(
                    (self.slab_blocks, *self.block_shape), dtype=self.dtype, pin_memory=self.pinned
                )
                self._next = 0
            block = self._slab[self._next]
            self._next += 1
            return block
