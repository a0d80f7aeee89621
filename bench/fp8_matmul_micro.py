"""FP8-weight products at decode sizes on a GPU: bf16 F.linear, torch._scaled_mm with per-token
activation quantization (the engine's prefill path) and the Triton FP8-weight kernel
(engine/models/fp8_small_batch.py, the engine's decode path up to its MAX_ROWS), on the 8B's
projection shapes; each checked against the dequantized weight in fp32.

Usage: python3 bench/fp8_matmul_micro.py [--out bench/results/fp8_matmul_micro_h200.json]
Times: CUDA events around 50 calls after 10 warm-ups, the median of 5 such runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench._report import hardware  # noqa: E402
from engine.models.fp8 import _scaled_mm_rows, dequantize, quantize_rows  # noqa: E402
from engine.models.fp8_small_batch import fp8_weight_matmul  # noqa: E402

SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}


def time_us(fn) -> float:
    for _ in range(10):
        fn()
    runs = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(50):
            fn()
        end.record()
        end.synchronize()
        runs.append(start.elapsed_time(end) * 1e3 / 50)
    return statistics.median(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 16, 32, 64])
    args = parser.parse_args()
    device = torch.device("cuda")
    rows_out = []
    for name, (n, k) in SHAPES.items():
        dense = torch.randn(n, k, device=device) * 0.02
        weight, scale = quantize_rows(dense)
        bf16 = dense.to(torch.bfloat16)
        reference_weight = dequantize(weight, scale, torch.float32)
        weight_gb = n * k / 1e9
        for m in args.rows:
            x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
            reference = x.float() @ reference_weight.T
            triton_out = fp8_weight_matmul(x, weight, scale).float()
            error = ((triton_out - reference).norm() / reference.norm()).item()
            row = {
                "shape": name,
                "n": n,
                "k": k,
                "m": m,
                "bf16_linear_us": time_us(partial(F.linear, x, bf16)),
                "scaled_mm_us": time_us(partial(_scaled_mm_rows, x, weight, scale)),
                "triton_fp8_us": time_us(partial(fp8_weight_matmul, x, weight, scale)),
                "triton_rel_l2": error,
            }
            row["triton_weight_tb_per_s"] = weight_gb / (row["triton_fp8_us"] * 1e-6) / 1e3
            rows_out.append(row)
            print(json.dumps(row), flush=True)
    result = {"hardware": hardware(device), "rows": rows_out}
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2))
        print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
