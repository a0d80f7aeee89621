"""Where the paged decode kernel's time goes on a GPU: its memory floor, and the KV layout.

At the 8B's attention shape (32 query heads, 8 KV heads, D=128, pages of 16 tokens in shuffled
order), for FP8 and bf16 caches, times:
- the decode kernel (paged_decode_attention: its default config and two others for FP8) on the
  engine's token-major pages [blocks, block_size, KV, D], where a KV head's row of a token is
  D bytes (FP8) and the next token's is KV * D bytes further, and on head-major pages [blocks,
  KV, block_size, D] (a page's tokens of one head contiguous), passed as a permuted view: the
  kernel takes strides;
- a loads-only kernel that reads the same K and V through the same block tables in the same
  tiles, pipelined as the decode loop is, and XORs them as 4-byte words: the floor the access
  pattern sets, with next to no arithmetic.

Usage: python3 bench/decode_layout_probe.py --out FILE.json
       python3 bench/decode_layout_probe.py --profile   (eager launches at 64 x 4K for Nsight
       Compute: the FP8 kernel at its default and at 2 stages with <= 128 registers, then
       loads-only, on token-major then head-major pages)
The inputs are bench/paged_decode_fp8.py's, and so is GB/s (K and V, an FP8 cache's scales too).
Times: per call, from a CUDA graph of 16 calls (each on another block table over its own blocks,
>= 256 MiB of cache in all, past L2) replayed after warm-up (bench._timing.graph_call_us).
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
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from bench._report import hardware  # noqa: E402
from bench._timing import graph_call_us  # noqa: E402
from bench.paged_decode_fp8 import BLOCK, CALLS, CASES, KV, D  # noqa: E402
from bench.paged_decode_fp8 import make as make_pages  # noqa: E402
from engine.attention.paged_decode import (  # noqa: E402
    KernelConfig,
    paged_decode_attention,
    paged_decode_reference,
    plan_num_splits,
)
from engine.device_guard import sm_count  # noqa: E402

FP8_CONFIGS = [
    None,
    KernelConfig(tile_tokens=128, num_stages=2, maxnreg=128),
    KernelConfig(tile_tokens=64, num_stages=3),
]
LOADS_TILES = [(128, 3), (64, 3), (32, 4)]  # (tokens, stages)


@triton.jit(do_not_specialize=["tiles_per_split", "stride_bt"])
def _loads_only(
    k_ptr,  # the pages as int32 words [blocks, BLOCK, KV, WORDS] (any strides, words contiguous)
    v_ptr,
    table_ptr,  # [B, pages] int32
    out_ptr,  # [B, KV, splits, WORDS] int32
    tiles_per_split,
    stride_bt,
    stride_n,
    stride_s,
    stride_h,
    WORDS: tl.constexpr,
    BLOCK: tl.constexpr,
    TILE_N: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    split = tl.program_id(2)
    begin = split * tiles_per_split * TILE_N
    end = begin + tiles_per_split * TILE_N
    offs = tl.arange(0, TILE_N)
    words = tl.arange(0, WORDS)
    acc = tl.zeros([WORDS], dtype=tl.int32)
    row = table_ptr + seq * stride_bt
    blocks = tl.load(row + (begin + offs) // BLOCK)  # the next tile's, loop-carried as in decode
    for tile_begin in range(begin, end, TILE_N):
        slots = (tile_begin + offs) % BLOCK
        rows = blocks.to(tl.int64) * stride_n + slots * stride_s + head * stride_h
        k = tl.load(k_ptr + rows[:, None] + words[None, :])
        v = tl.load(v_ptr + rows[:, None] + words[None, :])
        upcoming = tile_begin + TILE_N + offs
        blocks = tl.load(row + upcoming // BLOCK, mask=upcoming < end, other=0)
        acc = acc ^ tl.xor_sum(k ^ v, 0)
    programs = (seq * tl.num_programs(1) + head) * tl.num_programs(2) + split
    tl.store(out_ptr + programs * WORDS + words, acc)


def make(batch: int, context: int, fp8: bool, head_major: bool, device: torch.device) -> dict:
    """paged_decode_fp8.py's inputs (the same pages, tables and q), the pages re-laid head-major
    when asked, as [blocks, block_size, KV, D] views with head-major strides."""
    data = make_pages(batch, context, fp8, device)
    if head_major:
        for name in ("k_cache", "v_cache"):
            data[name] = data[name].permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)
    return data


def decode_call(data: dict, config: KernelConfig | None, out: torch.Tensor, table: torch.Tensor):
    return paged_decode_attention(
        data["q"], data["k_cache"], data["v_cache"], table, data["context_lens"], out=out, config=config,
        max_context_len=table.shape[1] * BLOCK, **data["scales"],
    )  # fmt: skip


def loads_call(data: dict, tile: int, stages: int, splits: int, out: torch.Tensor, table):
    words_k = data["k_cache"].view(torch.uint8).view(torch.int32)
    words_v = data["v_cache"].view(torch.uint8).view(torch.int32)
    tiles = table.shape[1] * BLOCK // tile // splits
    _loads_only[(table.shape[0], KV, splits)](
        words_k, words_v, table, out, tiles, table.stride(0),
        words_k.stride(0), words_k.stride(1), words_k.stride(2),
        WORDS=words_k.shape[3], BLOCK=BLOCK, TILE_N=tile, num_warps=4, num_stages=stages,
    )  # fmt: skip


def whole_splits(batch: int, context: int, tile: int, device: torch.device) -> int:
    """The decode plan's split count, lowered to one that divides the tiles (loads-only has no
    masks: every split whole)."""
    planned = plan_num_splits(
        batch_size=batch, num_kv_heads=KV, max_context_len=context, num_sms=sm_count(device)
    )
    tiles = context // tile
    return max(d for d in range(1, planned + 1) if tiles % d == 0)


def profile(device: torch.device) -> None:
    for head_major in (False, True):
        data = make(64, 4096, True, head_major, device)
        out = torch.empty_like(data["q"])
        for config in FP8_CONFIGS[:2]:
            decode_call(data, config, out, data["tables"][0])
        splits = whole_splits(64, 4096, 128, device)
        words = torch.empty(64 * KV * splits * D // 4, dtype=torch.int32, device=device)
        for _ in range(2):
            loads_call(data, 128, 3, splits, words, data["tables"][0])
    torch.cuda.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    device = torch.device("cuda")
    if args.profile:
        profile(device)
        return 0
    if args.out is None:
        parser.error("--out is required unless --profile")
    rows = []
    for (batch, context), fp8, head_major in itertools.product(CASES, (True, False), (False, True)):
        data = make(batch, context, fp8, head_major, device)
        base = {
            "batch": batch,
            "context": context,
            "cache": "fp8" if fp8 else "bf16",
            "layout": "head_major" if head_major else "token_major",
        }
        tables = list(itertools.islice(itertools.cycle(data["tables"]), CALLS))
        reference = paged_decode_reference(
            data["q"],
            data["k_cache"],
            data["v_cache"],
            tables[0],
            data["context_lens"],
            **data["scales"],
        ).float()
        out = torch.empty_like(data["q"])
        for config in FP8_CONFIGS if fp8 else [None]:
            got = decode_call(data, config, out, tables[0]).float()
            error = ((got - reference).norm() / reference.norm()).item()
            us = graph_call_us(
                [functools.partial(decode_call, data, config, out, t) for t in tables]
            )
            config_row = "default" if config is None else vars(config)
            rows.append(
                {**base, "kernel": "decode", "config": config_row, "rel_l2": error, "us": us}
            )
        for tile, stages in LOADS_TILES:
            splits = whole_splits(batch, context, tile, device)
            words = torch.empty(batch * KV * splits * D, dtype=torch.int32, device=device)
            calls = [
                functools.partial(loads_call, data, tile, stages, splits, words, t) for t in tables
            ]
            us = graph_call_us(calls)
            rows.append({**base, "kernel": "loads_only", "tile": tile, "stages": stages, "us": us})
        for row in rows[-(len(LOADS_TILES) + (len(FP8_CONFIGS) if fp8 else 1)) :]:
            row["gb_per_s"] = data["bytes"] / row["us"] / 1e3
            print(json.dumps(row), flush=True)
        del data
        torch.cuda.empty_cache()
    args.out.write_text(json.dumps({"hardware": hardware(device), "rows": rows}, indent=1))
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
