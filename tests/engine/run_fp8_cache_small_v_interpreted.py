"""The paged decode kernel over an FP8 cache for an fp16 model under Triton's interpreter, with V
at several magnitudes: prints each one's error against the fp32 reference (test_fp8_kv.py starts
it with TRITON_INTERPRET=1, which must be set before triton decorates the kernels)."""

import json
import sys

import torch

from tests.engine.run_paged_decode_interpreted import start_interpreted

GAINS = (1.0, 1e-3, 1e-4)


def run(v_gain: float, context: int = 512, heads: int = 4, dim: int = 128) -> dict:
    from engine.attention.fp8_kv import quantize_heads
    from engine.attention.paged_decode import paged_decode_attention, paged_decode_reference

    block_size = 16
    generator = torch.Generator().manual_seed(0)
    num_blocks = context // block_size
    k = torch.randn(num_blocks + 1, block_size, 1, dim, generator=generator)
    v = torch.randn(num_blocks + 1, block_size, 1, dim, generator=generator) * v_gain
    q = (torch.randn(1, heads, dim, generator=generator) * 0.5).to(torch.float16)
    (k_cache, k_scale), (v_cache, v_scale) = quantize_heads(k), quantize_heads(v)
    inputs = dict(
        q=q,
        k_cache=k_cache,
        v_cache=v_cache,
        block_tables=torch.arange(1, num_blocks + 1, dtype=torch.int32)[None],
        context_lens=torch.tensor([context], dtype=torch.int32),
        k_scale=k_scale,
        v_scale=v_scale,
    )
    out = paged_decode_attention(**inputs, num_splits=1).float()
    reference = paged_decode_reference(**inputs).float()
    return {"v_gain": v_gain, "rel_l2": ((out - reference).norm() / reference.norm()).item()}


def main() -> None:
    start_interpreted()
    print(json.dumps([run(gain) for gain in GAINS]))


if __name__ == "__main__":
    sys.exit(main())
