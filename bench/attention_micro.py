"""One prefill chunk's attention against its cached prefix, several ways (CUDA micro-benchmark).

Usage: python3 bench/attention_micro.py [--queries 8192] [--contexts 32768 131072]

Shapes are the Llama-3-8B attention (32 query heads, 8 KV heads, head dim 128, bf16); the keys
are a strided view of a paged cache [ctx, KV, D], as the engine holds them. Variants:
- flex: the engine's FlexAttention call (offset causal block mask, its kernel options);
- split-*: the chunk's attention cut into a mask-free part over the cached prefix and a causal
  square over the chunk itself, merged by log-sum-exp. For the prefix part the 4 query heads
  that share a KV head are folded into the query axis ([KV, 4*T, D] against [KV, ctx, D]): no
  K/V repeat, and any dense kernel applies (cuDNN or flash);
- sdpa-lower-right: SDPA with causal_lower_right (PyTorch's flash kernel).
TFLOP/s counts the useful causal pairs (T*start + T*(T+1)/2), 4*H*D FLOPs each. Outputs are
checked against flex (relative L2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

H, KV, D = 32, 8, 128
GROUP = H // KV


def _lse(lse: torch.Tensor, heads: int, rows: int) -> torch.Tensor:
    return lse.reshape(heads, rows).float()


def prefix_dense(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, impl: str):
    """q [T, H, D]; k, v [ctx, KV, D] -> out [H, T, D], lse [H, T] (fp32), no mask."""
    num_q = q.shape[0]
    # Fold the query heads of each KV head into rows: [1, KV, GROUP*T, D] (head h = kv*G + g).
    qf = q.view(num_q, KV, GROUP, D).permute(1, 2, 0, 3).reshape(1, KV, GROUP * num_q, D)
    kt, vt = k.permute(1, 0, 2)[None], v.permute(1, 0, 2)[None]  # [1, KV, ctx, D] strided
    if impl == "cudnn":
        out, lse = torch.ops.aten._scaled_dot_product_cudnn_attention(
            qf, kt, vt, None, True, 0.0, False, False
        )[:2]
    elif impl == "flash":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention(qf, kt, vt, 0.0, False)[:2]
    else:
        raise ValueError(impl)
    return out.reshape(H, num_q, D), _lse(lse, H, num_q)


def diagonal_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, impl: str):
    """The chunk against its own keys, causal: q [T, H, D], k, v [T, KV, D]."""
    num_q = q.shape[0]
    qt = q.transpose(0, 1)[None]  # [1, H, T, D]
    if impl == "cudnn":
        kt = k.repeat_interleave(GROUP, dim=1).transpose(0, 1)[None]
        vt = v.repeat_interleave(GROUP, dim=1).transpose(0, 1)[None]
        out, lse = torch.ops.aten._scaled_dot_product_cudnn_attention(
            qt, kt, vt, None, True, 0.0, True, False
        )[:2]
    elif impl == "flash":
        kt = k.repeat_interleave(GROUP, dim=1).transpose(0, 1)[None]
        vt = v.repeat_interleave(GROUP, dim=1).transpose(0, 1)[None]
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention(qt, kt, vt, 0.0, True)[:2]
    else:
        raise ValueError(impl)
    return out.reshape(H, num_q, D), _lse(lse, H, num_q)


def split_attention(q, k_prefix, v_prefix, k_new, v_new, prefix_impl: str, diag_impl: str):
    """Both parts merged by log-sum-exp -> [T, H, D]."""
    o1, l1 = prefix_dense(q, k_prefix, v_prefix, prefix_impl)
    o2, l2 = diagonal_causal(q, k_new, v_new, diag_impl)
    lse = torch.logaddexp(l1, l2)
    w1, w2 = torch.exp(l1 - lse)[..., None], torch.exp(l2 - lse)[..., None]  # [H, T, 1]
    return (o1 * w1 + o2 * w2).to(q.dtype).transpose(0, 1)


def bench_context(ctx: int, num_q: int, flex, do_bench) -> None:
    from torch.nn.attention.bias import causal_lower_right

    from engine.attention.flex import DEFAULT_KERNEL_OPTIONS, causal_offset_block_mask

    device = torch.device("cuda")
    start = ctx - num_q
    torch.manual_seed(0)
    q = torch.randn(num_q, H, D, device=device, dtype=torch.bfloat16)
    cache_k = torch.randn(ctx, KV, D, device=device, dtype=torch.bfloat16)
    cache_v = torch.randn(ctx, KV, D, device=device, dtype=torch.bfloat16)
    pairs = num_q * start + num_q * (num_q + 1) / 2
    flops = 4 * H * D * pairs
    mask = causal_offset_block_mask(num_q, ctx, start, device)

    def run_flex():
        return flex(
            q.transpose(0, 1)[None],
            cache_k.transpose(0, 1)[None],
            cache_v.transpose(0, 1)[None],
            block_mask=mask,
            enable_gqa=True,
            kernel_options=DEFAULT_KERNEL_OPTIONS,
        )[0].transpose(0, 1)

    k_contig = cache_k.transpose(0, 1).contiguous()[None]  # [1, KV, ctx, D]
    v_contig = cache_v.transpose(0, 1).contiguous()[None]

    def run_flex_contiguous():
        return flex(
            q.transpose(0, 1).contiguous()[None],
            k_contig,
            v_contig,
            block_mask=mask,
            enable_gqa=True,
            kernel_options=DEFAULT_KERNEL_OPTIONS,
        )[0].transpose(0, 1)

    def split(prefix_impl: str, diag_impl: str):
        return lambda: split_attention(
            q,
            cache_k[:start],
            cache_v[:start],
            cache_k[start:],
            cache_v[start:],
            prefix_impl,
            diag_impl,
        )

    bias = causal_lower_right(num_q, ctx)

    def run_sdpa():
        return F.scaled_dot_product_attention(
            q.transpose(0, 1)[None],
            cache_k.transpose(0, 1)[None],
            cache_v.transpose(0, 1)[None],
            attn_mask=bias,
            enable_gqa=True,
        )[0].transpose(0, 1)

    variants = {"flex (engine)": run_flex, "flex contiguous q/k/v": run_flex_contiguous}
    for prefix_impl in ("cudnn", "flash"):
        for diag_impl in ("flash", "cudnn"):
            variants[f"split {prefix_impl}+{diag_impl}"] = split(prefix_impl, diag_impl)
    variants["sdpa lower-right"] = run_sdpa
    reference = None
    for name, fn in variants.items():
        try:
            out = fn()
            torch.cuda.synchronize()
            if reference is None:
                reference = out.float()
            err = float((out.float() - reference).norm() / reference.norm())
            ms = do_bench(fn, warmup=50, rep=300, return_mode="median")
            print(f"{name:<28} {ctx:>7} {ms:>8.2f} {flops / ms / 1e9:>8.1f} {err:>15.2e}")
        except Exception as exc:
            print(f"{name:<28} {ctx:>7} failed: {exc!r}"[:400])
        sys.stdout.flush()


def check_lse() -> None:
    """cuDNN's and flash's log-sum-exp against explicit scores (natural log expected)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, D, device="cuda", dtype=torch.bfloat16) for n in (64, 96, 96))
    scores = torch.einsum("bnld,bnsd->bnls", q.float(), k.float()) / D**0.5
    expected = scores.logsumexp(-1)
    for name, op in (
        ("cudnn", lambda: torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True)),
        ("flash", lambda: torch.ops.aten._scaled_dot_product_flash_attention(q, k, v)),
    ):
        try:
            out = op()
            lse = out[1].reshape(expected.shape).float()
            print(
                f"lse check {name}: shape {tuple(out[1].shape)}, max abs diff "
                f"{float((lse - expected).abs().max()):.3e}"
            )
        except Exception as exc:
            print(f"lse check {name} failed: {exc!r}"[:300])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=8192)
    parser.add_argument("--contexts", type=int, nargs="+", default=[32768, 131072])
    args = parser.parse_args()
    from torch.nn.attention.flex_attention import flex_attention
    from triton.testing import do_bench

    flex = torch.compile(flex_attention, dynamic=True)
    check_lse()
    print(f"{'variant':<28} {'ctx':>7} {'ms':>8} {'TFLOP/s':>8} {'rel L2 vs flex':>15}")
    for ctx in args.contexts:
        bench_context(ctx, args.queries, flex, do_bench)


if __name__ == "__main__":
    main()
