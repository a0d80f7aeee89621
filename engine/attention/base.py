"""What every attention backend shares: per-step metadata, KV writes and block gathers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class AttentionMetadata:
    """One forward step of one sequence: queries are positions [start, start + num_query_tokens)."""

    start: int  # tokens whose KV was in the cache before this step
    num_query_tokens: int
    slot_mapping: torch.Tensor  # [T] int64: cache slot of each query position
    block_table: torch.Tensor  # [num_blocks_of_seq] int32, on the device
    block_size: int
    # First block id when the sequence's blocks are consecutive ids: its KV is then a view.
    first_block_if_contiguous: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # backend-specific (block masks, ...)

    @property
    def context_len(self) -> int:
        """Keys the queries attend to: every earlier token and the step's own."""
        return self.start + self.num_query_tokens


class AttentionBackend:
    """Base class: forward stores the step's K/V in the cache, then subclasses' attend reads
    them (and may enrich the metadata in prepare)."""

    name = "base"
    # Whether [heads, queries, keys] scores are materialized (the chunk planner's memory model).
    materializes_scores = False

    def prepare(self, meta: AttentionMetadata) -> AttentionMetadata:
        return meta

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        """q: [T, H, D], k/v: [T, KV, D], caches: [num_blocks, block_size, KV, D] -> [T, H, D]."""
        write_kv(k, v, k_cache, v_cache, meta)
        return self.attend(q, k, v, k_cache, v_cache, meta)

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        """The attention of q over the sequence's keys, the step's own already in the cache
        (k and v are those same keys, for backends that read them directly)."""
        raise NotImplementedError


def write_kv(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    meta: AttentionMetadata,
) -> None:
    """Store the step's K/V [T, KV, D] in their cache slots: a plain copy into one slice when
    the sequence's blocks are consecutive (on an H200, index_copy_ moved them at ~0.5 TB/s),
    else a scatter by slot."""
    num_kv_heads, head_dim = k.shape[1], k.shape[2]
    k_slots = k_cache.view(-1, num_kv_heads, head_dim)  # [num_blocks * block_size, KV, D]
    v_slots = v_cache.view(-1, num_kv_heads, head_dim)
    first = meta.first_block_if_contiguous
    if first is not None:
        begin = first * meta.block_size + meta.start
        k_slots[begin : begin + k.shape[0]].copy_(k)
        v_slots[begin : begin + v.shape[0]].copy_(v)
        return
    k_slots.index_copy_(0, meta.slot_mapping, k)
    v_slots.index_copy_(0, meta.slot_mapping, v)


def gather_kv(cache: torch.Tensor, meta: AttentionMetadata, padded_len: int = 0) -> torch.Tensor:
    """The sequence's first max(context_len, padded_len) cache slots as [len, KV, D].

    A view when the blocks are consecutive (the usual case for a fresh prompt); otherwise one
    index_select. Slots past context_len are whatever the blocks hold: callers mask them.
    """
    length = max(meta.context_len, padded_len)
    num_blocks = -(-length // meta.block_size)
    _, block_size, num_kv_heads, head_dim = cache.shape
    first = meta.first_block_if_contiguous
    if first is not None and first + num_blocks <= cache.shape[0]:
        blocks = cache[first : first + num_blocks]
    else:
        table = meta.block_table
        if num_blocks > table.shape[0]:  # padding: repeat block 0, its keys are masked out
            pad = table.new_zeros(num_blocks - table.shape[0])
            table = torch.cat([table, pad])
        blocks = cache.index_select(0, table[:num_blocks])
    return blocks.view(num_blocks * block_size, num_kv_heads, head_dim)[:length]
