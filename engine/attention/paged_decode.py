"""Decode attention over many sequences in the paged KV cache: one query token per sequence.

paged_decode_attention runs our Triton flash-decoding kernel (paged_decode_kernels.py) on CUDA;
paged_decode_reference is the same computation in plain torch (gather the pages, fp32 softmax),
for the CPU and for tests. Both take the engine's cache layout [num_blocks, block_size, KV, D]
(engine/kv_cache.py), a block table [B, max_blocks] and context lengths [B].

CUDA graphs: nothing here reads a device value on the host or sizes a buffer by one. The split
count depends only on B, KV, max_context_len and the SM count, and each split finds its token
range from context_lens on the device, so a captured call replays with new context_lens and
block tables written into the same buffers. The first call of each shape (batch size, split
count, dtype, head layout) compiles the kernels, seconds: make it before the capture.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from types import ModuleType

import torch

from engine.device_guard import launch_options, on_device, sm_count, triton_module
from engine.errors import EngineError

LOG2_E = 1.4426950408889634
# tl.dot needs at least 16 rows and a reduction of at least 16.
MIN_DOT_DIM = 16
MAX_HEAD_DIM = 256
# Splits per sequence and KV head: enough programs for TARGET_PROGRAMS_PER_SM on every SM
# (what one SM holds at once with the default config), each split at least
# MIN_TOKENS_PER_SPLIT tokens (a shorter one is mostly its prologue and its share of the
# merge), at most MAX_SPLITS (the merge kernel holds all of a head's splits at once).
TARGET_PROGRAMS_PER_SM = 4
MIN_TOKENS_PER_SPLIT = 128
MAX_TOKENS_PER_SPLIT = 4096
MAX_SPLITS = 128
# A K (or V) tile of about this many bytes per iteration: 32 tokens at D=128 in bf16.
TILE_BYTES = 8192
# The split kernel's own merge (merge_counters) takes at most this many partial output values
# into registers at once: 8 splits of 4 query heads at D=128 (the bf16 kernel's sm_90 build:
# 123 registers a thread, where four programs an SM, as many as its shared memory allows, fit
# up to 128); half as many from 8 query heads a KV head (4,096 took it to 128, 2,048 to 93).
MERGE_VALUES = 4096
# An FP8 cache's V read as pairs by default (KernelConfig.v_pairs): in the sm_90 build (Triton
# 3.9, D=128, 128 tokens a tile) the loop falls from 1,207 to 884 instructions and the kernel
# from 195 to 150 registers a thread (three programs an SM where two fit), with no one-byte
# shared-memory load left. On an H100 (bench/paged_decode_fp8.py --v-pairs, fp8_h100.md call O):
# 64 x 8K 417 us against 454 in the same run; 64 x 4K 210 against 243.6 (call F).
FP8_V_PAIRS = True


@dataclass(frozen=True)
class KernelConfig:
    """Launch parameters of the split kernel (defaults from default_kernel_config)."""

    tile_tokens: int  # tokens per iteration: several pages, a power of two >= 16
    num_warps: int = 4
    num_stages: int = 4
    # An FP8 cache read by a 16-bit model: both dots in fp16 (the kernel's FP16_DOTS); False
    # dequantizes K and V to the model's dtype (bench/paged_decode_fp8.py times both).
    fp16_dots: bool = True
    # A cap on registers a thread (ptxas's .maxnreg), None for ptxas's own count: a program that
    # needs fewer registers leaves room for one more on each SM.
    maxnreg: int | None = None
    # With fp16 dots, the FP8 cache's V read as 16-bit pairs of dimensions (the kernel's
    # V_PAIRS): ldmatrix.trans instead of one-byte shared-memory loads for the P @ V dot.
    v_pairs: bool = False

    def __post_init__(self) -> None:
        n = self.tile_tokens
        if n < MIN_DOT_DIM or n & (n - 1):
            raise EngineError(f"tile_tokens must be a power of two of at least 16, not {n}.")
        if self.maxnreg is not None and not 24 <= self.maxnreg <= 255:
            raise EngineError(f"maxnreg must be between 24 and 255, not {self.maxnreg}.")


def default_kernel_config(
    head_dim: int, dtype: torch.dtype, cache_dtype: torch.dtype | None = None
) -> KernelConfig:
    """About TILE_BYTES of K per iteration (32 tokens at D=128 in bf16, 64 at D=64), four
    stages: three K/V tiles in flight per program; `dtype` is q's (the dots' operands),
    `cache_dtype` the cache's where it differs (FP8: below).

    From the sm_90 build (Triton 3.6) of the bf16 D=128 kernel: 64 registers a thread and
    54 KiB of shared memory, so four programs an SM, up to 192 KiB of K/V in flight there;
    4.3 TB/s at ~1 us of latency needs ~33 KiB an SM. bench/paged_decode_micro.py --sweep
    times the alternatives on the card.
    """
    padded = _next_power_of_2(max(head_dim, MIN_DOT_DIM))
    if cache_dtype is not None and cache_dtype.itemsize == 1 and dtype.itemsize == 2:
        # An FP8 cache read by a 16-bit model: 128 tokens (at D=128) and three stages (76 KiB
        # of shared memory at D=128 on sm_90, three programs an SM). bench/paged_decode_fp8.py
        # on an H100 (bench/results/fp8_h100.md): 266 us against 316 for 32 or 64 tokens at
        # 64 x 4K, 138 against 168 at 16 x 8K, 50 against 65 at 1 x 32K (bf16: 355, 209, 55).
        # Not for an fp32 model: its widened tiles would pass an sm_89 block's shared memory.
        tile = max(MIN_DOT_DIM, min(128, 2 * TILE_BYTES // padded))
        return KernelConfig(tile_tokens=tile, num_stages=3, v_pairs=FP8_V_PAIRS)
    row_bytes = padded * dtype.itemsize
    tile = max(MIN_DOT_DIM, min(128, TILE_BYTES // row_bytes))
    return KernelConfig(tile_tokens=tile)


def plan_num_splits(
    *, batch_size: int, num_kv_heads: int, max_context_len: int, num_sms: int
) -> int:
    """Splits per (sequence, KV head): from shapes and the card only, never context_lens."""
    programs = max(1, batch_size * num_kv_heads)
    wanted = -(-TARGET_PROGRAMS_PER_SM * num_sms // programs)
    # A batch whose longest context is far above the rest: splits sized to it, or that one
    # sequence's few long splits finish last (a 33K question among 8K summaries ran 2.5x long).
    wanted = max(wanted, -(-max_context_len // MAX_TOKENS_PER_SPLIT))
    useful = max(1, -(-max_context_len // MIN_TOKENS_PER_SPLIT))
    return max(1, min(wanted, useful, MAX_SPLITS))


def prebuild_split_counts() -> list[int]:
    """A split count for each variant of the kernels a decode step may launch: one split (the
    split kernel writes the output) and one for each power-of-two pad of the merge kernel's
    splits (SPLITS_PAD), up to MAX_SPLITS."""
    counts, pad = [1], 2
    while pad <= MAX_SPLITS:
        counts.append(pad // 2 + 1)  # pads to `pad`
        pad *= 2
    return counts


def prebuild(
    num_heads: int,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    dtype: torch.dtype,
    *,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    merge_counters: torch.Tensor | None = None,
) -> None:
    """Compile now every variant of the kernels that decode steps over these caches launch
    (with merge_counters: the split kernel that merges its own splits, as the steps will):
    Triton compiles a variant at its first launch, seconds, inside whichever step first needs
    it (on an H100, a step of 8 decoding requests took 2.4 s so, its thread in Triton's
    compiler: bench/results/kv_tiers_h100.md). Reads one page of the caches, writes nothing of
    theirs."""
    q = torch.zeros(1, num_heads, k_cache.shape[3], dtype=dtype, device=k_cache.device)
    table = torch.zeros(1, 1, dtype=torch.int32, device=k_cache.device)
    lens = torch.ones(1, dtype=torch.int32, device=k_cache.device)
    for num_splits in prebuild_split_counts():
        paged_decode_attention(
            q, k_cache, v_cache, table, lens, num_splits=num_splits, k_scale=k_scale,
            v_scale=v_scale, merge_counters=merge_counters,
        )  # fmt: skip


def is_paged_decode_available(device: torch.device) -> bool:
    """Whether paged_decode_attention runs on `device`: a CUDA device that torch can reach, and
    Triton imports."""
    return device.type == "cuda" and torch.cuda.is_available() and _kernels() is not None


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
    max_context_len: int | None = None,
    out: torch.Tensor | None = None,
    num_splits: int | None = None,
    config: KernelConfig | None = None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    merge_counters: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of one query per sequence over its paged keys -> [B, H, D] (into `out` if given).

    q: [B, H, D]; k_cache, v_cache: [num_blocks, block_size, KV, D], H a multiple of KV (query
    head h reads KV head h // (H // KV)); block_tables: [B, max_blocks] int32, entries past a
    sequence's blocks any valid id; context_lens: [B] int32, the keys each query sees (its own
    included), 0 for a padding row (output zeros). max_context_len: an upper bound on
    context_lens known ahead, which sizes the split grid (default: the block table's capacity).
    num_splits and config override the split plan and the launch parameters (tuning, tests).
    k_scale, v_scale: [num_blocks, block_size, KV] fp32 for an FP8 cache (engine/attention/
    fp8_kv.py): a key is k_cache * k_scale[..., None], dequantized tile by tile in the kernel.
    merge_counters: int32 zeros, at least B * KV of them (merge_counters()), with which the split
    kernel merges its own splits (its last program of each sequence and KV head) instead of a
    second kernel; the kernel leaves them zero. Calls that share one must not run at once (one
    stream: an engine's steps).
    """
    kernels = _kernels()
    if kernels is None:
        raise EngineError(
            "The paged decode kernel needs the triton package; use paged_decode_reference."
        )
    if q.device.type != "cuda" and not _is_interpreted(kernels):
        raise EngineError(
            "The paged decode kernel runs on a CUDA device (or under Triton's interpreter); "
            "use paged_decode_reference on the CPU."
        )
    _check_inputs(q, k_cache, v_cache, block_tables, context_lens, out, k_scale, v_scale)
    batch_size, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    group = num_heads // num_kv_heads
    _check_counters(merge_counters, batch_size * num_kv_heads, q.device)
    is_fp8 = k_scale is not None
    if k_scale is None or v_scale is None:  # unread (KV_FP8 off): any pointer will do
        k_scale = v_scale = context_lens
    if out is None:
        out = torch.empty_like(q)
    if batch_size == 0:
        return out
    if max_context_len is None:
        max_context_len = block_tables.shape[1] * block_size
    if num_splits is None:
        num_splits = plan_num_splits(
            batch_size=batch_size,
            num_kv_heads=num_kv_heads,
            max_context_len=max_context_len,
            num_sms=sm_count(q.device),
        )
    if not 1 <= num_splits <= MAX_SPLITS:
        raise EngineError(f"num_splits must be between 1 and {MAX_SPLITS}, not {num_splits}.")
    config = config or default_kernel_config(head_dim, q.dtype, k_cache.dtype)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    block_d = _next_power_of_2(max(head_dim, MIN_DOT_DIM))
    fp16_dots = is_fp8 and config.fp16_dots and q.dtype.itemsize == 2
    v_pairs = fp16_dots and config.v_pairs and _pairs_aligned(v_cache)
    single = num_splits == 1
    fused = merge_counters is not None and not single
    group_p2 = _next_power_of_2(group) if fused else 1
    if merge_counters is None:  # unread (FUSED_MERGE off): any pointer will do
        merge_counters = context_lens
    if single:  # the kernel writes `out` directly; the workspace pointers go unused
        part_out = part_lse = out
    else:
        part_out = torch.empty(
            batch_size, num_heads, num_splits, head_dim, dtype=torch.float32, device=q.device
        )
        part_lse = torch.empty(
            batch_size, num_heads, num_splits, dtype=torch.float32, device=q.device
        )
    with on_device(q.device):
        kernels._paged_decode_split_kernel[(batch_size, num_kv_heads, num_splits)](
            q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens, out, part_out,
            part_lse, merge_counters,
            scale * LOG2_E,
            block_tables.shape[1],
            q.stride(0), q.stride(1),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
            # scales [num_blocks, block_size, KV], contiguous (checked): strides from the pages'
            block_size * num_kv_heads, num_kv_heads,
            block_tables.stride(0),
            out.stride(0), out.stride(1),
            GROUP=group,
            GROUP_PAD=_next_power_of_2(max(group, MIN_DOT_DIM)),
            HEAD_DIM=head_dim,
            BLOCK_D=block_d,
            BLOCK_SIZE=block_size,
            TILE_N=config.tile_tokens,
            SINGLE_SPLIT=single,
            KV_FP8=is_fp8,
            FP16_DOTS=fp16_dots,
            DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
            FUSED_MERGE=fused,
            GROUP_P2=group_p2,
            MERGE_CHUNK=_merge_chunk(group_p2, block_d) if fused else 1,
            V_PAIRS=v_pairs,
            PAIRS_ASM=v_pairs and _has_fp8_conversions(q.device),
            num_warps=config.num_warps,
            num_stages=config.num_stages,
            **({} if config.maxnreg is None else {"maxnreg": config.maxnreg}),
            **launch_options(q.device),
        )  # fmt: skip
        if not (single or fused):
            kernels._merge_splits_kernel[(batch_size, num_heads)](
                part_out, part_lse, out, num_splits, out.stride(0), out.stride(1),
                HEAD_DIM=head_dim,
                BLOCK_D=block_d,
                SPLITS_PAD=_next_power_of_2(num_splits),
                # all of a head's partial rows sit in registers: more warps for many splits
                num_warps=4 if num_splits * block_d <= 4096 else 8,
                **launch_options(q.device),
            )  # fmt: skip
    return out


