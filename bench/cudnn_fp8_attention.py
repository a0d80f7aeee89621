"""One prefill chunk's attention in FP8 through cuDNN's sdpa_fp8 (the cuDNN frontend's Python
graph), against the engine's bf16 path: a CUDA probe for issue 23's FP8 prefill.

Usage: python3 bench/cudnn_fp8_attention.py [--queries 8192] [--contexts 16384 65536 131072]
       [--out FILE]

Needs the `nvidia-cudnn-frontend` wheel (carried; it loads the cuDNN that torch ships). Shapes are
the Llama-3-8B attention (32 query heads, 8 KV heads, head dim 128). A chunk of T queries at the
end of a context of S keys attends to all S - T earlier keys and causally to its own: one call
with a bottom-right causal mask and the 8 KV heads as they are (grouped-query attention in the
kernel), Q, K and V in E4M3 with one scale each, the softmax's P in E4M3 (scale 448), out bf16.

The graphs are the engine's (engine/attention/cudnn_fp8.py SdpaGraph: keys and queries padded to
a shape, the real lengths passed as tensors). For each context it reports, in milliseconds (CUDA events, the median of several runs) and TFLOP/s
(4 * H * D FLOPs per causal pair):
- fp8: that call, its shape the real one;
- fp8-padded: the same with half a bucket of padding keys (one plan serves every length in a
  bucket, if the kernel stops at the real length; a new shape costs a plan build, timed too);
- bf16-frontend: the same graph in bf16 (sdpa);
- bf16-split: the engine's bf16 path today (cudnn_split.py: the prefix without a mask and the
  chunk causally, merged by log-sum-exp; bench/attention_micro.py's split);
and the outputs' relative L2 error against fp32 attention over the bf16 inputs (the FP8 ones
also against fp32 attention over their own dequantized inputs: the error of P in E4M3 alone).
First a small exactness check of the mask, the padding and the grouping.
"""

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
    return (x.float() / descale).to(torch.float8_e4m3fn), descale


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


def build(num_q: int, num_k: int, fp8: bool, kv_heads: int = KV):
    """The engine's graph for these padded sizes, and the seconds its plan took."""
    from engine.attention.cudnn_fp8 import SdpaGraph

    began = time.perf_counter()
    graph = SdpaGraph(
        num_q=num_q, num_k=num_k, num_heads=H, num_kv_heads=kv_heads, head_dim=D,
        fp8=fp8, out_dtype=torch.bfloat16,
    )  # fmt: skip
    return graph, time.perf_counter() - began


def probe(row: dict, fn) -> dict:
    """fn(row) filling row, its exception recorded instead (a probe goes on)."""
    try:
        fn(row)
    except Exception as exc:
        row["error"] = repr(exc)[:600]
    return row


