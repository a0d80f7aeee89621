"""The paged KV cache tensors, and how many blocks to give them."""

from __future__ import annotations

import torch

from engine.chunk_planner import ModelShape, kv_bytes_per_token, plan_num_kv_blocks

# On the CPU the cache takes at most this share of available RAM: the OS and the model need the rest.
CPU_KV_MEMORY_FRACTION = 0.5


class KVCache:
    """One tensor [2, layers, num_blocks + 1, block_size, kv_heads, head_dim]; per-layer K/V are
    views in flash-attn's paged layout [num_blocks + 1, block_size, kv_heads, head_dim]. The last
    block belongs to no request: padding rows of a CUDA-graph decode step write there."""

    def __init__(
        self,
        shape: ModelShape,
        *,
        num_blocks: int,
        block_size: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.scratch_slot = num_blocks * block_size
        self.tensor = torch.zeros(
            2,
            shape.num_layers,
            num_blocks + 1,
            block_size,
            shape.num_kv_heads,
            shape.head_dim,
            dtype=dtype,
            device=device,
        )
        self.k = list(self.tensor[0].unbind(0))
        self.v = list(self.tensor[1].unbind(0))

    @property
    def num_bytes(self) -> int:
        return self.tensor.numel() * self.tensor.element_size()


def plan_num_blocks(
    *,
    shape: ModelShape,
    dtype_bytes: int,
    block_size: int,
    max_model_len: int,
    free_bytes: int,
    max_kv_cache_bytes: int | None,
    memory_fraction: float,
    is_cpu: bool,
) -> int:
    """Blocks for the cache: an explicit byte budget, else a share of free memory, capped at
    max_model_len tokens (one whole document plus a block): more would only hold older prefixes
    and take memory the prefill chunks need."""
    if max_kv_cache_bytes is not None:
        budget = max_kv_cache_bytes
    else:
        fraction = min(memory_fraction, CPU_KV_MEMORY_FRACTION) if is_cpu else memory_fraction
        cap = kv_bytes_per_token(shape, dtype_bytes) * (max_model_len + block_size)
        budget = min(int(free_bytes * fraction), cap)
    return plan_num_kv_blocks(
        kv_budget_bytes=budget, shape=shape, dtype_bytes=dtype_bytes, block_size=block_size
    )
