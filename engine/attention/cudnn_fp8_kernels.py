"""Triton kernel for FP8 attention's inputs (imported only where Triton is): a tensor rounded to
E4M3 against one scale, in one pass.

quantize_tensor's torch path takes five passes over a tensor with fp32 temporaries between them
(widen, divide, clamp, cast, and the largest |value| first); at 128K keys that was about 4 ms of
each layer's 24 ms of FP8 attention on an H100 (bench/results/cudnn_fp8_attention_h100.json).
Here the largest |value| is one reduction (torch.linalg.vector_norm, no temporary) and this kernel
reads each value once and writes its byte, in (batch, sequence, head, dim) order: the same
numbers as the torch path (an IEEE division, clamped, rounded to nearest even).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.device_guard import on_device
from engine.models.fp8 import FP8_DTYPE, FP8_MAX


@triton.jit
def _quantize_kernel(
    x_ptr,  # [B, N, L, D], any strides but a contiguous D
    descale_ptr,  # [1] fp32
    out_ptr,  # [B, L, N, D] float8_e4m3fn, contiguous
    seq_len,
    stride_xb,
    stride_xn,
    stride_xl,
    fp8_max,
    NUM_HEADS: tl.constexpr,
    HEADS_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    row = tl.program_id(0)  # a (batch, position): all its heads
    batch = row // seq_len
    position = row % seq_len
    heads = tl.arange(0, HEADS_PAD)
    dims = tl.arange(0, BLOCK_D)
    mask = (heads < NUM_HEADS)[:, None] & (dims < HEAD_DIM)[None, :]
    source = (
        x_ptr
        + batch.to(tl.int64) * stride_xb
        + position.to(tl.int64) * stride_xl
        + heads[:, None].to(tl.int64) * stride_xn
        + dims[None, :]
    )
    x = tl.load(source, mask=mask, other=0.0).to(tl.float32)
    quotient = tl.math.div_rn(x, tl.load(descale_ptr))
    quotient = tl.where(quotient != quotient, quotient, tl.clamp(quotient, -fp8_max, fp8_max))
    target = out_ptr + row.to(tl.int64) * (NUM_HEADS * HEAD_DIM) + heads[:, None] * HEAD_DIM
    tl.store(target + dims[None, :], quotient.to(out_ptr.dtype.element_ty), mask=mask)


def quantize_fused(x: torch.Tensor, descale: torch.Tensor) -> torch.Tensor:
    """x [B, N, L, D] (its last dimension contiguous) / descale ([1, 1, 1, 1] fp32) -> E4M3
    [B, L, N, D], contiguous."""
    batch, num_heads, seq_len, head_dim = x.shape
    if x.stride(3) != 1:
        x = x.contiguous()
    out = torch.empty((batch, seq_len, num_heads, head_dim), dtype=FP8_DTYPE, device=x.device)
    if out.numel() == 0:
        return out
    with on_device(x.device):
        _quantize_kernel[(batch * seq_len,)](
            x, descale, out, seq_len,
            x.stride(0), x.stride(1), x.stride(2), FP8_MAX,
            NUM_HEADS=num_heads,
            HEADS_PAD=triton.next_power_of_2(num_heads),
            HEAD_DIM=head_dim,
            BLOCK_D=triton.next_power_of_2(head_dim),
            num_warps=4 if num_heads * head_dim >= 2048 else 2,
        )  # fmt: skip
    return out
