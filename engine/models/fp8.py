"""FP8 (E4M3) weights: the checkpoint formats we read, quantizing at load, and the FP8 products.

Formats (config.json `quantization_config`), as vLLM and SGLang serve them:
- "fp8": `weight` in float8_e4m3fn with `weight_scale` (one per tensor, or one per output row),
  or with `weight_block_size` [128, 128] a `weight_scale_inv` of [ceil(out/128), ceil(in/128)]
  (DeepSeek's and Qwen3's layout; despite its name it multiplies: w = weight * weight_scale_inv).
- "compressed-tensors" with 8-bit float weights, strategy "tensor", "channel" or "block".
Activation scales a checkpoint carries (`input_scale`, static) are not used: activations are
quantized per token as they come (vLLM's "dynamic" scheme), so no outlier token is clipped.

At load every scale becomes rows [out, 1], or [out, ceil(in/block_k)] for block scales (each
row's block scales repeated): q, k and v then fuse by concatenating rows whatever their sizes.

Products: on CUDA with per-tensor or per-row scales, torch._scaled_mm (activations quantized per
token, row-wise scales: cuBLASLt/CUTLASS FP8 tensor cores on Hopper); elsewhere (the CPU, block
scales, fp32 models) the weight is dequantized to the activations' dtype for F.linear, so the
same loading code and the same numbers are tested on the CPU. Where _scaled_mm runs, block
scales are requantized with one scale per row at load (requantize_rows: a second rounding, about
1.4x the first's error) so that every product runs on it; a block-scaled Triton product would
keep them as they are.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from engine.errors import ModelLoadError, UnsupportedModelError
from engine.models.linear import OneRowProjection

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(FP8_DTYPE).max)  # 448
# An all-zero row gets this scale instead of 0: its quantized values are 0 either way.
MIN_SCALE = 1e-12
# The projections that run in FP8; embeddings, norms and the logits stay in the model's dtype.
FP8_PROJECTIONS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
# _scaled_mm's FP8 tensor-core kernels need both dimensions of the weight in multiples of 16.
_SCALED_MM_ALIGNMENT = 16


def fp8_weight_block(quantization: Any) -> tuple[int, int] | None:
    """The (rows, cols) of a block-scaled FP8 checkpoint's scales, None for per-tensor or per-row
    scales; UnsupportedModelError for a quantization that is not FP8 weights."""
    method = quantization.get("quant_method", "unknown") if isinstance(quantization, dict) else ""
    if method == "fp8":
        if quantization.get("fmt", "e4m3") != "e4m3":
            raise UnsupportedModelError(
                f"The checkpoint's FP8 format is {quantization['fmt']!r}; the engine loads E4M3."
            )
        return _block(quantization.get("weight_block_size"))
    if method == "compressed-tensors":
        return _compressed_tensors_block(quantization)
    raise UnsupportedModelError(
        f"The checkpoint is quantized ({method}); the engine loads bf16, fp16 or fp32 weights, "
        'and FP8 ("fp8" or "compressed-tensors" FP8): use one of those checkpoints.'
    )


def _compressed_tensors_block(quantization: dict[str, Any]) -> tuple[int, int] | None:
    blocks = set()
    for name, group in (quantization.get("config_groups") or {}).items():
        weights = (group or {}).get("weights") or {}
        strategy = weights.get("strategy")
        if (
            weights.get("num_bits") != 8
            or weights.get("type") != "float"
            or strategy not in ("tensor", "channel", "block")
        ):
            raise UnsupportedModelError(
                f"The checkpoint's compressed-tensors group {name!r} holds "
                f"{weights.get('num_bits')}-bit {weights.get('type')} weights ({strategy}); the "
                "engine loads 8-bit float (FP8) weights with tensor, channel or block scales."
            )
        blocks.add(_block(weights.get("block_structure")) if strategy == "block" else None)
    if len(blocks) > 1:
        raise UnsupportedModelError(
            "The checkpoint mixes block-scaled and per-tensor or per-channel FP8 groups; the "
            "engine loads one kind of scales per checkpoint."
        )
    return blocks.pop() if blocks else None


def _block(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    if not (isinstance(value, list | tuple) and len(value) == 2 and all(int(v) > 0 for v in value)):
        raise UnsupportedModelError(
            f"The checkpoint's FP8 block size {value!r} is not [rows, cols]."
        )
    return int(value[0]), int(value[1])


def is_fp8(tensor: torch.Tensor) -> bool:
    return tensor.dtype == FP8_DTYPE


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """weight [out, in] -> (E4M3 [out, in], fp32 scales [out, 1]): one scale per output row, its
    largest magnitude mapped to 448."""
    wide = weight.float()
    scale = (wide.abs().amax(dim=1, keepdim=True) / FP8_MAX).clamp(min=MIN_SCALE)  # [out, 1]
    return to_fp8(wide / scale), scale


def to_fp8(x: torch.Tensor) -> torch.Tensor:
    # E4M3fn has no infinity: a value past 448 (rounding of x / scale) would become NaN.
    return x.clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)


def row_scales(
    scale: torch.Tensor, out_features: int, in_features: int, block: tuple[int, int] | None
) -> torch.Tensor:
    """A checkpoint's scale (one, [out] / [out, 1], or blocks [ceil(out/r), ceil(in/c)]) as fp32
    rows: [out, 1], or [out, ceil(in/c)] for block scales."""
    scale = scale.float()
    cols = 1 if block is None else -(-in_features // block[1])
    if scale.numel() == 1:
        return scale.reshape(1, 1).expand(out_features, cols).contiguous()
    if block is None:
        if scale.numel() != out_features:
            raise ModelLoadError(
                f"An FP8 weight of {out_features} rows has {scale.numel()} scales; expected one "
                "per tensor or one per row."
            )
        return scale.reshape(out_features, 1).contiguous()
    expected = (-(-out_features // block[0]), cols)
    if tuple(scale.shape) != expected:
        raise ModelLoadError(
            f"An FP8 weight of shape [{out_features}, {in_features}] has block scales of shape "
            f"{list(scale.shape)}; expected {list(expected)} for {list(block)} blocks."
        )
    return scale.repeat_interleave(block[0], dim=0)[:out_features].contiguous()


def requantize_rows(
    weight: torch.Tensor, scale: torch.Tensor, block_k: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """An E4M3 weight with block scales [out, ceil(in/block_k)] -> E4M3 with row scales [out, 1]."""
    return quantize_rows(dequantize(weight, scale, torch.float32, block_k))


def supports_scaled_mm(device: torch.device) -> bool:
    """Whether torch._scaled_mm's FP8 kernels run on `device`: CUDA with FP8 tensor cores."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)


