"""The one-row FP8 GEMV with the layer's work around it fused in (engine/models/fp8_gemv.py:
an RMSNorm on the way in, SiLU(gate) * up in, a residual added out) against the same work as the
compiled engine runs it: one Inductor kernel beside the GEMV. Llama-3-8B's and -70B's shapes, one
decode row, every call inside a CUDA graph on another copy of the weight (HBM, not L2).

Usage: python3 bench/fp8_gemv_fusion.py --out FILE.json [--shapes 8b 70b] [--weights fp8 bf16]
Each fused call is checked against the unfused one first (within two bf16 roundings).

--weights bf16 asks whether the bf16 model's one stream would gain from the same kernel: the
weights stay bf16 (the kernel widens them to fp32 as it does E4M3; no scale, as Linear.one_row),
the unfused side is what the bf16 engine runs (F.linear, cuBLAS, beside the same compiled
kernels), and the GEMV is timed at each of BF16_TILES.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench._report import hardware  # noqa: E402
from bench._timing import graph_call_us  # noqa: E402
from engine.models.fp8 import quantize_rows  # noqa: E402
from engine.models.fp8_gemv import GEMV_CONFIG, fp8_weight_gemv  # noqa: E402

CALLS = 24  # per graph
# bf16 weights: twice an E4M3 tile's bytes at GEMV_CONFIG's shape, or the same bytes (half K).
BF16_TILES = [
    dict(block_n=8, block_k=1024, num_warps=4, num_stages=2),
    dict(block_n=8, block_k=512, num_warps=4, num_stages=2),
    dict(block_n=4, block_k=1024, num_warps=4, num_stages=2, reduce_each_tile=True),
    dict(block_n=8, block_k=512, num_warps=4, num_stages=2, prefetch=True),
]
HBM_BYTES = 256 * 1024**2  # weight copies per shape: past any L2
EPS = 1e-5
# (name, outputs, inputs, what is fused): the projection and the layer's work around it.
SHAPES = {
    "8b": [
        ("qkv", 6144, 4096, "norm"),
        ("gate_up", 28672, 4096, "norm"),
        ("down", 4096, 14336, "gated+residual"),
        ("o", 4096, 4096, "residual"),
    ],
    "70b": [
        ("qkv_70b", 10240, 8192, "norm"),
        ("gate_up_70b", 57344, 8192, "norm"),
        ("down_70b", 8192, 28672, "gated+residual"),
        ("o_70b", 8192, 8192, "residual"),
    ],
}


@torch.compile(dynamic=False)
def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """engine/models/llama.py's RMSNorm."""
    return weight * F.rms_norm(x.float(), (x.shape[-1],), eps=EPS).to(x.dtype)


@torch.compile(dynamic=False)
def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up


@torch.compile(dynamic=False)
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


def calls_for(
    kind: str, weights, x, norm_weight, residual, fused: bool, tiles: dict | None = None
) -> list:
    """CALLS calls of one kind, each on the next weight copy; `tiles` (bf16 weights): the
    fused side's GEMV tiles, and the unfused side is F.linear."""
    if tiles is None:
        gemv = lambda a, w, s, **kw: fp8_weight_gemv(a, w, s, **GEMV_CONFIG, **kw)  # noqa: E731
    elif fused:
        gemv = lambda a, w, s, **kw: fp8_weight_gemv(a, w, s, **tiles, **kw)  # noqa: E731
    else:
        gemv = lambda a, w, s: F.linear(a, w)  # noqa: E731
    cycle = list(itertools.islice(itertools.cycle(weights), CALLS))
    if kind == "norm":
        if fused:
            return [lambda w=w, s=s: gemv(x, w, s, norm=(norm_weight, EPS)) for w, s in cycle]
        return [lambda w=w, s=s: gemv(rms_norm(x, norm_weight), w, s) for w, s in cycle]
    if kind == "residual":
        if fused:
            return [lambda w=w, s=s: gemv(x, w, s, residual=residual) for w, s in cycle]
        return [lambda w=w, s=s: add(residual, gemv(x, w, s)) for w, s in cycle]
    if fused:  # gated+residual
        return [lambda w=w, s=s: gemv(x, w, s, gated=True, residual=residual) for w, s in cycle]
    return [lambda w=w, s=s: add(residual, gemv(silu_and_mul(x), w, s)) for w, s in cycle]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=["8b", "70b"])
    parser.add_argument("--weights", nargs="+", choices=["fp8", "bf16"], default=["fp8"])
    args = parser.parse_args()
    device = torch.device("cuda")
    result = {"hardware": hardware(device), "args": vars(args) | {"out": str(args.out)}}
    result["gemv_config"], result["bf16_tiles"], result["rows"] = GEMV_CONFIG, BF16_TILES, []
    shapes = [s for group in args.shapes for s in SHAPES[group]]
    for dtype, (name, n, k, kind) in itertools.product(args.weights, shapes):
        for row in time_shape(dtype, name, n, k, kind, device):
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    args.out.write_text(json.dumps(result, indent=2))
    print("wrote", args.out)
    return 0


def time_shape(dtype: str, name: str, n: int, k: int, kind: str, device) -> list[dict]:
    """One shape's rows: FP8 weights at GEMV_CONFIG, or bf16 weights at each of BF16_TILES."""
    if dtype == "fp8":
        weight, scale = quantize_rows(torch.randn(n, k, device=device) * 0.02)
    else:
        weight, scale = (torch.randn(n, k, device=device) * 0.02).to(torch.bfloat16), None
    copies = max(2, -(-HBM_BYTES // (n * k * weight.element_size())))
    weights = [(weight.clone(), None if scale is None else scale.clone()) for _ in range(copies)]
    del weight, scale
    x = torch.randn(1, 2 * k if kind.startswith("gated") else k, device=device).bfloat16()
    norm_weight = (torch.rand(k, device=device) + 0.5).to(torch.bfloat16)
    residual = torch.randn(1, n, device=device, dtype=torch.bfloat16)
    rows = []
    for tiles in [None] if dtype == "fp8" else BF16_TILES:
        plain = calls_for(kind, weights, x, norm_weight, residual, fused=False, tiles=tiles)
        fused = calls_for(kind, weights, x, norm_weight, residual, fused=True, tiles=tiles)
        expected, got = plain[0]().float(), fused[0]().float()
        # Relative to the largest output (as the layer test bounds it): an input the kernel's
        # rsqrt or exp rounds the other way moves an output near zero by more than its size
        # (per element, against |expected| + |residual| + 1e-3, an H100 gave 0.44 so).
        error = (got - expected).abs().max() / expected.abs().max()
        row = {"weights": dtype, "shape": name, "n": n, "k": k, "fused": kind, "tiles": tiles}
        row |= {"max_error_of_largest": error.item()}
        if tiles is None or not rows:  # the unfused side does not depend on the tiles
            unfused_us = graph_call_us(plain)
        row |= {"unfused_us": unfused_us, "fused_us": graph_call_us(fused)}
        row["ratio"] = row["unfused_us"] / row["fused_us"]
        row["fused_tb_per_s"] = n * k * weights[0][0].element_size() / row["fused_us"] / 1e6
        rows.append(row)
    return rows


if __name__ == "__main__":
    sys.exit(main())
