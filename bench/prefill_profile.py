"""Where one prefill's GPU time goes: torch.profiler over the engine, kernels grouped by kind.

Usage (repository root, CUDA):
    python3 bench/prefill_profile.py --tokens 32768 --backend flash_attn [--compile]
    python3 bench/prefill_profile.py --tokens 131072 --weights fp8 --kv-dtype fp8 --fp8-attention

Builds the engine on random weights of the Llama-3-8B shape (as bench/prefill.py; --weights fp8
builds them in FP8 on the device, as bench/prefill.py does), runs one
warm-up prefill and one profiled one, and prints the CUDA kernels' total time by group (matrix
products, attention, elementwise and the rest) and the 25 costliest kernels. Tells what is left
to win; the figures to report come from bench/prefill.py.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from bench import _engine_runs as er  # noqa: E402
from bench._flops import Shape, prefill_flops  # noqa: E402
from bench._models import RANDOM_PRESETS, ModelSource  # noqa: E402

GROUPS = (
    ("attention", re.compile(r"flash|fmha|attention|cudnn|sdpa|FlashAttention", re.I)),
    ("matmul", re.compile(r"gemm|cutlass|nvjet|sm90_xmma|cublas", re.I)),
    ("triton (fused elementwise)", re.compile(r"^triton_", re.I)),
    ("copy / index", re.compile(r"copy|index|gather|scatter|cat", re.I)),
    ("elementwise / reduce", re.compile(r"elementwise|reduce|vectorized|unrolled", re.I)),
)


def group_of(name: str) -> str:
    for group, pattern in GROUPS:
        if pattern.search(name):
            return group
    return "other"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=32768)
    parser.add_argument("--chunk", type=int, default=8192)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--model", default="llama3-8b-random")
    parser.add_argument(
        "--fa4-one-call",
        action="store_true",
        help="flash-attn 4: one causal call per chunk instead of prefix + own keys",
    )
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke run")
    parser.add_argument("--weights", choices=["bf16", "fp8"], default="bf16")
    parser.add_argument("--kv-dtype", choices=["auto", "fp8"], default="auto")
    parser.add_argument(
        "--fp8-attention",
        action="store_true",
        help="with --kv-dtype fp8 and the cudnn backend: long chunks attend in FP8 (EngineConfig)",
    )
    parser.add_argument("--work-dir", type=Path, default=ROOT / "var" / "bench_prefill")
    args = parser.parse_args()
    if args.fa4_one_call:
        from engine.attention.flash import FlashAttn4Backend

        FlashAttn4Backend.split_prefix = False
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    activity = ProfilerActivity.CUDA if device.type == "cuda" else ProfilerActivity.CPU
    source = ModelSource(
        argparse.Namespace(model=args.model, cache_dir=ROOT / "var" / "models", seed=0),
        device,
        dtype,
    )
    if args.weights == "fp8" and (device.type != "cuda" or args.model not in RANDOM_PRESETS):
        parser.error("--weights fp8 builds a random preset's weights on a CUDA device")
    # FP8 weights are built on the device, never in bf16: the shape from the preset's config.
    hf = [] if args.weights == "fp8" else [source.hf_model()]
    if hf:
        shape = Shape.from_hf_config(hf[0].config)
    else:
        from transformers import LlamaConfig

        shape = Shape.from_hf_config(LlamaConfig(**RANDOM_PRESETS[args.model]))
    kwargs = er.engine_config_kwargs(
        shape=shape,
        device=device,
        dtype=dtype,
        num_tokens=args.tokens,
        chunk=args.chunk,
        backend=args.backend,
        block_size=16,
        compile=args.compile,
        kv_dtype=args.kv_dtype,
    )
    kwargs["fp8_attention"] = args.fp8_attention
    if args.weights == "fp8":
        kwargs["weights"] = "fp8"
        engine = er.fp8_engine(args.model, args.work_dir / f"{source.name}-fp8", kwargs)
    else:
        engine, _ = er.engine_from_hf(hf, args.work_dir / source.name, kwargs)
    tokens = torch.randint(3, shape.vocab_size, (args.tokens,)).tolist()
    er.run_engine(engine, tokens, args.chunk)  # warm-up: compilation, autotuning
    _sync(device)
    with profile(activities=[activity]) as prof:
        er.run_engine(engine, tokens, args.chunk)
        _sync(device)
    walls = []
    for _ in range(2):  # unprofiled, for the wall time the kernels' sum is compared with
        began = time.perf_counter()
        er.run_engine(engine, tokens, args.chunk)
        _sync(device)
        walls.append(time.perf_counter() - began)
    by_kernel: dict[str, float] = defaultdict(float)
    for event in prof.key_averages():
        spent = event.device_time_total if device.type == "cuda" else event.self_cpu_time_total
        if spent > 0:
            by_kernel[event.key] += spent / 1e3  # ms
    total = sum(by_kernel.values())
    by_group: dict[str, float] = defaultdict(float)
    for name, ms in by_kernel.items():
        by_group[group_of(name)] += ms
    flops = prefill_flops(shape, args.tokens, num_logits=1)
    print(
        f"\nengine {engine.attention_backend} compile={args.compile} split={not args.fa4_one_call} "
        f"weights={args.weights} kv={args.kv_dtype} fp8_attention={args.fp8_attention}, "
        f"{args.tokens} tokens: "
        f"kernels {total:.1f} ms ({flops / total / 1e9:.0f} TFLOP/s if nothing else ran); "
        f"wall {min(walls):.3f} s ({flops / min(walls) / 1e12:.0f} TFLOP/s)"
    )
    for group, ms in sorted(by_group.items(), key=lambda kv: -kv[1]):
        print(f"  {group:<28} {ms:9.1f} ms  {100 * ms / total:5.1f}%")
    print("\ncostliest kernels:")
    for name, ms in sorted(by_kernel.items(), key=lambda kv: -kv[1])[:25]:
        print(f"  {ms:9.1f} ms  {name[:110]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
