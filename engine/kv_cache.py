"""The paged KV cache tensors, and how many blocks to give them."""

from __future__ import annotations

import torch

from engine.attention.fp8_kv import SCALE_BYTES, SCALE_DTYPE, QuantizedPages
from engine.chunk_planner import ModelShape, kv_bytes_per_token, plan_num_kv_blocks
from engine.models.fp8 import FP8_DTYPE

# On the CPU the cache takes at most this share of available RAM: the OS and the model need the rest.
CPU_KV_MEMORY_FRACTION = 0.5


class KVCache:
    """One tensor [2, layers, num_blocks + 1, block_size, kv_heads, head_dim]; per-layer K/V are
    views in flash-attn's paged layout [num_blocks + 1, block_size, kv_heads, head_dim]. The last
    block belongs to no request: padding rows of a CUDA-graph decode step write there.

    With fp8, the tensor holds E4M3 values and `scales` [2, layers, num_blocks + 1, block_size,
    kv_heads] one fp32 scale per token and head; per-layer K/V are then QuantizedPages
    (engine/attention/fp8_kv.py)."""

    def __init__(
        self,
        shape: ModelShape,
        *,
        num_blocks: int,
        block_size: int,
        dtype: torch.dtype,
        device: torch.device,
        fp8: bool = False,
    ) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.scratch_slot = num_blocks * block_size
        self.is_fp8 = fp8
        pages = (2, shape.num_layers, num_blocks + 1, block_size, shape.num_kv_heads)
        self.tensor = torch.zeros(
            *pages, shape.head_dim, dtype=FP8_DTYPE if fp8 else dtype, device=device
        )
        self.scales = torch.ones(*pages, dtype=SCALE_DTYPE, device=device) if fp8 else None
        if self.scales is None:
            self.k = list(self.tensor[0].unbind(0))
            self.v = list(self.tensor[1].unbind(0))
        else:
            self.k = [QuantizedPages(*p) for p in zip(self.tensor[0], self.scales[0], strict=True)]
            self.v = [QuantizedPages(*p) for p in zip(self.tensor[1], self.scales[1], strict=True)]

    @property
    def num_bytes(self) -> int:
        scale_bytes = 0 if self.scales is None else self.scales.numel() * SCALE_BYTES
        return self.tensor.numel() * self.tensor.element_size() + scale_bytes


def plan_num_blocks(
    *,
    shape: ModelShape,
    dtype_bytes: int,
    block_size: int,
    max_model_len: int,
    scale_bytes: int = 0,
    free_bytes: int,
    max_kv_cache_bytes: int | None,
    memory_fraction: float,
    is_cpu: bool,
) -> int:
    """Blocks for the cache: an explicit byte budget, else a share of free memory, capped at
    max_model_len tokens (one whole document plus a block): more would only hold older prefixes
    and take memory the prefill chunks need. dtype_bytes and scale_bytes: the cache's bytes per
    element and per token and head (1 and 4 for fp8, see engine/attention/fp8_kv.py)."""
    if max_kv_cache_bytes is not None:
        budget = max_kv_cache_bytes
    else:
        fraction = min(memory_fraction, CPU_KV_MEMORY_FRACTION) if is_cpu else memory_fraction
        cap = kv_bytes_per_token(shape, dtype_bytes, scale_bytes) * (max_model_len + block_size)
        budget = min(int(free_bytes * fraction), cap)
    return plan_num_kv_blocks(
        kv_budget_bytes=budget,
        shape=shape,
        dtype_bytes=dtype_bytes,
        block_size=block_size,
        scale_bytes=scale_bytes,
    )
