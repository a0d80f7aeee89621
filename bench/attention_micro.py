"""One prefill chunk's attention against its cached prefix, several ways (CUDA micro-benchmark).

Usage: python3 bench/attention_micro.py [--queries 8192] [--contexts 32768 131072]

Shapes are the Llama-3-8B attention (32 query heads, 8 KV heads, head dim 128, bf16); the keys
are a strided view of a paged cache [ctx, KV, D], as the engine holds them. Variants:
- flex: the engine's FlexAttention call (offset causal block mask, its kernel options);
- split-*: the chunk's attention cut into a mask-free part over the cached prefix and a causal
  square over the chunk itself, merged by log-sum-exp. For the prefix part the 4 query heads
  that share a KV head are folded into the query axis ([KV, 4*T, D] against [KV, ctx, D]): no
  K/V repeat, and any dense kernel applies (cuDNN or flash);
- sdpa-lower-right: SDPA with causal_lower_right (PyTorch's flash kernel);
- fa4: flash-attn 4 (flash_attn.cute) in one bottom-right causal call, on the contiguous cache and
  through a block table (pages of 16 and 128 tokens), when it is installed.
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


def flash_attn_4_variants(q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor) -> dict:
    """flash-attn 4 (when it imports): one bottom-right causal call over the contiguous cache
    [ctx, KV, D], and the same keys read through a shuffled block table of 16- and 128-token
    pages (the engine's scattered-blocks path; 128 = the kernel's key tile, loaded by TMA)."""
    try:
        from flash_attn.cute import flash_attn_func, flash_attn_varlen_func
    except Exception as exc:
        print(f"flash-attn 4 not available: {exc!r}"[:300])
        return {}
    ctx = cache_k.shape[0]
    variants = {
        "fa4 contiguous": lambda: flash_attn_func(
            q[None], cache_k[None], cache_v[None], causal=True
        )[0][0]
    }
    for page in (16, 128):
        num_pages = ctx // page
        order = torch.randperm(num_pages, device=q.device)
        # Page order[i] of the paged cache holds the sequence's page i.
        paged_k = torch.empty(num_pages, page, KV, D, device=q.device, dtype=q.dtype)
        paged_v = torch.empty_like(paged_k)
        paged_k[order] = cache_k.view(num_pages, page, KV, D)
        paged_v[order] = cache_v.view(num_pages, page, KV, D)
        table = order.to(torch.int32)[None]  # [1, num_pages]
        used = torch.tensor([ctx], dtype=torch.int32, device=q.device)

        def run_paged(paged_k=paged_k, paged_v=paged_v, table=table, used=used):
            return flash_attn_varlen_func(
                q[None], paged_k, paged_v, page_table=table, seqused_k=used, causal=True
            )[0][0]

        variants[f"fa4 paged {page}"] = run_paged
    return variants


def flash_attn_4_tiles(ctx: int, num_q: int, do_bench) -> None:
    """flash-attn 4's own knobs on the chunk's two parts (its private _flash_attn_fwd): the
    whole chunk (bottom-right causal) with key tiles of 128, 160 and 176, the prefix alone
    (no mask) with key tiles of 128 and 176 (FlashAttention-3's C++ tile for a mask-free head
    dim of 128), and prefix + diagonal merged by log-sum-exp."""
    from engine.attention.flash import merge_by_lse

    try:
        from flash_attn.cute.interface import _flash_attn_fwd
    except Exception as exc:
        print(f"flash-attn 4 not available: {exc!r}"[:300])
        return
    torch.manual_seed(1)
    start = ctx - num_q
    q = torch.randn(1, num_q, H, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, ctx, KV, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, ctx, KV, D, device="cuda", dtype=torch.bfloat16)
    pairs_prefix, pairs_diag = num_q * start, num_q * (num_q + 1) / 2
    reference = _flash_attn_fwd(q, k, v, causal=True)[0].float()

    def report(name: str, fn, pairs: float, check: bool = False) -> None:
        try:
            out = fn()
            torch.cuda.synchronize()
            err = float((out.float() - reference).norm() / reference.norm()) if check else 0.0
            ms = do_bench(fn, warmup=50, rep=300, return_mode="median")
            print(
                f"{name:<40} {ctx:>7} {ms:>8.2f} {4 * H * D * pairs / ms / 1e9:>8.1f} {err:>9.2e}"
            )
        except Exception as exc:
            print(f"{name:<40} {ctx:>7} failed: {exc!r}"[:400])
        sys.stdout.flush()

    for tile in ((128, 128), (128, 176), (128, 160)):
        report(
            f"fa4 causal, tile {tile}",
            lambda tile=tile: _flash_attn_fwd(q, k, v, causal=True, tile_mn=tile)[0],
            pairs_prefix + pairs_diag,
            check=True,
        )
    kp, vp = k[:, :start], v[:, :start]
    for tile in ((128, 128), (128, 176), (128, 160)):
        report(
            f"fa4 prefix only, tile {tile}",
            lambda tile=tile: _flash_attn_fwd(q, kp, vp, causal=False, tile_mn=tile)[0],
            pairs_prefix,
        )

    def split(tile):
        o1, l1 = _flash_attn_fwd(q, kp, vp, causal=False, tile_mn=tile, return_lse=True)[:2]
        o2, l2 = _flash_attn_fwd(q, k[:, start:], v[:, start:], causal=True, return_lse=True)[:2]
        return merge_by_lse(o1, l1, o2, l2)  # the engine's blend (fp32, eager here)

    for tile in ((128, 128), (128, 176)):
        report(
            f"fa4 split, prefix tile {tile}",
            lambda tile=tile: split(tile),
            pairs_prefix + pairs_diag,
            True,
        )


# The mask-free prefix call's knobs swept by --fa4-knobs (those this flash-attn 4 accepts).
PREFIX_KNOBS: tuple[dict, ...] = (
    {},
    {"tile_mn": (128, 176)},
    {"tile_mn": (128, 192)},
    {"tile_mn": (128, 160)},
    {"tile_mn": (128, 176), "pack_gqa": True},
    {"tile_mn": (128, 128), "pack_gqa": True},
    {"tile_mn": (128, 176), "mma_pv_is_rs": False},
    {"tile_mn": (128, 176), "intra_wg_overlap": False},
)


def flash_attn_4_knobs(ctx: int, num_q: int, do_bench) -> None:
    """The chunk against its cached prefix, no mask, under each of PREFIX_KNOBS that this
    version's private _flash_attn_fwd takes: key tile, GQA packing (the 4 query heads of a KV
    head in one tile), P @ V from registers, and the softmax / next QK^T overlap."""
    import inspect
    from importlib.metadata import version

    try:
        from flash_attn.cute.interface import _flash_attn_fwd
    except Exception as exc:
        print(f"flash-attn 4 not available: {exc!r}"[:300])
        return
    accepted = set(inspect.signature(_flash_attn_fwd).parameters)
    torch.manual_seed(1)
    start = ctx - num_q
    q = torch.randn(1, num_q, H, D, device="cuda", dtype=torch.bfloat16)
    kp = torch.randn(1, start, KV, D, device="cuda", dtype=torch.bfloat16)
    vp = torch.randn(1, start, KV, D, device="cuda", dtype=torch.bfloat16)
    reference = _flash_attn_fwd(q, kp, vp, causal=False)[0].float()
    for knobs in PREFIX_KNOBS:
        name = f"{version('flash-attn-4')} prefix " + (
            ", ".join(f"{k}={v}" for k, v in knobs.items()) or "defaults"
        )
        if not set(knobs) <= accepted:
            print(f"{name:<64} {ctx:>7} not in this version")
            continue
        fn = lambda knobs=knobs: _flash_attn_fwd(q, kp, vp, causal=False, **knobs)[0]  # noqa: E731
        try:
            err = float((fn().float() - reference).norm() / reference.norm())
            ms = do_bench(fn, warmup=50, rep=1000, return_mode="median")
            tflops = 4 * H * D * num_q * start / ms / 1e9
            print(f"{name:<64} {ctx:>7} {ms:>8.2f} {tflops:>8.1f} {err:>9.2e}")
        except Exception as exc:
            print(f"{name:<64} {ctx:>7} failed: {exc!r}"[:400])
        sys.stdout.flush()


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
    # The flash-prefix splits ran at 330-350 TFLOP/s (bench/results/prefill_h200.md): not repeated.
    for diag_impl in ("flash", "cudnn"):
        variants[f"split cudnn+{diag_impl}"] = split("cudnn", diag_impl)
    variants["sdpa lower-right"] = run_sdpa
    variants.update(flash_attn_4_variants(q, cache_k, cache_v))
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
    parser.add_argument(
        "--fa4-tiles", action="store_true", help="only flash-attn 4's tile and packing variants"
    )
    parser.add_argument(
        "--fa4-knobs", action="store_true", help="only the prefix call under PREFIX_KNOBS"
    )
    args = parser.parse_args()
    from torch.nn.attention.flex_attention import flex_attention
    from triton.testing import do_bench

    if args.fa4_knobs:
        print(f"{'variant':<64} {'ctx':>7} {'ms':>8} {'TFLOP/s':>8} {'rel L2':>9}")
        for ctx in args.contexts:
            flash_attn_4_knobs(ctx, args.queries, do_bench)
        return

    if args.fa4_tiles:
        print(f"{'variant':<40} {'ctx':>7} {'ms':>8} {'TFLOP/s':>8} {'rel L2':>9}")
        for ctx in args.contexts:
            flash_attn_4_tiles(ctx, args.queries, do_bench)
        return

    flex = torch.compile(flex_attention, dynamic=True)
    check_lse()
    print(f"{'variant':<28} {'ctx':>7} {'ms':>8} {'TFLOP/s':>8} {'rel L2 vs flex':>15}")
    for ctx in args.contexts:
        bench_context(ctx, args.queries, flex, do_bench)


if __name__ == "__main__":
    main()
