"""Prefill speed and memory of our engine against transformers, same weights, same process.

Usage (from the repository root):
    .venv/bin/python bench/prefill.py                       # CPU: SmolLM2-135M GGUF, fp32, 8K,
                                                             # the engine plans its own chunk
    python3 bench/prefill.py --device cuda                   # Llama-3-8B shape, random, bf16,
                                                             # 32K and 128K tokens, chunk 8,192
    .venv/bin/python bench/prefill.py --model tiny-random --tokens 512 --chunk 128 --runs 1
    python3 bench/prefill.py --device cuda --weights fp8 --kv-dtype fp8 --tokens 131072 \
        --memory-cap-gib 24                                  # issue 23's A10G-sized memory check

--weights fp8 builds the random preset directly in FP8 (E4M3 projections, a scale per output row:
bench/_models.random_fp8_checkpoint), with no transformers run (it has no FP8 path to compare).
--kv-dtype fp8 keeps the KV cache in E4M3; with bf16 weights transformers runs beside it and the
logits are compared. --memory-cap-gib caps what torch may allocate in this process
(torch.cuda.set_per_process_memory_fraction): a run that needs more fails with out-of-memory
and is recorded as a failure, so a row within the cap shows that the prompt fits.

For each prompt length: transformers runs first (the DynamicCache chunk loop and one unchunked
forward, see bench/_hf_runs.py), then its weights are handed to a fresh engine whose KV cache is
sized to that prompt, and transformers' model is dropped, so each side's peak memory counts its
own weights only (bench/_engine_runs.py). Every figure is the median of --runs timed runs after
--warmup warm-ups. Results: bench/results/prefill_<label>.md and .json. Only token counts and
timings are printed (the prompt is random token ids).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from transformers import LlamaConfig  # noqa: E402

from bench import _engine_runs as er  # noqa: E402
from bench._flops import Shape, prefill_flops  # noqa: E402
from bench._hf_runs import prefill_chunked, prefill_unchunked  # noqa: E402
from bench._models import RANDOM_PRESETS, ModelSource, default_gguf_path  # noqa: E402
from bench._report import Row, compare_logits, hardware, write  # noqa: E402
from bench._timing import measure  # noqa: E402

HF_MODES = ("chunked", "unchunked")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    parser.add_argument("--tokens", type=int, nargs="+", help="prompt lengths")
    parser.add_argument(
        "--chunk",
        type=int,
        help="engine prefill chunk; 0: planned by the engine (default 8192 on CUDA, 0 on the CPU)",
    )
    parser.add_argument(
        "--hf-chunk", type=int, help="transformers' chunk (default --chunk or 2048)"
    )
    parser.add_argument(
        "--model",
        help=f"a .gguf file, a checkpoint folder, or a random preset ({', '.join(RANDOM_PRESETS)}); "
        "default: the SmolLM2 GGUF on the CPU, llama3-8b-random on CUDA",
    )
    parser.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default="auto")
    parser.add_argument("--runs", type=int, default=2, help="timed runs (median)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument(
        "--label", help="result file name: prefill_<label>.md (default cpu/h200...)"
    )
    parser.add_argument(
        "--hf-modes",
        default="chunked,unchunked",
        help="transformers runs: chunked,unchunked or none",
    )
    parser.add_argument(
        "--backend",
        default="auto",
        help="engine attention backend(s), comma-separated; '+compile' sets EngineConfig.compile "
        "for that run, '+serial' runs flash-attn 4's split calls on one stream, '+libtile' "
        "leaves its prefix call's tile to flash-attn "
        "(e.g. flex,cudnn,flash_attn+compile,flash_attn+compile+serial)",
    )
    parser.add_argument(
        "--unchunked-max-tokens",
        type=int,
        default=None,
        help="run transformers' unchunked forward only up to this many tokens (default: always)",
    )
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--compile", action="store_true", help="EngineConfig.compile")
    parser.add_argument("--weights", choices=["bf16", "fp8"], default="bf16")
    parser.add_argument("--kv-dtype", choices=["auto", "fp8"], default="auto")
    parser.add_argument(
        "--fp8-attention",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="with --kv-dtype fp8 and the cudnn backend: long chunks attend in FP8 through cuDNN "
        "(EngineConfig.fp8_attention); the default, as the engine's, attends in bf16",
    )
    parser.add_argument(
        "--memory-cap-gib", type=float, help="CUDA: what torch may allocate in this process"
    )
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "var" / "models")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "var" / "bench_prefill")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    is_cuda = args.device.startswith("cuda")
    args.model = args.model or ("llama3-8b-random" if is_cuda else str(default_gguf_path()))
    args.tokens = args.tokens or ([32768, 131072] if is_cuda else [8192])
    # CPU: the engine plans its own chunk from free memory (what a user gets); transformers'
    # chunk loop uses BASELINES.md's 2,048.
    if args.chunk is None:
        args.chunk = 8192 if is_cuda else 0
    args.hf_chunk = args.hf_chunk or args.chunk or 2048
    if args.dtype == "auto":
        args.dtype = "bfloat16" if is_cuda else "float32"
    args.hf_modes = [m for m in args.hf_modes.split(",") if m in HF_MODES]
    if args.weights == "fp8":
        if args.model not in RANDOM_PRESETS or not is_cuda:
            parser.error("--weights fp8 builds a random preset's shape on a CUDA device")
        args.hf_modes = []  # transformers has no FP8 path to run beside it
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    source = ModelSource(args, device, dtype)
    meta = hardware(device)
    label = args.label or (_gpu_label(meta) if device.type == "cuda" else "cpu")
    if args.memory_cap_gib:
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(
            min(1.0, args.memory_cap_gib * 2**30 / total),
            device.index if device.index is not None else torch.cuda.current_device(),
        )
    meta.update(
        weights=args.weights,
        kv_dtype=args.kv_dtype,
        fp8_attention=args.fp8_attention,
        memory_cap_gib=args.memory_cap_gib,
        model=source.name,
        dtype=args.dtype,
        chunk=args.chunk or "planned by the engine",
        transformers_chunk=args.hf_chunk,
        runs=args.runs,
        warmup=args.warmup,
        engine_backend_requested=args.backend,
        engine_compile_all_runs=args.compile,  # --compile; '+compile' sets it per run
        notes=[
            "transformers: SDPA attention; chunked = DynamicCache loop with logits_to_keep=1, "
            "unchunked = one forward, use_cache=False, logits_to_keep=1.",
            "engine: prefix cache off, KV cache preallocated for exactly the prompt (rounded "
            "to a block) and counted in its peak; rebuilt for every prompt length.",
            "peak: "
            + (
                "torch.cuda.max_memory_allocated, reset before each run, weights "
                "included; only one model's weights are allocated at a time."
                if device.type == "cuda"
                else "the process's peak RSS (VmHWM reset before each run), one model loaded at a time."
            ),
        ],
    )
    rows: list[Row] = []
    print(
        f"prefill benchmark: {source.name} {args.dtype} on {device}, tokens {args.tokens}, "
        f"chunk {args.chunk}",
        flush=True,
    )
    for num_tokens in args.tokens:
        done = list(rows)
        rows.extend(
            _one_length(  # results are rewritten after every row: a killed run keeps them
                args,
                source,
                device,
                dtype,
                num_tokens,
                meta,
                lambda current, done=done: write(args.out, label, meta, [*done, *current]),
            )
        )
        er.free_memory()
        if device.type == "cuda":  # nothing of this length's models may stay allocated
            print(
                f"  allocated after freeing: {torch.cuda.memory_allocated(device) / 2**30:.2f} GiB"
            )
        md_path, json_path = write(args.out, label, meta, rows)  # partial results survive a crash
    meta["load_average_at_end"] = list(__import__("os").getloadavg())
    md_path, json_path = write(args.out, label, meta, rows)
    print(md_path.read_text())
    print(f"wrote {md_path} and {json_path}")
    return 0


def _one_length(
    args: argparse.Namespace,
    source: ModelSource,
    device: torch.device,
    dtype: torch.dtype,
    num_tokens: int,
    meta: dict,
    on_row,
) -> list[Row]:
    generator = torch.Generator().manual_seed(args.seed + num_tokens)
    if args.weights == "fp8":  # built by the engine's run below, never in bf16
        hf = []
        shape = Shape.from_hf_config(LlamaConfig(**RANDOM_PRESETS[args.model]))
    else:
        hf = [source.hf_model()]
        shape = Shape.from_hf_config(hf[0].config)
    flops = prefill_flops(shape, num_tokens, num_logits=1)
    token_ids = torch.randint(3, shape.vocab_size, (num_tokens,), generator=generator)
    input_ids = token_ids[None].to(device)  # [1, S]
    rows, logits = [], {}

    def add_row(system: str, chunk: int | None, m, detail: dict) -> Row:
        row = Row(
            system=system,
            num_tokens=num_tokens,
            chunk=chunk,
            seconds=m.seconds,
            warmup_seconds=m.warmup_seconds,
            median_seconds=m.median_seconds,
            tokens_per_second=num_tokens / m.median_seconds,
            tflops=flops / m.median_seconds / 1e12,
            peak_gib=m.peak_gib,
            detail=detail,
        )
        print(
            f"{system} {num_tokens}: {row.median_seconds:.3f} s, {row.tokens_per_second:,.0f} "
            f"tokens/s, {row.tflops:.1f} TFLOP/s, peak {row.peak_gib:.2f} GiB",
            flush=True,
        )
        rows.append(row)
        on_row(rows)
        return row

    def keep(name: str):
        return lambda out: logits.__setitem__(name, out.detach().float().cpu())

    for mode in _modes_for(args, num_tokens):
        chunk = args.hf_chunk if mode == "chunked" else None
        if mode == "chunked":
            run = lambda: prefill_chunked(hf[0], input_ids, args.hf_chunk)  # noqa: E731
        else:
            run = lambda: prefill_unchunked(hf[0], input_ids)  # noqa: E731
        m = measure(
            run,
            device=device,
            num_runs=args.runs,
            num_warmup=args.warmup,
            on_result=keep(mode),
            label=f"transformers {mode} {num_tokens}",
        )
        add_row(f"transformers {mode}", chunk, m, {})
    if mode_skipped := [m for m in args.hf_modes if m not in _modes_for(args, num_tokens)]:
        print(f"  transformers {', '.join(mode_skipped)} skipped at {num_tokens} tokens")
    token_list = token_ids.tolist()
    for spec in args.backend.split(","):
        backend, *options = spec.split("+")
        name = f"engine {spec}"
        # "serial": flash-attn 4's two calls of a split chunk on one stream (the A/B of overlap).
        _set_flash_attn_4_options(overlap="serial" not in options, lib_tile="libtile" in options)
        try:
            engine, how = _build_engine(
                args, source, hf, shape, device, dtype, num_tokens, backend, "compile" in options
            )
            if backend == "auto":
                name = f"engine {spec} ({engine.attention_backend})"
            m = measure(
                lambda engine=engine: er.run_engine(engine, token_list, args.chunk or None),
                device=device,
                num_runs=args.runs,
                num_warmup=args.warmup,
                on_result=keep("engine"),
                label=f"{name} {num_tokens}",
            )
        except Exception as exc:  # one backend failing must not lose the other figures
            print(f"{name} {num_tokens} FAILED: {exc!r}"[:2000], flush=True)
            meta.setdefault("failures", []).append(f"{name} at {num_tokens} tokens: {exc!r}"[:500])
            engine = m = None
            hf.clear()
            er.free_memory()
            continue
        detail = {
            "backend": engine.attention_backend,
            "compile": "compile" in options,
            "options": options,
            "loaded": how,
        }
        detail.update(
            compare_logits(
                logits, args.dtype, meta.setdefault("transformers_noise", {}), num_tokens
            )
        )
        add_row(name, args.chunk or None, m, detail)
        del engine, m
        er.free_memory()
    return rows


def _set_flash_attn_4_options(*, overlap: bool, lib_tile: bool) -> None:
    from engine.attention.flash import PREFIX_TILE, FlashAttn4Backend

    FlashAttn4Backend.overlap_own = overlap
    FlashAttn4Backend.prefix_tile = None if lib_tile else PREFIX_TILE


def _modes_for(args: argparse.Namespace, num_tokens: int) -> list[str]:
    """transformers' unchunked forward only up to --unchunked-max-tokens (it is a reference
    point for the kernels' speed; the targets compare with the chunk loop)."""
    return [
        m
        for m in args.hf_modes
        if m != "unchunked"
        or args.unchunked_max_tokens is None
        or num_tokens <= args.unchunked_max_tokens
    ]


