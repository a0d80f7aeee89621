"""Attention backends: flash-attn 4 or 2 (CUDA, if installed), cuDNN split prefix + causal
(CUDA), FlexAttention (CUDA), our AVX-512 kernel (CPU), SDPA (anywhere)."""

from __future__ import annotations

import torch

from engine.attention.base import AttentionBackend, AttentionMetadata, gather_kv, write_kv
from engine.attention.cpu_flash import CpuFlashBackend, is_cpu_flash_available
from engine.attention.flash import flash_attn_version, make_flash_backend
from engine.config import ATTENTION_BACKENDS
from engine.errors import EngineError

__all__ = [
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
    head_dim: int | None = None,
) -> AttentionBackend:
    """The backend called `name`, or for "auto": flash-attn (4 on Hopper and Blackwell, else 2),
    else cuDNN (split prefix + causal), else flex on CUDA; on the CPU our AVX-512 kernel for
    fp32 (engine/attention/cpu_flash.py, 2.2-2.7x SDPA at 8K tokens on this project's CPU),
    else SDPA. flash-attn and cuDNN run bf16/fp16 only, so an fp32 model on CUDA gets flex.

    cuDNN before flex: on an H200 (Llama-3-8B shape, chunk 8192) it prefilled 32K tokens in
    1.40 s against flex's 1.97 s and 128K in 11.3 s against 18.2 s (bench/results/prefill_h200.md);
    flex also failed to compile a 1,000-token chunk there (Inductor NoValidChoicesError).
    """
    if name == "auto":
        from engine.attention.cudnn_split import is_cudnn_attention_available

        is_half = dtype in HALF_DTYPES
        if device.type != "cuda":
            name = "cpu_flash" if is_cpu_flash_available(dtype, head_dim) else "sdpa"
        elif is_half and flash_attn_version(device) is not None:
            name = "flash_attn"
        elif is_half and is_cudnn_attention_available(device):
            name = "cudnn"
        else:
            name = "flex"
    if name == "cpu_flash":
        if device.type != "cpu" or not is_cpu_flash_available(dtype, head_dim):
            raise EngineError(
                "The cpu_flash attention backend needs the CPU, a float32 model, a head "
                "dimension that is a multiple of 16 (at most 256), a CPU with AVX-512 and a "
                "C++ compiler to build it once; choose 'sdpa' or 'auto'."
            )
        return CpuFlashBackend()
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
        backend = make_flash_backend(device, block_size) if dtype in HALF_DTYPES else None
        if backend is None:
            raise EngineError(
                "The flash_attn attention backend needs a CUDA device, a bfloat16 or float16 "
                "model and the flash-attn package (flash-attn-4 on Hopper or Blackwell, "
                "flash-attn 2 elsewhere); choose 'cudnn', 'flex' or 'sdpa', or 'auto'."
            )
        return backend
    raise EngineError(
        f"Unknown attention backend {name!r}; choose one of {', '.join(ATTENTION_BACKENDS)}."
    )
