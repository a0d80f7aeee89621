"""FP8 activations times FP8 weights for decode batches of 2 to 64 rows: Triton kernels in which
both operands of the tensor-core product are E4M3, so no weight is widened in registers.

Widening each E4M3 weight to bf16 before a bf16 dot (fp8_small_batch's tensor-core kernel) makes
a 64-row product bound by that arithmetic, not by its bytes: on an H200, gate_up at 64 rows took
81 us there (1.45 TB/s of weights) against 60 us for bf16 reading twice the bytes
(bench/results/fp8_matmul_sweep_h200.json). Here the activations are quantized instead, once a
product (quantize_groups: one small kernel), in groups of GROUP inputs per row, each group with
its own fp32 scale (its largest magnitude mapped to 448: DeepSeek-V3's 1 x 128 activation tiles,
as vLLM's block-FP8 kernels take them); the product kernel then multiplies E4M3 by E4M3 on FP8
tensor cores, one GROUP-wide K tile at a time, and applies the group's activation scales to each
tile's fp32 result and the weight's row scales at the end.

Its error against the fp32 product is the activations' rounding to E4M3 (3 mantissa bits: at
most 2**-4 of a value, about 2% rel. L2 over a product), on top of the weights' own; the
engine's FP8 tests bound the model's logits against the unquantized model's.

SWAP (the default) computes the transposed product, weight tile x activations: the weight's
BLOCK_N outputs are the dot's M dimension, at least 64 as Hopper's wgmma wants, and the few rows
its N dimension (padded to a power of two of at least 16). Imported only where Triton is.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.device_guard import launch_options, on_device

GROUP = 128  # inputs per activation scale, and the product's K tile
GROUPS_PER_PROGRAM = 8  # of the quantizing kernel
FP8_MAX = tl.constexpr(448.0)
MIN_SCALE = tl.constexpr(1e-12)  # an all-zero group: any scale gives 0


# stride_sm (a row's groups: K / GROUP) is not specialized: prebuild's small K and a model's
# large one would otherwise differ in divisibility by 16 and compile twice.
@triton.jit(do_not_specialize=["stride_sm"])
def _quantize_groups_kernel(
    x_ptr,  # [M, K] bf16 / fp16 / fp32
    q_ptr,  # [M, K] float8_e4m3fn
    s_ptr,  # [M, ceil(K / GROUP)] fp32
    K,
    stride_xm,
    stride_qm,
    stride_sm,
    GROUP: tl.constexpr,
    GROUPS: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    if USE_PDL:  # programmatic dependent launch: wait for the activations, then let the
        tl.extra.cuda.gdc_wait()  # product launch (it waits for this kernel to finish)
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    groups = tl.program_id(1) * GROUPS + tl.arange(0, GROUPS)
    cols = groups[:, None] * GROUP + tl.arange(0, GROUP)[None, :]  # [GROUPS, GROUP]
    ok = cols < K
    x = tl.load(x_ptr + row * stride_xm + cols, mask=ok, other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=1) / FP8_MAX, MIN_SCALE)  # [GROUPS]
    # The GPU's max drops NaN: a group holding one gets a NaN scale, so that the NaN reaches
    # the product's output as it does with bf16 activations (not -448 times the scale).
    has_nan = tl.sum((x != x).to(tl.int32), axis=1) > 0
    scale = tl.where(has_nan, float("nan"), scale)
    # x / scale is at most 448 up to a rounding: clamped, since E4M3fn has no infinity.
    q = tl.minimum(
        tl.maximum(x / scale[:, None], -FP8_MAX, propagate_nan=tl.PropagateNan.ALL),
        FP8_MAX,
        propagate_nan=tl.PropagateNan.ALL,
    )
    tl.store(q_ptr + row * stride_qm + cols, q.to(q_ptr.dtype.element_ty), mask=ok)
    tl.store(s_ptr + row * stride_sm + groups, scale, mask=groups * GROUP < K)


@triton.jit(do_not_specialize=["M", "stride_sm"])  # rows change step by step
def _fp8_w8a8_kernel(
    xq_ptr,  # [M, K] float8_e4m3fn
    xs_ptr,  # [M, ceil(K / GROUP)] fp32
    w_ptr,  # [N, K] float8_e4m3fn
    ws_ptr,  # [N] fp32
    out_ptr,  # [M, N] in the activations' dtype, or [SPLIT_K, M, N] fp32 partials
    M,
    N,
    K,
    stride_xm,
    stride_sm,
    stride_wn,
    stride_om,
    stride_os,  # a split's slice of the partials (SPLIT_K > 1)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    GROUP: tl.constexpr,
    SPLIT_K: tl.constexpr,
    SWAP: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    if USE_PDL:  # programmatic dependent launch: wait for the quantized activations
        tl.extra.cuda.gdc_wait()
    rows = tl.arange(0, BLOCK_M)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, GROUP)
    row_ok = rows < M
    col_ok = cols < N
    # This program's 1/SPLIT_K of the K groups (all of them when SPLIT_K is 1).
    groups = tl.cdiv(K, GROUP)
    per_split = tl.cdiv(groups, SPLIT_K)
    g_start = tl.program_id(1) * per_split
    g_end = tl.minimum(g_start + per_split, groups)
    if SWAP:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for g in range(g_start, g_end):
        k = g * GROUP + ks
        k_ok = k < K
        x, w = tiles_at(xq_ptr, w_ptr, rows, cols, k, row_ok, col_ok, k_ok, stride_xm, stride_wn)
        x_scale = tl.load(xs_ptr + rows * stride_sm + g, mask=row_ok, other=0.0)
        if SWAP:
            acc += tl.dot(w, tl.trans(x)) * x_scale[None, :]
        else:
            acc += tl.dot(x, tl.trans(w)) * x_scale[:, None]
    if USE_PDL:  # the next kernel may launch now: it waits for this one to finish
        tl.extra.cuda.gdc_launch_dependents()
    w_scale = tl.load(ws_ptr + cols, mask=col_ok, other=0.0)
    if SWAP:
        acc = acc * w_scale[:, None]
        offsets = out_ptr + rows[None, :] * stride_om + cols[:, None]
        mask = col_ok[:, None] & row_ok[None, :]
    else:
        acc = acc * w_scale[None, :]
        offsets = out_ptr + rows[:, None] * stride_om + cols[None, :]
        mask = row_ok[:, None] & col_ok[None, :]
    if SPLIT_K > 1:  # each split its own slice of the partials
        offsets += tl.program_id(1) * stride_os
    tl.store(offsets, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def tiles_at(x_ptr, w_ptr, rows, cols, k, row_ok, col_ok, k_ok, stride_xm, stride_wn):
    """A product's tiles at inputs k: x [BLOCK_M, k] and the weight's w [BLOCK_N, k], each 0
    past its rows (columns) and past K (the FP8 products' kernels: here, fp8_small_batch.py,
    fp8_gemv.py)."""
    x = tl.load(
        x_ptr + rows[:, None] * stride_xm + k[None, :],
        mask=row_ok[:, None] & k_ok[None, :],
        other=0.0,
    )
    w = tl.load(
        w_ptr + cols[:, None] * stride_wn + k[None, :],
        mask=col_ok[:, None] & k_ok[None, :],
        other=0.0,
    )
    return x, w


@triton.jit(do_not_specialize=["total"])
def _sum_splits_kernel(
    part_ptr,  # [SPLIT_K, total] fp32
    out_ptr,  # [total] in the output's dtype
    total,
    SPLIT_K: tl.constexpr,
    BLOCK: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    if USE_PDL:  # wait for the partials, then let the next kernel launch (it waits for this one)
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offsets < total
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for split in tl.static_range(SPLIT_K):  # always in this order: the same sum every run
        acc += tl.load(part_ptr + split * total + offsets, mask=ok, other=0.0)
    tl.store(out_ptr + offsets, acc.to(out_ptr.dtype.element_ty), mask=ok)


SUM_BLOCK = 1024


def sum_splits(partials: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Split-K's fp32 partials [S, M, N] summed in split order and cast -> [M, N] of dtype, in one
    kernel (torch's sum then cast took two: 7.6 us a product at 64 rows on an H200, a
    millisecond of a 64-stream step)."""
    splits, rows, outputs = partials.shape
    partials = partials.contiguous()
    out = torch.empty((rows, outputs), dtype=dtype, device=partials.device)
    total = rows * outputs
    with on_device(partials.device):
        _sum_splits_kernel[(triton.cdiv(total, SUM_BLOCK),)](
            partials, out, total, SPLIT_K=splits, BLOCK=SUM_BLOCK, **launch_options(partials.device)
        )
    return out


