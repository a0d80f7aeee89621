"""Writing speed of the batching engine against transformers' generate, same weights, same process.

Usage (from the repository root):
    python3 bench/generate.py --device cuda      # H200: Llama-3-8B shape, random weights, bf16
    .venv/bin/python bench/generate.py           # CPU: the default model (SmolLM2 GGUF), fp32

CUDA parts (--parts to choose):
  hf          transformers generate, 4K prompt, 256 new tokens, batch 1 / 16 / 64: a step is
              (time for 256 tokens - time for 1) / 255, as ../shared/BASELINES.md measured it
  single      the engine, one stream, the same prompt and length: decode tokens/s after the
              first token, and the time to it
  concurrent  64 requests of 4K prompts at once, 256 new each: output tokens/s while all decode
              (the last request's first token to the first request's last), after all started
              (the last first token to the end, the shrinking tail included), and over the
              whole run
  hier        a hierarchical summary: 16 sections of 8K tokens with 256 new tokens each, then a
              combine prompt of their outputs (16 x 256 tokens) with 256 new: all sections
              together (generate_many) against one after another, same engine
  question    32 requests of 8K prompts decoding; a question of 1K new tokens after a 32K
              document already in the prefix cache, at high priority: time to its first token
              (median of 10) and its decode speed against the same question alone
  prefill     32K and 128K prompts through prefill_logits (as bench/prefill.py times them)
  latency     1, 8, 16 and 32 concurrent requests (4K prompts, 256 new tokens): P50/P99 time to the
              first token and time per output token over the requests
  long        one 32K prompt, 256 new tokens: time to the first token and decode speed
Shapes (--shape): llama3-8b-random (default) or llama3-70b-random. --weights fp8 runs the
projections in FP8 (the 8B quantized at load from transformers' bf16 weights; the 70B built as an
FP8 checkpoint directly, 72 GB, since in bf16 it does not fit: no transformers part for it);
--kv-dtype fp8 keeps the KV cache in E4M3.
CPU parts: hf (transformers generate, batch 1 and 8, 1,000-token prompt, 128 new tokens, on the
default model's weights as the engine converted them), single (the engine, one stream, the same
lengths) and sections (8 prompts of about 1,000 tokens, 128 new tokens each, batched against one
after another). Every part writes its full length (bench._engine_runs.fixed_length).

Every GPU time is taken after torch.cuda.synchronize (the engine synchronizes at the end of
every step; generate's outputs are read back). Results: bench/results/generate_<label>.json, the
label h200 or cpu by default, with .compile appended under --compile (bench/results/README.md);
the .md beside it is written by hand from the JSON files.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench import _engine_runs as er  # noqa: E402
from bench._models import (  # noqa: E402
    default_gguf_path,
    random_hf_model,
    write_config_and_tokenizer,
)
from bench._report import hardware  # noqa: E402
from engine import EngineConfig, LLMEngine, SamplingParams  # noqa: E402
from engine.device_guard import is_programmatic_launch_on  # noqa: E402

GPU_PARTS = ("hf", "single", "concurrent", "hier", "question", "prefill")
EXTRA_GPU_PARTS = ("latency", "long")
CPU_PARTS = ("hf", "single", "sections")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--parts", nargs="+", help="which parts to run (see the docstring)")
    parser.add_argument("--backend", default="auto", help="the engine's attention backend")
    parser.add_argument("--compile", action="store_true", help="torch.compile the layers")
    parser.add_argument("--no-graphs", action="store_true", help="decode without CUDA graphs")
    parser.add_argument(
        "--label", help="results file: generate_<label>.json (default h200 or cpu, + .compile)"
    )
    parser.add_argument("--shape", default="llama3-8b-random", help="a bench._models preset")
    parser.add_argument("--weights", choices=["auto", "fp8"], default="auto")
    parser.add_argument("--kv-dtype", choices=["auto", "fp8"], default="auto")
    parser.add_argument(
        "--fp8-small-batch-kernel",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="FP8 decode products through the Triton FP8-weight kernels (EngineConfig)",
    )
    parser.add_argument(
        "--fp8-w8a8-decode",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="those kernels from 2 rows with FP8 activations (EngineConfig.fp8_w8a8_decode)",
    )
    parser.add_argument(
        "--fp8-one-row-fusion",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="one row through GEMVs that do the norms, SiLU and residual adds "
        "(EngineConfig.fp8_one_row_fusion)",
    )
    parser.add_argument(
        "--bf16-one-row-fusion",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="the same GEMVs for bf16 projections (EngineConfig.bf16_one_row_fusion)",
    )
    parser.add_argument(
        "--pdl",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="programmatic dependent launch for decode's kernels (EngineConfig.pdl; Hopper+)",
    )
    parser.add_argument("--kv-gib", type=float, default=72.0, help="KV cache bytes, GiB")
    parser.add_argument("--max-num-seqs", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=4096)
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "var" / "bench-cache")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--wheels", default="none", help="which carried wheel set (for the report)")
    parser.add_argument("--profile", action="store_true", help="cProfile each part (host time)")
    return parser.parse_args(argv)


def default_label(device: torch.device, compiled: bool) -> str:
    """The current result's name in bench/results: a compiled run beside the eager one."""
    label = "h200" if device.type == "cuda" else "cpu"
    return f"{label}.compile" if compiled else label


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def random_prompt(n: int, seed: int, vocab: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (n,), generator=g).tolist()


