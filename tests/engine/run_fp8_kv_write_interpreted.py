"""The FP8 KV cache's fused kernels (engine/attention/fp8_kv_kernels.py) under Triton's
interpreter against the torch paths, on small shapes: the write against write_pages' (pages and
scales), the read for prefill against dequantize_pages' (test_fp8_kv.py starts it with
TRITON_INTERPRET=1, set before triton decorates kernels; on CUDA it calls check and
check_read)."""

import json

import torch

from tests.engine.run_paged_decode_interpreted import start_interpreted

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


def check_read(blocks: int, heads: int, dim: int, dtype: torch.dtype, device: torch.device) -> dict:
    """dequantize_pages_fused against dequantize_pages' torch path (on the CPU) over pages
    written by quantize_heads, a block table in shuffled order that repeats a block, a NaN
    and an inf among the values: the largest difference in units of the last place of dtype
    (0 on a GPU; Triton's interpreter may round a bf16 down where the GPU rounds to nearest)."""
    from engine.attention.fp8_kv import QuantizedPages, dequantize_pages, quantize_heads
    from engine.attention.fp8_kv_kernels import dequantize_pages_fused

    generator = torch.Generator().manual_seed(blocks * 10 + dim)
    block_size, num_blocks = 4, blocks + 2
    x = torch.randn(num_blocks * block_size, heads, dim, generator=generator) * 5
    x[3, 0, 1] = float("nan")
    x[5, heads - 1, 0] = float("inf")
    data, scale = quantize_heads(x)
    pages = QuantizedPages(
        data.view(num_blocks, block_size, heads, dim), scale.view(num_blocks, block_size, heads)
    )
    table = torch.randperm(num_blocks, generator=generator)[:blocks]
    table[-1] = table[0]
    expected = dequantize_pages(pages, table, dtype)  # the torch path, on the CPU
    got = dequantize_pages_fused(
        pages.data.to(device), pages.scale.to(device), table.to(device), dtype
    ).cpu()
    same_nan = torch.equal(got.isnan(), expected.isnan())
    finite = expected.isfinite() & got.isfinite()
    ulp = torch.finfo(dtype).eps * expected.abs().clamp(min=torch.finfo(dtype).tiny)
    worst = float(((got - expected).abs()[finite] / ulp[finite]).max())
    return {
        "shape": [blocks, heads, dim, str(dtype)],
        "same_specials": same_nan and torch.equal(got.isinf(), expected.isinf()),
        "worst_ulp": worst,
        "out_shape": list(got.shape),
    }


READ_SHAPES = [(3, 2, 128, torch.bfloat16), (2, 3, 64, torch.float16), (4, 1, 80, torch.float32)]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, NaN where the other is NaN (a NaN's sign bit may differ)."""
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


def main() -> None:
    start_interpreted()
    cpu = torch.device("cpu")
    print(
        json.dumps(
            [check(*shape, cpu) for shape in SHAPES]
            + [check_read(*shape, cpu) for shape in READ_SHAPES]
        )
    )


if __name__ == "__main__":
    main()
