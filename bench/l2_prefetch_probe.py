"""Would warming L2 with the next product's weights, while the decode attention runs, pay? A probe
on a GPU, before any engine change.

At one stream the decode attention is latency-bound (an H200 reads a 4K context's FP8 K/V at
about 1 TB/s of its 4.3), and the output projection after it reads 16.8 MB of FP8 weights at
about 2.9 TB/s (latency again: a small product). A kernel that issues `prefetch.global.L2` for
those weights just before the attention (fire and forget: it retires at once) would have them
cross from HBM while the attention waits on its own loads, and the product then reads L2.

Usage (CUDA): python3 bench/l2_prefetch_probe.py [--context 4096] [--extra-mib 0 8 16] --out F.json

Measures, per layer of 32 distinct layers captured in one CUDA graph (each layer its own
weights and KV pages, so nothing is warm from the layer before; 32 x 16.8 MB passes any L2),
with programmatic dependent launch off and on:
  attn           the FP8 paged decode attention alone (one sequence, 8B shape)
  attn+o         then the o projection (4,096 x 4,096 FP8, the engine's one-row GEMV)
  pf+attn+o      a prefetch kernel for o's weights first
  attn+o+gu      then gate_up (28,672 x 4,096)
  pf+attn+o+gu   prefetching o's weights and the first EXTRA MiB of gate_up's
  o+o            o twice over the same weights: the second from L2 (its floor)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from bench._report import hardware  # noqa: E402
from bench._timing import graph_call_us  # noqa: E402
from engine.attention.fp8_kv import quantize_heads  # noqa: E402
from engine.attention.paged_decode import paged_decode_attention  # noqa: E402
from engine.device_guard import launch_options, set_programmatic_launch  # noqa: E402
from engine.models.fp8_small_batch import fp8_weight_matmul  # noqa: E402

H, KV, D, BLOCK, HIDDEN, FFN, LAYERS = 32, 8, 128, 16, 4096, 14336, 32
LINE = 128  # bytes an L2 prefetch brings


@triton.jit
def _prefetch_kernel(a_ptr, a_lines, b_ptr, b_lines, LINES: tl.constexpr, USE_PDL: tl.constexpr):
    """prefetch.global.L2 of LINES 128-byte lines a program, over a's lines then b's (bytes);
    then, under PDL, waits for the kernel before it, so that the next kernel's wait still covers
    everything before this one."""
    line = tl.program_id(0) * LINES + tl.arange(0, LINES)
    in_a = line < a_lines
    b_line = tl.minimum(tl.maximum(line - a_lines, 0), tl.maximum(b_lines - 1, 0))
    a_off = tl.minimum(line, a_lines - 1).to(tl.int64) * 128
    ptrs = tl.where(in_a, a_ptr + a_off, b_ptr + b_line.to(tl.int64) * 128)
    tl.inline_asm_elementwise(
        "prefetch.global.L2 [$1]; mov.u32 $0, 0;",
        "=r,l",
        [ptrs],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()


def prefetch(a: torch.Tensor, b: torch.Tensor | None = None, b_bytes: int = 0) -> None:
    a_lines = a.numel() * a.element_size() // LINE
    b_lines = 0 if b is None else min(b_bytes, b.numel() * b.element_size()) // LINE
    lines = 256
    grid = (triton.cdiv(a_lines + b_lines, lines),)
    _prefetch_kernel[grid](
        a,
        a_lines,
        a if b is None else b,
        b_lines,
        LINES=lines,
        num_warps=4,
        **launch_options(a.device),
    )


def build(context: int, device: torch.device) -> list[dict]:
    pages = context // BLOCK
    layers = []
    for i in range(LAYERS):
        gen = torch.Generator(device=device).manual_seed(i)
        k = torch.randn(pages * BLOCK, KV, D, generator=gen, device=device, dtype=torch.bfloat16)
        v = torch.randn(pages * BLOCK, KV, D, generator=gen, device=device, dtype=torch.bfloat16)
        (k, ks), (v, vs) = quantize_heads(k), quantize_heads(v)
        layer = {
            "q": torch.randn(1, H, D, generator=gen, device=device, dtype=torch.bfloat16),
            "k_cache": k.view(pages, BLOCK, KV, D),
            "v_cache": v.view(pages, BLOCK, KV, D),
            "k_scale": ks.view(pages, BLOCK, KV),
            "v_scale": vs.view(pages, BLOCK, KV),
            "table": torch.randperm(pages, generator=gen, device=device).int().view(1, pages),
            "lens": torch.tensor([context], dtype=torch.int32, device=device),
            "out": torch.empty(1, H, D, device=device, dtype=torch.bfloat16),
            "wo": (torch.randn(HIDDEN, HIDDEN, generator=gen, device=device) * 0.02).to(
                torch.float8_e4m3fn
            ),
            "so": torch.full((HIDDEN, 1), 0.01, device=device),
            "wgu": (torch.randn(2 * FFN, HIDDEN, generator=gen, device=device) * 0.02).to(
                torch.float8_e4m3fn
            ),
            "sgu": torch.full((2 * FFN, 1), 0.01, device=device),
        }
        layers.append(layer)
    return layers


def attn(layer: dict) -> torch.Tensor:
    return paged_decode_attention(
        layer["q"],
        layer["k_cache"],
        layer["v_cache"],
        layer["table"],
        layer["lens"],
        out=layer["out"],
        k_scale=layer["k_scale"],
        v_scale=layer["v_scale"],
    )


def variant(name: str, layer: dict, extra_bytes: int) -> Callable[[], None]:
    def run() -> None:
        if name.startswith("pf+"):
            prefetch(layer["wo"], layer["wgu"] if "gu" in name else None, extra_bytes)
        if name == "o+o":
            x = layer["out"].view(1, HIDDEN)
            fp8_weight_matmul(x, layer["wo"], layer["so"])
            fp8_weight_matmul(x, layer["wo"], layer["so"])
            return
        o = attn(layer).view(1, HIDDEN)
        if "+o" in name:
            y = fp8_weight_matmul(o, layer["wo"], layer["so"])
            if name.endswith("+gu"):
                fp8_weight_matmul(y, layer["wgu"], layer["sgu"])

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--extra-mib", type=int, nargs="+", default=[0, 8, 16])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    device = torch.device("cuda")
    layers = build(args.context, device)
    rows = []
    for pdl in (False, True):
        set_programmatic_launch(device, pdl)
        names = ["attn", "attn+o", "pf+attn+o", "attn+o+gu", "o+o"]
        cases = [(name, 0) for name in names]
        cases += [("pf+attn+o+gu", mib) for mib in args.extra_mib]
        for name, mib in cases:
            calls = [variant(name, layer, mib * 2**20) for layer in layers]
            us = graph_call_us(calls, warm=3, replays=20)
            row = {"pdl": pdl, "variant": name, "extra_mib": mib, "us_per_layer": round(us, 2)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    set_programmatic_launch(device, False)
    result = {"hardware": hardware(device), "context": args.context, "layers": LAYERS, "rows": rows}
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
