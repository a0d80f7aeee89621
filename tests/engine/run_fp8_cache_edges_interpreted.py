"""The paged decode kernel over an FP8 cache with fp16 dots (a bf16 model) at two edges, under
Triton's interpreter or on CUDA: a tile whose scores lie far below an earlier tile's (its
probabilities times V's scales go subnormal) and a q past fp16's range with two keys that tie.
Prints what the checks need as JSON (test_fp8_kv.py starts it with TRITON_INTERPRET=1)."""

import json
import math
import sys

import torch

from tests.engine.run_paged_decode_interpreted import start_interpreted

GAPS = (100.0, 125.0, 130.0, 140.0)  # log2 units between the two tiles' best scores


def far_tile(gap: float, device: torch.device) -> dict:
    """Two tiles of 128 tokens: token 0 scores `gap` (log2 units), every other token 0."""
    from engine.attention.fp8_kv import quantize_heads
    from engine.attention.paged_decode import (
        KernelConfig,
        paged_decode_attention,
        paged_decode_reference,
    )

    dim, block, context = 128, 16, 256
    k = torch.zeros(context // block, block, 1, dim)
    k.view(context, 1, dim)[0, 0, 0] = 1.0
    v = torch.randn(context // block, block, 1, dim, generator=torch.Generator().manual_seed(0))
    (k_cache, k_scale), (v_cache, v_scale) = quantize_heads(k), quantize_heads(v)
    q = torch.zeros(1, 4, dim)
    q[0, :, 0] = gap / (dim**-0.5 * math.log2(math.e))
    inputs = {
        "q": q.to(torch.bfloat16),
        "k_cache": k_cache,
        "v_cache": v_cache,
        "block_tables": torch.arange(context // block, dtype=torch.int32)[None],
        "context_lens": torch.tensor([context], dtype=torch.int32),
        "k_scale": k_scale,
        "v_scale": v_scale,
    }
    inputs = {name: t.to(device) for name, t in inputs.items()}
    config = KernelConfig(128, num_stages=3)
    out = paged_decode_attention(**inputs, num_splits=1, config=config).float()
    reference = paged_decode_reference(**inputs).float()
    return {"gap": gap, "has_nan": bool(out.isnan().any()), "max_err": _max_err(out, reference)}


def tie(x: float, device: torch.device) -> dict:
    """q = (3x, x): token 0's key (1, 0) and token 1's (0, 3) score the same; V picks them out."""
    from engine.attention.fp8_kv import quantize_heads
    from engine.attention.paged_decode import paged_decode_attention, paged_decode_reference

    dim, block = 64, 16
    k, v = torch.zeros(1, block, 1, dim), torch.zeros(1, block, 1, dim)
    k[0, 0, 0, 0], k[0, 1, 0, 1] = 1.0, 3.0
    v[0, 0, 0, 0], v[0, 1, 0, 1] = 1.0, 1.0
    (k_cache, k_scale), (v_cache, v_scale) = quantize_heads(k), quantize_heads(v)
    q = torch.zeros(1, 1, dim)
    q[0, 0, 0], q[0, 0, 1] = 3 * x, x
    inputs = {
        "q": q.to(torch.bfloat16),
        "k_cache": k_cache,
        "v_cache": v_cache,
        "block_tables": torch.zeros(1, 1, dtype=torch.int32),
        "context_lens": torch.tensor([2], dtype=torch.int32),
        "k_scale": k_scale,
        "v_scale": v_scale,
    }
    inputs = {name: t.to(device) for name, t in inputs.items()}
    out = paged_decode_attention(**inputs, num_splits=1).float()[0, 0, :2]
    reference = paged_decode_reference(**inputs).float()[0, 0, :2]
    return {"x": x, "weights": out.tolist(), "reference": reference.tolist()}


def _max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


def run(device: torch.device) -> dict:
    return {
        "far_tile": [far_tile(gap, device) for gap in GAPS],
        "tie": [tie(x, device) for x in (6000.0, 41000.0)],
    }


def main() -> None:
    start_interpreted()
    print(json.dumps(run(torch.device("cpu"))))


if __name__ == "__main__":
    sys.exit(main())
