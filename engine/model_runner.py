"""The only place that runs the model: one forward step of one sequence against the paged cache."""

from __future__ import annotations

import torch

from engine.attention import AttentionBackend, AttentionMetadata
from engine.kv_cache import KVCache
from engine.models import LlamaModel


class ModelRunner:
    def __init__(
        self,
        model: LlamaModel,
        kv_cache: KVCache,
        backend: AttentionBackend,
        device: torch.device,
    ) -> None:
        self.model = model
        self.kv_cache = kv_cache
        self.backend = backend
        self.device = device
        self.block_size = kv_cache.block_size

    @torch.inference_mode()
    def forward(
        self,
        token_ids: list[int],
        start: int,
        block_table: list[int],
        *,
        all_logits: bool = False,
    ) -> torch.Tensor:
        """Write KV for positions [start, start + len(token_ids)) and return fp32 logits [N, V]
        for the last position (N = 1) or, with all_logits, for every position (N = T)."""
        num_tokens = len(token_ids)
        device = self.device
        input_ids = torch.tensor(token_ids, dtype=torch.long, device=device)  # [T]
        positions = torch.arange(start, start + num_tokens, device=device)  # [T]
        num_blocks = -(-(start + num_tokens) // self.block_size)
        table = block_table[:num_blocks]
        table_t = torch.tensor(table, dtype=torch.int32, device=device)
        slots = table_t[positions // self.block_size].long() * self.block_size
        slots += positions % self.block_size
        meta = self.backend.prepare(
            AttentionMetadata(
                start=start,
                num_query_tokens=num_tokens,
                slot_mapping=slots,
                block_table=table_t,
                block_size=self.block_size,
                first_block_if_contiguous=_first_if_consecutive(table),
            )
        )
        cache, backend = self.kv_cache, self.backend

        def attention(layer_idx: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
            return backend.forward(q, k, v, cache.k[layer_idx], cache.v[layer_idx], meta)

        logits_indices = None if all_logits else torch.tensor([num_tokens - 1], device=device)
        logits = self.model(input_ids, positions, attention, logits_indices)
        return logits.float()


def _first_if_consecutive(table: list[int]) -> int | None:
    if not table:
        return None
    first = table[0]
    return (
        first
        if table[-1] - first == len(table) - 1 and table == list(range(first, first + len(table)))
        else None
    )