# ---- transformers --------------------------------------------------------------------------


def hf_generate(model, batch: int, prompt_tokens: int, new_tokens: int, device) -> dict:
    vocab = model.config.vocab_size
    ids = torch.tensor(
        [random_prompt(prompt_tokens, 1000 + b, vocab) for b in range(batch)], device=device
    )

    def run(n: int) -> float:
        sync(device)
        started = time.perf_counter()
        out = model.generate(
            ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0
        )
        out.cpu()
        return time.perf_counter() - started

    run(2)  # warm-up
    first = run(1)
    full = run(new_tokens)
    step = (full - first) / (new_tokens - 1)
    return {
        "batch": batch,
        "ms_per_step": step * 1e3,
        "output_tokens_per_s": batch / step,
        "time_to_first_token_s": first,
    }


# ---- the engine ----------------------------------------------------------------------------


class Timeline:
    """Token arrival times per request (engine callbacks run inside step(), after the sync)."""

    def __init__(self) -> None:
        self.times: dict[int, list[float]] = {}

    def callback(self, index: int):
        self.times[index] = []
        return lambda _token, _delta: self.times[index].append(time.perf_counter())


def decode_rate(times: list[float]) -> float:
    return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0


def engine_single(engine: LLMEngine, prompt_tokens: int, new_tokens: int, runs: int = 3) -> dict:
    vocab = engine.model_args.vocab_size
    params = er.fixed_length(new_tokens)
    # Warm-up (graph capture), at the timed length unless that is long: a 32K prompt's warm-up
    # would time its prefill twice.
    engine.generate(random_prompt(min(prompt_tokens, 4096), 7, vocab), params)
    results = []
    for seed in (11, 12, 13)[:runs]:
        timeline = Timeline()
        started = time.perf_counter()
        result = engine.generate(
            random_prompt(prompt_tokens, seed, vocab), params, on_token=timeline.callback(0)
        )
        times = timeline.times[0]
        results.append(
            {
                "decode_tokens_per_s": decode_rate(times),
                "time_to_first_token_s": times[0] - started,
                "total_s": times[-1] - started,
                "tokens": len(result.token_ids),
            }
        )
    best = statistics.median(r["decode_tokens_per_s"] for r in results)
    return {"prompt_tokens": prompt_tokens, "runs": results, "decode_tokens_per_s": best}


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), linear between the nearest ranks."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def engine_latency(
    engine: LLMEngine, concurrency: tuple[int, ...], prompt_tokens: int, new_tokens: int
) -> list[dict]:
    """At each concurrency, that many requests added at once: time to each one's first token and
    its time per output token after it (P50 and P99 over the requests and their tokens)."""
    vocab = engine.model_args.vocab_size
    params = er.fixed_length(new_tokens)
    engine.generate_many([random_prompt(prompt_tokens, 900, vocab)], er.fixed_length(4))
    rows = []
    for n in concurrency:
        timeline = Timeline()
        started = time.perf_counter()
        for i in range(n):
            engine.add_request(
                random_prompt(prompt_tokens, 2000 + 100 * n + i, vocab),
                params,
                on_token=timeline.callback(i),
            )
        while engine.has_unfinished_requests():
            engine.step()
        ended = time.perf_counter()
        times = list(timeline.times.values())
        first = [t[0] - started for t in times]
        gaps = [b - a for t in times for a, b in itertools.pairwise(t)]
        per_request = [(t[-1] - t[0]) / (len(t) - 1) for t in times if len(t) > 1]
        rows.append(
            {
                "concurrency": n,
                "prompt_tokens": prompt_tokens,
                "new_tokens": new_tokens,
                "ttft_p50_s": percentile(first, 50),
                "ttft_p99_s": percentile(first, 99),
                "tpot_p50_ms": percentile(per_request, 50) * 1e3,
                "tpot_p99_ms": percentile(per_request, 99) * 1e3,
                "inter_token_p99_ms": percentile(gaps, 99) * 1e3,
                "output_tokens_per_s": sum(len(t) for t in times) / (ended - started),
            }
        )
        print("latency:", json.dumps(rows[-1]), flush=True)
    return rows


