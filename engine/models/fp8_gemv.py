"""The one-row FP8-weight product (a single stream's decode step): a tensor-core-free GEMV that
widens each E4M3 weight tile to fp32 in registers and multiplies it by the bf16 activations, and
may take the layer's work around the product into the same kernel (an RMSNorm on the way in,
SiLU(gate) * up on the way in, a residual added on the way out: fp8_gemv_fused_op, what
Fp8Linear.one_row calls). fp8_small_batch.py chooses it for one row. Imported only where Triton
is.

The same kernel takes bf16 weights without a scale (Linear.one_row, EngineConfig's
bf16_one_row_fusion): what a bf16 model's single stream gains there is the layer's own kernels
(two norms, SiLU * up, cuBLAS's split-K reductions), not bandwidth (bench/fp8_gemv_fusion.py
--weights bf16 times it against F.linear).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.device_guard import launch_options, on_device
from engine.models.fp8_w8a8 import split_output, sum_splits, tiles_at

# From bench/fp8_matmul_sweep.py on an H100 (bench/results/fp8_h100.md): 8 outputs a program,
# 1,024 inputs a tile (92.5 us a layer of the 8B, against 155.7 for bf16 F.linear and 165.5 for
# the earlier single configuration).
GEMV_CONFIG = dict(block_n=8, block_k=1024, num_warps=4, num_stages=2)
# bf16 weights: the same bytes a tile (half the inputs).
BF16_GEMV_CONFIG = dict(block_n=8, block_k=512, num_warps=4, num_stages=2)


@triton.jit(do_not_specialize=["M"])  # rows change step by step
def _fp8_weight_gemv_kernel(
    x_ptr,  # [M, K] bf16
    w_ptr,  # [N, K] float8_e4m3fn (or bf16: not SCALED)
    scale_ptr,  # [N] fp32: read when SCALED
    out_ptr,  # [M, N] in x's dtype, or [SPLIT_K, M, N] fp32 partials when SPLIT_K > 1
    M,
    N,
    K,
    stride_xm,
    stride_wn,
    stride_om,
    stride_os,  # a split's slice of the partials (SPLIT_K > 1)
    norm_ptr,  # [K] in x's dtype: read when NORM
    res_ptr,  # [N] in x's dtype: read when ADD_RESIDUAL
    eps,  # the norm's (NORM)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    REDUCE_EACH_TILE: tl.constexpr,
    PREFETCH: tl.constexpr,
    NORM: tl.constexpr,
    GATED: tl.constexpr,
    ADD_RESIDUAL: tl.constexpr,
    SCALED: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """The same product without tensor cores, for one to a few rows: each program widens a
    [BLOCK_N, BLOCK_K] weight tile to fp32 and multiplies it by every row in registers (no row
    padding to 16), over its 1/SPLIT_K of K. One row keeps a [BLOCK_N, BLOCK_K] partial sum and
    reduces it once at the end; with REDUCE_EACH_TILE it reduces each tile's products instead
    (shuffles every tile, but a [BLOCK_N] sum where the other holds BLOCK_N * BLOCK_K: registers
    for larger tiles, so more weight bytes in flight).

    PREFETCH (one row): each iteration loads the next weight tile before it multiplies the one
    it holds, so two tiles are in flight a program where the plain loop has one (Triton's
    pipeliner leaves loads that feed no tl.dot as they are).

    One row only, what the layer around the product would do in kernels of its own: NORM, x
    RMSNorm'd on the way in (its weight at norm_ptr, eps); GATED, x is the MLP's [gate | up]
    (2K wide) and the product takes SiLU(gate) * up; ADD_RESIDUAL (one split), the output is
    residual + the product. Each rounds where the model's own kernels round (_one_row_inputs).

    USE_PDL (launched with programmatic dependent launch, engine/device_guard.py): one row's
    first weight tile is loaded before the program waits for the kernel before it (weights are
    no kernel's output), so that wait and the first loads overlap."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    ks = tl.arange(0, BLOCK_K)
    per_split = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K
    k_start = tl.program_id(1) * per_split
    k_end = tl.minimum(k_start + per_split, K)
    rows = tl.arange(0, BLOCK_M)
    row_ok = rows < M
    if BLOCK_M == 1:
        if REDUCE_EACH_TILE:
            sums = tl.zeros((BLOCK_N,), dtype=tl.float32)
        else:
            sums = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        w_rows = w_ptr + cols[:, None] * stride_wn
        first = k_start
        if PREFETCH or USE_PDL:  # the first weight tile before anything else
            k = k_start + ks
            w = tl.load(w_rows + k[None, :], mask=col_ok[:, None] & (k < k_end)[None, :], other=0.0)
            if USE_PDL:  # weights are no kernel's output: loaded before the wait
                tl.extra.cuda.gdc_wait()
        rstd = _row_rstd(x_ptr, K, eps, BLOCK_K, NORM)
        if PREFETCH:  # each iteration loads the next tile before it multiplies this one
            for k0 in range(k_start, k_end, BLOCK_K):
                k = k0 + ks
                following = k + BLOCK_K
                w_next = tl.load(
                    w_rows + following[None, :],
                    mask=col_ok[:, None] & (following < k_end)[None, :],
                    other=0.0,
                )
                x = _one_row_inputs(x_ptr, k, k < k_end, K, rstd, norm_ptr, NORM, GATED)
                sums = _gemv_tile(sums, w, x, REDUCE_EACH_TILE)
                w = w_next
            first = k_end  # nothing left for the loop below
        elif USE_PDL:  # the first tile peeled: its weights were loaded before the wait
            k = k_start + ks
            x = _one_row_inputs(x_ptr, k, k < k_end, K, rstd, norm_ptr, NORM, GATED)
            sums = _gemv_tile(sums, w, x, REDUCE_EACH_TILE)
            first = k_start + BLOCK_K
        for k0 in range(first, k_end, BLOCK_K):
            k = k0 + ks
            k_ok = k < k_end
            x = _one_row_inputs(x_ptr, k, k_ok, K, rstd, norm_ptr, NORM, GATED)
            w = tl.load(
                w_rows + k[None, :],
                mask=col_ok[:, None] & k_ok[None, :],
                other=0.0,
            )
            sums = _gemv_tile(sums, w, x, REDUCE_EACH_TILE)
        if REDUCE_EACH_TILE:  # noqa: SIM108 (a compile-time branch)
            acc = sums[None, :]
        else:
            acc = tl.sum(sums, axis=1)[None, :]
    else:
        if USE_PDL:
            tl.extra.cuda.gdc_wait()
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(k_start, k_end, BLOCK_K):
            k = k0 + ks
            k_ok = k < k_end
            x, w = tiles_at(x_ptr, w_ptr, rows, cols, k, row_ok, col_ok, k_ok, stride_xm, stride_wn)
            x, w = x.to(tl.float32), w.to(tl.float32)
            acc += tl.sum(x[:, None, :] * w[None, :, :], axis=2)
    if USE_PDL:  # the next kernel may launch now: it waits for this one to finish
        tl.extra.cuda.gdc_launch_dependents()
    if SCALED:
        scale = tl.load(scale_ptr + cols, mask=col_ok, other=0.0)
        acc = acc * scale[None, :]
    if ADD_RESIDUAL:  # one row, one split: the product rounded as the model's, then added
        residual = tl.load(res_ptr + cols, mask=col_ok, other=0.0)
        acc = acc.to(residual.dtype).to(tl.float32) + residual.to(tl.float32)[None, :]
    offsets = out_ptr + rows[:, None] * stride_om + cols[None, :]
    if SPLIT_K > 1:  # each split its own slice of the partials
        offsets += tl.program_id(1) * stride_os
    tl.store(offsets, acc.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def _row_rstd(x_ptr, K, eps, BLOCK_K: tl.constexpr, NORM: tl.constexpr):
    """1 / sqrt(mean(x**2) + eps) over the row's K inputs in fp32 (RMSNorm's, as F.rms_norm
    takes it); 1.0 without NORM."""
    rstd = 1.0
    if NORM:
        ks = tl.arange(0, BLOCK_K)
        squares = tl.zeros((BLOCK_K,), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            x = tl.load(x_ptr + k0 + ks, mask=k0 + ks < K, other=0.0).to(tl.float32)
            squares += x * x
        rstd = tl.rsqrt(tl.sum(squares, 0) / K + eps)
    return rstd


@triton.jit
def _one_row_inputs(x_ptr, k, k_ok, K, rstd, norm_ptr, NORM: tl.constexpr, GATED: tl.constexpr):
    """One row's inputs k [BLOCK_K] in fp32, as the model's layers would hand them over in its
    dtype: x as it is; with NORM, RMSNorm's (x * rstd rounded to the dtype, times the norm's
    weight, rounded: engine/models/llama.py's RMSNorm); with GATED (x holds [gate | up], 2K
    wide), SiLU(gate) rounded, times up, rounded (the MLP's activation)."""
    if GATED:
        gate = tl.load(x_ptr + k, mask=k_ok, other=0.0)
        up = tl.load(x_ptr + K + k, mask=k_ok, other=0.0)
        wide = gate.to(tl.float32)
        act = (wide / (1.0 + tl.exp(-wide))).to(up.dtype)
        inputs = (act.to(tl.float32) * up.to(tl.float32)).to(up.dtype).to(tl.float32)
    else:
        raw = tl.load(x_ptr + k, mask=k_ok, other=0.0)
        if NORM:
            weight = tl.load(norm_ptr + k, mask=k_ok, other=0.0)
            normed = (raw.to(tl.float32) * rstd).to(raw.dtype)
            inputs = (normed.to(tl.float32) * weight.to(tl.float32)).to(raw.dtype).to(tl.float32)
        else:
            inputs = raw.to(tl.float32)
    return inputs


@triton.jit
def _gemv_tile(sums, w, x, REDUCE_EACH_TILE: tl.constexpr):
    """One weight tile [BLOCK_N, BLOCK_K] (E4M3) times one row's inputs [BLOCK_K] (fp32), added
    to the program's sums."""
    products = w.to(tl.float32) * x[None, :]
    # One return (Triton 3.6 builds the statements after a compile-time branch's return too).
    if REDUCE_EACH_TILE:
        sums += tl.sum(products, axis=1)
    else:
        sums += products
    return sums


def fp8_weight_gemv(
    x: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor | None,
    *,
    block_n: int,
    block_k: int,
    split_k: int = 1,
    num_warps: int = 4,
    num_stages: int = 2,
    reduce_each_tile: bool = False,
    prefetch: bool = False,
    norm: tuple[torch.Tensor, float] | None = None,
    gated: bool = False,
    residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """fp8_weight_matmul through the tensor-core-free kernel, with its tile sizes given; split_k
    > 1 writes fp32 partials, then sums them in a fixed order and casts (one more kernel;
    atomics summing them would round in whatever order the programs finish, so a greedy
    decode could change from run to run).

    One row may take the layer's work around the product (the kernel's NORM, GATED and
    ADD_RESIDUAL): norm (weight [K], eps), RMSNorm x first; gated, x [1, 2K] is [gate | up] and
    the product takes SiLU(gate) * up; residual [1, N], returned: residual + the product.
    scale None: the weight is bf16 (or another 16-bit dtype), the product unscaled."""
    rows, width = x.shape
    outputs, inputs = weight.shape
    if width != (2 * inputs if gated else inputs):
        raise ValueError(
            f"fp8_weight_gemv takes rows of {2 * inputs if gated else inputs}"
            f"{' ([gate | up])' if gated else ''}, not {width}."
        )
    fused = norm is not None or gated or residual is not None
    if fused and (rows != 1 or (norm is not None and gated)):
        raise ValueError("fp8_weight_gemv fuses a norm, or SiLU(gate) * up, into one row only.")
    if residual is not None and (split_k != 1 or tuple(residual.shape) != (1, outputs)):
        raise ValueError(f"fp8_weight_gemv adds a residual [1, {outputs}] with one split only.")
    if norm is not None and (tuple(norm[0].shape) != (inputs,) or not norm[0].is_contiguous()):
        raise ValueError(f"fp8_weight_gemv's norm weight must be contiguous [{inputs}].")
    x = x.contiguous()
    out = split_output(x, outputs, split_k)
    norm_weight, eps = norm if norm is not None else (x, 0.0)
    with on_device(x.device):
        _fp8_weight_gemv_kernel[(triton.cdiv(outputs, block_n), split_k)](
            x,
            weight,
            scale if scale is not None else x,
            out,
            rows,
            outputs,
            inputs,
            x.stride(0),
            weight.stride(0),
            out.stride(-2),  # a row of the output (of each split's partials)
            out.stride(0) if split_k > 1 else 0,
            norm_weight,
            residual.contiguous() if residual is not None else x,
            eps,
            BLOCK_M=triton.next_power_of_2(rows),
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            SPLIT_K=split_k,
            REDUCE_EACH_TILE=reduce_each_tile,
            PREFETCH=prefetch and rows == 1,
            NORM=norm is not None,
            GATED=gated,
            ADD_RESIDUAL=residual is not None,
            SCALED=scale is not None,
            num_warps=num_warps,
            num_stages=num_stages,
            **launch_options(x.device),
        )
    return out if split_k == 1 else sum_splits(out, x.dtype)


@torch.library.custom_op("longdoc::fp8_gemv_fused", mutates_args=())
def fp8_gemv_fused_op(
    x: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor | None,
    norm_weight: torch.Tensor | None,
    eps: float,
    gated: bool,
    residual: torch.Tensor | None,
) -> torch.Tensor:
    """One row's product with the layer's work around it (fp8_weight_gemv's norm, gated and
    residual; GEMV_CONFIG's tiles, BF16_GEMV_CONFIG's for unscaled bf16 weights) as one opaque
    operator for torch.compile."""
    norm = None if norm_weight is None else (norm_weight, eps)
    tiles = GEMV_CONFIG if scale is not None else BF16_GEMV_CONFIG
    return fp8_weight_gemv(x, weight, scale, **tiles, norm=norm, gated=gated, residual=residual)


@fp8_gemv_fused_op.register_fake
def _(
    x: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor | None,
    norm_weight: torch.Tensor | None,
    eps: float,
    gated: bool,
    residual: torch.Tensor | None,
) -> torch.Tensor:
    return x.new_empty((x.shape[0], weight.shape[0]))
