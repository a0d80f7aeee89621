"""Where a decode step's time goes: the GPU's replay of the step's CUDA graph alone, against
whole engine steps (host scheduling, input copies, sampling, text), with a host profile.

    python3 bench/decode_profile.py --batches 1 64 --context 4096
    python3 bench/decode_profile.py --weights fp8 --kv-dtype fp8 [--fp8-small-batch-kernel] --kernels

Llama-3-8B shape, random weights, bf16, cuDNN prefill, the paged decode kernel. GPU times use
CUDA events around back-to-back replays; step times are wall clock over many engine.step() calls
with a synchronize at both ends (the engine runs one step ahead). Each batch is then profiled
with torch.profiler (host calls, waits included) and cProfile; --kernels adds each kernel's GPU
time over eager steps. --copy-check first times how long the host waits to queue a copy behind
a busy stream.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench import _engine_runs as er  # noqa: E402
from bench._models import random_hf_model  # noqa: E402
from bench.generate import random_prompt  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--copy-check", action="store_true")
    parser.add_argument("--kernels", action="store_true", help="GPU time per kernel, eager steps")
    parser.add_argument("--weights", choices=["auto", "fp8"], default="auto")
    parser.add_argument("--kv-dtype", choices=["auto", "fp8"], default="auto")
    parser.add_argument(
        "--fp8-small-batch-kernel", action=argparse.BooleanOptionalAction, default=True
    )
    parser.add_argument("--fp8-w8a8-decode", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--fp8-one-row-fusion", action=argparse.BooleanOptionalAction, default=False
    )
    parser.add_argument(
        "--bf16-one-row-fusion", action=argparse.BooleanOptionalAction, default=False
    )
    parser.add_argument(
        "--pdl",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="programmatic dependent launch (EngineConfig.pdl)",
    )
    args = parser.parse_args()
    device = torch.device("cuda")
    if args.copy_check:
        copy_check()
    folder = ROOT / "var" / "bench-cache" / f"llama3-8b-random-{args.weights}"
    config_kwargs = dict(
        device="cuda",
        dtype="bfloat16",
        max_model_len=args.context + 2048,
        max_kv_cache_bytes=48 * 1024**3,
        max_num_seqs=max(args.batches),
        compile=args.compile,
        weights=args.weights,
        kv_dtype=args.kv_dtype,
        fp8_small_batch_kernel=args.fp8_small_batch_kernel,
        fp8_w8a8_decode=args.fp8_w8a8_decode,
        fp8_one_row_fusion=args.fp8_one_row_fusion,
        bf16_one_row_fusion=args.bf16_one_row_fusion,
        pdl=args.pdl,
    )
    if args.weights == "fp8":  # E4M3 weights built directly
        engine = er.fp8_engine("llama3-8b-random", folder, config_kwargs)
    else:
        model = random_hf_model("llama3-8b-random", device=device, dtype=torch.bfloat16)
        engine, _ = er.engine_from_hf([model], folder, config_kwargs)
    vocab = engine.model_args.vocab_size
    params = er.fixed_length(args.steps + 200)
    for batch in args.batches:
        for i in range(batch):
            engine.add_request(random_prompt(args.context, 77 + 1000 * batch + i, vocab), params)
        while any(not s.is_decoding for s in engine._main.scheduler.running) or (
            engine._main.scheduler.waiting
        ):
            engine.step()
        for _ in range(3):
            engine.step()  # capture this bucket's graph
        graphs = engine._main.runner.graphs
        key = min(k for k in graphs._graphs if k[0] >= batch)
        graph, _ = graphs._graphs[key]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.steps):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        gpu_ms = start.elapsed_time(end) / args.steps
        step_ms = _step_ms(engine, args.steps)
        print(
            f"| B={batch} | context {args.context} | graph replay {gpu_ms:.2f} ms | engine step "
            f"{step_ms:.2f} ms | exposed host {step_ms - gpu_ms:.2f} ms | "
            f"{batch / step_ms * 1e3:.0f} tokens/s |",
            flush=True,
        )
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        ) as trace:
            for _ in range(10):
                engine.step()
            torch.cuda.synchronize()
        print(trace.key_averages().table(sort_by="self_cpu_time_total", row_limit=20), flush=True)
        if args.kernels:  # the same steps without the graph: each kernel's GPU time
            runner = engine._main.runner
            saved, runner.graphs = runner.graphs, None
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as trace:
                for _ in range(10):
                    engine.step()
                torch.cuda.synchronize()
            runner.graphs = saved
            print(trace.key_averages().table(sort_by="self_cuda_time_total", row_limit=25))
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.steps):
            engine.step()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
        for request_id in list(engine._requests):
            engine.abort(request_id)
    return 0


def _step_ms(engine, num_steps: int) -> float:
    """Wall time of a step in the steady state: the engine runs one step ahead, so the GPU's
    work of the last step is waited for at the end."""
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(num_steps):
        engine.step()
    torch.cuda.synchronize()
    return (time.perf_counter() - started) / num_steps * 1e3


def copy_check() -> None:
    """How long the host waits to queue a small host-to-device copy behind 50 ms of GPU work,
    from pageable memory and from pinned memory."""
    device = torch.device("cuda")
    target = torch.empty(64, dtype=torch.long, device=device)
    sources = {
        "pageable": lambda: torch.arange(64),
        "pinned": lambda: torch.arange(64).pin_memory(),
    }
    for name, make in sources.items():
        source = make()
        torch.cuda.synchronize()
        torch.cuda._sleep(50_000_000)  # ~25-50 ms of one kernel
        started = time.perf_counter()
        target.copy_(source, non_blocking=True)
        queued = time.perf_counter() - started
        torch.cuda.synchronize()
        print(f"copy from {name} memory behind a busy stream: host {queued * 1e3:.3f} ms")


if __name__ == "__main__":
    sys.exit(main())
