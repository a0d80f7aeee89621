"""The KV cache seen block by block, as the lower tiers move it: one host block per cache block.

A 16-bit cache is one tensor [2, L, num_blocks + 1, block_size, KV, D]: a host block is
cache[:, :, b], [2, L, block_size, KV, D] in the cache's dtype. An FP8 cache (KVCache.is_fp8)
keeps its E4M3 values there and one fp32 scale per token and head beside them, [2, L,
num_blocks + 1, block_size, KV]; a value means nothing without its scale, so a host block packs
both, as bytes: [2, L, block_size * KV * D + block_size * KV * 4] uint8, each layer's K (or V)
values then their scales. Half the bytes of a bf16 block and a few percent more for the scales
(16 tokens x 8 heads x 128 dims: 16,384 bytes of values and 512 of scales a layer's K).
"""

from __future__ import annotations

import math

import torch


class CacheBlocks:
    def __init__(self, values: torch.Tensor, scales: torch.Tensor | None = None) -> None:
        """values: KVCache.tensor [2, L, num_blocks + 1, block_size, KV, D]; scales: an FP8
        cache's KVCache.scales [2, L, num_blocks + 1, block_size, KV] (None: a 16- or 32-bit
        cache)."""
        self.values = values
        self.scales = scales
        self.device = self.values.device
        shape = self.values.shape
        self._value_shape = (shape[0], shape[1], *shape[3:])  # [2, L, block_size, KV, D]
        if self.scales is None:
            self.dtype = self.values.dtype
            self.block_shape: tuple[int, ...] = self._value_shape
            return
        # The E4M3 values moved as bytes (index_select and index_copy_ on float8 dtypes are not
        # there on every torch build).
        self._raw_values = self.values.view(torch.uint8)
        self._value_bytes = shape[3] * shape[4] * shape[5] * self.values.element_size()
        self._scale_bytes = shape[3] * shape[4] * self.scales.element_size()
        self.dtype = torch.uint8
        self.block_shape = (shape[0], shape[1], self._value_bytes + self._scale_bytes)

    @property
    def block_bytes(self) -> int:
        return math.prod(self.block_shape) * self.dtype.itemsize

    def gather(self, index: torch.Tensor) -> torch.Tensor:
        """The blocks of `index` (on the cache's device) as [n, *block_shape], contiguous."""
        if self.scales is None:
            return self.values.movedim(2, 0).index_select(0, index)
        values = self._raw_values.movedim(2, 0).index_select(0, index)
        num = values.shape[0]
        scales = self.scales.movedim(2, 0).index_select(0, index)
        return torch.cat(
            (
                values.reshape(num, *self.block_shape[:2], -1),
                scales.reshape(num, *self.block_shape[:2], -1).view(torch.uint8),
            ),
            dim=-1,
        )

    def scatter(self, index: torch.Tensor, blocks: torch.Tensor) -> None:
        """blocks [n, *block_shape] (on the cache's device) into the cache blocks of `index`."""
        if self.scales is None:
            self.values.index_copy_(2, index, blocks.movedim(0, 2))
            return
        num = blocks.shape[0]
        split = self._value_bytes
        values = blocks[..., :split].reshape(num, *self._value_shape)
        scales = blocks[..., split:].contiguous().view(self.scales.dtype)
        scales = scales.reshape(num, *self._value_shape[:-1])
        self._raw_values.index_copy_(2, index, values.movedim(0, 2))
        self.scales.index_copy_(2, index, scales.movedim(0, 2))
