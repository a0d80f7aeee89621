"""The FP8 KV cache (kv_dtype "fp8"): E4M3 pages with one fp32 scale per token and KV head.

A scale per (slot, KV head), computed as each key is written, needs no calibration and follows
outliers token by token (a single per-layer scale lets one large key flatten every other one); it
costs 4 bytes per head_dim bytes: a block takes (D + 4) / 2D of its bf16 size, 0.52 at D = 128.

Writes quantize (write_pages: a scatter, graph-safe). Reads: the paged decode kernel on CUDA
dequantizes the tiles it loads (paged_decode.py); every other path (prefill chunks, decode on the
CPU) goes through Fp8KVBackend, which dequantizes the sequence's pages (one Triton kernel on
CUDA) into a scratch cache in the model's dtype and runs the model's own attention backend on
it, unchanged. The chunk attends to its own keys as rounded into the pages too, as decode does:
a token's KV is the same whichever step wrote it.
"""

from __future__ import annotations

from types import ModuleType
from typing import NamedTuple

import torch

from engine.attention.base import AttentionBackend, AttentionMetadata
from engine.device_guard import triton_module
from engine.models.fp8 import FP8_MAX, MIN_SCALE, to_fp8

SCALE_DTYPE = torch.float32
SCALE_BYTES = 4


class QuantizedPages(NamedTuple):
    """One layer's K (or V) pages: value = data * scale[..., None]."""

    data: torch.Tensor  # [num_blocks, block_size, KV, D] float8_e4m3fn
    scale: torch.Tensor  # [num_blocks, block_size, KV] fp32


def quantize_heads(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, KV, D] -> (E4M3 [T, KV, D], fp32 scales [T, KV]), each head's largest |value| -> 448."""
    wide = x.float()
    scale = (wide.abs().amax(dim=-1) / FP8_MAX).clamp(min=MIN_SCALE)  # [T, KV]
    return to_fp8(wide / scale[..., None]), scale


def write_pages(
    k: torch.Tensor,
    v: torch.Tensor,
    k_pages: QuantizedPages,
    v_pages: QuantizedPages,
    slot_mapping: torch.Tensor,
) -> None:
    """Quantize rows' K/V [T, KV, D] into their slots [T] (a scatter: graph-safe). On CUDA one
    Triton kernel does it all (fp8_kv_kernels.py), elsewhere torch."""
    if k.is_cuda and _fused_kernels() is not None:
        _fused_kernels().write_pages_fused(
            k, v, k_pages.data, v_pages.data, k_pages.scale, v_pages.scale, slot_mapping
        )
        return
    for x, pages in ((k, k_pages), (v, v_pages)):
        data, scale = quantize_heads(x)
        num_kv_heads, head_dim = data.shape[1], data.shape[2]
        # index_copy_ has no float8 kernels: move the bytes.
        slots = pages.data.view(torch.uint8).view(-1, num_kv_heads, head_dim)
        slots.index_copy_(0, slot_mapping, data.view(torch.uint8))
        pages.scale.view(-1, num_kv_heads).index_copy_(0, slot_mapping, scale)


def _fused_kernels() -> ModuleType | None:
    return triton_module("engine.attention.fp8_kv_kernels")


def dequantize_pages(
    pages: QuantizedPages, block_table: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """The blocks of block_table [N] -> [N, block_size, KV, D] in dtype (on CUDA one Triton
    kernel, fp8_kv_kernels.py; elsewhere torch, the same numbers)."""
    if pages.data.is_cuda and _fused_kernels() is not None:
        return _fused_kernels().dequantize_pages_fused(pages.data, pages.scale, block_table, dtype)
    data = pages.data.index_select(0, block_table)  # [N, block_size, KV, D]
    scale = pages.scale.index_select(0, block_table)  # [N, block_size, KV]
    return (data.float() * scale[..., None]).to(dtype)


class Fp8KVBackend(AttentionBackend):
    """An attention backend over the FP8 cache: each call quantizes the step's K/V into the FP8
    pages, dequantizes the sequence's pages into a scratch cache laid out from block 0, and runs
    `inner` there. inner.prepare sees the scratch layout (block table 0..N-1, slot = position)."""

    def __init__(self, inner: AttentionBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.materializes_scores = inner.materializes_scores

    def prepare(self, meta: AttentionMetadata) -> AttentionMetadata:
        device = meta.block_table.device
        num_blocks = meta.block_table.shape[0]
        scratch = AttentionMetadata(
            start=meta.start,
            num_query_tokens=meta.num_query_tokens,
            slot_mapping=torch.arange(meta.start, meta.context_len, device=device),
            block_table=torch.arange(num_blocks, dtype=torch.int32, device=device),
            block_size=meta.block_size,
            first_block_if_contiguous=0,
        )
        scratch = self.inner.prepare(scratch)
        scratch.extra["fp8_pages"] = meta  # where the sequence's K/V really are
        return scratch

    def forward(self, q, k, v, k_cache, v_cache, meta):
        """As AttentionBackend.forward, with the caches QuantizedPages."""
        pages = meta.extra["fp8_pages"]
        write_pages(k, v, k_cache, v_cache, pages.slot_mapping)
        table = pages.block_table.long()
        k_scratch = dequantize_pages(k_cache, table, q.dtype)  # [N, block_size, KV, D]
        v_scratch = dequantize_pages(v_cache, table, q.dtype)
        # The chunk's own K/V as the pages hold them (the scratch's slot = position), not as
        # computed: a token's KV is then the same whichever step wrote it and whichever chunk
        # reads it, as decode reads it, so a cached or reloaded prefix answers as a cold read.
        own = slice(meta.start, meta.start + k.shape[0])
        k = k_scratch.view(-1, *k.shape[1:])[own]
        v = v_scratch.view(-1, *v.shape[1:])[own]
        return self.inner.forward(q, k, v, k_scratch, v_scratch, meta)


def scratch_bytes(*, num_tokens: int, num_kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """The scratch K and V of one layer for a sequence of num_tokens (Fp8KVBackend.forward) plus
    the fp32 intermediate of one of them."""
    elements = num_tokens * num_kv_heads * head_dim
    return elements * (2 * dtype_bytes + 4)
