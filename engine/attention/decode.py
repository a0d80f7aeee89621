"""Decode attention over many sequences at once: one query per sequence against its paged KV.

64 streams of 4K context read twice as many KV bytes per step as the weights of an 8B model, so
on CUDA this is one paged kernel over every block table (engine/attention/paged_decode.py, Triton)
whose launch shape does not depend on the context lengths: a CUDA graph of the whole decode step
replays it with new lengths and tables in the same buffers. Where no such kernel runs (the CPU, a
GPU without Triton) each sequence goes through its backend's own one-query path, in place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from engine.attention.base import AttentionBackend, AttentionMetadata
from engine.attention.fp8_kv import Fp8KVBackend, dequantize_pages, write_pages


@dataclass
class DecodeBatch:
    """The decode rows of a step: B sequences, one new token each."""

    slot_mapping: torch.Tensor  # [B] int64: cache slot of each row's new token
    block_tables: torch.Tensor  # [B, max_blocks] int32, padded with block 0
    context_lens: torch.Tensor  # [B] int32: keys of each row, its own included
    max_context_len: int
    per_row: list[AttentionMetadata] | None = None  # for backends without a batched kernel

    @classmethod
    def build(
        cls,
        starts: Sequence[int],
        block_tables: Sequence[Sequence[int]],
        block_size: int,
        device: torch.device,
        *,
        per_row: Callable[[Any], AttentionMetadata] | None = None,
        chunks: Sequence[Any] = (),
    ) -> DecodeBatch:
        num_rows = len(starts)
        num_blocks = [start // block_size + 1 for start in starts]
        # One numpy array filled row by row, then one copy: a tensor per row cost ~45 us each.
        tables = np.zeros((num_rows, max(num_blocks)), dtype=np.int32)
        slots = np.empty(num_rows, dtype=np.int64)
        for row, (start, table) in enumerate(zip(starts, block_tables, strict=True)):
            tables[row, : num_blocks[row]] = table[: num_blocks[row]]
            slots[row] = table[start // block_size] * block_size + start % block_size
        context_lens = np.asarray(starts, dtype=np.int32) + 1
        return cls(
            slot_mapping=_to_device(slots, device),
            block_tables=_to_device(tables, device),
            context_lens=_to_device(context_lens, device),
            max_context_len=max(starts) + 1,
            per_row=[per_row(chunk) for chunk in chunks] if per_row is not None else None,
        )


def _to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    host = torch.from_numpy(array)
    return host if device.type == "cpu" else host.to(device, non_blocking=True)


class DecodeAttention:
    """q: [B, H, D], k/v: [B, KV, D] (the rows' new keys), caches [blocks, block_size, KV, D]."""

    name = "base"
    is_batched = False  # one kernel over all rows (else per_row metadata is needed)
    is_graph_safe = False  # may be captured in a CUDA graph

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        batch: DecodeBatch,
    ) -> torch.Tensor:
        raise NotImplementedError

    def prebuild(self, num_heads: int, kv_cache: Any, dtype: torch.dtype) -> None:
        """Compile ahead whatever a step would otherwise compile at its first launch, over
        kv_cache (an engine.kv_cache.KVCache: every layer's k and v, its scratch_slot);
        nothing to do for most."""


class PerSequenceDecode(DecodeAttention):
    """Each row through the backend's one-query path: exactly what a request alone computes."""

    name = "per_sequence"

    def __init__(self, backend: AttentionBackend) -> None:
        self.backend = backend

    def forward(self, q, k, v, k_cache, v_cache, batch):
        assert batch.per_row is not None
        out = torch.empty_like(q)  # [B, H, D]
        for row, meta in enumerate(batch.per_row):
            rows = slice(row, row + 1)
            out[rows] = self.backend.forward(q[rows], k[rows], v[rows], k_cache, v_cache, meta)
        return out


