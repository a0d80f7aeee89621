"""FP8 weights in decode-sized products (up to MAX_ROWS rows): Triton kernels that read each E4M3
weight once, at most once a step.

Three kernels, chosen by rows (plan): for one row (a single stream's decode step) a
tensor-core-free GEMV that widens each weight tile to fp32 in registers and multiplies it by the
bf16 activations; for 2-64 rows, by default, FP8 activations times FP8 weights on FP8 tensor
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

from engine.device_guard import launch_options, on_device, sm_count
from engine.models.fp8_w8a8 import block_m, fp8_w8a8_matmul, split_output, sum_splits

MAX_ROWS = 64  # the kernels take up to this many rows
# What Fp8Linear sends them: every decode batch up to 64 rows. With split-K tiles at 17-64 rows
# a layer's four products take 122.7 us at 32 rows and 166.3 at 64 on an H100, against 220.8
# and 225.0 through torch._scaled_mm with its activations quantized (bench/fp8_matmul_sweep.py);
# end to end, 64 streams were level (3,482 against 3,487 tokens/s, two machines;
# bench/results/fp8_h100.md), and the activations stay bf16.
LINEAR_ROWS = 64
# Tile sizes by rows, from bench/fp8_matmul_sweep.py on an H100 (bench/results/fp8_h100.md): at
# each row count, the configuration whose time summed over the 8B's four projections is least.
# One row: the tensor-core-free kernel, 8 outputs a program, 1,024 inputs a tile (92.5 us a
# layer, against 155.7 for bf16 F.linear and 165.5 for the earlier single configuration); more
# rows: the tensor-core kernel, wider output tiles and the inputs split four ways as the rows
# grow (measured at 32 and 64 rows).
GEMV_CONFIG = dict(block_n=8, block_k=1024, num_warps=4, num_stages=2)
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
    offsets = out_ptr + rows[:, None] * stride_om + cols[None, :]
    if SPLIT_K > 1:  # each split its own slice of the partials
        offsets += tl.program_id(1) * stride_os
    tl.store(offsets, acc.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit(do_not_specialize=["M"])  # rows change step by step
def _fp8_weight_gemv_kernel(
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
            x = tl.load(
                x_ptr + rows[:, None] * stride_xm + k[None, :],
                mask=row_ok[:, None] & k_ok[None, :],
                other=0.0,
            ).to(tl.float32)
            w = tl.load(
                w_ptr + cols[:, None] * stride_wn + k[None, :],
                mask=col_ok[:, None] & k_ok[None, :],
                other=0.0,
            ).to(tl.float32)
            acc += tl.sum(x[:, None, :] * w[None, :, :], axis=2)
    if USE_PDL:  # the next kernel may launch now: it waits for this one to finish
        tl.extra.cuda.gdc_launch_dependents()
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
    if NORM:
        ks = tl.arange(0, BLOCK_K)
        squares = tl.zeros((BLOCK_K,), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            x = tl.load(x_ptr + k0 + ks, mask=k0 + ks < K, other=0.0).to(tl.float32)
            squares += x * x
        return tl.rsqrt(tl.sum(squares, 0) / K + eps)
    return 1.0


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
        return (act.to(tl.float32) * up.to(tl.float32)).to(up.dtype).to(tl.float32)
    raw = tl.load(x_ptr + k, mask=k_ok, other=0.0)
    if NORM:
        weight = tl.load(norm_ptr + k, mask=k_ok, other=0.0)
        normed = (raw.to(tl.float32) * rstd).to(raw.dtype)
        return (normed.to(tl.float32) * weight.to(tl.float32)).to(raw.dtype).to(tl.float32)
    return raw.to(tl.float32)


@triton.jit
def _gemv_tile(sums, w, x, REDUCE_EACH_TILE: tl.constexpr):
    """One weight tile [BLOCK_N, BLOCK_K] (E4M3) times one row's inputs [BLOCK_K] (fp32), added
    to the program's sums."""
    products = w.to(tl.float32) * x[None, :]
    if REDUCE_EACH_TILE:
        return sums + tl.sum(products, axis=1)
    return sums + products


def fp8_weight_gemv(
    x: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor,
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
    the product takes SiLU(gate) * up; residual [1, N], returned: residual + the product."""
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
            scale,
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
            BLOCK_M=_block_m("gemv", rows),
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            SPLIT_K=split_k,
            REDUCE_EACH_TILE=reduce_each_tile,
            PREFETCH=prefetch and rows == 1,
            NORM=norm is not None,
            GATED=gated,
            ADD_RESIDUAL=residual is not None,
            num_warps=num_warps,
            num_stages=num_stages,
            **launch_options(x.device),
        )
    return out if split_k == 1 else sum_splits(out, x.dtype)


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


@torch.library.custom_op("longdoc::fp8_gemv_fused", mutates_args=())
def fp8_gemv_fused_op(
    x: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor,
    norm_weight: torch.Tensor | None,
    eps: float,
    gated: bool,
    residual: torch.Tensor | None,
) -> torch.Tensor:
    """One row's product with the layer's work around it (fp8_weight_gemv's norm, gated and
    residual, GEMV_CONFIG's tiles) as one opaque operator for torch.compile."""
    norm = None if norm_weight is None else (norm_weight, eps)
    return fp8_weight_gemv(
        x, weight, scale, **GEMV_CONFIG, norm=norm, gated=gated, residual=residual
    )


@fp8_gemv_fused_op.register_fake
def _(
    x: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor,
    norm_weight: torch.Tensor | None,
    eps: float,
    gated: bool,
    residual: torch.Tensor | None,
) -> torch.Tensor:
    return x.new_empty((x.shape[0], weight.shape[0]))