def dequantize(
    weight: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype, block_k: int | None = None
) -> torch.Tensor:
    """E4M3 [out, in] and row scales [out, 1], or [out, ceil(in/block_k)] -> dtype."""
    wide = weight.float()
    if scale.shape[1] == 1:
        return (wide * scale).to(dtype)
    if block_k is None or scale.shape[1] != -(-weight.shape[1] // block_k):
        raise ValueError(
            f"{scale.shape[1]} block scales per row need their block_k, not {block_k}."
        )
    return (wide * scale.repeat_interleave(block_k, dim=1)[:, : weight.shape[1]]).to(dtype)


class Fp8Linear(OneRowProjection, nn.Module):
    """A projection with E4M3 weights [out, in] and fp32 row scales (see row_scales); parameter
    names are the checkpoint's (`weight`, `weight_scale`, `bias`)."""

    def __init__(
        self, in_features: int, out_features: int, bias: bool = False, *, block_k: int | None = None
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.block_k = block_k  # the inputs per scale of block scales; None: one scale a row
        scale_cols = 1 if block_k is None else -(-in_features // block_k)
        self.weight = nn.Parameter(
            torch.empty(out_features, in_features, dtype=FP8_DTYPE), requires_grad=False
        )
        self.weight_scale = nn.Parameter(
            torch.empty(out_features, scale_cols, dtype=torch.float32), requires_grad=False
        )
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        # Not a plain product: DecoderLayer.compile_halves keeps it out of addmm_.
        self.matmul = None
        # Decided once the weights are on their device (use_scaled_mm), not per call, so that
        # torch.compile and CUDA graphs see a plain attribute.
        self.scaled_mm = False
        # A few rows (decode) through the FP8-weight Triton kernels (fp8_small_batch.py), from 2
        # rows with FP8 activations where small_batch_w8a8.
        self.small_batch_rows = 0
        self.small_batch_w8a8 = True
        # One row may take the layer's work around the product into the GEMV (one_row).
        self.one_row_fusion = False

    def use_scaled_mm(
        self,
        device: torch.device,
        *,
        small_batch_kernel: bool = False,
        w8a8: bool = True,
        one_row_fusion: bool = False,
    ) -> None:
        """Multiply with torch._scaled_mm where it runs: CUDA with FP8 tensor cores (sm_89+),
        row scales, and both weight dimensions multiples of 16; with small_batch_kernel, up to
        LINEAR_ROWS rows through the Triton kernels there, where Triton is (w8a8: from 2 rows
        with the activations quantized to E4M3, fp8_w8a8.py); with one_row_fusion too (and no
        bias), one_row runs."""
        self.scaled_mm = (
            supports_scaled_mm(device)
            and self.weight_scale.shape[1] == 1
            and self.out_features % _SCALED_MM_ALIGNMENT == 0
            and self.in_features % _SCALED_MM_ALIGNMENT == 0
        )
        self.small_batch_rows = 0
        self.small_batch_w8a8 = w8a8
        if small_batch_kernel and self.scaled_mm and importlib.util.find_spec("triton") is not None:
            from engine.models.fp8_small_batch import LINEAR_ROWS

            self.small_batch_rows = LINEAR_ROWS
        self.one_row_fusion = one_row_fusion and self.small_batch_rows > 0 and self.bias is None

    def one_row_scale(self) -> torch.Tensor:
        return self.weight_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Row-wise scaled products write bf16 only: an fp16 or fp32 model dequantizes.
        if self.scaled_mm and x.dtype == torch.bfloat16:
            flat = x.reshape(-1, self.in_features)
            if flat.shape[0] <= self.small_batch_rows:
                from engine.models.fp8_small_batch import fp8_weight_matmul_op

                out = fp8_weight_matmul_op(
                    flat, self.weight, self.weight_scale, self.small_batch_w8a8
                )
                out = out.view(*x.shape[:-1], self.out_features)
                return out if self.bias is None else out + self.bias
            out = _scaled_mm_rows(flat, self.weight, self.weight_scale)
            out = out.view(*x.shape[:-1], self.out_features)
            return out if self.bias is None else out + self.bias
        weight = dequantize(self.weight, self.weight_scale, x.dtype, self.block_k)
        return F.linear(x, weight, self.bias)

    def extra_repr(self) -> str:
        kind = "rows" if self.weight_scale.shape[1] == 1 else "blocks"
        return f"in_features={self.in_features}, out_features={self.out_features}, fp8 {kind}"


def _scaled_mm_rows(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [M, K] bf16, quantized per token here; weight [N, K] E4M3, scale [N, 1] -> [M, N] bf16.
    Uncompiled, one Triton pass rounds x (fp8_tokens.py: the same bytes); under torch.compile
    Inductor fuses the torch path itself."""
    x_fp8, x_scale = quantize_per_token(x)
    # mat2 must be column-major: the [N, K] row-major weight transposed is.
    return torch._scaled_mm(
        x_fp8,
        weight.t(),
        scale_a=x_scale,
        scale_b=scale.view(1, -1),  # [1, N]
        out_dtype=torch.bfloat16,
    )


def quantize_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] -> (E4M3 [M, K], fp32 scales [M, 1]): each row's largest magnitude mapped to 448."""
    if x.is_cuda and not torch.compiler.is_compiling() and _has_triton():
        from engine.models.fp8_tokens import fits, quantize_tokens

        if fits(x.shape[1]):
            return quantize_tokens(x, fp8_max=FP8_MAX, min_scale=MIN_SCALE)
    x_scale = (x.abs().amax(dim=1, keepdim=True).float() / FP8_MAX).clamp(min=MIN_SCALE)  # [M, 1]
    return to_fp8(x.float() / x_scale), x_scale


@functools.cache
def _has_triton() -> bool:
    return importlib.util.find_spec("triton") is not None