def _build_engine(args, source, hf: list, shape, device, dtype, num_tokens, backend, compile):
    kwargs = er.engine_config_kwargs(
        shape=shape,
        device=device,
        dtype=dtype,
        num_tokens=num_tokens,
        chunk=args.chunk,
        backend=backend,
        block_size=args.block_size,
        compile=compile or args.compile,
        cache_dir=args.cache_dir,
        kv_dtype=args.kv_dtype,
    )
    kwargs["weights"] = "auto" if args.weights == "bf16" else args.weights
    kwargs["fp8_attention"] = args.fp8_attention
    if args.weights == "fp8":
        folder = args.work_dir / f"{source.name}-fp8"
        return er.fp8_engine(args.model, folder, kwargs), "random FP8, built on the device"
    if source.is_preset:
        if not hf:  # an earlier engine took the weights: the same seed builds them again
            hf.append(source.hf_model())
        return er.engine_from_hf(hf, args.work_dir / source.name, kwargs)
    hf.clear()
    er.free_memory()
    from engine import EngineConfig, LLMEngine

    return LLMEngine(EngineConfig(model_path=Path(args.model), **kwargs)), "from files"


def _gpu_label(meta: dict) -> str:
    name = meta.get("gpu_name", "gpu").lower()
    for known in ("h200", "h100", "a100", "l40s", "l4", "a10"):
        if known in name:
            return known
    return "gpu"


if __name__ == "__main__":
    raise SystemExit(main())