def engine_concurrent(engine: LLMEngine, n: int, prompt_tokens: int, new_tokens: int) -> dict:
    vocab = engine.model_args.vocab_size
    params = er.fixed_length(new_tokens)
    prompts = [random_prompt(prompt_tokens, 500 + i, vocab) for i in range(n)]
    engine.generate_many(prompts[:8], er.fixed_length(4))
    timeline = Timeline()
    started = time.perf_counter()
    ids = {
        engine.add_request(p, params, on_token=timeline.callback(i)): i
        for i, p in enumerate(prompts)
    }
    steps_before = engine.num_steps
    while engine.has_unfinished_requests():
        engine.step()
    ended = time.perf_counter()
    times = list(timeline.times.values())
    all_first = max(t[0] for t in times)
    first_done = min(t[-1] for t in times)
    tokens_after = sum(sum(1 for x in t if x > all_first) for t in times)
    # While every request decodes: after the last one's first token, up to the first one's last.
    # The prompts are prefilled over ~32 steps of 8K tokens, so the first requests finish ~32
    # steps before the last: after first_done the batch shrinks, and "after all started"
    # counts that tail too.
    tokens_all = sum(sum(1 for x in t if all_first < x <= first_done) for t in times)
    total_tokens = sum(len(t) for t in times)
    return {
        "requests": len(ids),
        "steps": engine.num_steps - steps_before,
        "all_decoding_output_tokens_per_s": (
            tokens_all / (first_done - all_first) if first_done > all_first else 0.0
        ),
        "all_decoding_seconds": max(0.0, first_done - all_first),
        "decode_output_tokens_per_s": tokens_after / (ended - all_first),
        "overall_output_tokens_per_s": total_tokens / (ended - started),
        "time_to_last_first_token_s": all_first - started,
        "total_s": ended - started,
    }


def engine_hierarchical(engine: LLMEngine, new_tokens: int) -> dict:
    vocab = engine.model_args.vocab_size
    params = er.fixed_length(new_tokens)
    sections = [random_prompt(8192, 900 + i, vocab) for i in range(16)]

    def combine(outputs: list[list[int]]) -> float:
        prompt = [t for out in outputs for t in out]
        started = time.perf_counter()
        engine.generate(prompt, params)
        return time.perf_counter() - started

    engine.generate_many(sections[:2], er.fixed_length(2))
    started = time.perf_counter()
    outs = [engine.generate(s, params).token_ids for s in sections]
    sequential_sections = time.perf_counter() - started
    sequential = sequential_sections + combine(outs)
    # Fresh section prompts: nothing from the sequential run is in the prefix cache.
    sections = [random_prompt(8192, 1900 + i, vocab) for i in range(16)]
    started = time.perf_counter()
    outs = [r.token_ids for r in engine.generate_many(sections, params)]
    batched_sections = time.perf_counter() - started
    batched = batched_sections + combine(outs)
    return {
        "sequential_s": sequential,
        "sequential_sections_s": sequential_sections,
        "batched_s": batched,
        "batched_sections_s": batched_sections,
        "speedup": sequential / batched,
    }


