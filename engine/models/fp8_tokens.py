"""Triton kernel for the FP8 products of many rows (prefill, large decode batches): activations
rounded to E4M3 with one scale per token, in one pass (imported only where Triton is).

fp8._scaled_mm_rows's torch path takes six passes over a [T, K] activation with fp32 temporaries
between them (|x|, its largest per row, widen, divide, clamp, cast). In a 128K-token prefill of
the 8B with FP8 weights on an H100 those kernels took about 1.3 s of 9.6 s, four products a layer
(bench/results/fp8_h100.md, "Where the 128K FP8 prefill's time goes"). Here a program reads one
row once, keeps it in registers, and writes its bytes and its scale: the same numbers as the
torch path (the largest |value| / 448, at least MIN_SCALE; an IEEE division, clamped, rounded to
nearest even; a row holding a NaN gets a NaN scale, as torch's amax gives it).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.device_guard import launch_options, on_device

# The longest row a program holds in registers (a power of two): 32K inputs over 16 warps is 64
# fp32 values a thread. Longer rows take the torch path.
MAX_ROW = 32768


@triton.jit
def _quantize_tokens_kernel(
    x_ptr,  # [T, K] bf16 / fp16 / fp32, rows `stride_x` apart, K contiguous
    q_ptr,  # [T, K] float8_e4m3fn, contiguous
    s_ptr,  # [T] fp32
    K,
    stride_x,
    fp8_max,
    min_scale,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    if USE_PDL:  # programmatic dependent launch: wait for the activations, then let the next
        tl.extra.cuda.gdc_wait()  # kernel launch (it waits for this one to finish)
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_K)
    ok = cols < K
    x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    scale = tl.maximum(tl.math.div_rn(tl.max(tl.abs(x), axis=0), fp8_max), min_scale)
    # The GPU's max drops NaN: a row holding one gets a NaN scale (torch's amax propagates it).
    has_nan = tl.sum((x != x).to(tl.int32), axis=0) > 0
    scale = tl.where(has_nan, float("nan"), scale)
    quotient = tl.math.div_rn(x, scale)
    # x / scale is at most 448 up to a rounding: clamped, since E4M3fn has no infinity.
    quotient = tl.where(quotient != quotient, quotient, tl.clamp(quotient, -fp8_max, fp8_max))
    tl.store(q_ptr + row * K + cols, quotient.to(q_ptr.dtype.element_ty), mask=ok)
    tl.store(s_ptr + row, scale)


def fits(inputs: int) -> bool:
    """Whether quantize_tokens takes rows of `inputs` values."""
    return 0 < inputs <= MAX_ROW


def quantize_tokens(
    x: torch.Tensor, *, fp8_max: float, min_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, K] (K contiguous, K <= MAX_ROW) -> (E4M3 [T, K], fp32 scales [T, 1]): each row scaled
    so that its largest magnitude is fp8_max (fp8.py's constants: this module imports nothing of
    the engine's models), a scale at least min_scale."""
    rows, inputs = x.shape
    if not fits(inputs):
        raise ValueError(f"quantize_tokens takes rows of 1 to {MAX_ROW} values, not {inputs}.")
    if x.stride(1) != 1:
        x = x.contiguous()
    quantized = torch.empty((rows, inputs), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((rows, 1), dtype=torch.float32, device=x.device)
    if rows == 0:
        return quantized, scales
    block = triton.next_power_of_2(inputs)
    with on_device(x.device):
        _quantize_tokens_kernel[(rows,)](
            x, quantized, scales, inputs, x.stride(0), fp8_max, min_scale,
            BLOCK_K=block,
            num_warps=max(1, min(16, block // 1024)),
            **launch_options(x.device),
        )  # fmt: skip
    return quantized, scales
