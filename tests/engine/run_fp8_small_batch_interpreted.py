"""The FP8-weight Triton kernel under Triton's CPU interpreter, on small shapes; prints
whether each matches the fp32 product (test_fp8_small_batch.py starts it with
TRITON_INTERPRET=1, which must be set before triton decorates the kernel)."""

import json

import torch

from tests.engine.run_paged_decode_interpreted import start_interpreted

# (rows, outputs, inputs), as the engine multiplies (plan picks): one row (the GEMV) within one K
# tile and over two ragged ones; from 2 rows FP8 activations (w8a8) over a ragged K, more rows
# than 16 (BLOCK_M 32), a ragged N.
SHAPES = [(1, 48, 64), (1, 24, 1100), (3, 32, 300), (17, 40, 256), (64, 16, 512)]
# Explicit tiles (bench/fp8_matmul_sweep.py's): the GEMV with several rows and split-K (fp32
# partials, uneven splits, an empty one), reducing each tile (a ragged N and K, split), each
# weight tile loaded an iteration ahead (prefetch: ragged, and split), the layer's work around
# one row's product (an RMSNorm on the way in, split; SiLU(gate) * up in and a residual added
# out, as the MLP's down projection; a residual alone, prefetched), the bf16-activation
# tensor-core kernel split along K, the FP8-activation one unswapped and split unevenly over a
# ragged last group.
TILE_CASES = [
    ((2, 24, 520), dict(block_n=16, block_k=128, split_k=3)),
    ((1, 40, 1000), dict(block_n=8, block_k=256, split_k=4)),
    ((1, 44, 1100), dict(block_n=8, block_k=512, reduce_each_tile=True)),
    ((1, 24, 1000), dict(block_n=4, block_k=256, split_k=3, reduce_each_tile=True)),
    ((1, 40, 1100), dict(block_n=8, block_k=256, prefetch=True)),
    ((1, 24, 1000), dict(block_n=4, block_k=128, split_k=3, reduce_each_tile=True, prefetch=True)),
    ((1, 40, 1100), dict(block_n=8, block_k=256, norm=True)),
    ((1, 24, 600), dict(block_n=4, block_k=128, split_k=2, norm=True, prefetch=True)),
    ((1, 40, 700), dict(block_n=8, block_k=256, gated=True, residual=True)),
    (
        (1, 44, 300),
        dict(block_n=4, block_k=128, reduce_each_tile=True, residual=True, prefetch=True),
    ),
    ((33, 40, 600), dict(kind="dot", block_n=32, block_k=128, split_k=3)),
    ((64, 16, 300), dict(kind="dot", block_n=16, block_k=128, split_k=4)),
    ((5, 72, 700), dict(kind="w8a8", block_n=64, split_k=3, swap=False)),
    ((40, 136, 1024), dict(kind="w8a8", block_n=64, split_k=2)),
]


def quantized_groups(x: torch.Tensor, group: int = 128) -> torch.Tensor:
    """x rounded as fp8_w8a8.quantize_groups rounds it (E4M3, a scale per `group` inputs of a
    row, the group's largest magnitude at 448), back in fp32: plain torch, the reference."""
    from engine.models.fp8 import FP8_MAX, to_fp8

    rows, inputs = x.shape
    padded = torch.nn.functional.pad(x.float(), (0, -inputs % group)).view(rows, -1, group)
    scale = (padded.abs().amax(dim=2, keepdim=True) / FP8_MAX).clamp(min=1e-12)
    return (to_fp8(padded / scale).float() * scale).view(rows, -1)[:, :inputs]


def _rounding_swing(exact: torch.Tensor, relative: float, carry) -> torch.Tensor:
    """How far apart the layer's input can land, per input: `exact` (float64) is the value that
    rounds to the model's dtype, known to `relative`; where its two ends round apart, `carry`
    takes each on as the layer would (in the model's dtype), else 0."""
    low = (exact * (1 - relative)).to(torch.bfloat16)
    high = (exact * (1 + relative)).to(torch.bfloat16)
    return (carry(high).float() - carry(low).float()).abs()


