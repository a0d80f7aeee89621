"""The CPU tier: KV blocks in host memory (pinned when the cache is on a GPU), least recently
used first out, within a byte cap. One process's own; not shared."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch


@dataclass
class CpuBlock:
    token_ids: tuple[int, ...]
    kv: torch.Tensor  # [2, L, block_size, KV, D], contiguous, on the CPU


class CpuTier:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.num_bytes = 0
        self.num_evicted = 0
        self._blocks: OrderedDict[int, CpuBlock] = OrderedDict()  # first: least recent

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, block_hash: int) -> bool:
        return block_hash in self._blocks

    def get(self, block_hash: int, token_ids: tuple[int, ...]) -> torch.Tensor | None:
        block = self._blocks.get(block_hash)
        if block is None or block.token_ids != token_ids:
            return None
        self._blocks.move_to_end(block_hash)
        return block.kv

    def put(self, block_hash: int, token_ids: tuple[int, ...], kv: torch.Tensor) -> None:
        size = kv.numel() * kv.element_size()
        if size > self.max_bytes or block_hash in self._blocks:
            return
        while self.num_bytes + size > self.max_bytes:
            _, evicted = self._blocks.popitem(last=False)
            self.num_bytes -= evicted.kv.numel() * evicted.kv.element_size()
            self.num_evicted += 1
        self._blocks[block_hash] = CpuBlock(token_ids, kv)
        self.num_bytes += size

    def drop(self, block_hashes: list[int] | set[int]) -> int:
        num_dropped = 0
        for block_hash in block_hashes:
            block = self._blocks.pop(block_hash, None)
            if block is not None:
                self.num_bytes -= block.kv.numel() * block.kv.element_size()
                num_dropped += 1
        return num_dropped
