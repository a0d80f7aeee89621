"""The model's matrix products, and which library computes them on the CPU.

On the CPU PyTorch sends `F.linear` to MKL, whose generic x86 path runs on AMD processors without
AVX-512: on this project's 2-core AMD EPYC (Zen 5) it computes SmolLM2's projections at 175-215
GFLOP/s, where oneDNN (also inside PyTorch, chosen by CPU features, not vendor) reaches 340-480,
and the decode step's logits 2.8x faster (bench/results/cpu_matmul.md). oneDNN is reached
through `torch.ops.mkldnn._linear_pointwise`, the op Inductor's CPU backend emits for linear
layers; it is private, so it is probed once per dtype and F.linear is kept wherever it is
missing or disagrees.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

# (x [..., in], weight [out, in], bias [out] or None) -> [..., out]
LinearFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]

# Tokens per MLP pass on the CPU: the [T, 2 * intermediate] product stays in the caches.
CPU_MLP_MAX_ROWS = 512

# The probe's tolerance against F.linear, relative to the result's norm: both are fp32 (or bf16)
# products that only sum in another order.
_PROBE_TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


def onednn_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x.contiguous(), weight, bias, "none", [], "")


@functools.cache
def cpu_linear_fn(dtype: torch.dtype) -> LinearFn:
    """oneDNN's linear for `dtype` on the CPU when it runs and agrees with F.linear, else F.linear."""
    if dtype not in _PROBE_TOLERANCE or not torch.backends.mkldnn.is_available():
        return F.linear
    if not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return F.linear
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(37, 64, generator=generator).to(dtype)
    weight = torch.randn(48, 64, generator=generator).to(dtype)
    bias = torch.randn(48, generator=generator).to(dtype)
    try:
        ours = onednn_linear(x, weight, bias).float()
    except Exception:  # a build without the op's kernels raises RuntimeError or NotImplementedError
        return F.linear
    reference = F.linear(x.float(), weight.float(), bias.float())
    error = ((ours - reference).norm() / reference.norm()).item()
    return onednn_linear if error <= _PROBE_TOLERANCE[dtype] else F.linear


class OneRowProjection:
    """A projection whose single bf16 row may go through the GEMV that also does the layer's
    work around the product (engine/models/fp8_gemv.py): Linear (bf16 weights) and Fp8Linear
    (E4M3 weights and their row scales, one_row_scale)."""

    weight: torch.Tensor
    one_row_fusion: bool

    def one_row_scale(self) -> torch.Tensor | None:
        """The weight's row scales for the GEMV; None for weights in the activations' dtype."""
        return None

    def one_row(
        self,
        x: torch.Tensor,
        *,
        norm: tuple[torch.Tensor, float] | None = None,
        gated: bool = False,
        residual: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x [1, in] (or [1, 2 * in] gated) bf16 -> [1, out] in one GEMV kernel that also does
        the layer's work around the product (fp8_gemv.fp8_weight_gemv): norm (weight, eps), an
        RMSNorm of x first; gated, SiLU(gate) * up of x's halves; residual [1, out] added. Only
        where one_row_fusion (else ValueError: the caller checks)."""
        if not (self.one_row_fusion and x.dtype == torch.bfloat16 and x.shape[0] == 1):
            raise ValueError(
                f"{type(self).__name__}.one_row takes one bf16 row, where one_row_fusion is on."
            )
        from engine.models.fp8_gemv import fp8_gemv_fused_op

        norm_weight, eps = norm if norm is not None else (None, 0.0)
        scale = self.one_row_scale()
        return fp8_gemv_fused_op(x, self.weight, scale, norm_weight, eps, gated, residual)


class Linear(OneRowProjection, nn.Module):
    """nn.Linear's parameters (same names, so checkpoints load as they are) with a matrix product
    that the model chooses for its device (`LlamaModel.use_matmul`)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = False) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        self.matmul: LinearFn = F.linear
        # One bf16 row through the GEMV that also does the layer's work around the product
        # (one_row; set by enable_one_row where it runs).
        self.one_row_fusion = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.matmul(x, self.weight, self.bias)

    def enable_one_row(self, device: torch.device) -> bool:
        """Let one_row run where it can: bf16 weights (rows contiguous) without a bias on CUDA,
        with Triton."""
        self.one_row_fusion = (
            device.type == "cuda"
            and self.weight.dtype == torch.bfloat16
            and self.weight.stride(-1) == 1
            and self.bias is None
            and importlib.util.find_spec("triton") is not None
        )
        return self.one_row_fusion

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"
