"""CPU matrix products of SmolLM2's layers: MKL (torch's F.linear) against oneDNN, and the MLP
in row blocks. The evidence behind engine/models/linear.py.

Usage: .venv/bin/python bench/cpu_matmul.py   (writes bench/results/cpu_matmul.md)

Shapes are SmolLM2-135M's (hidden 576, q/k/v 960, MLP 1536) at M = 8,192 tokens (one prefill
chunk), 512 and 1 (decode). Median of 5 runs after a warm-up, fp32, torch's default threads.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench._report import hardware  # noqa: E402
from engine.models.linear import onednn_linear  # noqa: E402

HIDDEN, QKV, INTERMEDIATE, VOCAB = 576, 960, 1536, 49152
SHAPES = {  # name: (in, out)
    "qkv_proj": (HIDDEN, QKV),
    "gate_up_proj": (HIDDEN, 2 * INTERMEDIATE),
    "down_proj": (INTERMEDIATE, HIDDEN),
    "lm_head": (HIDDEN, VOCAB),
}


def median_seconds(fn: Callable[[], object], runs: int = 5) -> float:
    fn()
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def mlp(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor, matmul) -> torch.Tensor:
    gate, up = matmul(x, w_gate_up, None).split(INTERMEDIATE, dim=-1)
    return matmul(F.silu(gate) * up, w_down, None)


def main() -> int:
    torch.manual_seed(0)
    lines = ["# CPU matrix products: MKL vs oneDNN (SmolLM2-135M shapes, fp32)", ""]
    meta = hardware(torch.device("cpu"))
    lines += [
        f"{meta['date_utc']} UTC, {meta['cpu_model']}, {meta['cpu_count']} cores, torch "
        f"{meta['torch']}, {torch.get_num_threads()} threads, load at start "
        f"{[round(x, 2) for x in meta['load_average_at_start']]}. Median of 5 after a warm-up.",
        "Command: `.venv/bin/python bench/cpu_matmul.py`",
        "",
        "| layer | tokens | MKL ms | MKL GFLOP/s | oneDNN ms | oneDNN GFLOP/s | speed-up |",
        "|---|---|---|---|---|---|---|",
    ]
    for tokens in (8192, 512, 1):
        for name, (n_in, n_out) in SHAPES.items():
            if name == "lm_head" and tokens != 1:
                continue  # the engine computes logits for the last position only
            x, w = torch.randn(tokens, n_in), torch.randn(n_out, n_in) * 0.02
            flops = 2 * tokens * n_in * n_out
            mkl = median_seconds(lambda x=x, w=w: F.linear(x, w))
            dnn = median_seconds(lambda x=x, w=w: onednn_linear(x, w))
            lines.append(
                f"| {name} | {tokens} | {mkl * 1e3:.3f} | {flops / mkl / 1e9:.0f} | "
                f"{dnn * 1e3:.3f} | {flops / dnn / 1e9:.0f} | {mkl / dnn:.2f}x |"
            )
    tokens = 8192
    x = torch.randn(tokens, HIDDEN)
    w_gate_up = torch.randn(2 * INTERMEDIATE, HIDDEN) * 0.02
    w_down = torch.randn(HIDDEN, INTERMEDIATE) * 0.02
    flops = 2 * tokens * HIDDEN * 3 * INTERMEDIATE
    lines += [
        "",
        "One MLP (gate_up, SiLU * up, down) over 8,192 tokens:",
        "",
        "| variant | ms | GFLOP/s |",
        "|---|---|---|",
    ]

    def blocked(rows: int) -> torch.Tensor:
        out = torch.empty(tokens, HIDDEN)
        for start in range(0, tokens, rows):
            out[start : start + rows] = mlp(
                x[start : start + rows], w_gate_up, w_down, onednn_linear
            )
        return out

    variants = {
        "MKL, all rows at once": lambda: mlp(x, w_gate_up, w_down, F.linear),
        "oneDNN, all rows at once": lambda: mlp(x, w_gate_up, w_down, onednn_linear),
    }
    for rows in (256, 512, 1024, 2048):
        variants[f"oneDNN, {rows} rows at a time"] = lambda rows=rows: blocked(rows)
    for name, fn in variants.items():
        seconds = median_seconds(fn)
        lines.append(f"| {name} | {seconds * 1e3:.1f} | {flops / seconds / 1e9:.0f} |")
    reference = mlp(x.double(), w_gate_up.double(), w_down.double(), F.linear)
    for name, fn in (
        ("MKL", variants["MKL, all rows at once"]),
        ("oneDNN 512", lambda: blocked(512)),
    ):
        error = float((fn().double() - reference).norm() / reference.norm())
        lines.append(f"\n{name}: rel. L2 error against fp64 {error:.2e}")
    out = ROOT / "bench" / "results" / "cpu_matmul.md"
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