def engine_question(engine: LLMEngine, new_tokens: int) -> dict:
    vocab = engine.model_args.vocab_size
    document = random_prompt(32768, 4242, vocab)
    engine.generate(document, SamplingParams(max_new_tokens=1))  # the document in the cache
    question_params = er.fixed_length(64)

    def question(seed: int) -> list[int]:
        return [*document, *random_prompt(1024, seed, vocab)]

    alone = []
    for seed in (1, 2, 3):
        timeline = Timeline()
        engine.generate(question(seed), question_params, on_token=timeline.callback(0))
        alone.append(decode_rate(timeline.times[0]))
    writers = [random_prompt(8192, 3000 + i, vocab) for i in range(32)]
    long_params = er.fixed_length(4096)
    written: list[float] = []  # the writers' token times, all of them
    for prompt in writers:
        engine.add_request(
            prompt, long_params, on_token=lambda _t, _d: written.append(time.perf_counter())
        )
    while engine._main.scheduler.waiting or any(
        not s.is_decoding for s in engine._main.scheduler.running
    ):
        engine.step()
    mark = len(written)
    for _ in range(32):
        engine.step()
    writers_alone = (
        (len(written) - mark) / (written[-1] - written[mark]) if len(written) > mark + 1 else 0.0
    )
    ttfts, rates, writers_during = [], [], []
    for seed in range(10, 20):
        timeline = Timeline()
        asked = time.perf_counter()
        request_id = engine.add_request(
            question(seed), question_params, priority=10, on_token=timeline.callback(0)
        )
        done = False
        while not done:
            done = any(r.request_id == request_id for r in engine.step())
        times = timeline.times[0]
        ttfts.append(times[0] - asked)
        rates.append(decode_rate(times))
        during = [t for t in written if times[0] <= t <= times[-1]]
        writers_during.append(len(during) / (times[-1] - times[0]) if len(times) > 1 else 0.0)
    running = list(engine._requests)
    for request_id in running:
        engine.abort(request_id)
    return {
        "time_to_first_token_s_median": statistics.median(ttfts),
        "time_to_first_token_s": ttfts,
        "decode_tokens_per_s_median": statistics.median(rates),
        "alone_decode_tokens_per_s": statistics.median(alone),
        "speed_share": statistics.median(rates) / statistics.median(alone),
        # The 32 writers' output tokens/s: before the questions, and while a question decodes
        # (engine/scheduler.py runs them in one step of every lower_priority_every then).
        "writers_tokens_per_s_before": writers_alone,
        "writers_tokens_per_s_during_question_median": statistics.median(writers_during),
        "lower_priority_every": engine.config.lower_priority_every,
    }


def engine_prefill(engine: LLMEngine, lengths: list[int]) -> list[dict]:
    vocab = engine.model_args.vocab_size
    rows = []
    for n in lengths:
        prompt = random_prompt(n, n, vocab)
        engine.prefill_logits([*prompt[:1024], 5])  # warm-up
        times = []
        for run in range(2):
            prompt = random_prompt(n, n + run + 1, vocab)
            sync(engine.device)
            started = time.perf_counter()
            engine.prefill_logits(prompt)
            sync(engine.device)
            times.append(time.perf_counter() - started)
        rows.append({"tokens": n, "seconds": statistics.median(times), "runs": times})
    return rows


def engine_cpu_sections(engine: LLMEngine) -> dict:
    text = (
        "The Supplier shall deliver the Products to the Customer within thirty days of each "
        "order. Either party may terminate this Agreement on ninety days' written notice. "
    )
    prompts = []
    for i in range(8):
        body = f"Section {i + 1}. " + text * 30
        messages = [{"role": "user", "content": f"Summarize this section:\n{body}"}]
        prompts.append(engine.apply_chat_template(messages)[:1000])
    params = er.fixed_length(128)
    engine.generate(prompts[0][:200], SamplingParams(max_new_tokens=4))
    started = time.perf_counter()
    for prompt in prompts:
        engine.generate(prompt, params)
    sequential = time.perf_counter() - started
    # Different prompts the second time: no prefix-cache advantage for the batch.
    prompts = [[*p[:-1], 13] for p in prompts]
    started = time.perf_counter()
    engine.generate_many(prompts, params)
    batched = time.perf_counter() - started
    return {"sequential_s": sequential, "batched_s": batched, "speedup": sequential / batched}


