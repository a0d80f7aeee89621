"""The FP8 KV cache's fused write kernel (engine/attention/fp8_kv_kernels.py) under Triton's
interpreter against write_pages' torch path, on small shapes; prints whether pages and scales
match (test_fp8_kv.py starts it with TRITON_INTERPRET=1, set before triton decorates kernels)."""

import json
import os

import torch

from tests.engine.run_paged_decode_interpreted import _patch_interpreter

# (tokens, KV heads, head dim, model dtype): Llama's D, SmolLM2's, a D that is no power of two.
SHAPES = [(5, 2, 128, torch.bfloat16), (3, 3, 64, torch.float16), (4, 1, 80, torch.float32)]


def check(tokens: int, heads: int, dim: int, dtype: torch.dtype, device: torch.device) -> dict:
    from engine.attention.fp8_kv import QuantizedPages, write_pages
    from engine.attention.fp8_kv_kernels import write_pages_fused
    from engine.models.fp8 import FP8_DTYPE

    generator = torch.Generator().manual_seed(tokens * 100 + dim)
    num_blocks, block_size = 4, 4
    k = (torch.randn(tokens, heads, dim, generator=generator) * 3).to(device, dtype)
    v = torch.randn(tokens, heads, dim, generator=generator).to(device, dtype)
    k[0, 0] = 0.0  # an all-zero row: the smallest scale, zeros
    if tokens > 2:  # a NaN and an inf, which must read back as what they are
        v[1, 0, 3] = float("nan")
        k[2, heads - 1, 1] = float("inf")
    slots = torch.randperm(num_blocks * block_size, generator=generator)[:tokens].to(device)

    def pages(where: torch.device) -> QuantizedPages:
        return QuantizedPages(
            torch.zeros(num_blocks, block_size, heads, dim, device=where).to(FP8_DTYPE),
            torch.zeros(num_blocks, block_size, heads, device=where),
        )

    cpu = torch.device("cpu")
    torch_k, torch_v, fused_k, fused_v = pages(cpu), pages(cpu), pages(device), pages(device)
    write_pages(k.cpu(), v.cpu(), torch_k, torch_v, slots.cpu())  # the torch path (CPU)
    write_pages_fused(k, v, fused_k.data, fused_v.data, fused_k.scale, fused_v.scale, slots)
    same = all(
        _same(a.data.cpu().float(), b.data.float())
        and torch.equal(a.data.cpu().float().isnan(), b.data.float().isnan())
        and _same(a.scale.cpu(), b.scale)
        for a, b in ((fused_k, torch_k), (fused_v, torch_v))
    )
    return {"shape": [tokens, heads, dim, str(dtype)], "same": same}


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, NaN where the other is NaN (a NaN's sign bit may differ)."""
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


def main() -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("set TRITON_INTERPRET=1 (before triton decorates the kernels)")
    _patch_interpreter()
    torch.set_num_threads(1)
    print(json.dumps([check(*shape, torch.device("cpu")) for shape in SHAPES]))


if __name__ == "__main__":
    main()
