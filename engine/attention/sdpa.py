"""PyTorch's scaled_dot_product_attention: the CPU backend (and a portable fallback on CUDA).

A chunk after a cached prefix needs bottom-right causal attention. With a boolean [T, ctx] mask
the CPU kernel visits every key block; on the CPU we instead run two mask-free flash calls, the
chunk against the prefix (nothing masked) and against itself (plain causal), and merge them by
their log-sum-exp: exact, and 1.6x faster at 4K queries after a 2K prefix (more for short ones).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.attention.base import AttentionBackend, AttentionMetadata, gather_kv

# Private, but stable since torch 2.3; returns the log-sum-exp the merge needs.
_CPU_FLASH_WITH_LSE = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


class SdpaBackend(AttentionBackend):
    name = "sdpa"

    def __init__(self, device: torch.device) -> None:
        # On CUDA a boolean mask drops SDPA to kernels that hold the scores; on the CPU the
        # flash kernel runs with or without a mask and never holds them.
        self.materializes_scores = device.type != "cpu"
        self.splits_prefix = device.type == "cpu" and _CPU_FLASH_WITH_LSE is not None

    def prepare(self, meta: AttentionMetadata) -> AttentionMetadata:
        if meta.start > 0 and meta.num_query_tokens > 1 and not self.splits_prefix:
            # Bottom-right causal: query i (position start + i) sees keys [0, start + i].
            q_pos = torch.arange(meta.num_query_tokens, device=meta.slot_mapping.device)
            kv_pos = torch.arange(meta.context_len, device=meta.slot_mapping.device)
            meta.extra["mask"] = kv_pos[None, :] <= (q_pos[:, None] + meta.start)  # [T, ctx]
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
        is_gqa = q.shape[1] != k.shape[1]
        if meta.start > 0 and meta.num_query_tokens > 1 and self.splits_prefix:
            prefix = gather_kv(k_cache, meta)[: meta.start], gather_kv(v_cache, meta)[: meta.start]
            return _prefix_then_causal(q, prefix, (k, v))
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


def _prefix_then_causal(
    q: torch.Tensor,
    prefix: tuple[torch.Tensor, torch.Tensor],
    own: tuple[torch.Tensor, torch.Tensor],
) -> torch.Tensor:
    """Bottom-right causal attention of a chunk (q: [T, H, D]) over a cached prefix ([P, KV, D]
    each) and its own keys ([T, KV, D] each), as two flash calls merged by log-sum-exp."""
    num_groups = q.shape[1] // own[0].shape[1]
    q4 = q.transpose(0, 1).unsqueeze(0)  # [1, H, T, D]

    def heads(t: torch.Tensor) -> torch.Tensor:  # [S, KV, D] -> [1, H, S, D]
        return t.repeat_interleave(num_groups, dim=1).transpose(0, 1).unsqueeze(0)

    out_prefix, lse_prefix = _CPU_FLASH_WITH_LSE(q4, heads(prefix[0]), heads(prefix[1]), 0.0, False)
    out_own, lse_own = _CPU_FLASH_WITH_LSE(q4, heads(own[0]), heads(own[1]), 0.0, True)
    lse = torch.logaddexp(lse_prefix, lse_own)  # [1, H, T]
    out = out_prefix * torch.exp(lse_prefix - lse).unsqueeze(-1)
    out += out_own * torch.exp(lse_own - lse).unsqueeze(-1)  # [1, H, T, D]
    return out[0].transpose(0, 1).to(q.dtype)  # [T, H, D]