# Rows of a decode batch whose splits the attention kernel merges itself (PagedDecode's
# counters: 4 bytes a row and KV head); a larger batch merges in a second kernel. 0: none, every
# batch merges in the second kernel. On an H100 (bench/results/fp8_h100.md, call O) its CUDA
# checks passed and, with an FP8 cache's V read as pairs, the 8B in FP8 compiled went from 249.2
# to 253.9 tokens/s at one stream and from 4,838 to 5,077 at 64 streams.
FUSED_MERGE_ROWS = 4096


class PagedDecode(DecodeAttention):
    """A paged kernel over every row (Triton on CUDA: graph-safe). Once prebuilt, with
    FUSED_MERGE_ROWS, its split kernel merges its own splits (engine/attention/paged_decode.py's
    merge_counters, allocated here before any CUDA graph is captured; this object's calls run
    one at a time, on the engine's stream): one kernel a layer where the merge took a second
    (3.5 us a layer at one stream on an H200)."""

    name = "paged_triton"
    is_batched = True
    is_graph_safe = True

    def __init__(self, kernel: Callable[..., torch.Tensor]) -> None:
        self.kernel = kernel
        self.merge_counters: torch.Tensor | None = None

    def prebuild(self, num_heads, kv_cache, dtype):
        """The decode kernels' variants over every layer's caches (a layer's pages are views
        into one tensor: their pointers' alignment, which Triton specializes on, can differ
        from layer to layer: _prebuild_layer). With FUSED_MERGE_ROWS the merge counters come
        first, and go again if a build fails (the steps then merge in a second kernel)."""
        self._allocate_counters(self._pages(kv_cache.k[0]))
        try:
            for k_cache, v_cache in zip(kv_cache.k, kv_cache.v, strict=True):
                self._prebuild_layer(num_heads, k_cache, v_cache, dtype, kv_cache.scratch_slot)
        except Exception:
            self.merge_counters = None
            raise

    def _prebuild_layer(
        self, num_heads: int, k_cache: Any, v_cache: Any, dtype: torch.dtype, scratch_slot: int
    ) -> None:
        """One layer's attention variants, and the fused write into the scratch slot from K and
        V laid out as the model gives them (K out of RoPE, V a view of the fused projection)."""
        from engine.attention.paged_decode import prebuild

        prebuild(num_heads, k_cache, v_cache, dtype, merge_counters=self.merge_counters)
        k, v = _model_laid_kv(num_heads, k_cache, dtype)
        slot = torch.tensor([scratch_slot], device=k_cache.device)
        write_slots(k, v, k_cache, v_cache, slot)

    @staticmethod
    def _pages(cache: Any) -> torch.Tensor:
        """A layer's cache as the kernel reads it: the tensor itself."""
        return cache

    def _allocate_counters(self, pages: torch.Tensor) -> None:
        if not FUSED_MERGE_ROWS:
            return
        from engine.attention.paged_decode import merge_counters

        self.merge_counters = merge_counters(FUSED_MERGE_ROWS, pages.shape[2], pages.device)

    def _merge_options(self, q: torch.Tensor, pages: torch.Tensor) -> dict[str, torch.Tensor]:
        """The kernel's merge_counters where this batch fits them (none before prebuild, and
        none for the CPU kernel, which takes no such argument)."""
        counters = self.merge_counters
        if counters is None or q.shape[0] * pages.shape[2] > counters.numel():
            return {}
        return {"merge_counters": counters}

    def forward(self, q, k, v, k_cache, v_cache, batch):
        write_slots(k, v, k_cache, v_cache, batch.slot_mapping)
        return self.kernel(
            q,
            k_cache,
            v_cache,
            batch.block_tables,
            batch.context_lens,
            max_context_len=batch.max_context_len,
            **self._merge_options(q, self._pages(k_cache)),
        )


