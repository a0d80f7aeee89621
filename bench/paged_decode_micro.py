"""The paged decode attention kernel on CUDA: checked against its reference, then timed.

Usage: python3 bench/paged_decode_micro.py [--check] [--sweep] [--merge-ab] [--out results.md]
           [--batches 1 8 16 32 64] [--contexts 4096 8192 32768]

Needs only torch and triton: engine/attention/paged_decode.py is loaded without the engine
package's __init__ (which imports transformers and the loaders).

Shapes are Llama-3-8B's attention (32 query heads, 8 KV heads, head dim 128, bf16), one layer,
every sequence at the full context, pages of 16 tokens handed out in shuffled order. Each row
times the kernel eagerly (CUDA events around back-to-back calls, after warm-up) and as a CUDA
graph replay (several calls captured in one graph, per-call time), against the reference SDPA
path (gather the pages into dense K/V, then F.scaled_dot_product_attention with enable_gqa).
GB/s counts the K and V bytes the sequences attend to (B * context * KV * D * 2 * 2 bytes),
against 4.3 TB/s, the card's measured copy rate. Small footprints rotate over several copies
of the cache (>= 256 MiB in all) so that the 50 MB L2 does not serve them.

--check first asserts kernel == reference (max abs error printed, tolerance stated) on several
shapes and dtypes, mixed context lengths with padding rows, and a CUDA graph replayed with new
context lengths and block tables. --sweep times tile size, warps, stages and split counts on
four shapes.
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
import types
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
H, KV, D = 32, 8, 128
BLOCK_SIZE = 16
COPY_RATE = 4.3e12  # bytes/s, the H200's measured device copy rate
ROTATE_BYTES = 256 * 2**20
CALLS_PER_GRAPH = 16
BASELINE_GRAPH_BYTES = 2 * 2**30  # larger footprints time the SDPA path eagerly only
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1e-2, 1e-2)}


def load_paged_decode() -> types.ModuleType:
    """engine.attention.paged_decode with the engine's packages stood in for by bare ones."""
    sys.path.insert(0, str(ROOT))
    for name, folder in (("engine", "engine"), ("engine.attention", "engine/attention")):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [str(ROOT / folder)]
            sys.modules[name] = package
    return importlib.import_module("engine.attention.paged_decode")


pd = load_paged_decode()


def make_inputs(
    lens: list[int],
    heads: tuple[int, int, int],
    dtype: torch.dtype,
    *,
    block_size: int = 16,
    copies: int = 1,
    seed: int = 0,
    device: str = "cuda",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor], torch.Tensor]:
    """q, K/V caches, `copies` block tables over disjoint shuffled blocks, context lens. Block 0
    (the padding id) and slots past each context are NaN: a kernel that reads them shows."""
    num_heads, num_kv, dim = heads
    gen = torch.Generator(device=device).manual_seed(seed)
    pages = [max(1, math.ceil(n / block_size)) for n in lens]
    max_blocks = max(pages)
    num_blocks = 1 + copies * sum(pages)
    shape = (num_blocks, block_size, num_kv, dim)
    k = torch.randn(shape, generator=gen, device=device, dtype=dtype)
    v = torch.randn(shape, generator=gen, device=device, dtype=dtype)
    order = torch.randperm(num_blocks - 1, generator=gen, device=device).int() + 1
    tables, used = [], 0
    for _ in range(copies):
        table = torch.zeros(len(lens), max_blocks, dtype=torch.int32, device=device)
        for row, (length, count) in enumerate(zip(lens, pages, strict=True)):
            ids = order[used : used + count]
            used += count
            table[row, :count] = ids
            if length % block_size:
                last = int(ids[-1])
                k[last, length % block_size :] = float("nan")
                v[last, length % block_size :] = float("nan")
        tables.append(table)
    k[0], v[0] = float("nan"), float("nan")
    q = torch.randn(len(lens), num_heads, dim, generator=gen, device=device, dtype=dtype)
    context_lens = torch.tensor(lens, dtype=torch.int32, device=device)
    return q, k, v, tables, context_lens


