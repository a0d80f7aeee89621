"""The only place that runs the model: one forward step over the chunks of many sequences.

A step's tokens are flattened ([T] ids and positions, decodes first); the matrix products run
over all of them at once. Attention, the one part that is per sequence, is split: the step's
single-token chunks (the decodes) go through one paged decode kernel over all their block tables
where one is available (CUDA with Triton), and every longer chunk (a prefill chunk) goes through
the backend's own prefill path, one call per chunk, exactly as when it ran alone. Decode-only
steps on CUDA replay a captured CUDA graph (engine/cuda_graphs.py).
"""

from __future__ import annotations

import torch

from engine.attention import AttentionBackend, AttentionMetadata
from engine.attention.decode import DecodeAttention, DecodeBatch, make_decode_attention
from engine.cuda_graphs import DecodeGraphs
from engine.kv_cache import KVCache
from engine.models import LlamaModel
from engine.sampler import to_device
from engine.step_inputs import LOGITS_ALL, LOGITS_LAST, ChunkInput, FedTokens


class ModelRunner:
    def __init__(
        self,
        model: LlamaModel,
        kv_cache: KVCache,
        backend: AttentionBackend,
        device: torch.device,
        *,
        use_cuda_graphs: bool = False,
        max_num_seqs: int = 64,
        max_model_len: int = 8192,
    ) -> None:
        self.model = model
        self.kv_cache = kv_cache
        self.backend = backend
        self.device = device
        self.block_size = kv_cache.block_size
        self.decode_attention: DecodeAttention = make_decode_attention(backend, device)
        self.graphs = None
        if use_cuda_graphs and device.type == "cuda" and self.decode_attention.is_graph_safe:
            self.graphs = DecodeGraphs(self, max_num_seqs=max_num_seqs, max_model_len=max_model_len)

    @torch.inference_mode()
    def run(self, chunks: list[ChunkInput], fed: FedTokens | None = None) -> torch.Tensor:
        """Write the KV of every chunk and return fp32 logits [N, V]: for each chunk in order,
        none, its last position or all its positions, as it asks. fed: input ids to take from
        the device instead of the chunks' token_ids. Launches the work without waiting for it."""
        num_decodes = _num_leading_single_tokens(chunks)
        if self.graphs is not None and num_decodes == len(chunks):
            logits = self.graphs.run(chunks, fed)
            if logits is not None:
                return logits
        return self.forward_eager(chunks, num_decodes, fed)

    def forward_eager(
        self, chunks: list[ChunkInput], num_decodes: int, fed: FedTokens | None = None
    ) -> torch.Tensor:
        device = self.device
        input_ids = to_device(
            [t for chunk in chunks for t in chunk.token_ids], torch.long, device
        )  # [T]
        if fed is not None:
            fed.write_into(input_ids)
        positions = to_device(
            [p for chunk in chunks for p in range(chunk.start, chunk.start + chunk.num_tokens)],
            torch.long,
            device,
        )  # [T]
        decode = self._decode_batch(chunks[:num_decodes]) if num_decodes else None
        prefills = [
            (offset, self._prefill_metadata(chunk))
            for offset, chunk in _offsets(chunks, num_decodes)
        ]
        cache, backend, decode_attention = self.kv_cache, self.backend, self.decode_attention

        def attention(layer_idx: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
            # q: [T, H, D], k, v: [T, KV, D]
            k_cache, v_cache = cache.k[layer_idx], cache.v[layer_idx]
            if decode is None and len(prefills) == 1:
                return backend.forward(q, k, v, k_cache, v_cache, prefills[0][1])
            out = torch.empty_like(q)
            if decode is not None:
                n = num_decodes
                out[:n] = decode_attention.forward(q[:n], k[:n], v[:n], k_cache, v_cache, decode)
            for offset, meta in prefills:
                rows = slice(offset, offset + meta.num_query_tokens)
                out[rows] = backend.forward(q[rows], k[rows], v[rows], k_cache, v_cache, meta)
            return out

        logits_indices = _logits_indices(chunks, device)
        if logits_indices is not None and logits_indices.numel() == 0:
            self.model(input_ids, positions, attention, logits_indices)
            return torch.empty(0, self.model.args.vocab_size, device=device)
        return self.model(input_ids, positions, attention, logits_indices).float()

    # ---- metadata -------------------------------------------------------------------------

    def _prefill_metadata(self, chunk: ChunkInput) -> AttentionMetadata:
        device = self.device
        num_blocks = -(-(chunk.start + chunk.num_tokens) // self.block_size)
        table = chunk.block_table[:num_blocks]
        table_t = to_device(table, torch.int32, device)
        positions = torch.arange(chunk.start, chunk.start + chunk.num_tokens, device=device)
        slots = table_t[positions // self.block_size].long() * self.block_size
        slots += positions % self.block_size
        return self.backend.prepare(
            AttentionMetadata(
                start=chunk.start,
                num_query_tokens=chunk.num_tokens,
                slot_mapping=slots,
                block_table=table_t,
                block_size=self.block_size,
                first_block_if_contiguous=_first_if_consecutive(table),
            )
        )

    def _decode_batch(self, chunks: list[ChunkInput]) -> DecodeBatch:
        return DecodeBatch.build(
            [chunk.start for chunk in chunks],
            [chunk.block_table for chunk in chunks],
            self.block_size,
            self.device,
            per_row=None if self.decode_attention.is_batched else self._prefill_metadata,
            chunks=chunks,
        )


def _num_leading_single_tokens(chunks: list[ChunkInput]) -> int:
    count = 0
    for chunk in chunks:
        if chunk.num_tokens != 1:
            break
        count += 1
    return count


def _offsets(chunks: list[ChunkInput], first: int) -> list[tuple[int, ChunkInput]]:
    offset = sum(chunk.num_tokens for chunk in chunks[:first])
    found = []
    for chunk in chunks[first:]:
        found.append((offset, chunk))
        offset += chunk.num_tokens
    return found


def _logits_indices(chunks: list[ChunkInput], device: torch.device) -> torch.Tensor | None:
    """Rows of the flat step whose logits are needed; None for all of them."""
    if all(chunk.logits == LOGITS_ALL for chunk in chunks):
        return None
    if all(chunk.logits == LOGITS_LAST and len(chunk.token_ids) == 1 for chunk in chunks):
        return None  # a decode step: every row samples
    rows: list[int] = []
    offset = 0
    for chunk in chunks:
        if chunk.logits == LOGITS_ALL:
            rows.extend(range(offset, offset + chunk.num_tokens))
        elif chunk.logits == LOGITS_LAST:
            rows.append(offset + chunk.num_tokens - 1)
        offset += chunk.num_tokens
    return to_device(rows, torch.long, device)


def _first_if_consecutive(table: list[int]) -> int | None:
    if not table:
        return None
    first = table[0]
    return (
        first
        if table[-1] - first == len(table) - 1 and table == list(range(first, first + len(table)))
        else None
    )
