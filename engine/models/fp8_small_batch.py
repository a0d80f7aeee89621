"""FP8 weights in decode-sized products (up to MAX_ROWS rows): Triton kernels that read each E4M3
weight once, at most once a step.

Three kernels, chosen by rows (plan): for one row (a single stream's decode step) a
tensor-core-free GEMV that widens each weight tile to fp32 in registers and multiplies it by the
bf16 activations (fp8_gemv.py); for 2-64 rows, by default, FP8 activations times FP8 weights on FP8 tensor
cores (fp8_w8a8.py: the activations quantized per 128 inputs by one small kernel, no weight
widened); with w8a8=False, bf16 activations times weights widened to bf16 in the kernel (exact
activations, but bound by that widening at many rows: bench/results/fp8_h200.md), rows padded to
a power of two of at least 16 for tl.dot. Programs split the output features in blocks and,
where those blocks alone leave SMs idle, K two or four ways (split-K: fp32 partials summed in a
fixed order after), so that even the narrowest projection of an 8B (4,096 outputs) fills the
GPU. Imported only where Triton is.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.device_guard import on_device, sm_count
from engine.models.fp8_gemv import GEMV_CONFIG, fp8_weight_gemv
from engine.models.fp8_w8a8 import (
    block_m,
    fp8_w8a8_matmul,
    split_output,
    sum_splits,
    tiles_at,
)

MAX_ROWS = 64  # the kernels take up to this many rows
# What Fp8Linear sends them: every decode batch up to 64 rows. With split-K tiles at 17-64 rows
# a layer's four products take 122.7 us at 32 rows and 166.3 at 64 on an H100, against 220.8
# and 225.0 through torch._scaled_mm with its activations quantized (bench/fp8_matmul_sweep.py);
# end to end, 64 streams were level (3,482 against 3,487 tokens/s, two machines;
# bench/results/fp8_h100.md), and the activations stay bf16.
LINEAR_ROWS = 64
# Tile sizes by rows, from bench/fp8_matmul_sweep.py on an H100 (bench/results/fp8_h100.md): at
# each row count, the configuration whose time summed over the 8B's four projections is least.
# One row: fp8_gemv.GEMV_CONFIG; more rows: the tensor-core kernel, wider output tiles and the
# inputs split four ways as the rows grow (measured at 32 and 64 rows).
# FP8 activations (fp8_w8a8.py), by rows; split-K from w8a8_split (the output sizes and the SMs).
# From the sweep on an H100 (bench/results/fp8_matmul_sweep_h100.json): up to 32 rows the
# outputs as the dots' M (swap), at 64 the rows (within 5% of each shape's best tile there).
W8A8_CONFIGS = (
    (32, dict(block_n=128, num_warps=4, num_stages=4)),
    (MAX_ROWS, dict(block_n=128, num_warps=4, num_stages=4, swap=False)),
)
W8A8_SPLITS = (1, 2, 4)
DOT_CONFIGS = (  # (up to rows, config)
    (16, dict(block_n=32, block_k=256, num_warps=4, num_stages=4)),
    (32, dict(block_n=64, block_k=128, num_warps=4, num_stages=3, split_k=4)),
    (MAX_ROWS, dict(block_n=128, block_k=128, num_warps=8, num_stages=3, split_k=4)),
)


@triton.jit(do_not_specialize=["M"])  # rows change step by step
def _fp8_weight_matmul_kernel(
    x_ptr,  # [M, K] bf16
    w_ptr,  # [N, K] float8_e4m3fn
    scale_ptr,  # [N] fp32
    out_ptr,  # [M, N] in x's dtype, or [SPLIT_K, M, N] fp32 partials when SPLIT_K > 1
    M,
    N,
    K,
    stride_xm,
    stride_wn,
    stride_om,
    stride_os,  # a split's slice of the partials (SPLIT_K > 1)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
):
    rows = tl.arange(0, BLOCK_M)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    row_ok = rows < M
    col_ok = cols < N
    # This program's 1/SPLIT_K of K, in whole tiles (all of K when SPLIT_K is 1).
    per_split = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K
    k_start = tl.program_id(1) * per_split
    k_end = tl.minimum(k_start + per_split, K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        k = k0 + ks
        k_ok = k < k_end
        x, w = tiles_at(x_ptr, w_ptr, rows, cols, k, row_ok, col_ok, k_ok, stride_xm, stride_wn)
        acc += tl.dot(x, tl.trans(w.to(x.dtype)))
    scale = tl.load(scale_ptr + cols, mask=col_ok, other=0.0)
    acc = acc * scale[None, :]
    offsets = out_ptr + rows[:, None] * stride_om + cols[None, :]
    if SPLIT_K > 1:  # each split its own slice of the partials
        offsets += tl.program_id(1) * stride_os
    tl.store(offsets, acc.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


def _block_m(kind: str, rows: int) -> int:
    """The rows a program holds: a power of two, at least 16 for the tensor-core kernels' tl.dot."""
    return triton.next_power_of_2(rows) if kind == "gemv" else block_m(rows)


