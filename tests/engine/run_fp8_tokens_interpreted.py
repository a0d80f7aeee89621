"""The prefill products' per-token rounding (engine/models/fp8_tokens.py quantize_tokens) under
Triton's interpreter against fp8.quantize_per_token's torch path (test_fp8_weights.py starts it
with TRITON_INTERPRET=1; on CUDA it calls check)."""

import json

import torch

from tests.engine.run_paged_decode_interpreted import start_interpreted

# (rows, inputs, dtype, case): a row of a power of two, a ragged one read from a wider buffer
# (rows farther apart than their length), an all-zero row, a NaN, values past E4M3's range
# before scaling, fp16 and fp32 models.
SHAPES = [
    (3, 256, torch.bfloat16, "plain"),
    (4, 300, torch.bfloat16, "strided"),
    (2, 128, torch.bfloat16, "zero row"),
    (2, 64, torch.bfloat16, "nan"),
    (3, 96, torch.float16, "large"),
    (2, 200, torch.float32, "plain"),
]


def check(rows: int, inputs: int, dtype: torch.dtype, case: str, device: torch.device) -> dict:
    from engine.models.fp8 import FP8_MAX, MIN_SCALE, quantize_per_token
    from engine.models.fp8_tokens import quantize_tokens

    generator = torch.Generator().manual_seed(rows * 1000 + inputs)
    x = torch.randn(rows, inputs + 8, generator=generator) * 3
    x = x[:, :inputs] if case == "strided" else x[:, :inputs].contiguous()
    if case == "zero row":
        x[1] = 0.0
    if case == "nan":
        x[0, 5] = float("nan")
    if case == "large":
        x = x * 2000.0
    x = x.to(dtype)
    expected, expected_scale = quantize_per_token(x)  # the torch path, on the CPU
    got, scale = quantize_tokens(x.to(device), fp8_max=FP8_MAX, min_scale=MIN_SCALE)
    got, scale = got.cpu(), scale.cpu()
    return {
        "shape": [rows, inputs, str(dtype), case],
        "same_values": _same(got, expected),
        "same_scales": _same(scale, expected_scale),
    }


def _same(got: torch.Tensor, expected: torch.Tensor) -> bool:
    """Equal bytes, except that a NaN need only be a NaN (its sign bit is either path's own)."""
    nan = expected.float().isnan()
    if not torch.equal(got.float().isnan(), nan):
        return False
    keep = ~nan
    return (
        torch.equal(got[keep].view(torch.uint8), expected[keep].view(torch.uint8))
        if (got.element_size() == 1)
        else torch.equal(got[keep], expected[keep])
    )


def main() -> None:
    start_interpreted()
    print(json.dumps([check(*shape, torch.device("cpu")) for shape in SHAPES]))


if __name__ == "__main__":
    main()
