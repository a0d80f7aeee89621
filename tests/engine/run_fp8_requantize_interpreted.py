"""The FP8 prefill's requantization (engine/attention/fp8_kv_kernels.py requantize_pages_fused)
under Triton's interpreter against requantize_pages' torch path (test_cudnn_fp8.py starts it with
TRITON_INTERPRET=1; on CUDA it calls check)."""

import json

import torch

from tests.engine.run_paged_decode_interpreted import start_interpreted

# (blocks, KV heads, head dim, tokens used, rows out): Llama's 8 x 128, a partly used last block
# and padding rows, 3 heads of a D that is no power of two.
SHAPES = [(3, 8, 128, 10, 16), (2, 3, 80, 8, 8), (4, 1, 64, 13, 20)]


def check(blocks: int, heads: int, dim: int, tokens: int, rows: int, device: torch.device) -> dict:
    from engine.attention.cudnn_fp8 import requantize_pages
    from engine.attention.fp8_kv import QuantizedPages, quantize_heads
    from engine.attention.fp8_kv_kernels import requantize_pages_fused

    generator = torch.Generator().manual_seed(blocks * 100 + dim)
    block_size, num_blocks = 4, blocks + 2
    # Tokens of very different sizes: each token's scale follows its own largest value.
    sizes = torch.logspace(-2, 1, num_blocks * block_size)[
        torch.randperm(num_blocks * block_size, generator=generator)
    ]
    x = torch.randn(num_blocks * block_size, heads, dim, generator=generator) * sizes[:, None, None]
    data, scale = quantize_heads(x)
    pages = QuantizedPages(
        data.view(num_blocks, block_size, heads, dim), scale.view(num_blocks, block_size, heads)
    )
    table = torch.randperm(num_blocks, generator=generator)[:blocks]
    expected, expected_descale = requantize_pages(pages, table, tokens, rows)  # torch, CPU
    descale = expected_descale.view(1).to(device)
    got = requantize_pages_fused(
        pages.data.to(device), pages.scale.to(device), table.to(device), descale, tokens, rows
    ).cpu()
    return {
        "shape": [blocks, heads, dim, tokens, rows],
        "same": torch.equal(got.view(torch.uint8), expected.view(torch.uint8)),
        "padding_zero": bool((got[tokens:].float() == 0).all()),
    }


def main() -> None:
    start_interpreted()
    print(json.dumps([check(*shape, torch.device("cpu")) for shape in SHAPES]))


if __name__ == "__main__":
    main()
