"""CUDA graphs of decode steps: one graph per batch-size bucket, replayed with new inputs.

A decode step of an 8B model is ~200 small kernels; launched one by one from Python they cost
more than the GPU needs to run them at batch 1. As vLLM, SGLang and nano-vllm do, the whole
decode forward is captured once per bucket of batch sizes, over static input buffers (ids,
positions, cache slots, block tables, context lengths), and each step copies its rows into the
buffers and replays. Rows past the step's batch are padding: context length 0 (the kernel writes
zeros) and a scratch cache slot that no request owns (KVCache.scratch_slot).
"""

from __future__ import annotations

import bisect
from typing import Any, Protocol

import numpy as np
import torch

from engine.attention.decode import DecodeAttention, DecodeBatch
from engine.kv_cache import KVCache
from engine.step_inputs import ChunkInput, FedTokens


class GraphedRunner(Protocol):
    """What the graphs read of the model runner that owns them."""

    block_size: int
    device: torch.device
    kv_cache: KVCache
    decode_attention: DecodeAttention
    model: Any


def batch_buckets(max_num_seqs: int) -> list[int]:
    """1, 2, 4, 8, then every 8 up to max_num_seqs (vLLM's shape of buckets)."""
    buckets = [b for b in (1, 2, 4) if b < max_num_seqs]
    buckets += list(range(8, max_num_seqs, 8))
    return [*buckets, max_num_seqs]


def context_bucket(num_tokens: int, max_model_len: int) -> int:
    """The power of two (at least 4,096) at or above num_tokens, at most max_model_len."""
    bucket = 4096
    while bucket < num_tokens:
        bucket *= 2
    return min(bucket, max(max_model_len, num_tokens))


class DecodeGraphs:
    def __init__(self, runner: GraphedRunner, *, max_num_seqs: int, max_model_len: int) -> None:
        self.runner = runner
        self.buckets = batch_buckets(max_num_seqs)
        self.max_model_len = max_model_len
        block_size = runner.block_size
        self.max_blocks = -(-max_model_len // block_size)
        device, size = runner.device, self.buckets[-1]
        self.scratch_slot = runner.kv_cache.scratch_slot
        self.input_ids = torch.zeros(size, dtype=torch.long, device=device)
        self.positions = torch.zeros(size, dtype=torch.long, device=device)
        self.slot_mapping = torch.full((size,), self.scratch_slot, dtype=torch.long, device=device)
        self.block_tables = torch.zeros(size, self.max_blocks, dtype=torch.int32, device=device)
        self.context_lens = torch.zeros(size, dtype=torch.int32, device=device)
        self._host_rows = np.zeros((4, size), dtype=np.int64)  # ids, positions, slots, lengths
        self._host_tables = np.zeros((size, self.max_blocks), dtype=np.int32)
        self._row_owner: list[tuple[object, int]] = [(None, 0)] * size
        # By (batch bucket, context bucket): the kernel's split count follows the longest context.
        self._graphs: dict[tuple[int, int], tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self._pool = None

    def run(self, chunks: list[ChunkInput], fed: FedTokens | None = None) -> torch.Tensor | None:
        """fp32 logits [B, V] of a decode-only step, or None when no bucket is large enough.
        fed: input ids taken from the device (the previous step's samples) into the buffer."""
        num_rows = len(chunks)
        index = bisect.bisect_left(self.buckets, num_rows)
        if index == len(self.buckets) or max(c.start for c in chunks) >= self.max_model_len:
            return None
        bucket = self.buckets[index]
        context = context_bucket(max(c.start for c in chunks) + 1, self.max_model_len)
        self._fill(chunks, bucket)
        if fed is not None:
            fed.write_into(self.input_ids)  # after the buffer's host copy, in stream order
        key = (bucket, context)
        if key not in self._graphs:
            self._graphs[key] = self._capture(bucket, context)
        graph, logits = self._graphs[key]
        graph.replay()
        return logits[:num_rows]

    def _fill(self, chunks: list[ChunkInput], bucket: int) -> None:
        """Copy the step's rows into the static buffers. The host copy of the block tables is
        kept between steps: a row whose sequence stayed only gets its new block ids."""
        bs = self.runner.block_size
        num_blocks = max(chunk.start for chunk in chunks) // bs + 1
        rows = self._host_rows[:, :bucket]
        rows[0] = 0
        rows[1] = 0
        rows[2] = self.scratch_slot
        rows[3] = 0
        tables = self._host_tables
        for row, chunk in enumerate(chunks):
            start, table = chunk.start, chunk.block_table
            n = start // bs + 1
            owner, written = self._row_owner[row]
            if owner is not table:
                written = 0
            if written < n:
                tables[row, written:n] = table[written:n]
                self._row_owner[row] = (table, n)
            rows[0, row] = chunk.token_ids[0]
            rows[1, row] = start
            rows[2, row] = table[start // bs] * bs + start % bs
            rows[3, row] = start + 1
        host_rows = torch.from_numpy(rows)
        self.input_ids[:bucket].copy_(host_rows[0], non_blocking=True)
        self.positions[:bucket].copy_(host_rows[1], non_blocking=True)
        self.slot_mapping[:bucket].copy_(host_rows[2], non_blocking=True)
        self.context_lens[:bucket].copy_(host_rows[3], non_blocking=True)
        self.block_tables[:bucket, :num_blocks].copy_(
            torch.from_numpy(tables[:bucket, :num_blocks]), non_blocking=True
        )

    def _forward(self, bucket: int, context: int) -> torch.Tensor:
        runner = self.runner
        batch = DecodeBatch(
            slot_mapping=self.slot_mapping[:bucket],
            block_tables=self.block_tables[:bucket],
            context_lens=self.context_lens[:bucket],
            max_context_len=context,
        )
        cache, decode = runner.kv_cache, runner.decode_attention

        def attention(layer_idx: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
            return decode.forward(q, k, v, cache.k[layer_idx], cache.v[layer_idx], batch)

        logits = runner.model(self.input_ids[:bucket], self.positions[:bucket], attention, None)
        return logits.float()  # [bucket, V]

    @torch.inference_mode()
    def _capture(self, bucket: int, context: int) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        # Warm up on a side stream (lazy initialisation, compiled kernels), then capture.
        stream = torch.cuda.Stream(self.runner.device)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._forward(bucket, context)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        # thread_local: other threads' CUDA calls (the KV tiers pin host memory on a thread of
        # their own) neither fail nor invalidate this capture; in the default global mode a
        # host allocation on another thread during a capture broke the step.
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            logits = self._forward(bucket, context)
        self._pool = graph.pool()
        return graph, logits
