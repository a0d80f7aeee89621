"""flash-attn (CUDA, only when the package imports): paged kernels read the cache in place."""

from __future__ import annotations

import torch

from engine.attention.base import AttentionBackend, AttentionMetadata, gather_kv, write_kv

# flash-attn 2's paged path requires blocks of a multiple of 256 tokens.
PAGED_BLOCK_MULTIPLE = 256


def is_flash_attn_available() -> bool:
    try:
        import flash_attn  # noqa: F401
    except Exception:  # an ABI mismatch raises more than ImportError
        return False
    return True


class FlashAttnBackend(AttentionBackend):
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
        # flash-attn aligns a causal mask bottom-right when queries are fewer than keys.
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
