"""The paged decode kernel on an FP8 KV cache against the same kernel on bf16, on a GPU: tile
sizes, warps and stages for the FP8 cache, and its dots in fp16 against K and V dequantized to
bf16, at the 8B's attention shape (32 query heads, 8 KV heads, D=128, pages of 16 tokens
handed out in shuffled order).

Usage: python3 bench/paged_decode_fp8.py --out FILE.json [--tiles 64 128] [--warps 4] [--stages 2 3]
       [--maxnreg 168 128] [--v-pairs off on]
Times: per call, from a CUDA graph of 16 calls (each on another block table over its own
blocks, >= 256 MiB of cache in all, past L2) replayed 10 times after 3. GB/s counts the K and V
bytes attended to (FP8: the scales too). Each configuration is first checked against the
reference in plain torch.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench._report import hardware  # noqa: E402
from bench._timing import graph_call_us  # noqa: E402
from engine.attention.fp8_kv import quantize_heads  # noqa: E402
from engine.attention.paged_decode import (  # noqa: E402
    KernelConfig,
    paged_decode_attention,
    paged_decode_reference,
)

H, KV, D, BLOCK = 32, 8, 128, 16
CASES = [(64, 4096), (16, 8192), (1, 32768), (64, 8192)]  # (batch, context)
CALLS = 16


def make(batch: int, context: int, fp8: bool, device: torch.device) -> dict:
    pages = context // BLOCK
    bytes_per_token = KV * D * 2 * (1 if fp8 else 2)
    copies = max(1, -(-(256 * 2**20) // (batch * context * bytes_per_token)))
    num_blocks = 1 + copies * batch * pages
    gen = torch.Generator(device=device).manual_seed(batch * 7 + context)
    k = torch.randn(num_blocks * BLOCK, KV, D, generator=gen, device=device, dtype=torch.bfloat16)
    v = torch.randn(num_blocks * BLOCK, KV, D, generator=gen, device=device, dtype=torch.bfloat16)
    inputs = {}
    if fp8:
        (k, ks), (v, vs) = quantize_heads(k), quantize_heads(v)
        inputs["k_scale"] = ks.view(num_blocks, BLOCK, KV)
        inputs["v_scale"] = vs.view(num_blocks, BLOCK, KV)
    order = torch.randperm(num_blocks - 1, generator=gen, device=device).int() + 1
    tables = order.view(copies, batch, pages)
    return {
        "q": torch.randn(batch, H, D, generator=gen, device=device, dtype=torch.bfloat16),
        "k_cache": k.view(num_blocks, BLOCK, KV, D),
        "v_cache": v.view(num_blocks, BLOCK, KV, D),
        "tables": list(tables.unbind(0)),
        "context_lens": torch.full((batch,), context, dtype=torch.int32, device=device),
        "scales": inputs,
        "bytes": batch * context * (bytes_per_token + (KV * 8 if fp8 else 0)),
    }


def time_us(data: dict, config: KernelConfig | None) -> float:
    out = torch.empty_like(data["q"])

    def call(table: torch.Tensor) -> None:
        paged_decode_attention(
            data["q"], data["k_cache"], data["v_cache"], table, data["context_lens"],
            out=out, config=config, max_context_len=table.shape[1] * BLOCK, **data["scales"],
        )  # fmt: skip

    tables = itertools.islice(itertools.cycle(data["tables"]), CALLS)
    return graph_call_us([functools.partial(call, table) for table in tables])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tiles", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--warps", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--stages", type=int, nargs="+", default=[3, 4])
    parser.add_argument("--maxnreg", type=int, nargs="*", default=[])
    parser.add_argument(
        "--v-pairs",
        nargs="+",
        choices=["off", "on"],
        default=["off"],
        help="V read byte-wise (off) and/or as 16-bit pairs (on: KernelConfig.v_pairs)",
    )
    args = parser.parse_args()
    device = torch.device("cuda")
    # The default, the same tiles with K and V dequantized to bf16 (fp16_dots off: the kernel
    # before its dots went to fp16), then the sweep.
    # --maxnreg adds each register cap to the sweep (a program's registers decide how many fit
    # an SM: at 128 tokens the sm_90 build takes 184, two programs an SM; 168 lets three fit).
    # --v-pairs on adds each configuration with V read as 16-bit pairs.
    configs = [None, KernelConfig(tile_tokens=128, num_stages=3, fp16_dots=False)] + [
        KernelConfig(tile_tokens=t, num_warps=w, num_stages=s, maxnreg=r, v_pairs=p == "on")
        for t, w, s, r, p in itertools.product(
            args.tiles, args.warps, args.stages, [None, *args.maxnreg], args.v_pairs
        )
    ]
    rows = []
    for batch, context in CASES:
        for fp8 in (False, True):
            data = make(batch, context, fp8, device)
            table = data["tables"][0]
            reference = paged_decode_reference(
                data["q"], data["k_cache"], data["v_cache"], table, data["context_lens"],
                **data["scales"],
            ).float()  # fmt: skip
            for config in configs if fp8 else [None]:
                got = paged_decode_attention(
                    data["q"], data["k_cache"], data["v_cache"], table, data["context_lens"],
                    config=config, **data["scales"],
                ).float()  # fmt: skip
                error = ((got - reference).norm() / reference.norm()).item()
                row = {
                    "batch": batch,
                    "context": context,
                    "cache": "fp8" if fp8 else "bf16",
                    "config": "default" if config is None else vars(config),
                    "rel_l2": error,
                }
                try:
                    row["us"] = time_us(data, config) if error < 2e-2 else None
                except Exception as exc:  # a configuration past the card's shared memory
                    row["us"], row["error"] = None, repr(exc)[:200]
                if row["us"]:
                    row["gb_per_s"] = data["bytes"] / row["us"] / 1e3
                rows.append(row)
                print(json.dumps(row), flush=True)
            del data
            torch.cuda.empty_cache()
    args.out.write_text(json.dumps({"hardware": hardware(device), "rows": rows}, indent=2))
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
