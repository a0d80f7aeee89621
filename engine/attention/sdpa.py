"""PyTorch's scaled_dot_product_attention: the CPU backend (and a portable fallback on CUDA)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.attention.base import AttentionBackend, AttentionMetadata, gather_kv, write_kv


class SdpaBackend(AttentionBackend):
    name = "sdpa"

    def __init__(self, device: torch.device) -> None:
        # On CUDA a boolean mask drops SDPA to kernels that hold the scores; on the CPU the
        # flash kernel runs with or without a mask and never holds them.
        self.materializes_scores = device.type != "cpu"

    def prepare(self, meta: AttentionMetadata) -> AttentionMetadata:
        if meta.start > 0 and meta.num_query_tokens > 1:
            # Bottom-right causal: query i (position start + i) sees keys [0, start + i].
            q_pos = torch.arange(meta.num_query_tokens, device=meta.slot_mapping.device)
            kv_pos = torch.arange(meta.context_len, device=meta.slot_mapping.device)
            meta.extra["mask"] = kv_pos[None, :] <= (q_pos[:, None] + meta.start)  # [T, ctx]
        return meta

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        write_kv(k, v, k_cache, v_cache, meta.slot_mapping)
        is_gqa = q.shape[1] != k.shape[1]
        if meta.start == 0:
            # Nothing cached before this step: attend within the step, plain causal (the
            # fastest kernel, no mask), straight from the fresh k/v.
            keys, values = k, v
        else:
            keys, values = gather_kv(k_cache, meta), gather_kv(v_cache, meta)  # [ctx, KV, D]
        out = F.scaled_dot_product_attention(
            q.transpose(0, 1).unsqueeze(0),  # [1, H, T, D]
            keys.transpose(0, 1).unsqueeze(0),  # [1, KV, ctx, D]
            values.transpose(0, 1).unsqueeze(0),
            attn_mask=meta.extra.get("mask"),
            is_causal=meta.start == 0 and meta.num_query_tokens > 1,
            enable_gqa=is_gqa,
        )  # [1, H, T, D]
        return out[0].transpose(0, 1)  # [T, H, D]
