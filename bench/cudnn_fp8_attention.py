"""One prefill chunk's attention in FP8 through cuDNN's sdpa_fp8 (the cuDNN frontend's Python
graph), against the engine's bf16 path: a CUDA probe for issue 23's FP8 prefill.

Usage: python3 bench/cudnn_fp8_attention.py [--queries 8192] [--contexts 16384 65536 131072]
       [--out FILE]
       python3 bench/cudnn_fp8_attention.py --hopper-variants [--out FILE]

Needs the `nvidia-cudnn-frontend` wheel (carried; it loads the cuDNN that torch ships). Shapes are
the Llama-3-8B attention (32 query heads, 8 KV heads, head dim 128).

Default: a chunk of T queries at the end of a context of S keys through the engine's cuDNN split
backend (engine/attention/cudnn_split.py: the S - T cached keys with no mask, the chunk causally,
merged by log-sum-exp), its kernel cuDNN's bf16 attention through torch ("bf16-split") or the
FP8 one (engine/attention/cudnn_fp8.py Fp8Attend, "fp8-split"): milliseconds (CUDA events, the
median of 10 runs), TFLOP/s (4 * H * D FLOPs per causal pair), the first call's seconds (its
plans), and the relative L2 error of the first 512 queries' outputs against fp32 attention.

--hopper-variants: which sdpa_fp8 graphs this card's cuDNN plans (no mask, top-left or
bottom-right causal, grouped KV heads, padded lengths, an E4M3 or a bf16 output, log-sum-exps),
each against fp32 attention over its own E4M3 inputs, then the prefix part alone (8K queries
folded 4 to a KV head against 120K keys) in FP8 against bf16."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

H, KV, D = 32, 8, 128
FP8_MAX = 448.0


def quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor E4M3: (data, descale [1, 1, 1, 1] fp32), value = data * descale."""
    amax = x.abs().amax().float().clamp(min=1e-12)
    descale = (amax / FP8_MAX).reshape(1, 1, 1, 1)
    return (x.float() / descale.reshape(())).to(torch.float8_e4m3fn), descale


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths=None) -> torch.Tensor:
    """fp32 attention, bottom-right causal, GQA: q [T, H, D], k, v [S, KV, D] -> [T, H, D]."""
    num_q, num_k = q.shape[0], k.shape[0]
    if lengths is not None:
        num_q, num_k = lengths
        q, k, v = q[:num_q], k[:num_k], v[:num_k]
    kk = k.float().repeat_interleave(H // KV, dim=1)
    vv = v.float().repeat_interleave(H // KV, dim=1)
    scores = torch.einsum("thd,shd->hts", q.float(), kk) / math.sqrt(D)
    pos_q = torch.arange(num_q, device=q.device)[:, None] + (num_k - num_q)
    keep = torch.arange(num_k, device=q.device)[None, :] <= pos_q
    scores = scores.masked_fill(~keep, float("-inf"))
    return torch.einsum("hts,shd->thd", scores.softmax(-1), vv)


def time_ms(fn, reps: int = 10) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


def probe(row: dict, fn) -> dict:
    """fn(row) filling row, its exception recorded instead (a probe goes on)."""
    try:
        fn(row)
    except Exception as exc:
        row["error"] = repr(exc)[:600]
    return row


def measure_context(ctx: int, num_q: int, emit) -> None:
    """One chunk of num_q queries ending a context of ctx keys through the engine's cuDNN split
    backend (a contiguous paged cache, blocks of 16), its attend function bf16 (cuDNN through
    torch) and FP8 (Fp8Attend); outputs against fp32 over the first 512 queries."""
    from engine.attention import AttentionMetadata
    from engine.attention.cudnn_fp8 import Fp8Attend
    from engine.attention.cudnn_split import CudnnSplitBackend, cudnn_attend

    torch.manual_seed(1)
    start = ctx - num_q
    q = torch.randn(num_q, H, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(ctx, KV, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(ctx, KV, D, device="cuda", dtype=torch.bfloat16)
    flops = 4 * H * D * (num_q * start + num_q * (num_q + 1) / 2)
    ref = reference(q[:512], k[: start + 512], v[: start + 512])  # the first 512 queries
    blocks = ctx // 16
    meta = AttentionMetadata(
        start=start,
        num_query_tokens=num_q,
        slot_mapping=torch.arange(start, ctx, device="cuda"),
        block_table=torch.arange(blocks, dtype=torch.int32, device="cuda"),
        block_size=16,
        first_block_if_contiguous=0,
    )
    k_cache, v_cache = k.view(blocks, 16, KV, D), v.view(blocks, 16, KV, D)
    device = torch.device("cuda")
    backends = {
        "bf16-split": CudnnSplitBackend(device),
        "fp8-split": CudnnSplitBackend(device, attend=Fp8Attend(fallback=cudnn_attend)),
    }
    for name, backend in backends.items():

        def fill(row, backend=backend):
            def run():
                return backend.attend(q, k[start:], v[start:], k_cache, v_cache, meta)

            began = time.perf_counter()
            out = run()
            torch.cuda.synchronize()
            row["first_call_s"] = round(time.perf_counter() - began, 3)  # plans included
            row["rel_l2_first_512"] = rel(out[:512], ref)
            ms = time_ms(run)
            row.update(ms=round(ms, 3), tflops=round(flops / ms / 1e9, 1))

        emit(probe({"variant": name, "queries": num_q, "context": ctx}, fill))


def variant_graph(
    num_q, num_k, heads, kv_heads, *, mask: str, padded: bool, out_fp8: bool, stats: bool
):
    """An sdpa_fp8 graph built directly (not the engine's), to find what cuDNN runs on this card:
    mask "none", "top_left" (causal, square) or "bottom_right"; padded: real lengths as tensors;
    out_fp8: E4M3 output (else bf16); stats: the log-sum-exps as an output too. Returns (run,
    seconds to plan); run(q8, k8, v8, descale) -> (out widened to fp32, stats or None)."""
    import cudnn

    dt = cudnn.data_type
    began = time.perf_counter()
    handle = cudnn.create_handle()
    g = cudnn.pygraph(
        io_data_type=dt.FP8_E4M3, intermediate_data_type=dt.FLOAT, compute_data_type=dt.FLOAT,
        handle=handle,
    )  # fmt: skip

    def tokens(name, rows, n):
        return g.tensor(
            name=name,
            dim=(1, n, rows, D),
            stride=(rows * n * D, D, n * D, 1),
            data_type=dt.FP8_E4M3,
        )

    def scalar(name, kind=dt.FLOAT):
        return g.tensor(name=name, dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=kind)

    t = {
        "q": tokens("q", num_q, heads),
        "k": tokens("k", num_k, kv_heads),
        "v": tokens("v", num_k, kv_heads),
    }
    names = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")
    t.update({n: scalar(n) for n in names})
    options = dict(attn_scale=1.0 / math.sqrt(D), generate_stats=stats)
    if mask == "top_left":
        options.update(use_causal_mask=True)
    elif mask == "bottom_right":
        options.update(right_bound=0, diagonal_alignment=cudnn.diagonal_alignment.BOTTOM_RIGHT)
    if padded:
        t["seq_len_q"], t["seq_len_kv"] = (
            scalar("seq_len_q", dt.INT32),
            scalar("seq_len_kv", dt.INT32),
        )
        options.update(use_padding_mask=True, seq_len_q=t["seq_len_q"], seq_len_kv=t["seq_len_kv"])
    o, st, _, amax_o = g.sdpa_fp8(**{n: t[n] for n in ("q", "k", "v", *names)}, **options)
    o.set_output(True).set_dim((1, heads, num_q, D)).set_stride(
        (num_q * heads * D, D, heads * D, 1)
    )
    o.set_data_type(dt.FP8_E4M3 if out_fp8 else dt.BFLOAT16)
    amax_o.set_output(True).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1)).set_data_type(dt.FLOAT)
    t["o"], t["amax_o"] = o, amax_o
    if stats:
        st.set_output(True).set_dim((1, heads, num_q, 1)).set_stride((heads * num_q, num_q, 1, 1))
        st.set_data_type(dt.FLOAT)
        t["stats"] = st
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    seconds = time.perf_counter() - began
    workspace = torch.empty(g.get_workspace_size(), dtype=torch.uint8, device="cuda")

    def run(q8, k8, v8, descale):
        out = torch.empty(
            q8.shape, device="cuda", dtype=torch.float8_e4m3fn if out_fp8 else torch.bfloat16
        )
        lse = torch.empty(1, heads, num_q, 1, device="cuda") if stats else None
        one = torch.ones(1, 1, 1, 1, device="cuda")
        pack = {t["q"]: q8, t["k"]: k8, t["v"]: v8, t["o"]: out, t["amax_o"]: torch.zeros_like(one)}
        pack.update(
            {t["descale_q"]: descale[0], t["descale_k"]: descale[1], t["descale_v"]: descale[2]}
        )
        pack.update({t["descale_s"]: one / 448, t["scale_s"]: one * 448})
        pack[t["scale_o"]] = 1 / descale[2] if out_fp8 else one
        if padded:
            pack[t["seq_len_q"]] = torch.full((1, 1, 1, 1), num_q, dtype=torch.int32, device="cuda")
            pack[t["seq_len_kv"]] = torch.full(
                (1, 1, 1, 1), num_k, dtype=torch.int32, device="cuda"
            )
        if stats:
            pack[t["stats"]] = lse
        cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
        g.execute(pack, workspace, handle=handle)
        wide = out.float() * (descale[2].view(1, 1, 1) if out_fp8 else 1.0)
        return wide, lse

    return run, seconds


def hopper_variants(emit) -> None:
    """Which sdpa_fp8 graphs this card's cuDNN plans (small, checked against fp32), then the
    prefix part of a chunk, mask-free, at 8K folded rows x 120K keys timed against bf16."""
    torch.manual_seed(2)
    cases = [  # (queries, keys, heads, kv heads, mask, padded, out_fp8, stats)
        (1024, 1024, 8, 8, "none", False, True, True),
        (1024, 1024, 8, 8, "none", False, False, True),
        (1024, 1024, 8, 8, "top_left", False, True, True),
        (1024, 4096, 8, 8, "none", False, True, True),
        (1024, 4096, 32, 8, "none", False, True, True),
        (1024, 4096, 8, 8, "bottom_right", False, True, True),
        (1024, 4096, 8, 8, "none", True, True, True),
        (1024, 1024, 8, 8, "none", False, True, False),
    ]
    for num_q, num_k, heads, kv_heads, mask, padded, out_fp8, stats in cases:
        row = {"hopper_variant": mask, "queries": num_q, "keys": num_k, "heads": heads,
               "kv_heads": kv_heads, "padded": padded, "out_fp8": out_fp8, "stats": stats}  # fmt: skip

        def fill(row, num_q=num_q, num_k=num_k, heads=heads, kv_heads=kv_heads, mask=mask,
                 padded=padded, out_fp8=out_fp8, stats=stats):  # fmt: skip
            run, row["build_s"] = variant_graph(
                num_q, num_k, heads, kv_heads, mask=mask, padded=padded, out_fp8=out_fp8, stats=stats
            )  # fmt: skip
            q, k, v = (
                torch.randn(n, h, D, device="cuda")
                for n, h in ((num_q, heads), (num_k, kv_heads), (num_k, kv_heads))
            )
            (q8, dq), (k8, dk), (v8, dv) = quantize(q), quantize(k), quantize(v)
            out, lse = run(q8, k8, v8, (dq, dk, dv))
            torch.cuda.synchronize()
            qq, kk, vv = q8.float() * dq[0, 0], k8.float() * dk[0, 0], v8.float() * dv[0, 0]
            kk, vv = (x.repeat_interleave(heads // kv_heads, dim=1) for x in (kk, vv))
            scores = torch.einsum("thd,shd->hts", qq, kk) / math.sqrt(D)
            if mask != "none":
                shift = num_k - num_q if mask == "bottom_right" else 0
                seen = (
                    torch.arange(num_k, device="cuda")[None, :]
                    <= torch.arange(num_q, device="cuda")[:, None] + shift
                )
                scores = scores.masked_fill(~seen, float("-inf"))
            expected = torch.einsum("hts,shd->thd", scores.softmax(-1), vv)
            row["rel_l2"] = rel(out[0].transpose(0, 1) if out.dim() == 4 else out, expected)
            if lse is not None:
                row["lse_err"] = float((lse.view(heads, num_q) - scores.logsumexp(-1)).abs().max())

        emit(probe(row, fill))
    # The prefix part at the engine's scale: 4 query heads folded per KV head, 8K rows each.
    rows, keys = 4 * 8192, 120 * 1024
    row = {"hopper_variant": "prefix timing", "rows_per_kv_head": rows, "keys": keys}

    def fill_prefix(row):
        run, row["build_s"] = variant_graph(
            rows, keys, KV, KV, mask="none", padded=False, out_fp8=True, stats=True
        )
        q = torch.randn(rows, KV, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(keys, KV, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(keys, KV, D, device="cuda", dtype=torch.bfloat16)
        (q8, dq), (k8, dk), (v8, dv) = quantize(q), quantize(k), quantize(v)
        flops = 4 * KV * D * rows * keys
        ms = time_ms(lambda: run(q8, k8, v8, (dq, dk, dv)))
        row.update(fp8_ms=round(ms, 3), fp8_tflops=round(flops / ms / 1e9, 1))

        def bf16():
            return torch.ops.aten._scaled_dot_product_cudnn_attention(
                q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                None, True, 0.0, False, False,
            )[:2]  # fmt: skip

        ms = time_ms(bf16)
        row.update(bf16_ms=round(ms, 3), bf16_tflops=round(flops / ms / 1e9, 1))

    emit(probe(row, fill_prefix))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=8192)
    parser.add_argument("--contexts", type=int, nargs="+", default=[16384, 65536, 131072])
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--hopper-variants",
        action="store_true",
        help="only: which sdpa_fp8 graphs this card plans, and the mask-free prefix part timed",
    )
    args = parser.parse_args()
    import cudnn

    rows: list[dict] = []

    def emit(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            args.out.write_text(json.dumps({"rows": rows}, indent=1))

    emit({
        "frontend": cudnn.__version__, "cudnn": cudnn.backend_version_string(),
        "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
    })  # fmt: skip
    if args.hopper_variants:
        hopper_variants(emit)
        return
    for ctx in args.contexts:
        measure_context(ctx, args.queries, emit)


if __name__ == "__main__":
    main()