def quantize_groups(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] -> (E4M3 [M, K], fp32 scales [M, ceil(K / GROUP)]): each row's GROUP-wide groups
    scaled so that their largest magnitude is 448."""
    rows, inputs = x.shape
    x = x.contiguous()
    groups = triton.cdiv(inputs, GROUP)
    quantized = torch.empty((rows, inputs), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((rows, groups), dtype=torch.float32, device=x.device)
    with on_device(x.device):
        _quantize_groups_kernel[(rows, triton.cdiv(groups, GROUPS_PER_PROGRAM))](
            x,
            quantized,
            scales,
            inputs,
            x.stride(0),
            quantized.stride(0),
            scales.stride(0),
            GROUP=GROUP,
            GROUPS=GROUPS_PER_PROGRAM,
            **launch_options(x.device),
        )
    return quantized, scales


def fp8_w8a8_matmul(
    x: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor,
    *,
    block_n: int,
    num_warps: int,
    num_stages: int,
    split_k: int = 1,
    swap: bool = True,
) -> torch.Tensor:
    """x [M, K] (bf16) times E4M3 weight [N, K] with row scales [N, 1] -> [M, N] in x's dtype, the
    activations quantized per GROUP inputs (quantize_groups) and both operands E4M3 in the dot;
    split_k > 1 writes fp32 partials, then sums them in a fixed order (no atomics: a greedy
    decode must not change from run to run)."""
    rows, inputs = x.shape
    outputs = weight.shape[0]
    if weight.shape[1] != inputs:
        raise ValueError(f"fp8_w8a8_matmul takes rows of {weight.shape[1]}, not {inputs}.")
    quantized, scales = quantize_groups(x)
    out = split_output(x, outputs, split_k)
    with on_device(x.device):
        _fp8_w8a8_kernel[(triton.cdiv(outputs, block_n), split_k)](
            quantized,
            scales,
            weight,
            scale,
            out,
            rows,
            outputs,
            inputs,
            quantized.stride(0),
            scales.stride(0),
            weight.stride(0),
            out.stride(-2),
            out.stride(0) if split_k > 1 else 0,
            BLOCK_M=block_m(rows),
            BLOCK_N=block_n,
            GROUP=GROUP,
            SPLIT_K=split_k,
            SWAP=swap,
            num_warps=num_warps,
            num_stages=num_stages,
            **launch_options(x.device),
        )
    return out if split_k == 1 else sum_splits(out, x.dtype)


def block_m(rows: int) -> int:
    """The rows a program holds: a power of two, at least 16 for tl.dot."""
    return max(16, triton.next_power_of_2(rows))


def split_output(x: torch.Tensor, outputs: int, split_k: int) -> torch.Tensor:
    """A product's buffer: [M, N] in x's dtype, or [split_k, M, N] fp32 partials (sum_splits)."""
    if split_k == 1:
        return torch.empty((x.shape[0], outputs), dtype=x.dtype, device=x.device)
    return torch.empty((split_k, x.shape[0], outputs), dtype=torch.float32, device=x.device)