def assert_close(name: str, got: torch.Tensor, expected: torch.Tensor, dtype) -> None:
    atol, rtol = TOLERANCE[dtype]
    err = (got.float() - expected.float()).abs()
    ratio = (err / (atol + rtol * expected.float().abs())).max().item()
    print(f"check {name:<44} max abs err {err.max().item():.3e}  (atol {atol}, rtol {rtol})")
    assert not got.isnan().any(), f"{name}: NaN in the kernel's output"
    assert ratio <= 1.0, f"{name}: error {ratio:.2f}x the tolerance"


CHECKS = [  # name, lens, (H, KV, D), dtype, block size, num_splits, tile tokens
    ("llama bf16 mixed", [1, 15, 16, 17, 100, 1000, 0, 8192], (32, 8, 128), torch.bfloat16, 16, None, None),
    ("llama bf16 one split", [1, 17, 1000, 0, 4096], (32, 8, 128), torch.bfloat16, 16, 1, None),
    ("llama fp16 mixed", [3, 700, 5000, 0], (32, 8, 128), torch.float16, 16, None, None),
    ("llama fp32 mixed", [33, 2000, 0], (32, 8, 128), torch.float32, 16, None, None),
    ("smollm2 bf16 mixed", [1, 15, 16, 17, 100, 1000, 0, 8192], (9, 3, 64), torch.bfloat16, 16, None, None),
    ("smollm2 fp32 mixed", [1, 17, 1000, 0, 3000], (9, 3, 64), torch.float32, 16, None, None),
    ("llama bf16 block 32", [31, 33, 4000, 0], (32, 8, 128), torch.bfloat16, 32, None, None),
    ("llama bf16 block 128, tile 32", [129, 4000], (32, 8, 128), torch.bfloat16, 128, 7, 32),
    ("mha d128 bf16 batch 64", [4096] * 63 + [0], (8, 8, 128), torch.bfloat16, 16, None, None),
]  # fmt: skip


def run_checks() -> None:
    for name, lens, heads, dtype, block_size, splits, tile in CHECKS:
        q, k, v, tables, context_lens = make_inputs(lens, heads, dtype, block_size=block_size)
        config = pd.KernelConfig(tile_tokens=tile) if tile else None
        args = (q, k, v, tables[0], context_lens)
        got = pd.paged_decode_attention(*args, num_splits=splits, config=config)
        assert_close(name, got, pd.paged_decode_reference(*args), dtype)
        assert (got[context_lens == 0] == 0).all(), f"{name}: a padding row is not zero"
    check_graph_replay()


def check_graph_replay() -> None:
    """Capture with one batch; copy new q, lens and permuted table rows in; replay; compare."""
    lens = [1000, 17, 0, 300, 8000, 5, 64, 4096]
    q, k, v, tables, context_lens = make_inputs(lens, (H, KV, D), torch.bfloat16)
    table, out = tables[0], torch.empty_like(q)
    run = lambda: pd.paged_decode_attention(q, k, v, table, context_lens, out=out)  # noqa: E731
    graph = capture([run])
    perm = torch.tensor([4, 0, 2, 3, 1, 5, 7, 6], device="cuda")
    shrink = torch.tensor([100, 0, 0, 0, 0, 4, 4000, 63], device="cuda", dtype=torch.int32)
    new_table, new_lens = table[perm].clone(), context_lens[perm] - shrink
    table.copy_(new_table)
    context_lens.copy_(new_lens)
    q.copy_(torch.randn_like(q))
    graph.replay()
    torch.cuda.synchronize()
    expected = pd.paged_decode_reference(q, k, v, table, context_lens)
    assert_close("cuda graph replay, new lens and tables", out, expected, torch.bfloat16)


