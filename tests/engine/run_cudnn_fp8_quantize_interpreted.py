"""FP8 attention's input rounding (engine/attention/cudnn_fp8_kernels.py quantize_fused) under
Triton's interpreter against quantize_tensor's torch path (test_cudnn_fp8.py starts it with
TRITON_INTERPRET=1; on CUDA it calls check)."""

import json

import torch

from tests.engine.run_paged_decode_interpreted import start_interpreted

# (batch, heads, length, head dim, dtype, memory): a strided view in (batch, sequence, head,
# dim) memory as the split backend passes keys, a contiguous [B, N, L, D], 3 heads of a D that
# is no power of two.
SHAPES = [
    (1, 2, 9, 128, torch.bfloat16, "bshd"),
    (2, 4, 5, 64, torch.float16, "bnld"),
    (1, 3, 6, 80, torch.bfloat16, "bshd"),
]


def check(batch, heads, length, dim, dtype, memory, device: torch.device) -> dict:
    from engine.attention.cudnn_fp8 import quantize_tensor
    from engine.attention.cudnn_fp8_kernels import quantize_fused

    generator = torch.Generator().manual_seed(length * 10 + dim)
    x = torch.randn(batch, length, heads, dim, generator=generator) * 7
    x[0, 1, 0, 3] = 0.0
    x = x.transpose(1, 2) if memory == "bshd" else x.transpose(1, 2).contiguous()
    x = x.to(dtype)
    expected, descale = quantize_tensor(x)  # the torch path, on the CPU
    got = quantize_fused(x.to(device), descale.to(device)).cpu()
    return {
        "shape": [batch, heads, length, dim, str(dtype), memory],
        "same": torch.equal(
            got.view(torch.uint8), expected.transpose(1, 2).contiguous().view(torch.uint8)
        ),
    }


def main() -> None:
    start_interpreted()
    print(json.dumps([check(*shape, torch.device("cpu")) for shape in SHAPES]))


if __name__ == "__main__":
    main()