def write_slots(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Store rows' K/V [B, KV, D] in their cache slots (a scatter; graph-safe): on CUDA one
    Triton kernel for both caches, elsewhere an index_copy_ each."""
    if k.is_cuda:
        from engine.attention import paged_decode, slot_write

        if paged_decode.is_paged_decode_available(k.device):
            slot_write.write_slots_fused(k, v, k_cache, v_cache, slot_mapping)
            return
    num_kv_heads, head_dim = k.shape[1], k.shape[2]
    k_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, k)
    v_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, v)


class Fp8PagedDecode(PagedDecode):
    """The paged Triton kernel over the FP8 cache (caches are QuantizedPages): the new rows are
    quantized into their slots, and the kernel dequantizes each tile it loads."""

    name = "paged_triton_fp8"

    def _prebuild_layer(self, num_heads, k_cache, v_cache, dtype, scratch_slot):
        """As PagedDecode's, over the layer's pages and scales, and the FP8 cache's other two
        kernels: the fused write, into the scratch slot, from K and V laid out as the model
        gives them (K out of RoPE, V a view of the fused projection), and the prefill's read."""
        from engine.attention.paged_decode import prebuild

        prebuild(
            num_heads, k_cache.data, v_cache.data, dtype, k_scale=k_cache.scale,
            v_scale=v_cache.scale, merge_counters=self.merge_counters,
        )  # fmt: skip
        k, v = _model_laid_kv(num_heads, k_cache.data, dtype)
        device = k_cache.data.device
        slot = torch.tensor([scratch_slot], device=device)
        write_pages(k, v, k_cache, v_cache, slot)
        first_page = torch.zeros(1, dtype=torch.long, device=device)
        for pages in (k_cache, v_cache):
            dequantize_pages(pages, first_page, dtype)

    @staticmethod
    def _pages(cache: Any) -> torch.Tensor:
        """A layer's QuantizedPages as the kernel reads them: their E4M3 data."""
        return cache.data

    def forward(self, q, k, v, k_cache, v_cache, batch):
        write_pages(k, v, k_cache, v_cache, batch.slot_mapping)
        return self.kernel(
            q,
            k_cache.data,
            v_cache.data,
            batch.block_tables,
            batch.context_lens,
            max_context_len=batch.max_context_len,
            k_scale=k_cache.scale,
            v_scale=v_cache.scale,
            **self._merge_options(q, self._pages(k_cache)),
        )


def _model_laid_kv(
    num_heads: int, cache: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """A row of K and V [1, KV, D] laid out as the model hands them to decode attention (K out
    of RoPE, contiguous; V a view of the fused q/k/v projection), so that a prebuild launch
    specializes as a step's does."""
    num_kv_heads, head_dim = cache.shape[2], cache.shape[3]
    k = torch.zeros(1, num_kv_heads, head_dim, dtype=dtype, device=cache.device)
    width = (num_heads + 2 * num_kv_heads) * head_dim
    qkv = torch.zeros(1, width, dtype=dtype, device=cache.device)
    v = qkv[:, (num_heads + num_kv_heads) * head_dim :].view(1, num_kv_heads, head_dim)
    return k, v


class CpuPagedDecode(PagedDecode):
    """Our AVX-512 kernel over every row in one parallel region (the cpu_flash backend)."""

    name = "paged_cpu"
    is_graph_safe = False

    def prebuild(self, num_heads, kv_cache, dtype):
        """Nothing: the kernel is compiled once, ahead (worker/model/kernel_build)."""


def make_decode_attention(backend: AttentionBackend, device: torch.device) -> DecodeAttention:
    """The paged Triton kernel on CUDA where Triton runs, our AVX-512 kernel on the CPU with
    the cpu_flash backend, else each row through `backend`. Over the FP8 cache (backend an
    Fp8KVBackend): the Triton kernel on CUDA, else each row through the backend, dequantizing."""
    is_fp8 = isinstance(backend, Fp8KVBackend)
    if device.type == "cpu" and backend.name == "cpu_flash" and not is_fp8:
        from engine.attention.cpu_flash import cpu_paged_decode

        return CpuPagedDecode(cpu_paged_decode)
    if device.type == "cuda":
        try:
            from engine.attention.paged_decode import (
                is_paged_decode_available,
                paged_decode_attention,
            )
        except ImportError:
            return PerSequenceDecode(backend)
        if is_paged_decode_available(device):
            return (Fp8PagedDecode if is_fp8 else PagedDecode)(paged_decode_attention)
    return PerSequenceDecode(backend)
