"""The Triton kernel behind slot_write.py (imported only where Triton is)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _write_slots_kernel(
    k_ptr,  # [T, KV, D]
    v_ptr,
    slot_ptr,  # [T] int64
    k_cache_ptr,  # [num_slots, KV, D] (the pages, flat and contiguous)
    v_cache_ptr,
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    NUM_KV_HEADS: tl.constexpr,
    KV_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """One token's K and V rows, every KV head, into its cache slot: one launch for both caches
    where index_copy_ takes one each (2.2 us apiece a layer at one stream on an H200)."""
    if USE_PDL:  # wait for the rows this reads, then let the next kernel launch (it waits)
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    token = tl.program_id(0)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    heads = tl.arange(0, KV_PAD)
    dims = tl.arange(0, BLOCK_D)
    mask = (heads < NUM_KV_HEADS)[:, None] & (dims < HEAD_DIM)[None, :]
    cache_rows = (slot * NUM_KV_HEADS + heads)[:, None] * HEAD_DIM + dims[None, :]
    k = tl.load(k_ptr + token * stride_kt + heads[:, None] * stride_kh + dims[None, :], mask=mask)
    tl.store(k_cache_ptr + cache_rows, k, mask=mask)
    v = tl.load(v_ptr + token * stride_vt + heads[:, None] * stride_vh + dims[None, :], mask=mask)
    tl.store(v_cache_ptr + cache_rows, v, mask=mask)
