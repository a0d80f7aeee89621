"""A bf16 (or fp16, fp32) decode step's K and V rows into their cache slots, both caches in one
Triton kernel (slot_write_kernels.py) where index_copy_ takes a launch each. An FP8 cache has its
own write, which rounds and scales (fp8_kv.py)."""

from __future__ import annotations

from types import ModuleType

import torch

from engine.device_guard import launch_options, on_device, triton_module
from engine.errors import EngineError


def write_slots_fused(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Rows' K and V [T, KV, D] (last dimension contiguous) into their slots [T] of the
    contiguous caches [num_blocks, block_size, KV, D], in one kernel (a scatter: graph-safe)."""
    num_tokens, num_kv_heads, head_dim = k.shape
    if num_tokens == 0:
        return
    if k.stride(2) != 1 or v.stride(2) != 1:
        k, v = k.contiguous(), v.contiguous()
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise EngineError("write_slots_fused writes into contiguous caches only.")
    with on_device(k.device):
        _kernels()._write_slots_kernel[(num_tokens,)](
            k, v, slot_mapping, k_cache, v_cache,
            k.stride(0), k.stride(1), v.stride(0), v.stride(1),
            NUM_KV_HEADS=num_kv_heads,
            KV_PAD=_next_power_of_2(num_kv_heads),
            HEAD_DIM=head_dim,
            BLOCK_D=_next_power_of_2(head_dim),
            num_warps=1 if num_kv_heads * head_dim <= 1024 else 4,
            **launch_options(k.device),
        )  # fmt: skip


def _kernels() -> ModuleType | None:
    return triton_module("engine.attention.slot_write_kernels")


def _next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length()
