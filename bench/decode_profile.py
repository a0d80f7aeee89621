"""Where a decode step's time goes: the GPU's replay of the step's CUDA graph alone, against
whole engine steps (host scheduling, input copies, sampling, text), with a host profile.

    python3 bench/decode_profile.py --batches 1 64 --context 4096

Llama-3-8B shape, random weights, bf16, cuDNN prefill, the paged decode kernel. GPU times use
CUDA events around back-to-back replays; step times are wall clock around engine.step(), which
ends synchronized. Prints a table and the host profile of the B=max steps.
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
from bench._models import random_hf_model, write_config_and_tokenizer  # noqa: E402
from bench.generate import random_prompt  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()
    device = torch.device("cuda")
    model = random_hf_model("llama3-8b-random", device=device, dtype=torch.bfloat16)
    folder = ROOT / "var" / "bench-cache" / "llama3-8b-random"
    write_config_and_tokenizer(model, folder)
    engine, _ = er.engine_from_hf(
        [model],
        folder,
        dict(
            device="cuda",
            dtype="bfloat16",
            max_model_len=args.context + 2048,
            max_kv_cache_bytes=48 * 1024**3,
            max_num_seqs=max(args.batches),
            compile=args.compile,
        ),
    )
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
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        for _ in range(args.steps):
            engine.step()
        profiler.disable()
        step_ms = (time.perf_counter() - started) / args.steps * 1e3
        print(
            f"| B={batch} | context {args.context} | graph replay {gpu_ms:.2f} ms | "
            f"engine step {step_ms:.2f} ms | host {step_ms - gpu_ms:.2f} ms | "
            f"{batch / step_ms * 1e3:.0f} tokens/s |",
            flush=True,
        )
        pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
        for request_id in list(engine._requests):
            engine.abort(request_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
