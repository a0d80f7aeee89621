"""FP8 weights times bf16 activations for a few rows (decode steps): a Triton kernel that reads
the E4M3 weight once, widens it in registers and multiplies on bf16 tensor cores, then applies
the row scales. No activation is quantized, so a decode step skips the per-token quantization
that torch._scaled_mm needs (eight small kernels per projection, about half a decode step's time
at batch 1 on the H200), and the weight bytes it reads are half of bf16's.

Programs split the output features in BLOCK_N columns (16: enough programs to fill the GPU for
the narrowest projection of an 8B, 4096 outputs); each walks all of K. Rows are padded to a
power of two of at least 16 for tl.dot. Imported only where Triton is.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MAX_ROWS = 64  # beyond this the product is compute-bound: torch._scaled_mm's tensor cores win
BLOCK_N = 16
BLOCK_K = 256


@triton.jit
def _fp8_weight_matmul_kernel(
    x_ptr,  # [M, K] bf16
    w_ptr,  # [N, K] float8_e4m3fn
    scale_ptr,  # [N] fp32
    out_ptr,  # [M, N] bf16
    M,
    N,
    K,
    stride_xm,
    stride_wn,
    stride_om,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rows = tl.arange(0, BLOCK_M)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    row_ok = rows < M
    col_ok = cols < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        k_ok = k < K
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
        acc += tl.dot(x, tl.trans(w.to(x.dtype)))
    scale = tl.load(scale_ptr + cols, mask=col_ok, other=0.0)
    acc = acc * scale[None, :]
    tl.store(
        out_ptr + rows[:, None] * stride_om + cols[None, :],
        acc.to(out_ptr.dtype.element_ty),
        mask=row_ok[:, None] & col_ok[None, :],
    )


def num_stages(rows: int) -> int:
    """K tiles in flight: 4 (36 KB of shared memory at 16 rows, 60 KB at 32); at 64 rows four
    would take 148 KB, one program an SM (228 KB), so 3 there (two programs an SM)."""
    return 4 if rows <= 32 else 3


def fp8_weight_matmul(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [M, K] (M <= MAX_ROWS) times E4M3 weight [N, K] with row scales [N, 1] -> [M, N] in x's
    dtype: x @ (weight * scale).T, accumulated in fp32."""
    rows, inputs = x.shape
    outputs = weight.shape[0]
    if rows > MAX_ROWS or weight.shape[1] != inputs:
        raise ValueError(f"fp8_weight_matmul takes up to {MAX_ROWS} rows of {weight.shape[1]}.")
    x = x.contiguous()
    out = torch.empty((rows, outputs), dtype=x.dtype, device=x.device)
    _fp8_weight_matmul_kernel[(triton.cdiv(outputs, BLOCK_N),)](
        x,
        weight,
        scale,
        out,
        rows,
        outputs,
        inputs,
        x.stride(0),
        weight.stride(0),
        out.stride(0),
        BLOCK_M=max(16, triton.next_power_of_2(rows)),
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
        num_warps=4,
        num_stages=num_stages(rows),
    )
    return out