def paged_decode_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
    max_context_len: int | None = None,
    out: torch.Tensor | None = None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """paged_decode_attention in plain torch: every page of the block table gathered, keys past
    a sequence's context masked, softmax in fp32. max_context_len is accepted for the same
    signature (it only sizes the kernel's grid)."""
    del max_context_len
    _check_inputs(q, k_cache, v_cache, block_tables, context_lens, out, k_scale, v_scale)
    batch_size, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    group = num_heads // num_kv_heads
    num_keys = block_tables.shape[1] * block_size
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    table = block_tables.long()
    visible = torch.arange(num_keys, device=q.device)[None, :] < context_lens[:, None]  # [B, N]
    hidden = ~visible[:, :, None, None]  # [B, N, 1, 1]
    # Slots past a context may hold anything (NaN included): zero them, 0 * NaN is NaN.
    k = k_cache[table].reshape(batch_size, num_keys, num_kv_heads, head_dim).float()
    v = v_cache[table].reshape(batch_size, num_keys, num_kv_heads, head_dim).float()
    if k_scale is not None and v_scale is not None:  # an FP8 cache
        k = k * k_scale[table].reshape(batch_size, num_keys, num_kv_heads, 1)
        v = v * v_scale[table].reshape(batch_size, num_keys, num_kv_heads, 1)
    k, v = k.masked_fill(hidden, 0.0), v.masked_fill(hidden, 0.0)  # [B, N, KV, D]
    qg = q.float().view(batch_size, num_kv_heads, group, head_dim)  # [B, KV, G, D]
    scores = torch.einsum("bkgd,bnkd->bkgn", qg, k) * scale  # [B, KV, G, N]
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    # A padding row (context 0) has no visible key: zeros, not softmax's NaN.
    probs = scores.softmax(-1).nan_to_num(nan=0.0)
    result = torch.einsum("bkgn,bnkd->bkgd", probs, v).reshape(batch_size, num_heads, head_dim)
    if out is None:
        return result.to(q.dtype)
    return out.copy_(result)


