"""Attention backends: flash-attn (CUDA, if installed), FlexAttention (CUDA), SDPA (anywhere)."""

from __future__ import annotations

import torch

from engine.attention.base import AttentionBackend, AttentionMetadata, gather_kv, write_kv
from engine.attention.flash import is_flash_attn_available
from engine.errors import EngineError

BACKEND_NAMES = ("auto", "flash_attn", "flex", "sdpa")

__all__ = [
    "BACKEND_NAMES",
    "AttentionBackend",
    "AttentionMetadata",
    "gather_kv",
    "select_backend",
    "write_kv",
]


def select_backend(
    name: str, device: torch.device, *, block_size: int = 16, compile: bool = True
) -> AttentionBackend:
    """The backend called `name`, or for "auto": flash-attn, else flex on CUDA; SDPA on the CPU."""
    if name == "auto":
        if device.type != "cuda":
            name = "sdpa"
        elif is_flash_attn_available():
            name = "flash_attn"
        else:
            name = "flex"
    if name == "sdpa":
        from engine.attention.sdpa import SdpaBackend

        return SdpaBackend(device)
    if name == "flex":
        from engine.attention.flex import FlexBackend

        # Compiling needs Triton (CUDA); elsewhere flex runs eagerly (tests only: slow).
        return FlexBackend(device, compile=compile and device.type == "cuda")
    if name == "flash_attn":
        if device.type != "cuda" or not is_flash_attn_available():
            raise EngineError(
                "The flash_attn attention backend needs a CUDA device and the flash-attn "
                "package; choose 'flex' or 'sdpa', or 'auto'."
            )
        from engine.attention.flash import FlashAttnBackend

        return FlashAttnBackend(block_size)
    raise EngineError(
        f"Unknown attention backend {name!r}; choose one of {', '.join(BACKEND_NAMES)}."
    )