def check(
    rows: int, outputs: int, inputs: int, device: torch.device, tiles: dict | None = None
) -> dict:
    from functools import partial

    from engine.models.fp8 import dequantize, quantize_rows
    from engine.models.fp8_gemv import fp8_weight_gemv
    from engine.models.fp8_small_batch import fp8_weight_dot, fp8_weight_matmul, plan
    from engine.models.fp8_w8a8 import fp8_w8a8_matmul

    kind = (tiles or {}).get("kind", "gemv")
    options = {k: v for k, v in (tiles or {}).items() if k != "kind"}
    with_norm, with_residual = options.pop("norm", False), options.pop("residual", False)
    gated = options.get("gated", False)
    if tiles is None:  # as the engine multiplies: plan() picks
        product = fp8_weight_matmul
        kind = plan(rows)[0]
    elif kind == "dot":
        product = partial(fp8_weight_dot, num_warps=4, num_stages=3, **options)
    elif kind == "w8a8":
        product = partial(fp8_w8a8_matmul, num_warps=4, num_stages=3, **options)
    else:
        product = partial(fp8_weight_gemv, **options)
    generator = torch.Generator().manual_seed(rows * 1000 + outputs)
    width = 2 * inputs if gated else inputs
    x = torch.randn(rows, width, generator=generator).to(device, torch.bfloat16)
    weight, scale = quantize_rows(torch.randn(outputs, inputs, generator=generator).to(device))
    layer_input = x  # what the model's own kernels hand the product, in its dtype
    fused = {}  # the layer's work the GEMV takes on (norm, residual; gated is among the tiles)
    # Inputs the kernel may round the other way than the layer (its rsqrt or exp of its own,
    # its own order of summing the squares): the two candidates of each, as the layer would
    # carry them on, and how far apart they are.
    swing = torch.zeros(rows, inputs, device=device)
    if with_norm:  # RMSNorm as engine/models/llama.py computes it
        norm_weight = (torch.randn(inputs, generator=generator) * 0.5 + 1).to(device, x.dtype)
        fused["norm"] = (norm_weight, 1e-5)
        normed = torch.nn.functional.rms_norm(x.float(), (inputs,), eps=1e-5).to(x.dtype)
        layer_input = norm_weight * normed
        # fp32 sums of K squares in any order, an rsqrt within 2**-22 and x * rstd: 2**-20.
        exact = x.double() * (x.double().square().mean(1, keepdim=True) + 1e-5).rsqrt()
        swing = _rounding_swing(exact, inputs * 2**-24 + 2**-20, lambda v: norm_weight * v)
    if gated:  # the MLP's activation
        gate, up = x.split(inputs, dim=1)
        layer_input = torch.nn.functional.silu(gate) * up
        # SiLU in fp32 from an exp and a division of the kernel's own: a few ulps, 2**-20.
        swing = _rounding_swing(gate.double() * gate.double().sigmoid(), 2**-20, lambda v: v * up)
    residual = None
    if with_residual:
        residual = torch.randn(1, outputs, generator=generator).to(device, x.dtype)
        fused["residual"] = residual
    out = product(x, weight, scale, **fused)
    # FP8 activations: the product of what they round to (exactly as the kernel rounds them).
    operand = quantized_groups(x) if kind == "w8a8" else layer_input.float()
    wide = dequantize(weight, scale, torch.float32)
    reference = operand @ wide.T
    # The product is exact up to fp32 summation order; only the bf16 output rounds: half an ulp
    # to nearest on a GPU, up to one ulp where Triton's interpreter truncates. One ulp is at most
    # 2**-7 of the value; a floor for values that cancel to about 0.
    floor = 1e-5 * float(reference.abs().max())
    if kind == "w8a8" and device.type == "cuda":
        # Hopper's FP8 tensor cores accumulate a dot with about 14 bits of mantissa (DeepSeek-V3's
        # measurement; Triton's default for FP8 dots on sm_90), promoted to fp32 every 128 inputs
        # (a K tile): each of a tile's 8 additions (four k32 instructions, two steps each) errs
        # by at most 2**-13 of the terms' absolute sum, 2**-10 in all, around an output that
        # cancels to 0 as around any other.
        floor = floor + 2**-10 * (operand.abs() @ wide.abs().T)
    floor = floor + swing @ wide.abs().T  # the inputs that may round the other way
    bound = 2**-7 * reference.abs() + floor
    if residual is not None:
        # The product rounded to the dtype (each side up to an ulp, 2**-7 of it, from the exact
        # one), then the residual added and rounded (an ulp of the sum each side).
        reference = (reference.to(x.dtype) + residual).float()
        bound = bound + 2**-7 * reference.abs() + 2**-7 * (operand @ wide.T).abs()
    excess = (out.float() - reference).abs() - bound
    return {
        "shape": [rows, outputs, inputs],
        "kind": kind,
        "out_shape": list(out.shape),
        "dtype": str(out.dtype),
        "within": bool((excess <= 0).all()),
        "worst": float(excess.max()),
    }


def main() -> None:
    start_interpreted()
    cpu = torch.device("cpu")
    results = [check(*shape, cpu) for shape in SHAPES]
    results += [check(*shape, cpu, tiles) for shape, tiles in TILE_CASES]
    print(json.dumps(results))


if __name__ == "__main__":
    main()