def _check_inputs(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    out: torch.Tensor | None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> None:
    """Shapes, dtypes and devices only: nothing that reads a value on the device."""
    if q.dim() != 3 or k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        raise EngineError(
            "Paged decode attention takes q [B, H, D] and K and V caches of one shape "
            f"[num_blocks, block_size, KV, D]; got q {tuple(q.shape)}, "
            f"k {tuple(k_cache.shape)}, v {tuple(v_cache.shape)}."
        )
    batch_size, num_heads, head_dim = q.shape
    _, _, num_kv_heads, cache_head_dim = k_cache.shape
    if cache_head_dim != head_dim or num_heads % num_kv_heads:
        raise EngineError(
            f"q's head dimension ({head_dim}) must match the cache's ({cache_head_dim}) and its "
            f"{num_heads} heads must be a multiple of the cache's {num_kv_heads} KV heads."
        )
    if head_dim > MAX_HEAD_DIM:
        raise EngineError(f"Paged decode attention supports head dimensions up to {MAX_HEAD_DIM}.")
    if (k_scale is None) != (v_scale is None):
        raise EngineError("Give both k_scale and v_scale (an FP8 cache), or neither.")
    cache_dtype = torch.float8_e4m3fn if k_scale is not None else q.dtype
    if k_cache.dtype != cache_dtype or v_cache.dtype != cache_dtype:
        raise EngineError(
            "q and the caches must share a dtype (an FP8 cache, with k_scale and v_scale, is "
            f"float8_e4m3fn); got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}."
        )
    if k_scale is not None and v_scale is not None:
        expected = tuple(k_cache.shape[:3])
        for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):
            if (
                scale.dtype != torch.float32
                or tuple(scale.shape) != expected
                or not scale.is_contiguous()
                or scale.device != q.device
            ):
                raise EngineError(
                    f"{name} must be contiguous float32 {list(expected)} on {q.device}, like "
                    f"the cache's first three dimensions; got {scale.dtype} "
                    f"{list(scale.shape)}."
                )
    if (
        block_tables.dtype != torch.int32
        or block_tables.dim() != 2
        or block_tables.shape[0] != batch_size
        or context_lens.dtype != torch.int32
        or context_lens.shape != (batch_size,)
    ):
        raise EngineError(
            f"block_tables must be int32 [B={batch_size}, max_blocks] and context_lens int32 "
            f"[B]; got {block_tables.dtype} {tuple(block_tables.shape)} and "
            f"{context_lens.dtype} {tuple(context_lens.shape)}."
        )
    tensors = [q, k_cache, v_cache, block_tables, context_lens] + ([out] if out is not None else [])
    if len({t.device for t in tensors}) != 1:
        raise EngineError("q, the caches, block_tables, context_lens and out must share a device.")
    if out is not None and (out.shape != q.shape or out.dtype != q.dtype):
        raise EngineError(f"out must be {q.dtype} {tuple(q.shape)}, like q.")
    if any(t.stride(-1) != 1 for t in tensors):
        raise EngineError("q, the caches, block_tables and out need a contiguous last dimension.")


