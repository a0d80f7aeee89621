"""flash-attn on CUDA, when the package imports: flash-attn 4 (`flash_attn.cute`, the CuTe-DSL
kernels for Hopper and Blackwell) or flash-attn 2 (`flash_attn`, Ampere and newer).

Both align a causal mask bottom-right when a chunk's queries are fewer than its keys and read
grouped-query K/V without repeating it, so a chunk after a cached prefix can be one kernel call
(flash-attn 2 always, flash-attn 4 without its private entry point). flash-attn 4 is the
FlashAttention-3 design (warp-specialised TMA loads, two consumer warpgroups in ping-pong,
softmax overlapped with the next QK^T); its mask-free kernel is faster than its causal one, so
FlashAttn4Backend splits such a chunk into prefix and own keys (bench/results/prefill_h200.md)."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

from engine.attention.base import AttentionBackend, AttentionMetadata, gather_kv

# flash-attn 2's paged path requires blocks of a multiple of 256 tokens.
PAGED_BLOCK_MULTIPLE = 256
# GPU generations flash-attn 4 has forward kernels for (compute capability major).
FLASH_ATTN_4_MAJORS = (9, 10, 11)
# flash-attn 4's (query, key) tile for the mask-free prefix call: FlashAttention-3's C++ tile for
# head dim 128 without a mask. None leaves it to flash-attn's heuristic.
PREFIX_TILE: tuple[int, int] | None = (128, 176)


@functools.cache
def _import_flash_attn_4() -> Any | None:
    try:
        from flash_attn.cute import interface
    except Exception:  # missing, or its CUDA-DSL stack fails to load: raises more than ImportError
        return None
    return interface


@functools.cache
def _import_flash_attn_2() -> Any | None:
    try:
        import flash_attn
        from flash_attn import flash_attn_func, flash_attn_with_kvcache  # noqa: F401
    except Exception:  # an ABI mismatch raises more than ImportError
        return None
    return flash_attn


def flash_attn_version(device: torch.device) -> int | None:
    """4 when flash-attn 4 imports and `device` is a Hopper or Blackwell GPU, else 2 when
    flash-attn 2 imports and `device` is a GPU, else None."""
    if device.type != "cuda":
        return None
    major = torch.cuda.get_device_capability(device)[0]
    if major in FLASH_ATTN_4_MAJORS and _import_flash_attn_4() is not None:
        return 4
    if _import_flash_attn_2() is not None:
        return 2
    return None


def make_flash_backend(device: torch.device, block_size: int) -> AttentionBackend | None:
    """The flash-attn backend for `device`, or None when no flash-attn runs there."""
    version = flash_attn_version(device)
    if version == 4:
        return FlashAttn4Backend(_import_flash_attn_4())
    if version == 2:
        return FlashAttn2Backend(block_size)
    return None


class FlashAttn4Backend(AttentionBackend):
    """One bottom-right causal call per step; with split_prefix, a chunk after a cached prefix
    runs as a mask-free call over the prefix with wider key tiles (FlashAttention-3's 128 x 176
    for head dim 128) plus a causal call over its own keys, merged by log-sum-exp."""

    name = "flash_attn"
    materializes_scores = False
    split_prefix = True
    prefix_tile = PREFIX_TILE
    overlap_own = True  # the own-keys call on a second stream, concurrent with the prefix call

    def __init__(self, interface: Any) -> None:
        self._func = interface.flash_attn_func
        self._varlen_func = interface.flash_attn_varlen_func
        self._stream: torch.cuda.Stream | None = None
        # The tile is a knob of the private entry point only; without it, no split.
        self._fwd = getattr(interface, "_flash_attn_fwd", None)
        if self._fwd is None or "tile_mn" not in inspect.signature(self._fwd).parameters:
            self.split_prefix = False

    def prepare(self, meta: AttentionMetadata) -> AttentionMetadata:
        if meta.first_block_if_contiguous is None:
            meta.extra["seqused_k"] = torch.tensor(
                [meta.context_len], dtype=torch.int32, device=meta.slot_mapping.device
            )
        return meta

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        if meta.first_block_if_contiguous is None:
            # Scattered blocks (a prefix-cache hit): read them in place through the block table.
            # Pages past seqused_k are masked; the cache is zero-filled, so none holds a NaN.
            out, _ = self._varlen_func(
                q.unsqueeze(0),  # [1, T, H, D]
                k_cache,  # [num_blocks, block_size, KV, D]
                v_cache,
                page_table=meta.block_table.unsqueeze(0),
                seqused_k=meta.extra["seqused_k"],
                causal=True,
            )
            return out[0]  # [T, H, D]
        keys, values = gather_kv(k_cache, meta), gather_kv(v_cache, meta)  # [ctx, KV, D] views
        if self.split_prefix and meta.start > 0 and meta.num_query_tokens > 1:
            return self._prefix_then_own(q, keys.unsqueeze(0), values.unsqueeze(0), meta.start)
        out, _ = self._func(q.unsqueeze(0), keys.unsqueeze(0), values.unsqueeze(0), causal=True)
        return out[0]  # [T, H, D]

    def _prefix_then_own(
        self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, start: int
    ) -> torch.Tensor:
        """q [T, H, D]; keys, values [1, start + T, KV, D] -> [T, H, D]."""
        q4 = q.unsqueeze(0)  # [1, T, H, D]

        tile = {} if self.prefix_tile is None else {"tile_mn": self.prefix_tile}

        def prefix() -> tuple[torch.Tensor, torch.Tensor]:  # no mask: every query sees it all
            return self._fwd(
                q4, keys[:, :start], values[:, :start], causal=False, return_lse=True, **tile
            )[:2]

        def own() -> tuple[torch.Tensor, torch.Tensor]:
            return self._fwd(q4, keys[:, start:], values[:, start:], causal=True, return_lse=True)[
                :2
            ]

        if not q.is_cuda:  # flash-attn runs on CUDA only; this path is for tests
            return merge_by_lse(*prefix(), *own())[0]
        if not self.overlap_own:
            return _merge(*prefix(), *own())[0]
        main = torch.cuda.current_stream(q.device)
        side = self._side_stream(q.device)
        side.wait_stream(main)  # before the prefix call is queued, or the two would serialise
        o_prefix, lse_prefix = prefix()
        # The causal call over the chunk's own keys on a second stream: its small tiles fill
        # the SMs the prefix call's last wave leaves idle.
        with torch.cuda.stream(side):
            o_own, lse_own = own()
        main.wait_stream(side)
        o_own.record_stream(main)  # allocated on the side stream, read and freed on main
        lse_own.record_stream(main)
        return _merge(o_prefix, lse_prefix, o_own, lse_own)[0]

    def _side_stream(self, device: torch.device) -> torch.cuda.Stream:
        if self._stream is None:
            self._stream = torch.cuda.Stream(device)
        return self._stream


def merge_by_lse(
    o_prefix: torch.Tensor, lse_prefix: torch.Tensor, o_own: torch.Tensor, lse_own: torch.Tensor
) -> torch.Tensor:
    """Two attention parts [1, T, H, D] with log-sum-exps [1, H, T] -> their joint attention.

    The prefix part's weight is e^l1 / (e^l1 + e^l2) = sigmoid(l1 - l2), mostly near 1: in
    bf16 it would be off by up to 2^-9, so the blend is done in fp32 (1.0e-2 rel. L2 against
    the one-call kernel at 128K with a bf16 weight, bench/results/prefill_h200.md).
    """
    weight = torch.sigmoid(lse_prefix - lse_own).transpose(1, 2).unsqueeze(-1)  # [1, T, H, 1]
    own = o_own.float()
    return (own + weight * (o_prefix.float() - own)).to(o_own.dtype)


# One fused kernel on CUDA (eager it is four passes over fp32 temporaries); compiled on first use.
_merge = torch.compile(merge_by_lse, dynamic=True)


class FlashAttn2Backend(AttentionBackend):
    name = "flash_attn"
    materializes_scores = False

    def __init__(self, block_size: int) -> None:
        from flash_attn import flash_attn_func, flash_attn_with_kvcache

        self._with_kvcache = flash_attn_with_kvcache
        self._func = flash_attn_func
        self.is_paged = block_size % PAGED_BLOCK_MULTIPLE == 0

    def prepare(self, meta: AttentionMetadata) -> AttentionMetadata:
        device = meta.slot_mapping.device
        meta.extra["cache_seqlens"] = torch.tensor(
            [meta.context_len], dtype=torch.int32, device=device
        )
        return meta

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        if self.is_paged:
            out = self._with_kvcache(
                q.unsqueeze(0),  # [1, T, H, D]
                k_cache,  # [num_blocks, block_size, KV, D]: flash-attn's paged layout
                v_cache,
                cache_seqlens=meta.extra["cache_seqlens"],
                block_table=meta.block_table.unsqueeze(0),
                causal=True,
            )
        else:
            keys, values = gather_kv(k_cache, meta), gather_kv(v_cache, meta)  # [ctx, KV, D]
            out = self._func(q.unsqueeze(0), keys.unsqueeze(0), values.unsqueeze(0), causal=True)
        return out[0]  # [T, H, D]
