"""What a new shape costs the cuDNN attention backend: its first call against the same call again.

Usage: python3 bench/cudnn_plan_cost.py [--label h100] [--out-dir bench/results]

cuDNN's fused attention builds an execution plan per shape (PyTorch caches it by the tensors'
sizes and strides), and every question has its own length, every prefill chunk its own prefix
length. Each case below is a chunk's attention as the engine's cuDNN backend runs it
(engine/attention/cudnn_split.py: a causal part over the chunk, a prefix part split along the
keys), at a length no earlier case had; it is timed on its first call and again (CUDA
synchronized around each call, wall time: a plan is built on the host). The whole run is made
in child processes: with PyTorch's defaults, with TORCH_CUDNN_SDPA_AVOID_RECOMPILE=1 (PyTorch's
opt-in to cuDNN's ragged path, which keys its plans by lengths rounded up to powers of two), and
with PyTorch's memory-efficient kernel in cuDNN's place (no plans); their outputs are compared
(relative L2). Llama-3-8B attention shape, bf16. Writes
cudnn_plan_cost_LABEL.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

H, KV, D, BLOCK = 32, 8, 128, 16
# (queries, prefix keys): questions of new lengths after a 32K and a 128K document, then the
# chunks of a cold prefill of a document of a new length (8,192 a chunk).
CASES = [
    (23, 32768 + 5),
    (41, 32768 + 5),
    (23, 131072 + 9),
    (37, 131072 + 9),
    (8192, 0),
    (8192, 8192),
    (8192, 16384),
    (8192, 24576),
    (5311, 32768),
]
ENV = "TORCH_CUDNN_SDPA_AVOID_RECOMPILE"
# (name, environment, kernel): cuDNN as PyTorch runs it by default, with the opt-in above, and
# the memory-efficient kernel in cuDNN's place (the backend's parts and merges unchanged).
VARIANTS = [
    ("default", {}, "cudnn"),
    ("avoid_recompile", {ENV: "1"}, "cudnn"),
    ("efficient", {}, "efficient"),
]


def efficient_attend(q, k, v, is_causal):
    """PyTorch's memory-efficient kernel (CUTLASS: no plan to build) in cuDNN's place."""
    import torch

    out, lse = torch.ops.aten._scaled_dot_product_efficient_attention(
        q, k, v, None, True, 0.0, is_causal
    )[:2]
    return out, lse[..., : q.shape[2]].float()


def child(path: Path, kernel: str) -> None:
    import torch

    from engine.attention.base import AttentionMetadata
    from engine.attention.cudnn_split import CudnnSplitBackend

    device = torch.device("cuda")
    backend = CudnnSplitBackend(device, attend=efficient_attend if kernel == "efficient" else None)
    longest = max(q + s for q, s in CASES)
    num_blocks = -(-longest // BLOCK)
    generator = torch.Generator(device=device).manual_seed(0)
    k_cache = torch.randn(
        num_blocks, BLOCK, KV, D, device=device, dtype=torch.bfloat16, generator=generator
    )
    v_cache = torch.randn(
        num_blocks, BLOCK, KV, D, device=device, dtype=torch.bfloat16, generator=generator
    )
    table = torch.arange(num_blocks, device=device, dtype=torch.int32)
    rows, outputs = [], {}
    # cuDNN's own start (its handle, its library) is in no case: a small call of another shape.
    for num_q, start in [(16, 0), (16, 256)]:
        small = torch.randn(num_q, H, D, device=device, dtype=torch.bfloat16)
        small_kv = torch.randn(num_q, KV, D, device=device, dtype=torch.bfloat16)
        meta = AttentionMetadata(
            start=start,
            num_query_tokens=num_q,
            slot_mapping=torch.arange(start, start + num_q, device=device),
            block_table=table,
            block_size=BLOCK,
            first_block_if_contiguous=0,
        )
        backend.attend(small, small_kv, small_kv, k_cache, v_cache, meta)
    for num_q, start in CASES:
        q = torch.randn(num_q, H, D, device=device, dtype=torch.bfloat16, generator=generator)
        k = torch.randn(num_q, KV, D, device=device, dtype=torch.bfloat16, generator=generator)
        v = torch.randn(num_q, KV, D, device=device, dtype=torch.bfloat16, generator=generator)
        positions = torch.arange(start, start + num_q, device=device)
        meta = AttentionMetadata(
            start=start,
            num_query_tokens=num_q,
            slot_mapping=positions.long(),
            block_table=table,
            block_size=BLOCK,
            first_block_if_contiguous=0,
        )
        times = []
        for _ in range(2):
            torch.cuda.synchronize()
            began = time.perf_counter()
            result = backend.attend(q, k, v, k_cache, v_cache, meta)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - began)
        outputs[f"{num_q}@{start}"] = result.float().cpu()
        rows.append(
            {
                "queries": num_q,
                "prefix": start,
                "first_ms": times[0] * 1e3,
                "again_ms": times[1] * 1e3,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    torch.save(outputs, path.with_suffix(".pt"))
    path.write_text(json.dumps(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", default="gpu")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--kernel", default="cudnn", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.kernel)
        return
    import tempfile

    import torch

    from bench._report import hardware

    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra, kernel in VARIANTS:
            path = Path(tmp) / f"{name}.json"
            env = {k: v for k, v in os.environ.items() if k != ENV} | extra
            command = [sys.executable, __file__, "--child", str(path), "--kernel", kernel]
            if subprocess.run(command, env=env, cwd=ROOT).returncode != 0:
                print(f"{name}: its process failed (above); left out", flush=True)
                continue
            runs[name] = {
                "rows": json.loads(path.read_text()),
                "outputs": torch.load(path.with_suffix(".pt")),
            }
    compare: dict[str, dict[str, float]] = {}
    for name in runs:
        compare[name] = {}
        for key, base in runs["default"]["outputs"].items():
            other = runs[name]["outputs"][key]
            compare[name][key] = ((other - base).norm() / base.norm()).item()
    meta = {"hardware": hardware(torch.device("cuda")), "command": " ".join(sys.argv)}
    result = {"meta": meta, "variants": [v[:2] for v in VARIANTS if v[0] in runs]}
    result |= {name: runs[name]["rows"] for name in runs}
    result["rel_l2_vs_default"] = compare
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stem = args.out_dir / f"cudnn_plan_cost_{args.label}"
    Path(f"{stem}.json").write_text(json.dumps(result, indent=1))
    names = [name for name, _, _ in VARIANTS if name in runs]
    lines = [
        "# cuDNN attention: a new shape's first call against the same call again",
        "",
        f"`{meta['command']}` on {meta['hardware'].get('gpu_name', 'cuda')}, torch "
        f"{meta['hardware']['torch']}, cuDNN {meta['hardware'].get('cudnn')}. Wall ms around "
        f"each call, CUDA synchronized: first call / again (rel L2 against default). "
        f"`avoid_recompile`: `{ENV}=1`; `efficient`: PyTorch's memory-efficient kernel in "
        "cuDNN's place. Each variant in its own process.",
        "",
        "| queries | prefix keys | " + " | ".join(names) + " |",
        "|---:|---:|" + "---|" * len(names),
    ]
    for index, (num_q, start) in enumerate(CASES):
        key = f"{num_q}@{start}"
        cells = []
        for name in names:
            row = result[name][index]
            cell = f"{row['first_ms']:.1f} / {row['again_ms']:.2f}"
            if name != "default":
                cell += f" ({compare[name][key]:.1e})"
            cells.append(cell)
        lines.append(f"| {num_q} | {start} | " + " | ".join(cells) + " |")
    Path(f"{stem}.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {stem}.json and .md")


if __name__ == "__main__":
    main()