def _merge_chunk(group_p2: int, block_d: int) -> int:
    """Splits the fused merge takes a step (MERGE_VALUES), a power of two."""
    values = MERGE_VALUES if group_p2 <= 4 else MERGE_VALUES // 2
    return max(1, values // (group_p2 * block_d))


@functools.cache
def _has_fp8_conversions(device: torch.device) -> bool:
    """Whether the kernel may widen E4M3 pairs with inline PTX (cvt.rn.f16x2.e4m3x2: sm_89 and
    newer); otherwise (Triton's interpreter, an older GPU) it uses Triton's own operations."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)


def _pairs_aligned(v_cache: torch.Tensor) -> bool:
    """Whether V's 8-bit values can be read as 16-bit pairs: an even head dim, even strides,
    an even address."""
    return (
        v_cache.shape[-1] % 2 == 0
        and all(stride % 2 == 0 for stride in v_cache.stride()[:-1])
        and v_cache.stride(-1) == 1
        and v_cache.data_ptr() % 2 == 0
    )


def merge_counters(rows: int, num_kv_heads: int, device: torch.device) -> torch.Tensor:
    """Zeroed counters with which paged_decode_attention merges splits in its split kernel,
    for batches of up to `rows` sequences; allocate them before any CUDA graph capture."""
    return torch.zeros(rows * num_kv_heads, dtype=torch.int32, device=device)


def _check_counters(counters: torch.Tensor | None, needed: int, device: torch.device) -> None:
    if counters is None:
        return
    if (
        counters.dtype != torch.int32
        or counters.dim() != 1
        or not counters.is_contiguous()
        or counters.numel() < needed
        or counters.device != device
    ):
        raise EngineError(
            f"merge_counters must be a contiguous int32 vector of at least {needed} zeros "
            f"(batch size times KV heads) on {device}; got {counters.dtype} "
            f"{list(counters.shape)} on {counters.device}."
        )


def _kernels() -> ModuleType | None:
    return triton_module("engine.attention.paged_decode_kernels")


def _is_interpreted(kernels: ModuleType) -> bool:
    """Whether Triton decorated the kernels for its CPU interpreter (TRITON_INTERPRET=1)."""
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(kernels._merge_if_last, InterpretedFunction)


def _next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length()
