"""The one-row FP8 GEMV with the layer's work around it fused in (engine/models/fp8_gemv.py:
an RMSNorm on the way in, SiLU(gate) * up in, a residual added out) against the same work as the
compiled engine runs it: one Inductor kernel beside the GEMV. Llama-3-8B's and -70B's shapes, one
decode row, every call inside a CUDA graph on another copy of the weight (HBM, not L2).

Usage: python3 bench/fp8_gemv_fusion.py --out FILE.json [--shapes 8b 70b]
Each fused call is checked against the unfused one first (within two bf16 roundings).
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


def calls_for(kind: str, weights, x, norm_weight, residual, fused: bool) -> list:
    gemv = lambda a, w, s, **kw: fp8_weight_gemv(a, w, s, **GEMV_CONFIG, **kw)  # noqa: E731
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
    args = parser.parse_args()
    device = torch.device("cuda")
    result = {"hardware": hardware(device), "args": vars(args) | {"out": str(args.out)}}
    result["gemv_config"], result["rows"] = GEMV_CONFIG, []
    for name, n, k, kind in [s for group in args.shapes for s in SHAPES[group]]:
        weight, scale = quantize_rows(torch.randn(n, k, device=device) * 0.02)
        weights = [(weight.clone(), scale.clone()) for _ in range(max(2, -(-HBM_BYTES // (n * k))))]
        del weight, scale
        width = 2 * k if kind.startswith("gated") else k
        x = torch.randn(1, width, device=device, dtype=torch.bfloat16)
        norm_weight = (torch.rand(k, device=device) + 0.5).to(torch.bfloat16)
        residual = torch.randn(1, n, device=device, dtype=torch.bfloat16)
        plain = calls_for(kind, weights, x, norm_weight, residual, fused=False)
        fused = calls_for(kind, weights, x, norm_weight, residual, fused=True)
        expected, got = plain[0]().float(), fused[0]().float()
        # Both round the product, and the sum, to bf16: two roundings of 2**-8 each way.
        error = ((got - expected).abs() / (expected.abs() + residual.float().abs() + 1e-3)).max()
        row = {"shape": name, "n": n, "k": k, "fused": kind, "max_rel_error": error.item()}
        row |= {"unfused_us": graph_call_us(plain), "fused_us": graph_call_us(fused)}
        row["ratio"] = row["unfused_us"] / row["fused_us"]
        row["fused_tb_per_s"] = n * k / row["fused_us"] / 1e6
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
        del weights
        torch.cuda.empty_cache()
    args.out.write_text(json.dumps(result, indent=2))
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
