"""Correctness of the engine's device paths: its logits against transformers' on the same weights.

Usage (repository root):
    python3 bench/gpu_check.py                                   # CUDA, small-random, bf16
    python3 bench/gpu_check.py --model llama3-8b-random --tokens 8192 --chunks 2048 --backends flex
    .venv/bin/python bench/gpu_check.py --device cpu             # CPU smoke run: fp32 vs fp64

The reference is transformers in higher precision on the same weights (fp32 with TF32 off on
CUDA; fp64 on the CPU). Transformers in the tested dtype is measured against that reference too,
and that figure sets the tolerance:

    rel_l2(engine) <= 1.5 * rel_l2(transformers, same dtype) + FLOOR[dtype]

with rel_l2(x) = ||x - ref|| / ||ref|| over the logits of every computed position, and FLOOR
1e-3 in bf16, 1e-6 in fp32. In words: the engine must be about as close to the exact function
as transformers itself is in that precision. Variants: each attention backend and chunk size
(including one that is not a multiple of the 128-token mask block), a prompt whose first half
comes from the prefix cache, and greedy decoding (each generated token must be the reference's
argmax or within the transformers dtype's largest logit error of it, teacher-forced).
Exit status 1 if any variant fails. Results: bench/results/gpu_check_<label>.md/.json (label h200,
or the device, by default).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench._engine_runs import (  # noqa: E402
    DTYPE_NAMES,
    engine_config_kwargs,
    free_memory,
    make_engine,
)
from bench._flops import Shape  # noqa: E402
from bench._models import random_hf_model  # noqa: E402
from bench._report import hardware  # noqa: E402
from engine import SamplingParams  # noqa: E402

FLOOR = {torch.bfloat16: 1e-3, torch.float16: 1e-3, torch.float32: 1e-6}
TOLERANCE_FACTOR = 1.5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--model", help="random preset (default small-random; tiny-random on CPU)")
    parser.add_argument("--tokens", type=int, default=None, help="prompt length")
    parser.add_argument("--chunks", default=None, help="comma-separated chunk sizes")
    parser.add_argument("--backends", default=None, help="comma-separated engine backends")
    parser.add_argument("--decode-tokens", type=int, default=8)
    parser.add_argument("--compile", action="store_true", help="EngineConfig.compile (CUDA)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--label", default=None)
    parser.add_argument("--work-dir", type=Path, default=ROOT / "var" / "gpu_check")
    args = parser.parse_args(argv)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    is_cuda = args.device.startswith("cuda")
    args.model = args.model or ("small-random" if is_cuda else "tiny-random")
    args.tokens = args.tokens or (4096 if is_cuda else 640)
    args.chunks = [
        int(c) for c in (args.chunks or ("1024,1000,4096" if is_cuda else "256,200")).split(",")
    ]
    args.backends = (args.backends or ("flex,sdpa" if is_cuda else "sdpa,flex")).split(",")
    return args


@torch.inference_mode()
def hf_all_logits(model: torch.nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """Logits of every position [S, V] in fp32 (fp64 for an fp64 model); input_ids [1, S]."""
    logits = model(input_ids=input_ids, use_cache=False).logits[0]
    return logits if logits.dtype == torch.float64 else logits.float()


def rel_l2(x: torch.Tensor, ref: torch.Tensor) -> float:
    return float((x.to(ref.dtype) - ref).norm() / ref.norm())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    is_cuda = device.type == "cuda"
    dtype, ref_dtype = (
        (torch.bfloat16, torch.float32) if is_cuda else (torch.float32, torch.float64)
    )
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32
    torch.backends.cudnn.allow_tf32 = False
    generator = torch.Generator().manual_seed(1234)
    model = random_hf_model(args.model, device=device, dtype=dtype, seed=0)
    shape = Shape.from_hf_config(model.config)
    token_ids = torch.randint(3, shape.vocab_size, (args.tokens,), generator=generator)
    input_ids = token_ids[None].to(device)

    # Reference: the same (rounded) weights upcast, so only the arithmetic differs.
    reference = copy.deepcopy(model).to(ref_dtype)
    ref = hf_all_logits(reference, input_ids)  # [S, V]
    hf_logits = hf_all_logits(model, input_ids)
    hf_err = rel_l2(hf_logits, ref)
    hf_max_abs = float((hf_logits - ref).abs().max())
    tolerance = TOLERANCE_FACTOR * hf_err + FLOOR[dtype]
    print(
        f"transformers {DTYPE_NAMES[dtype]} vs {ref_dtype}: rel L2 {hf_err:.3e}, "
        f"max abs {hf_max_abs:.3e}; engine tolerance {tolerance:.3e}",
        flush=True,
    )
    results = []

    def record(name: str, logits: torch.Tensor, reference_logits: torch.Tensor, **extra) -> None:
        err = rel_l2(logits, reference_logits)
        vs_hf = extra.pop("vs_hf", None)
        ok = err <= tolerance and bool(torch.isfinite(logits).all())
        results.append(
            {
                "variant": name,
                "rel_l2_vs_ref": err,
                "rel_l2_vs_transformers": vs_hf,
                "ok": ok,
                **extra,
            }
        )
        print(
            f"{'ok  ' if ok else 'FAIL'} {name}: rel L2 vs reference {err:.3e}"
            + (f", vs transformers {vs_hf:.3e}" if vs_hf is not None else ""),
            flush=True,
        )

    folder = args.work_dir / args.model
    for backend in args.backends:
        for chunk in args.chunks:
            name = f"{backend} chunk {chunk}"
            try:
                engine, how = make_engine(
                    model, folder, _kwargs(shape, device, dtype, args, chunk, backend)
                )
                logits = engine.prefill_logits(
                    token_ids.tolist(), chunk_size=chunk, all_positions=True
                )
                record(
                    name,
                    logits,
                    ref,
                    vs_hf=rel_l2(logits, hf_logits),
                    loaded=how,
                    backend=engine.attention_backend,
                )
            except Exception as exc:  # report every variant, then fail at the end
                results.append({"variant": name, "ok": False, "error": repr(exc)[:500]})
                print(f"FAIL {name}: {exc!r}"[:800], flush=True)
            engine = None
            free_memory()
        results.extend(
            _prefix_and_decode(
                args,
                model,
                reference,
                folder,
                shape,
                device,
                dtype,
                backend,
                token_ids,
                ref,
                tolerance,
                hf_max_abs,
            )
        )
    meta = hardware(device)
    meta.update(
        model=args.model,
        dtype=DTYPE_NAMES[dtype],
        reference_dtype=str(ref_dtype),
        tokens=args.tokens,
        engine_compile=args.compile,
        transformers_rel_l2=hf_err,
        transformers_max_abs=hf_max_abs,
        tolerance=tolerance,
        tolerance_rule=f"{TOLERANCE_FACTOR} * transformers' rel L2 + {FLOOR[dtype]:g}",
    )
    _write(args, meta, results)
    return 0 if all(r["ok"] for r in results) else 1


def _kwargs(shape, device, dtype, args, chunk: int, backend: str, prefix_cache: bool = False):
    kwargs = engine_config_kwargs(
        shape=shape,
        device=device,
        dtype=dtype,
        num_tokens=args.tokens + args.decode_tokens + 16,
        chunk=chunk,
        backend=backend,
        block_size=16,
        compile=args.compile,
    )
    kwargs["enable_prefix_cache"] = prefix_cache
    return kwargs


def _prefix_and_decode(
    args,
    model,
    reference,
    folder,
    shape,
    device,
    dtype,
    backend,
    token_ids,
    ref,
    tolerance,
    hf_max_abs,
) -> list[dict]:
    """A prompt whose first half is reused from the prefix cache; then greedy decoding."""
    out = []
    chunk = args.chunks[0]
    name = f"{backend} prefix cache + decode"
    try:
        engine, _ = make_engine(
            model, folder, _kwargs(shape, device, dtype, args, chunk, backend, True)
        )
        half = args.tokens // 2
        engine.prefill_logits(token_ids[:half].tolist(), chunk_size=chunk)
        logits = engine.prefill_logits(token_ids.tolist(), chunk_size=chunk, all_positions=True)
        num_computed = logits.shape[0]
        err = rel_l2(logits, ref[-num_computed:])
        reused = args.tokens - num_computed
        ok = err <= tolerance and reused > 0
        out.append(
            {
                "variant": f"{backend} prefix cache ({reused} tokens reused)",
                "rel_l2_vs_ref": err,
                "ok": ok,
            }
        )
        print(
            f"{'ok  ' if ok else 'FAIL'} {backend} prefix cache: {reused} reused, rel L2 {err:.3e}"
        )
        result = engine.generate(
            token_ids.tolist(), SamplingParams(max_new_tokens=args.decode_tokens)
        )
        generated = result.token_ids
        full = torch.cat([token_ids, torch.tensor(generated, dtype=torch.long)])[None].to(device)
        ref_steps = hf_all_logits(reference, full)[args.tokens - 1 : -1]  # [G, V]: each step's
        gaps = [float(row.max() - row[t]) for row, t in zip(ref_steps, generated, strict=True)]
        max_gap = max(gaps, default=0.0)
        ok = max_gap <= max(hf_max_abs, 1e-6)
        out.append(
            {
                "variant": f"{backend} greedy decode ({len(generated)} tokens)",
                "max_logit_gap": max_gap,
                "num_argmax": sum(g == 0 for g in gaps),
                "ok": ok,
            }
        )
        print(
            f"{'ok  ' if ok else 'FAIL'} {backend} decode: {len(generated)} tokens, "
            f"{sum(g == 0 for g in gaps)} reference argmax, largest gap {max_gap:.3e}"
        )
    except Exception as exc:
        out.append({"variant": name, "ok": False, "error": repr(exc)[:500]})
        print(f"FAIL {name}: {exc!r}"[:800], flush=True)
    free_memory()
    return out


def _write(args, meta: dict, results: list[dict]) -> None:
    label = args.label or (
        "h200" if "H200" in str(meta.get("gpu_name")) else meta["device"].split(":")[0]
    )
    args.out.mkdir(parents=True, exist_ok=True)
    base = args.out / f"gpu_check_{label}"  # a label may hold a dot (h200.8b): no with_suffix
    Path(f"{base}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    lines = [
        f"# Engine logits vs transformers: {label}\n\n",
        "\n\n".join(__doc__.split("\n\n")[2:5]) + "\n\n",
        "| key | value |\n|---|---|\n",
    ]
    lines += [f"| {k} | {v} |\n" for k, v in meta.items()]
    lines.append(
        "\n| variant | rel. L2 vs reference | vs transformers same dtype | ok |\n|---|---|---|---|\n"
    )
    for r in results:
        err = r.get("rel_l2_vs_ref")
        vs_hf = r.get("rel_l2_vs_transformers")
        extra = r.get("error") or (
            f"max gap {r['max_logit_gap']:.2e}" if "max_logit_gap" in r else ""
        )
        lines.append(
            f"| {r['variant']} | {'' if err is None else f'{err:.3e}'} | "
            f"{'' if vs_hf is None else f'{vs_hf:.3e}'} {extra} | {'yes' if r['ok'] else '**no**'} |\n"
        )
    Path(f"{base}.md").write_text("".join(lines))
    print("".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
