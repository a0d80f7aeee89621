"""FlexAttention (CUDA): a chunk's queries against its cached keys with a bottom-right causal mask.

The block mask is built directly from block indices (no [queries, keys] boolean tensor) and the
K/V of the sequence are a view of the paged cache when its blocks are consecutive, a gather
otherwise. Keys are padded to a multiple of the mask block: padded keys lie after every query's
causal limit, so they are masked for free and the compiled kernel sees fewer distinct shapes.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from engine.attention.base import AttentionBackend, AttentionMetadata, gather_kv

MASK_BLOCK = 128
# Measured fastest on an H200 for 8192 queries x 32768 keys, head dim 128, bf16.
DEFAULT_KERNEL_OPTIONS: dict[str, Any] = {
    "BLOCK_M": 128,
    "BLOCK_N": 128,
    "num_warps": 8,
    "num_stages": 3,
}
MAX_CACHED_MASKS = 64


def causal_offset_block_mask(
    num_query_tokens: int, num_key_tokens: int, start: int, device: torch.device
) -> BlockMask:
    """Mask where query i sees key j iff j <= start + i, for keys padded to num_key_tokens."""
    offset = torch.tensor(start, device=device, dtype=torch.int64)

    def mask_mod(b, h, q_idx, kv_idx):
        return q_idx + offset >= kv_idx

    num_q_blocks = -(-num_query_tokens // MASK_BLOCK)
    num_kv_blocks = -(-num_key_tokens // MASK_BLOCK)
    q_block = torch.arange(num_q_blocks, device=device)
    first_q = q_block * MASK_BLOCK + start  # causal limit of the block's first query
    last_q = torch.clamp(q_block * MASK_BLOCK + MASK_BLOCK - 1, max=num_query_tokens - 1) + start
    kv_block = torch.arange(num_kv_blocks, device=device)
    # A kv block is full when its last key is visible to the block's first query; partial when
    # its first key is visible to the block's last query but it is not full.
    is_full = (kv_block[None, :] * MASK_BLOCK + MASK_BLOCK - 1) <= first_q[:, None]  # [nq, nkv]
    is_any = (kv_block[None, :] * MASK_BLOCK) <= last_q[:, None]
    is_partial = is_any & ~is_full
    full_counts, full_indices = _indices(is_full)
    partial_counts, partial_indices = _indices(is_partial)
    return BlockMask.from_kv_blocks(
        partial_counts,
        partial_indices,
        full_counts,
        full_indices,
        BLOCK_SIZE=MASK_BLOCK,
        mask_mod=mask_mod,
        seq_lengths=(num_query_tokens, num_key_tokens),
    )


def _indices(selected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: count of selected kv blocks and their indices first (a stable sort of ~selected)."""
    counts = selected.sum(dim=1, dtype=torch.int32)
    order = torch.argsort((~selected).to(torch.int8), dim=1, stable=True).to(torch.int32)
    return counts[None, None], order[None, None]  # [1, 1, nq], [1, 1, nq, nkv]


class FlexBackend(AttentionBackend):
    name = "flex"
    materializes_scores = False

    def __init__(
        self,
        device: torch.device,
        *,
        kernel_options: dict[str, Any] | None = None,
        compile: bool = True,
    ) -> None:
        self.device = device
        self.kernel_options = dict(
            DEFAULT_KERNEL_OPTIONS if kernel_options is None else kernel_options
        )
        # Compiled once; shapes vary per chunk, so let dynamo treat lengths as dynamic.
        self._flex = torch.compile(flex_attention, dynamic=True) if compile else flex_attention
        self._masks: OrderedDict[tuple[int, int, int], BlockMask] = OrderedDict()

    def prepare(self, meta: AttentionMetadata) -> AttentionMetadata:
        if meta.num_query_tokens == 1:
            return meta  # decode: plain SDPA over the cache, no mask needed
        padded = -(-meta.context_len // MASK_BLOCK) * MASK_BLOCK
        key = (meta.num_query_tokens, padded, meta.start)
        mask = self._masks.get(key)
        if mask is None:
            mask = causal_offset_block_mask(meta.num_query_tokens, padded, meta.start, self.device)
            self._masks[key] = mask
            if len(self._masks) > MAX_CACHED_MASKS:
                self._masks.popitem(last=False)
        meta.extra["block_mask"] = mask
        meta.extra["padded_len"] = padded
        return meta

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        is_gqa = q.shape[1] != k.shape[1]
        if meta.num_query_tokens == 1:
            keys, values = gather_kv(k_cache, meta), gather_kv(v_cache, meta)  # [ctx, KV, D]
            out = F.scaled_dot_product_attention(
                q.transpose(0, 1).unsqueeze(0),
                keys.transpose(0, 1).unsqueeze(0),
                values.transpose(0, 1).unsqueeze(0),
                enable_gqa=is_gqa,
            )
            return out[0].transpose(0, 1)
        padded = meta.extra["padded_len"]
        keys = gather_kv(k_cache, meta, padded)  # [padded, KV, D]
        values = gather_kv(v_cache, meta, padded)
        out = self._flex(
            q.transpose(0, 1).unsqueeze(0),  # [1, H, T, D]
            keys.transpose(0, 1).unsqueeze(0),  # [1, KV, padded, D]
            values.transpose(0, 1).unsqueeze(0),
            block_mask=meta.extra["block_mask"],
            enable_gqa=is_gqa,
            # Also for fewer queries than a block: without options, Inductor's lowering of a
            # compiled engine's chunk tail (96 queries after 4 chunks of 1,000, head dim 128,
            # H200) found no valid kernel config (bench/results/gpu_check_h200.md).
            kernel_options=self.kernel_options,
        )  # [1, H, T, D]
        return out[0].transpose(0, 1)
