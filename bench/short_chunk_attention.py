"""A short chunk's attention after a long cached prefix (a question after its document), CUDA.

Usage: python3 bench/short_chunk_attention.py [--contexts 32768 131072] [--queries 20 128 512 2048]
       [--label h100] [--out-dir bench/results]

The engine's cuDNN backend (engine/attention/cudnn_split.py) as it runs, its prefix part split
along the keys, beside the same backend with the split turned off (num_sms=1: one call over the
whole prefix, the engine before the split), in the same run. Since `a5aabf0` chunks of at most
SHORT_CHUNK_QUERIES queries run the memory-efficient kernel in both (the results file of
`263c783` is cuDNN's throughout). Llama-3-8B attention shape
(32 query heads, 8 KV heads, head dim 128, bf16), the prefix on consecutive blocks (a view) and
on scattered ones (gathered first, as after a load from the lower KV tiers). Times are CUDA
events around each call after the GPU finished (triton.testing.do_bench, median); the KV read
rate counts the prefix's K and V bytes once. Outputs are compared (relative L2, split vs one
call). Writes short_chunk_attention_LABEL.json and .md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench._report import hardware  # noqa: E402
from engine.attention.base import AttentionMetadata  # noqa: E402
from engine.attention.cudnn_split import CudnnSplitBackend, plan_prefix_splits  # noqa: E402

H, KV, D, BLOCK = 32, 8, 128, 16


def case(ctx: int, num_q: int, scattered: bool, do_bench) -> dict:
    device = torch.device("cuda")
    num_blocks = -(-(ctx + num_q) // BLOCK)
    k_cache = torch.randn(num_blocks, BLOCK, KV, D, device=device, dtype=torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    ids = torch.randperm(num_blocks) if scattered else torch.arange(num_blocks)
    table = ids.to(device=device, dtype=torch.int32)
    q = torch.randn(num_q, H, D, device=device, dtype=torch.bfloat16)
    k = torch.randn(num_q, KV, D, device=device, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    positions = torch.arange(ctx, ctx + num_q, device=device)
    meta = AttentionMetadata(
        start=ctx,
        num_query_tokens=num_q,
        slot_mapping=table[positions // BLOCK].long() * BLOCK + positions % BLOCK,
        block_table=table,
        block_size=BLOCK,
        first_block_if_contiguous=None if scattered else 0,
    )
    split, whole = CudnnSplitBackend(device), CudnnSplitBackend(device, num_sms=1)
    out_split = split.attend(q, k, v, k_cache, v_cache, meta)
    out_whole = whole.attend(q, k, v, k_cache, v_cache, meta)
    rel = ((out_split.float() - out_whole.float()).norm() / out_whole.float().norm()).item()
    ms_split = do_bench(lambda: split.attend(q, k, v, k_cache, v_cache, meta), return_mode="median")
    ms_whole = do_bench(lambda: whole.attend(q, k, v, k_cache, v_cache, meta), return_mode="median")
    kv_bytes = 2 * ctx * KV * D * 2
    num_sms = torch.cuda.get_device_properties(device).multi_processor_count
    return {
        "context": ctx,
        "queries": num_q,
        "blocks": "scattered" if scattered else "consecutive",
        "splits": plan_prefix_splits(
            num_rows=num_q * H // KV, num_kv_heads=KV, num_keys=ctx, num_sms=num_sms
        ),
        "split_ms": ms_split,
        "one_call_ms": ms_whole,
        "speedup": ms_whole / ms_split,
        "split_kv_gb_s": kv_bytes / ms_split / 1e6,
        "one_call_kv_gb_s": kv_bytes / ms_whole / 1e6,
        "rel_l2_split_vs_one_call": rel,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--contexts", type=int, nargs="+", default=[32768, 131072])
    parser.add_argument("--queries", type=int, nargs="+", default=[20, 128, 512, 2048])
    parser.add_argument("--label", default="gpu")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    from triton.testing import do_bench

    rows = []
    for ctx in args.contexts:
        for num_q in args.queries:
            for scattered in (False, True):
                row = case(ctx, num_q, scattered, do_bench)
                rows.append(row)
                print(json.dumps(row), flush=True)
                torch.cuda.empty_cache()
    meta = {"hardware": hardware(torch.device("cuda")), "command": " ".join(sys.argv)}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stem = args.out_dir / f"short_chunk_attention_{args.label}"
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        "# A short chunk's attention after a long cached prefix: keys split vs one cuDNN call",
        "",
        f"`{meta['command']}` on {meta['hardware'].get('gpu_name', 'cuda')}. Llama-3-8B attention "
        "shape, bf16; CUDA-event medians (do_bench). `one call` is the backend before the split "
        "(num_sms=1), run in the same process.",
        "",
        "| context | queries | blocks | splits | split ms | one call ms | x | KV GB/s split "
        "| KV GB/s one call | rel L2 |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['context']} | {r['queries']} | {r['blocks']} | {r['splits']} "
            f"| {r['split_ms']:.3f} | {r['one_call_ms']:.3f} | {r['speedup']:.2f} "
            f"| {r['split_kv_gb_s']:.0f} | {r['one_call_kv_gb_s']:.0f} "
            f"| {r['rel_l2_split_vs_one_call']:.1e} |"
        )
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