# ---- main ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(
        args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    )
    parts = args.parts or (GPU_PARTS if device.type == "cuda" else CPU_PARTS)
    results: dict = {"hardware": hardware(device), "args": vars(args) | {"cache_dir": None}}
    results["args"]["out_dir"] = None
    results["wheels"] = args.wheels
    label = args.label or default_label(device, args.compile)
    out = args.out_dir / f"generate_{label}.json"
    if device.type == "cuda":
        folder = args.cache_dir / args.shape
        config_kwargs = dict(
            device=str(device),
            dtype="bfloat16",
            attention_backend=args.backend,
            max_model_len=131072 + 1024,
            max_kv_cache_bytes=int(args.kv_gib * 1024**3),
            max_num_seqs=args.max_num_seqs,
            compile=args.compile,
            cuda_graphs=not args.no_graphs,
            weights=args.weights,
            kv_dtype=args.kv_dtype,
            fp8_small_batch_kernel=args.fp8_small_batch_kernel,
            fp8_w8a8_decode=args.fp8_w8a8_decode,
            fp8_one_row_fusion=args.fp8_one_row_fusion,
            bf16_one_row_fusion=args.bf16_one_row_fusion,
            pdl=args.pdl,
        )
        if args.weights == "fp8" and "hf" not in parts:
            # FP8 weights built directly (the 70B does not fit in bf16); no transformers model.
            started = time.perf_counter()
            engine = er.fp8_engine(args.shape, folder, config_kwargs)
            results["load_s"] = time.perf_counter() - started
        else:
            model = random_hf_model(args.shape, device=device, dtype=torch.bfloat16)
            if "hf" in parts:
                results["hf"] = [
                    hf_generate(model, b, args.prompt_tokens, args.new_tokens, device)
                    for b in (1, 16, 64)
                ]
                print("transformers:", json.dumps(results["hf"]), flush=True)
            write_config_and_tokenizer(model, folder)
            holder = [model]
            engine, _ = er.engine_from_hf(holder, folder, config_kwargs)
        results["memory"] = {
            "weights_and_kv_gib": torch.cuda.memory_allocated(device) / 1024**3,
            "peak_at_load_gib": torch.cuda.max_memory_allocated(device) / 1024**3,
        }
    else:
        from engine.gguf_convert import convert_gguf

        folder = convert_gguf(default_gguf_path(), args.cache_dir)
        if "hf" in parts:
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
            results["hf"] = [hf_generate(model, b, 1000, 128, device) for b in (1, 8)]
            print("transformers:", json.dumps(results["hf"]), flush=True)
            del model
        engine = LLMEngine(
            EngineConfig(model_path=folder, device="cpu", max_num_seqs=16, min_chunk_size=32)
        )
    results["engine"] = {
        "attention_backend": engine.attention_backend,
        "decode_attention": engine._main.runner.decode_attention.name,
        "cuda_graphs": engine._main.runner.graphs is not None,
        "step_budget": engine._main.scheduler.budget,
        "kv_blocks": engine._main.blocks.num_blocks,
        "weights": args.weights,
        "kv_dtype": args.kv_dtype,
        "fp8_small_batch_kernel": args.fp8_small_batch_kernel,
        "fp8_w8a8_decode": args.fp8_w8a8_decode,
        "fp8_one_row_fusion": args.fp8_one_row_fusion,
        "bf16_one_row_fusion": args.bf16_one_row_fusion,
        "pdl": is_programmatic_launch_on(),
    }
    print("engine:", json.dumps(results["engine"]), flush=True)
    runners = {
        "single": lambda: engine_single(engine, args.prompt_tokens, args.new_tokens),
        "concurrent": lambda: engine_concurrent(engine, 64, args.prompt_tokens, args.new_tokens),
        "hier": lambda: engine_hierarchical(engine, args.new_tokens),
        "question": lambda: engine_question(engine, args.new_tokens),
        "prefill": lambda: engine_prefill(engine, [32768, 131072]),
        "latency": lambda: engine_latency(
            engine, (1, 8, 16, 32), args.prompt_tokens, args.new_tokens
        ),
        "long": lambda: engine_single(engine, 32768, args.new_tokens, runs=1),
        "sections": lambda: engine_cpu_sections(engine),
    }
    if device.type == "cpu":
        runners["single"] = lambda: engine_single(engine, 1000, 128)
    for part in parts:
        if part in runners:
            try:
                if args.profile:
                    import cProfile
                    import pstats

                    profiler = cProfile.Profile()
                    results[part] = profiler.runcall(runners[part])
                    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
                else:
                    results[part] = runners[part]()
            except Exception as exc:  # report it, run the other parts
                import traceback

                traceback.print_exc()
                results[part] = {"error": repr(exc)}
            print(f"{part}:", json.dumps(results[part]), flush=True)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str))
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