def capture(calls: list[Callable[[], object]]) -> torch.cuda.CUDAGraph:
    """Warm up on a side stream (Triton compiles outside the capture), then capture the calls."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    return graph


def time_eager(calls: list[Callable[[], object]], reps: int = 50, warmup: int = 10) -> float:
    """Microseconds per call, CUDA events around `reps` back-to-back calls."""
    for index in range(warmup):
        calls[index % len(calls)]()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for index in range(reps):
        calls[index % len(calls)]()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def time_graph(
    calls: list[Callable[[], object]], replays: int = 20, per_graph: int = CALLS_PER_GRAPH
) -> float:
    """Microseconds per call, `per_graph` calls captured in one graph, replayed."""
    graph = capture([calls[i % len(calls)] for i in range(per_graph)])
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / (replays * per_graph)


def sdpa_path(q, k_cache, v_cache, table, context: int) -> torch.Tensor:
    """The baseline: every page gathered into dense [B, KV, ctx, D], then SDPA."""
    batch = q.shape[0]
    flat = table.flatten().long()
    keys = k_cache.index_select(0, flat).view(batch, context, KV, D).transpose(1, 2)
    values = v_cache.index_select(0, flat).view(batch, context, KV, D).transpose(1, 2)
    out = F.scaled_dot_product_attention(q[:, :, None], keys, values, enable_gqa=True)
    return out[:, :, 0]  # [B, H, D]


def setup(batch: int, context: int):
    footprint = batch * context * KV * D * 2 * 2
    copies = min(16, max(1, math.ceil(ROTATE_BYTES / footprint)))
    q, k, v, tables, lens = make_inputs(
        [context] * batch, (H, KV, D), torch.bfloat16, copies=copies
    )
    k.nan_to_num_(0.0)  # every slot is attended here: no NaN may reach the SDPA baseline
    v.nan_to_num_(0.0)
    return q, k, v, tables, lens, footprint


def kernel_calls(q, k, v, tables, lens, context, **kwargs) -> list[Callable[[], object]]:
    out = torch.empty_like(q)
    return [
        lambda t=t: pd.paged_decode_attention(
            q, k, v, t, lens, max_context_len=context, out=out, **kwargs
        )
        for t in tables
    ]


def bench_row(batch: int, context: int) -> str:
    q, k, v, tables, lens, footprint = setup(batch, context)
    calls = kernel_calls(q, k, v, tables, lens, context)
    splits = pd.plan_num_splits(
        batch_size=batch, num_kv_heads=KV, max_context_len=context,
        num_sms=torch.cuda.get_device_properties(0).multi_processor_count,
    )  # fmt: skip
    eager, graph = time_eager(calls), time_graph(calls)
    baseline = [lambda t=t: sdpa_path(q, k, v, t, context) for t in tables]
    # Each baseline call allocates dense K/V (2x the footprint, more if SDPA copies them):
    # graphs only for small footprints, a few calls each; eager timing everywhere.
    base_eager = time_eager(baseline, reps=10, warmup=2)
    base_graph = time_graph(baseline, per_graph=4) if footprint <= BASELINE_GRAPH_BYTES else None
    best_base = min(base_eager, base_graph or math.inf)
    rate, base_rate = footprint / (graph * 1e-6), footprint / (best_base * 1e-6)
    graph_text = "-" if base_graph is None else f"{base_graph:.1f}"
    return (
        f"| {batch} | {context} | {splits} | {footprint / 2**20:.0f} | {eager:.1f} | {graph:.1f} "
        f"| {rate / 1e9:.0f} | {100 * rate / COPY_RATE:.0f}% | {base_eager:.1f} | {graph_text} "
        f"| {base_rate / 1e9:.0f} | {best_base / graph:.1f}x |"
    )


def sweep() -> list[str]:
    lines = ["", "## Sweep (CUDA graph, us per call; the 6 fastest per shape)", ""]
    lines += ["| B | context | config | splits | us | GB/s |", "|---|---|---|---|---|---|"]
    for batch, context in ((1, 4096), (1, 32768), (64, 4096), (64, 32768)):
        lines += sweep_shape(batch, context)
        torch.cuda.empty_cache()
    return lines


def sweep_shape(batch: int, context: int) -> list[str]:
    q, k, v, tables, lens, footprint = setup(batch, context)
    planned = pd.plan_num_splits(
        batch_size=batch, num_kv_heads=KV, max_context_len=context,
        num_sms=torch.cuda.get_device_properties(0).multi_processor_count,
    )  # fmt: skip
    results = []
    for tile in (16, 32, 64):
        for warps in (4, 8):
            for stages in (2, 3, 4, 5):  # n stages: n - 1 K/V tiles in flight per program
                config = pd.KernelConfig(tile_tokens=tile, num_warps=warps, num_stages=stages)
                for splits in sorted({max(1, planned // 2), planned, min(128, planned * 2)}):
                    calls = kernel_calls(
                        q, k, v, tables, lens, context, num_splits=splits, config=config
                    )
                    try:
                        results.append((time_graph(calls), config, splits))
                    except Exception as exc:  # e.g. out of shared memory for this config
                        print(f"sweep {batch} {context} {config} {splits}: {exc!r}"[:300])
    lines = []
    for us, config, splits in sorted(results, key=lambda r: r[0])[:6]:
        text = f"tile {config.tile_tokens}, warps {config.num_warps}, stages {config.num_stages}"
        gbps = footprint / us / 1e3
        lines.append(f"| {batch} | {context} | {text} | {splits} | {us:.1f} | {gbps:.0f} |")
        print(lines[-1], flush=True)
    return lines


def merge_ab(shapes=((1, 4096), (1, 32768), (8, 4096), (64, 4096))) -> list[str]:
    """The splits merged by a second kernel or by the split kernel's last program
    (merge_counters), one after the other on the same inputs: per-call graph time, and the
    fused output against the reference (and the counters back at zero after the graph)."""
    lines = ["", "## Merge: second kernel against the split kernel's own (CUDA graph, us per call)"]
    lines += [
        "",
        "| B | context | splits | second kernel | fused | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for batch, context in shapes:
        q, k, v, tables, lens, _ = setup(batch, context)
        counters = pd.merge_counters(batch, KV, q.device)
        plain = time_graph(kernel_calls(q, k, v, tables, lens, context))
        fused_calls = kernel_calls(q, k, v, tables, lens, context, merge_counters=counters)
        fused = time_graph(fused_calls)
        assert int(counters.abs().sum()) == 0, "the counters are not back at zero"
        got = pd.paged_decode_attention(
            q, k, v, tables[0], lens, max_context_len=context, merge_counters=counters
        )
        name = f"fused merge B={batch} context={context}"
        assert_close(name, got, pd.paged_decode_reference(q, k, v, tables[0], lens), q.dtype)
        splits = pd.plan_num_splits(
            batch_size=batch, num_kv_heads=KV, max_context_len=context,
            num_sms=torch.cuda.get_device_properties(0).multi_processor_count,
        )  # fmt: skip
        lines.append(
            f"| {batch} | {context} | {splits} | {plain:.1f} | {fused:.1f} | {plain / fused:.2f} |"
        )
        print(lines[-1], flush=True)
        torch.cuda.empty_cache()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="assert kernel == reference first")
    parser.add_argument("--sweep", action="store_true", help="also time launch configs")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 16, 32, 64])
    parser.add_argument("--contexts", type=int, nargs="+", default=[4096, 8192, 32768])
    parser.add_argument("--out", type=Path, help="also write the markdown table here")
    parser.add_argument(
        "--merge-ab", action="store_true", help="also time the merge: second kernel or fused"
    )
    args = parser.parse_args()
    if not pd.is_paged_decode_available(torch.device("cuda")):
        raise SystemExit("needs a CUDA device and triton")
    if args.check:
        run_checks()
    import triton

    device = torch.cuda.get_device_name(0)
    lines = [
        f"# Paged decode attention on {device}",
        "",
        f"`bench/paged_decode_micro.py`, torch {torch.__version__}, triton {triton.__version__}; "
        f"H={H}, KV={KV}, D={D}, bf16, pages of {BLOCK_SIZE}; one layer. GB/s: K+V bytes read "
        f"/ graph time; % of {COPY_RATE / 1e12:.1f} TB/s. Baseline: gather + SDPA.",
        "",
        "| B | context | splits | KV MiB | kernel us (eager) | kernel us (graph) | GB/s "
        "| % of copy | SDPA path us (eager) | SDPA path us (graph) | SDPA GB/s (best) "
        "| speed-up (graph vs best SDPA) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    for context in args.contexts:
        for batch in args.batches:
            lines.append(bench_row(batch, context))
            print(lines[-1], flush=True)
            torch.cuda.empty_cache()  # the row's caches are gone with its frame
    if args.merge_ab:
        lines += merge_ab()
    if args.sweep:
        lines += sweep()
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
