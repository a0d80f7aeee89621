"""Tile sizes for the FP8-weight decode kernels (engine/models/fp8_small_batch.py) on a GPU: each
configuration of the FP8-activation kernel (fp8_w8a8.py: its activation quantization included),
of the bf16-activation tensor-core kernel (rows padded to 16) and of the tensor-core-free one
(one to a few rows), split-K or not (fp32 partials, then summed), on the 8B's projection shapes,
beside bf16 F.linear and torch._scaled_mm (per-token activation quantization), all as the engine runs them: inside a
CUDA graph, each call on another copy of the weight so that the weights come from HBM, not L2.

Usage: python3 bench/fp8_matmul_sweep.py [--rows 1 4 16 64] [--budget-s 300] --out FILE.json
Times: CUDA events around 10 replays of a graph of 24 calls after 3 warm replays (per call).
Each configuration is checked against the fp32 product (a wrong one is reported, not timed).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench._report import hardware  # noqa: E402
from bench._timing import graph_call_us  # noqa: E402
from engine.models.fp8 import _scaled_mm_rows, dequantize, quantize_rows  # noqa: E402
from engine.models.fp8_gemv import fp8_weight_gemv  # noqa: E402
from engine.models.fp8_small_batch import fp8_weight_dot, fp8_weight_matmul  # noqa: E402
from engine.models.fp8_w8a8 import fp8_w8a8_matmul  # noqa: E402
from tests.engine.run_fp8_small_batch_interpreted import quantized_groups  # noqa: E402

SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
# The 70B's (Llama-3-70B: hidden 8192, 64 query and 8 KV heads of 128, MLP 28672), by --shapes.
SHAPES_70B = {
    "qkv_70b": (10240, 8192),
    "o_70b": (8192, 8192),
    "gate_up_70b": (57344, 8192),
    "down_70b": (8192, 28672),
}
SHAPES |= SHAPES_70B
CALLS = 24  # per graph
HBM_BYTES = 256 * 1024**2  # weight copies per shape: past any L2


def gemv_configs(rows: int) -> list[dict]:
    if rows > 8:
        return []
    grid = itertools.product((8, 16, 32), (256, 512, 1024), (4, 8), (2, 4), (1, 4))
    if rows == 1:  # num_stages does not pipeline its plain loads; K split at most in two
        grid = itertools.product((8, 16), (512, 1024), (4, 8), (2,), (1, 2))
    configs = [
        dict(kind="gemv", block_n=bn, block_k=bk, num_warps=w, num_stages=s, split_k=sk)
        for bn, bk, w, s, sk in grid
        if bn * bk <= 16384
    ]
    if rows == 1:  # each tile reduced as it goes: larger tiles, more weight bytes in flight
        configs += [
            dict(kind="gemv", block_n=bn, block_k=bk, num_warps=w, num_stages=2,
                 reduce_each_tile=True)
            for bn, bk, w in itertools.product((4, 8, 16), (1024, 2048, 4096), (4, 8))
            if 4096 <= bn * bk <= 32768
        ]  # fmt: skip
        # each tile loaded an iteration ahead (prefetch): two tiles in flight a program
        configs += [
            dict(kind="gemv", block_n=bn, block_k=bk, num_warps=w, num_stages=2,
                 reduce_each_tile=reduce, prefetch=True)
            for bn, bk, w, reduce in itertools.product(
                (4, 8, 16), (512, 1024, 2048), (4, 8), (False, True)
            )
            if 4096 <= bn * bk <= (32768 if reduce else 8192)
        ]  # fmt: skip
    return configs


def dot_configs(rows: int) -> list[dict]:
    grid = itertools.product((16, 32, 64), (128, 256, 512), (4, 8), (3, 4))
    configs = [
        dict(kind="dot", block_n=bn, block_k=bk, num_warps=w, num_stages=s)
        for bn, bk, w, s in grid
        if not (rows > 32 and bk == 512 and s == 4)  # past shared memory
    ]
    if rows > 16:  # many rows: wider tiles, and K split over programs (fp32 partials)
        configs += [
            dict(kind="dot", block_n=bn, block_k=128, num_warps=w, num_stages=3, split_k=sk)
            for bn, w, sk in itertools.product((32, 64, 128), (4, 8), (2, 4))
        ]
    return configs


def w8a8_configs(rows: int) -> list[dict]:
    grid = itertools.product((64, 128), (3, 4, 5), (1, 2, 4))
    configs = [
        dict(kind="w8a8", block_n=bn, num_warps=4, num_stages=st, split_k=sk) for bn, st, sk in grid
    ]
    configs += [
        dict(kind="w8a8", block_n=256, num_warps=8, num_stages=st, split_k=sk)
        for st, sk in itertools.product((3, 4), (1, 2))
    ]
    configs += [
        dict(kind="w8a8", block_n=bn, num_warps=4, num_stages=4, split_k=sk, swap=False)
        for bn, sk in itertools.product((64, 128), (1, 4))
        if rows > 16 or bn == 64
    ]
    return configs


def run_config(config: dict, x, weights, reference) -> tuple[float, float]:
    kind = config["kind"]
    options = {k: v for k, v in config.items() if k != "kind"}
    if kind == "gemv":
        fn = partial(fp8_weight_gemv, **options)
    elif kind == "dot":
        fn = partial(fp8_weight_dot, **options)
    elif kind == "w8a8":
        fn = partial(fp8_w8a8_matmul, **options)
        reference = reference["w8a8"]
    elif kind == "default":
        fn = fp8_weight_matmul
        reference = reference["w8a8" if x.shape[0] > 1 else "exact"]
    elif kind == "default_bf16_activations":
        fn = partial(fp8_weight_matmul, w8a8=False)
    elif kind == "scaled_mm":
        fn = _scaled_mm_rows
    else:
        raise ValueError(kind)
    if isinstance(reference, dict):  # the products with bf16 activations
        reference = reference["exact"]
    weight, scale = weights[0]
    out = fn(x, weight, scale).float()
    error = ((out - reference).norm() / reference.norm()).item()
    if error > 5e-2:
        return float("nan"), error
    calls = [partial(fn, x, w, s) for w, s in itertools.islice(itertools.cycle(weights), CALLS)]
    return graph_call_us(calls), error


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument(
        "--shapes",
        nargs="+",
        choices=list(SHAPES),
        default=[n for n in SHAPES if n not in SHAPES_70B],
    )
    parser.add_argument("--budget-s", type=float, default=300.0)
    parser.add_argument(
        "--kinds", nargs="+", help="only these kinds (default, w8a8, gemv, dot, scaled_mm, ...)"
    )
    args = parser.parse_args()
    device = torch.device("cuda")
    started = time.perf_counter()
    result = {"hardware": hardware(device), "args": vars(args) | {"out": str(args.out)}, "rows": []}
    shapes = {name: SHAPES[name] for name in args.shapes}
    weights, bf16 = {}, {}
    for name, (n, k) in shapes.items():
        weight, scale = quantize_rows(torch.randn(n, k, device=device) * 0.02)
        # Copies of one weight in their own storage, so that each call reads HBM.
        copies = max(2, -(-HBM_BYTES // (n * k)))
        weights[name] = [(weight.clone(), scale.clone()) for _ in range(copies)]
        wide = dequantize(weight, scale, torch.bfloat16)
        bf16[name] = [wide.clone() for _ in range(max(2, copies // 2))]
        del weight, scale, wide
    stopped = False
    for rows in args.rows:
        configs = [{"kind": "default"}, {"kind": "default_bf16_activations"}]
        configs += [{"kind": "scaled_mm"}, *w8a8_configs(rows)]
        configs += gemv_configs(rows) + dot_configs(rows)
        if args.kinds:
            configs = [c for c in configs if c["kind"] in args.kinds]
        for name, (n, k) in shapes.items():
            x = torch.randn(rows, k, device=device, dtype=torch.bfloat16)
            w0, s0 = weights[name][0]
            wide = dequantize(w0, s0, torch.float32).T
            # Each product against the fp32 product of the operands it multiplies (FP8
            # activations: x as rounded); scaled_mm's per-token rounding against the exact one.
            reference = {"exact": x.float() @ wide, "w8a8": quantized_groups(x) @ wide}
            bf16_calls = [
                partial(F.linear, x, b)
                for b in itertools.islice(itertools.cycle(bf16[name]), CALLS)
            ]
            base = {"shape": name, "n": n, "k": k, "m": rows}
            row = base | {"kind": "bf16", "us": graph_call_us(bf16_calls)}
            row["tb_per_s"] = n * k * 2 / row["us"] / 1e6
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
            for config in configs:
                if time.perf_counter() - started > args.budget_s:
                    stopped = True
                    break
                try:
                    us, error = run_config(config, x, weights[name], reference)
                except Exception as exc:  # a configuration that does not build
                    us, error = float("nan"), repr(exc)[:200]
                row = base | config | {"us": us, "rel_l2": error}
                row["tb_per_s"] = n * k / us / 1e6 if us == us else None
                result["rows"].append(row)
                print(json.dumps(row), flush=True)
            if stopped:
                break
        if stopped:
            break
    result["stopped_by_budget"] = stopped
    result["best"] = best_table(result["rows"])
    args.out.write_text(json.dumps(result, indent=2))
    for line in result["best"]:
        print(line)
    print("wrote", args.out)
    return 0


def best_table(rows: list[dict]) -> list[str]:
    lines = []
    keys = sorted({(r["m"], r["shape"]) for r in rows})
    for m, shape in keys:
        mine = [r for r in rows if r["m"] == m and r["shape"] == shape and r["us"] == r["us"]]
        by_kind = {}
        for r in mine:
            if r["kind"] not in by_kind or r["us"] < by_kind[r["kind"]]["us"]:
                by_kind[r["kind"]] = r
        lines.append(
            f"m={m} {shape}: "
            + "; ".join(
                f"{kind} {r['us']:.1f} us ({r['tb_per_s']:.2f} TB/s)"
                + (
                    f" [{r['block_n']}x{r.get('block_k', 128)} w{r['num_warps']} s{r.get('num_stages')}"
                    + (f" k{r['split_k']}" if "split_k" in r else "")
                    + (" unswapped" if r.get("swap") is False else "")
                    + (" reduced" if r.get("reduce_each_tile") else "")
                    + (" prefetch" if r.get("prefetch") else "")
                    + "]"
                    if "block_n" in r
                    else ""
                )
                for kind, r in sorted(by_kind.items())
            )
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
