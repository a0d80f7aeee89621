"""Attention backends: flash-attn (CUDA, if installed), FlexAttention (CUDA), cuDNN split prefix +
causal (CUDA), SDPA (anywhere)."""

from __future__ import annotations

import torch

from engine.attention.base import AttentionBackend, AttentionMetadata, gather_kv, write_kv
from engine.attention.flash import is_flash_attn_available
from engine.errors import EngineError

BACKEND_NAMES = ("auto", "flash_attn", "flex", "cudnn", "sdpa")

__all__ = [
    "BACKEND_NAMES",
    "AttentionBackend",
    "AttentionMetadata",
    "gather_kv",
    "select_backend",
    "write_kv",
]


HALF_DTYPES = (torch.bfloat16, torch.float16)


def select_backend(
    name: str,
    device: torch.device,
    *,
    block_size: int = 16,
    compile: bool = True,
    dtype: torch.dtype = torch.bfloat16,
) -> AttentionBackend:
    """The backend called `name`, or for "auto": flash-attn, else cuDNN (split prefix + causal),
    else flex on CUDA; SDPA on the CPU. flash-attn and cuDNN run bf16/fp16 only, so an fp32
    model on CUDA gets flex.

    cuDNN before flex: on an H200 (Llama-3-8B shape, chunk 8192) it prefilled 32K tokens in
    1.40 s against flex's 1.97 s and 128K in 11.3 s against 18.2 s (bench/results/prefill_h200.md);
    flex also failed to compile a 1,000-token chunk there (Inductor NoValidChoicesError).
    """
    if name == "auto":
        from engine.attention.cudnn_split import is_cudnn_attention_available

        is_half = dtype in HALF_DTYPES
        if device.type != "cuda":
            name = "sdpa"
        elif is_half and is_flash_attn_available():
            name = "flash_attn"
        elif is_half and is_cudnn_attention_available(device):
            name = "cudnn"
        else:
            name = "flex"
    if name == "sdpa":
        from engine.attention.sdpa import SdpaBackend

        return SdpaBackend(device)
    if name == "flex":
        from engine.attention.flex import FlexBackend

        # Compiling needs Triton (CUDA); elsewhere flex runs eagerly (tests only: slow).
        return FlexBackend(device, compile=compile and device.type == "cuda")
    if name == "cudnn":
        from engine.attention.cudnn_split import CudnnSplitBackend

        if dtype not in HALF_DTYPES:
            raise EngineError(
                f"The cudnn attention backend runs bfloat16 or float16 models, not {dtype}; "
                "choose 'flex' or 'sdpa', or 'auto'."
            )

        return CudnnSplitBackend(device)
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
