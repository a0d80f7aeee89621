"""Paged decode attention cases shared by the interpreter run (CPU) and the CUDA run.

Each case builds a cache whose blocks are handed out in shuffled order and poisoned wherever no
query may look: block 0 (the id every block table is padded with) is all NaN, and so is every
slot past a sequence's context in its last block. The output buffer starts as NaN, so a row the
kernel skips shows up. Context 0 is a padding row: its output must be exactly zero.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from engine.attention.fp8_kv import quantize_heads
from engine.attention.paged_decode import (
    KernelConfig,
    default_kernel_config,
    paged_decode_attention,
    paged_decode_reference,
)

# (atol, rtol) against paged_decode_reference (fp32 softmax over the same inputs): |err| <=
# atol + rtol * |expected| everywhere. fp32 is rounding only; bf16 and fp16 also round the
# probabilities to the value dtype before P @ V (as flash kernels do) and the output itself,
# whose rounding alone is up to 2**-9 (bf16) or 2**-12 (fp16) of its magnitude.
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1e-2, 1e-2)}
# An FP8 cache: the reference dequantizes in fp32; the kernel widens E4M3 exactly and applies each
# token's K scale to its scores; V is dequantized to q's dtype (up to 2**-9 in bf16), or with fp16
# dots its scales go into the probabilities, rounded once to fp16, where the reference rounds
# nothing: twice the tolerance.
FP8_KV_TOLERANCE_FACTOR = 2


@dataclass(frozen=True)
class Case:
    num_heads: int
    num_kv_heads: int
    head_dim: int
    dtype: torch.dtype
    context_lens: tuple[int, ...]
    block_size: int = 16
    num_splits: int | None = None  # None: the default plan
    tile_tokens: int | None = None  # None: the default config
    scale: float | None = None
    q_gain: float = 1.0  # larger q: larger scores, more rescaling of the running max
    kv_fp8: bool = False  # the cache in E4M3 with a scale per token and KV head
    fp16_dots: bool = True  # KernelConfig.fp16_dots (an FP8 cache and a 16-bit model)
    fused_merge: bool = False  # the split kernel merges its splits (merge_counters)
    v_pairs: bool = False  # KernelConfig.v_pairs (an FP8 cache's V read as 16-bit pairs)


MIXED = (1, 15, 16, 17, 100, 1000, 0)
CASES: dict[str, Case] = {
    "g3_d64_fp32_mixed": Case(9, 3, 64, torch.float32, MIXED),
    "g3_d64_bf16_mixed": Case(9, 3, 64, torch.bfloat16, MIXED),
    "g4_d128_fp32_one_split": Case(8, 2, 128, torch.float32, (17, 1000, 0, 100), num_splits=1),
    "g4_d128_bf16_three_splits": Case(8, 2, 128, torch.bfloat16, (17, 1000, 0, 100), num_splits=3),
    "g4_d128_fp16": Case(8, 2, 128, torch.float16, (1, 16, 300)),
    "g1_d64_fp16": Case(2, 2, 64, torch.float16, (16, 100, 0)),
    "g1_d128_fp32_empty_splits": Case(2, 2, 128, torch.float32, (100, 3), num_splits=8),
    "g32_d64_fp32": Case(32, 1, 64, torch.float32, (5, 130)),
    "d80_fp32_padded_dim": Case(4, 2, 80, torch.float32, (40, 77)),
    "block32_g4_bf16": Case(4, 1, 64, torch.bfloat16, (33, 500, 0), block_size=32),
    "block64_tile16_fp32": Case(4, 2, 64, torch.float32, (64, 65, 200), block_size=64, tile_tokens=16),
    "tile128_fp32": Case(4, 2, 64, torch.float32, (129, 300), tile_tokens=128, num_splits=2),
    "large_scores_fp32": Case(4, 2, 64, torch.float32, (700,), q_gain=10.0, num_splits=2),
    "custom_scale_bf16": Case(4, 2, 64, torch.bfloat16, (90, 300), scale=0.3),
    "all_padding_fp32": Case(4, 2, 64, torch.float32, (0, 0), num_splits=4),
    "g3_d64_fp32_fp8_kv": Case(9, 3, 64, torch.float32, MIXED, kv_fp8=True),
    "g4_d128_bf16_fp8_kv_three_splits": Case(8, 2, 128, torch.bfloat16, (17, 1000, 0, 100), num_splits=3, kv_fp8=True),
    "g4_d128_fp16_fp8_kv": Case(8, 2, 128, torch.float16, (1, 16, 300, 0), kv_fp8=True),
    "g4_d128_bf16_fp8_kv_model_dtype_dots": Case(8, 2, 128, torch.bfloat16, (17, 300), kv_fp8=True, fp16_dots=False),
    # q past fp16's range (|q| up to ~4e5 in bf16): the fp16 dots scale it down first.
    "large_q_bf16_fp8_kv": Case(4, 2, 64, torch.bfloat16, (50, 700), q_gain=1e5, num_splits=2, kv_fp8=True),
    # The split kernel's own merge: the plan's splits, more splits than one chunk of the merge
    # holds (40 of 8 a chunk at G=4, D=128; ragged, many empty), empty splits, only padding
    # rows, one query head a KV head (64 a chunk), an FP8 cache, and several at once (9 heads
    # on 3 KV heads: 4 rows a chunk, one padded).
    "fused_g3_d64_fp32_mixed": Case(9, 3, 64, torch.float32, MIXED, fused_merge=True),
    "fused_g4_d128_bf16_40_splits": Case(8, 2, 128, torch.bfloat16, (1000, 17, 0, 300), num_splits=40, fused_merge=True),
    "fused_g1_d128_fp32_empty_splits": Case(2, 2, 128, torch.float32, (100, 3), num_splits=8, fused_merge=True),
    "fused_all_padding_fp32": Case(4, 2, 64, torch.float32, (0, 0), num_splits=4, fused_merge=True),
    "fused_g4_d128_bf16_fp8_kv_three_splits": Case(8, 2, 128, torch.bfloat16, (17, 1000, 0, 100), num_splits=3, kv_fp8=True, fused_merge=True),
    "fused_large_scores_fp32": Case(4, 2, 64, torch.float32, (700,), q_gain=10.0, num_splits=5, fused_merge=True),
    # An FP8 cache's V read as 16-bit pairs of dimensions: the plan's splits, fp16, a padded
    # head dim (80 of 128: pairs past 40 masked), large q, one split, the fused merge.
    "pairs_g4_d128_bf16_fp8_kv_three_splits": Case(8, 2, 128, torch.bfloat16, (17, 1000, 0, 100), num_splits=3, kv_fp8=True, v_pairs=True),
    "pairs_g4_d128_fp16_fp8_kv": Case(8, 2, 128, torch.float16, (1, 16, 300, 0), kv_fp8=True, v_pairs=True),
    "pairs_d80_bf16_fp8_kv_padded_dim": Case(4, 2, 80, torch.bfloat16, (40, 77), kv_fp8=True, v_pairs=True),
    "pairs_large_q_bf16_fp8_kv": Case(4, 2, 64, torch.bfloat16, (50, 700), q_gain=1e5, num_splits=2, kv_fp8=True, v_pairs=True),
    "pairs_g4_d128_bf16_fp8_kv_one_split": Case(8, 2, 128, torch.bfloat16, (17, 300), num_splits=1, kv_fp8=True, v_pairs=True),
    "pairs_fused_g4_d128_bf16_fp8_kv": Case(8, 2, 128, torch.bfloat16, (17, 1000, 0, 100), num_splits=3, kv_fp8=True, fused_merge=True, v_pairs=True),
}  # fmt: skip


def build_inputs(case: Case, device: torch.device, seed: int = 0) -> dict[str, torch.Tensor]:
    """q, caches, block tables and context lens for `case` (see the module docstring)."""
    gen = torch.Generator().manual_seed(seed)
    bs, num_kv, dim = case.block_size, case.num_kv_heads, case.head_dim
    pages = [math.ceil(n / bs) for n in case.context_lens]
    max_blocks = max(1, *pages) + 1  # one spare column: padded like the rest
    num_blocks = 1 + sum(pages) + 3  # block 0 + the sequences' + some never used
    k = torch.randn(num_blocks, bs, num_kv, dim, generator=gen)
    v = torch.randn(num_blocks, bs, num_kv, dim, generator=gen)
    order = (torch.randperm(num_blocks - 1, generator=gen) + 1).tolist()  # never block 0
    table = torch.zeros(len(pages), max_blocks, dtype=torch.int32)
    for row, (length, count) in enumerate(zip(case.context_lens, pages, strict=True)):
        ids = [order.pop() for _ in range(count)]
        table[row, :count] = torch.tensor(ids, dtype=torch.int32)
        if length % bs:  # slots past the context in the last block
            k[ids[-1], length % bs :] = float("nan")
            v[ids[-1], length % bs :] = float("nan")
    k[0] = float("nan")
    v[0] = float("nan")
    q = torch.randn(len(pages), case.num_heads, dim, generator=gen) * case.q_gain
    tensors = {
        "q": q.to(case.dtype),
        "k_cache": k.to(case.dtype),
        "v_cache": v.to(case.dtype),
        "block_tables": table,
        "context_lens": torch.tensor(case.context_lens, dtype=torch.int32),
    }
    if case.kv_fp8:  # poisoned slots stay NaN: their scales and values are NaN
        (tensors["k_cache"], tensors["k_scale"]), (tensors["v_cache"], tensors["v_scale"]) = (
            quantize_heads(k),
            quantize_heads(v),
        )
    return {name: t.to(device) for name, t in tensors.items()}


@contextmanager
def _split_launches() -> Iterator[list[dict]]:
    """The split kernel's launches while this holds: each one's keyword arguments (its
    constexprs among them)."""
    from engine.attention import paged_decode_kernels

    split = paged_decode_kernels._paged_decode_split_kernel
    launches: list[dict] = []

    class Records:
        def __getitem__(self, grid: object):
            def launch(*args: object, **kwargs: object) -> object:
                launches.append(kwargs)
                return split[grid](*args, **kwargs)

            return launch

    paged_decode_kernels._paged_decode_split_kernel = Records()
    try:
        yield launches
    finally:
        paged_decode_kernels._paged_decode_split_kernel = split


@contextmanager
def _no_merge_kernel(fused: bool) -> Iterator[None]:
    """With the split kernel merging its own splits, the second kernel must not run: it
    raises while this holds."""
    if not fused:
        yield
        return
    from engine.attention import paged_decode_kernels

    merge = paged_decode_kernels._merge_splits_kernel

    class Refuses:
        def __getitem__(self, grid: object) -> None:
            raise AssertionError("the merge kernel ran beside the fused merge")

    paged_decode_kernels._merge_splits_kernel = Refuses()
    try:
        yield
    finally:
        paged_decode_kernels._merge_splits_kernel = merge


def run_case(case: Case, device: torch.device) -> dict:
    """The kernel on `case` against the reference: max abs error and the row checks."""
    try:
        inputs = build_inputs(case, device)
        out = torch.full_like(inputs["q"], float("nan"))
        config = None
        if case.tile_tokens or not case.fp16_dots or case.kv_fp8:  # V byte-wise unless v_pairs
            default = default_kernel_config(case.head_dim, case.dtype, inputs["k_cache"].dtype)
            config = KernelConfig(
                case.tile_tokens or default.tile_tokens,
                num_stages=default.num_stages,
                fp16_dots=case.fp16_dots,
                v_pairs=case.v_pairs,
            )
        options = dict(scale=case.scale, num_splits=case.num_splits, config=config)
        counters = None
        if case.fused_merge:  # three more than the launch counts with: they stay untouched
            counters = torch.zeros(
                len(case.context_lens) * case.num_kv_heads + 3, dtype=torch.int32, device=device
            )
            options["merge_counters"] = counters
        with _no_merge_kernel(case.fused_merge), _split_launches() as launches:
            result = paged_decode_attention(**inputs, out=out, **options)
            # Each case read V as it asked: pairs for a v_pairs case, byte-wise otherwise.
            checks = {"v_pairs_ran": all(c["V_PAIRS"] == case.v_pairs for c in launches)}
            if counters is not None:  # left at zero for the next launch, which gives the same
                checks["counters_zero"] = bool((counters == 0).all().item())
                again = paged_decode_attention(**inputs, **options)
                checks["same_again"] = bool(torch.equal(again, result))
        expected = paged_decode_reference(**inputs, scale=case.scale)
        padding = inputs["context_lens"] == 0
        atol, rtol = TOLERANCE[case.dtype]
        if case.kv_fp8:
            atol, rtol = atol * FP8_KV_TOLERANCE_FACTOR, rtol * FP8_KV_TOLERANCE_FACTOR
        err = (result.float() - expected.float()).abs()
        return {
            "max_abs_err": err.max().item(),
            # <= 1 within tolerance (NaN propagates: a NaN output fails the check)
            "tolerance_ratio": (err / (atol + rtol * expected.float().abs())).max().item(),
            "has_nan": bool(result.isnan().any().item()),
            "wrote_into_out": result.data_ptr() == out.data_ptr(),
            "padding_rows_zero": bool((result[padding] == 0).all().item()),
            "reference_has_nan": bool(expected.isnan().any().item()),
            **checks,
        }
    except Exception:
        return {"error": traceback.format_exc()}
