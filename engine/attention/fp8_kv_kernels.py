"""Triton kernels for the FP8 KV cache (imported only where Triton is).

The writes: each program quantizes one token's K and V rows of one KV head and stores them and
their scales into the token's slot, as quantize_heads and write_pages do in torch (abs, amax,
divide, clamp, cast and two scatters, for K and for V: about 14 small kernels a layer a decode
step, ~0.6 ms of a 6.5 ms FP8 step at one stream on an H100; bench/results/
decode_profile_h100.fp8.txt). Same numbers as the torch path: the scale is the row's largest
|value| / 448 (at least MIN_SCALE), the division is IEEE (div_rn), and the cast rounds to
nearest even.

The reads for prefill: each program widens one page of a sequence's block table to the model's
dtype in a scratch cache, as dequantize_pages does in torch (gather, widen to fp32, multiply,
cast: four passes with fp32 in between, ~25 bytes of traffic a value where this moves 3; a
128K prompt's chunks widen their whole prefix every layer).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.device_guard import launch_options, on_device
from engine.models.fp8 import FP8_MAX, MIN_SCALE


@triton.jit
def _quantize_row(x_ptr, data_ptr, scale_ptr, dims, dim_ok, fp8_max, min_scale):
    x = tl.load(x_ptr + dims, mask=dim_ok, other=0.0).to(tl.float32)
    # IEEE divisions (div_rn), as torch's: Triton's `/` is div.full.f32 on a GPU (2 ulp).
    scale = tl.maximum(tl.math.div_rn(tl.max(tl.abs(x), axis=0), fp8_max), min_scale)
    # A NaN in the row makes its scale NaN, as torch's amax does (tl.max skips NaN): the row then
    # reads back NaN, not as plausible numbers. NaN quotients (inf / inf too) stay NaN: the clamp
    # (min/max on a GPU) would make them +-448.
    scale = tl.where(tl.sum((x != x).to(tl.int32), axis=0) > 0, float("nan"), scale)
    quotient = tl.math.div_rn(x, scale)
    quantized = tl.where(quotient != quotient, quotient, tl.clamp(quotient, -fp8_max, fp8_max))
    tl.store(data_ptr + dims, quantized.to(data_ptr.dtype.element_ty), mask=dim_ok)
    tl.store(scale_ptr, scale)


@triton.jit
def _write_pages_kernel(
    k_ptr,  # [T, KV, D]
    v_ptr,
    slot_ptr,  # [T] int64
    k_data_ptr,  # [num_slots, KV, D] float8_e4m3fn (the pages, flat)
    v_data_ptr,
    k_scale_ptr,  # [num_slots, KV] fp32
    v_scale_ptr,
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    num_kv_heads,
    fp8_max,
    min_scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    if USE_PDL:  # programmatic dependent launch: wait for the rows this reads, then let the
        tl.extra.cuda.gdc_wait()  # next kernel launch (it waits for this one to finish)
        tl.extra.cuda.gdc_launch_dependents()
    token = tl.program_id(0)
    head = tl.program_id(1)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    row = slot * num_kv_heads + head  # the (slot, head) row of the flat pages and scales
    dims = tl.arange(0, BLOCK_D)
    dim_ok = dims < HEAD_DIM
    _quantize_row(
        k_ptr + token * stride_kt + head * stride_kh,
        k_data_ptr + row * HEAD_DIM,
        k_scale_ptr + row,
        dims,
        dim_ok,
        fp8_max,
        min_scale,
    )
    _quantize_row(
        v_ptr + token * stride_vt + head * stride_vh,
        v_data_ptr + row * HEAD_DIM,
        v_scale_ptr + row,
        dims,
        dim_ok,
        fp8_max,
        min_scale,
    )


def write_pages_fused(
    k: torch.Tensor,
    v: torch.Tensor,
    k_data: torch.Tensor,
    v_data: torch.Tensor,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """k, v [T, KV, D] (last dimension contiguous) into the contiguous pages k_data, v_data
    [..., KV, D] (E4M3) and scales [..., KV] (fp32) at slot_mapping [T]."""
    num_tokens, num_kv_heads, head_dim = k.shape
    if num_tokens == 0:
        return
    if k.stride(2) != 1 or v.stride(2) != 1:
        k, v = k.contiguous(), v.contiguous()
    with on_device(k.device):
        _write_pages_kernel[(num_tokens, num_kv_heads)](
            k, v, slot_mapping, k_data, v_data, k_scale, v_scale,
            k.stride(0), k.stride(1), v.stride(0), v.stride(1),
            num_kv_heads, FP8_MAX, MIN_SCALE,
            HEAD_DIM=head_dim,
            BLOCK_D=triton.next_power_of_2(head_dim),
            num_warps=1 if head_dim <= 128 else 2,
            **launch_options(k.device),
        )  # fmt: skip


@triton.jit
def _dequantize_pages_kernel(
    data_ptr,  # [num_blocks * BLOCK_SIZE, KV, D] float8_e4m3fn (the pages' slots, flat)
    scale_ptr,  # [num_blocks * BLOCK_SIZE, KV] fp32
    table_ptr,  # [N] block ids
    out_ptr,  # [N * BLOCK_SIZE, KV, D] in the model's dtype
    NUM_KV_HEADS: tl.constexpr,
    KV_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    token = tl.program_id(0)  # a slot of the scratch: page token // BLOCK_SIZE
    block = tl.load(table_ptr + token // BLOCK_SIZE).to(tl.int64)
    slot = block * BLOCK_SIZE + token % BLOCK_SIZE
    heads = tl.arange(0, KV_PAD)
    dims = tl.arange(0, BLOCK_D)
    head_ok = heads < NUM_KV_HEADS
    mask = head_ok[:, None] & (dims < HEAD_DIM)[None, :]
    offsets = heads[:, None] * HEAD_DIM + dims[None, :]
    values = tl.load(data_ptr + slot * (NUM_KV_HEADS * HEAD_DIM) + offsets, mask=mask, other=0.0)
    scales = tl.load(scale_ptr + slot * NUM_KV_HEADS + heads, mask=head_ok, other=0.0)
    wide = values.to(tl.float32) * scales[:, None]
    out = out_ptr + token.to(tl.int64) * (NUM_KV_HEADS * HEAD_DIM) + offsets
    tl.store(out, wide.to(out_ptr.dtype.element_ty), mask=mask)


def dequantize_pages_fused(
    data: torch.Tensor, scale: torch.Tensor, block_table: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """The blocks of block_table [N] of the contiguous pages data [num_blocks, block_size, KV,
    D] (E4M3) with scales [num_blocks, block_size, KV] -> [N, block_size, KV, D] in dtype."""
    if not (data.is_contiguous() and scale.is_contiguous()):
        raise ValueError("dequantize_pages_fused reads contiguous pages and scales.")
    _, block_size, num_kv_heads, head_dim = data.shape
    out = torch.empty(
        (block_table.shape[0], block_size, num_kv_heads, head_dim), dtype=dtype, device=data.device
    )
    if block_table.shape[0] == 0:
        return out
    with on_device(data.device):
        _dequantize_pages_kernel[(block_table.shape[0] * block_size,)](
            data, scale, block_table, out,
            NUM_KV_HEADS=num_kv_heads,
            KV_PAD=triton.next_power_of_2(num_kv_heads),
            HEAD_DIM=head_dim,
            BLOCK_D=triton.next_power_of_2(head_dim),
            BLOCK_SIZE=block_size,
            num_warps=4 if num_kv_heads * head_dim >= 1024 else 1,
        )  # fmt: skip
    return out