def check_small(emit) -> None:
    """The mask, the padding and the grouping: small shapes against fp32 (the FP8 ones also
    against fp32 over their own rounded inputs: what P in E4M3 adds)."""
    torch.manual_seed(0)
    for num_q, num_k, pad_q, pad_k in ((256, 1024, 0, 0), (200, 1000, 56, 536)):
        q = torch.randn(num_q + pad_q, H, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(num_k + pad_k, KV, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(num_k + pad_k, KV, D, device="cuda", dtype=torch.bfloat16)
        if pad_k:  # garbage past the real lengths: it must not be seen
            k[num_k:], v[num_k:] = 30.0, 30.0
        ref = reference(q, k, v, (num_q, num_k))
        for kind in ("bf16", "fp8", "fp8-mha"):
            # fp8-mha: K and V repeated to the 32 query heads (in case the FP8 kernel wants it).

            def fill(row, kind=kind, q=q, k=k, v=v, num_q=num_q, num_k=num_k, ref=ref):
                fp8, kv_heads = kind != "bf16", H if kind == "fp8-mha" else KV
                graph, row["build_s"] = build(q.shape[0], k.shape[0], fp8, kv_heads)
                if fp8:
                    (q8, dq), (k8, dk), (v8, dv) = quantize(q), quantize(k), quantize(v)
                    own = reference(
                        (q8.float() * dq[0, 0]), k8.float() * dk[0, 0], v8.float() * dv[0, 0],
                        (num_q, num_k),
                    )  # fmt: skip
                    if kv_heads == H:
                        k8, v8 = (x.repeat_interleave(H // KV, dim=1) for x in (k8, v8))
                    out = graph(q8, k8, v8, num_q, num_k, (dq, dk, dv))
                    row["rel_l2_vs_own_inputs"] = rel(out[:num_q], own)
                else:
                    out = graph(q, k, v, num_q, num_k)
                torch.cuda.synchronize()
                row["rel_l2"] = rel(out[:num_q], ref)
                row["finite"] = bool(out[:num_q].isfinite().all())

            emit(
                probe({"check": kind, "queries": num_q, "keys": num_k, "padded": bool(pad_k)}, fill)
            )


def measure_context(ctx: int, num_q: int, bucket: int, emit) -> None:
    """One chunk of num_q queries ending a context of ctx keys, every variant."""
    from bench.attention_micro import split_attention
    from engine.attention.cudnn_fp8 import quantize_queries, requantize_pages
    from engine.attention.fp8_kv import QuantizedPages, quantize_heads

    torch.manual_seed(1)
    start = ctx - num_q
    q = torch.randn(num_q, H, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(ctx, KV, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(ctx, KV, D, device="cuda", dtype=torch.bfloat16)
    flops = 4 * H * D * (num_q * start + num_q * (num_q + 1) / 2)
    ref = reference(q[:512], k[: start + 512], v[: start + 512])  # the first 512 queries
    (q8, dq), (k8, dk), (v8, dv) = quantize(q), quantize(k), quantize(v)
    padded = -(-ctx // bucket) * bucket + bucket // 2
    k8p = torch.zeros(padded, KV, D, device="cuda", dtype=torch.uint8).view(torch.float8_e4m3fn)
    v8p = torch.zeros_like(k8p)
    k8p[:ctx], v8p[:ctx] = k8, v8
    variants = {
        "fp8": (ctx, True, lambda g: g(q8, k8, v8, num_q, ctx, (dq, dk, dv))),
        "fp8-padded": (padded, True, lambda g: g(q8, k8p, v8p, num_q, ctx, (dq, dk, dv))),
        "bf16-frontend": (ctx, False, lambda g: g(q, k, v, num_q, ctx)),
    }  # fmt: skip
    for name, (keys, fp8, run) in variants.items():

        def fill(row, keys=keys, fp8=fp8, run=run, ref=ref, flops=flops):
            graph, row["build_s"] = build(num_q, keys, fp8)
            out = run(graph)
            torch.cuda.synchronize()
            # The first 512 queries see keys [0, start + 512): compare them with fp32.
            row["rel_l2_first_512"] = rel(out[:512], ref)
            ms = time_ms(lambda: run(graph))
            row.update(ms=round(ms, 3), tflops=round(flops / ms / 1e9, 1))

        emit(probe({"variant": name, "queries": num_q, "context": ctx, "keys": keys}, fill))

    def split(q=q, k=k, v=v, start=start):
        return split_attention(q, k[:start], v[:start], k[start:], v[start:], "cudnn", "cudnn")

    def fill_split(row, split=split, ref=ref, flops=flops):
        out = split()
        torch.cuda.synchronize()
        row["rel_l2_first_512"] = rel(out[:512], ref)
        ms = time_ms(split)
        row.update(ms=round(ms, 3), tflops=round(flops / ms / 1e9, 1))

    emit(probe({"variant": "bf16-split", "queries": num_q, "context": ctx}, fill_split))

    # The engine's preparation of one layer's call: the pages (16-token blocks in shuffled
    # order, a scale per token and head) re-expressed against one scale, K and V, and Q.
    def fill_prep(row, k=k, v=v, q=q, ctx=ctx):
        blocks = ctx // 16
        table = torch.randperm(blocks, device="cuda")
        pages = []
        for x in (k, v):
            data, scale = quantize_heads(x)
            shuffled = QuantizedPages(
                torch.empty(blocks, 16, KV, D, device="cuda", dtype=data.dtype),
                torch.empty(blocks, 16, KV, device="cuda"),
            )
            shuffled.data[table] = data.view(blocks, 16, KV, D)
            shuffled.scale[table] = scale.view(blocks, 16, KV)
            pages.append(shuffled)

        def prep():
            requantize_pages(pages[0], table, ctx, ctx)
            requantize_pages(pages[1], table, ctx, ctx)
            quantize_queries(q, q.shape[0])

        row["ms"] = round(time_ms(prep), 3)

    emit(probe({"variant": "requantize K, V and Q", "queries": num_q, "context": ctx}, fill_prep))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=8192)
    parser.add_argument("--contexts", type=int, nargs="+", default=[16384, 65536, 131072])
    parser.add_argument("--bucket", type=int, default=16384, help="fp8-padded: keys padded to")
    parser.add_argument("--out", type=Path)
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
    check_small(emit)
    for ctx in args.contexts:
        measure_context(ctx, args.queries, args.bucket, emit)


if __name__ == "__main__":
    main()