def plan(rows: int, w8a8: bool = True) -> tuple[str, dict]:
    """The kernel ("gemv", "w8a8" or "dot") and tile sizes for a product of `rows` rows; w8a8:
    whether activations of 2-64 rows may be quantized to FP8 (else the bf16 "dot")."""
    if rows == 1:
        return "gemv", GEMV_CONFIG
    configs = W8A8_CONFIGS if w8a8 else DOT_CONFIGS
    return ("w8a8" if w8a8 else "dot"), next(c for most, c in configs if rows <= most)


def w8a8_split(outputs: int, block_n: int, sms: int) -> int:
    """K split two or four ways where the output blocks alone would leave SMs idle (an 8B's
    4,096 and 6,144 outputs in blocks of 128: 32 and 48 programs on 132 SMs)."""
    programs = triton.cdiv(outputs, block_n)
    return next((s for s in W8A8_SPLITS if programs * s >= sms), W8A8_SPLITS[-1])


def prebuild_rows(rows: int = LINEAR_ROWS, w8a8: bool = True) -> list[int]:
    """The least row count of each kernel variant that products of up to `rows` rows launch:
    each kind and tile of plan(), at each BLOCK_M (_block_m, as the launchers take it). N and K
    are not among them: Triton specializes them only on being multiples of 16, which every
    weight the kernels take is."""
    firsts: dict[tuple, int] = {}
    for count in range(1, rows + 1):
        kind, config = plan(count, w8a8)
        firsts.setdefault((kind, tuple(sorted(config.items())), _block_m(kind, count)), count)
    return sorted(firsts.values())


def prebuild(
    device: torch.device,
    rows: int = LINEAR_ROWS,
    *,
    w8a8: bool = True,
    outputs: tuple[int, ...] = (4096,),
) -> None:
    """Compile now each kernel variant that decode steps of up to `rows` rows launch on weights
    of these output sizes (their split-K), rather than inside the first step of each batch size
    (seconds: a step waits for it)."""
    for count in prebuild_rows(rows, w8a8):
        for n in sorted(set(outputs)):
            weight = torch.zeros(n, 256, device=device).to(torch.float8_e4m3fn)
            scale = torch.ones(n, 1, device=device)
            fp8_weight_matmul(
                torch.zeros(count, 256, device=device, dtype=torch.bfloat16), weight, scale, w8a8
            )


def fp8_weight_matmul(
    x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, w8a8: bool = True
) -> torch.Tensor:
    """x [M, K] (M <= MAX_ROWS) times E4M3 weight [N, K] with row scales [N, 1] -> [M, N] in x's
    dtype: x @ (weight * scale).T, accumulated in fp32; from 2 rows with w8a8, x rounded to E4M3
    per 128 inputs first (fp8_w8a8.py)."""
    rows = x.shape[0]
    if rows > MAX_ROWS:
        raise ValueError(f"fp8_weight_matmul takes up to {MAX_ROWS} rows of {weight.shape[1]}.")
    kind, config = plan(rows, w8a8)
    if kind == "gemv":
        return fp8_weight_gemv(x, weight, scale, **config)
    if kind == "w8a8":
        split = w8a8_split(weight.shape[0], config["block_n"], sm_count(x.device))
        return fp8_w8a8_matmul(x, weight, scale, split_k=split, **config)
    return fp8_weight_dot(x, weight, scale, **config)


def fp8_weight_dot(
    x: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor,
    *,
    block_n: int,
    block_k: int,
    num_warps: int,
    num_stages: int,
    split_k: int = 1,
) -> torch.Tensor:
    """The tensor-core kernel with its tile sizes given (rows padded to at least 16); split_k > 1
    as fp8_weight_gemv's."""
    rows, inputs = x.shape
    outputs = weight.shape[0]
    if weight.shape[1] != inputs:
        raise ValueError(f"fp8_weight_matmul takes rows of {weight.shape[1]}, not {inputs}.")
    x = x.contiguous()
    out = split_output(x, outputs, split_k)
    with on_device(x.device):
        _fp8_weight_matmul_kernel[(triton.cdiv(outputs, block_n), split_k)](
            x,
            weight,
            scale,
            out,
            rows,
            outputs,
            inputs,
            x.stride(0),
            weight.stride(0),
            out.stride(-2),  # a row of the output (of each split's partials)
            out.stride(0) if split_k > 1 else 0,
            BLOCK_M=_block_m("dot", rows),
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            SPLIT_K=split_k,
            num_warps=num_warps,
            num_stages=num_stages,
        )
    return out if split_k == 1 else sum_splits(out, x.dtype)


@torch.library.custom_op("longdoc::fp8_weight_matmul", mutates_args=())
def fp8_weight_matmul_op(
    x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, w8a8: bool
) -> torch.Tensor:
    """fp8_weight_matmul as one opaque operator, so that torch.compile calls it as it is (its
    kernel choice depends on the rows) instead of tracing into the Triton launch."""
    return fp8_weight_matmul(x, weight, scale, w8a8)


@fp8_weight_matmul_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, w8a8: bool) -> torch.Tensor:
    return x.new_empty((x.shape[0], weight.shape[0]))
