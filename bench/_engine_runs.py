"""Build our engine on the weights transformers holds, with a KV cache sized to one prompt.

The KV cache is preallocated at construction, so its size is part of every peak the engine
shows: it is sized to the measured prompt (rounded up to a block), as a deployment for that
document length would be, and the engine is rebuilt for each prompt length.
"""

from __future__ import annotations

import gc
import inspect
from pathlib import Path

import torch

from bench._flops import Shape
from bench._models import (
    hf_state_dict,
    random_fp8_checkpoint,
    write_config_and_tokenizer,
    write_weights,
)
from engine import EngineConfig, LLMEngine, SamplingParams
from engine.attention.fp8_kv import SCALE_BYTES


def fixed_length(max_new_tokens: int) -> SamplingParams:
    """Greedy sampling that writes exactly max_new_tokens: past the end-of-sequence tokens and
    past the loop detector (random prompts and repeated text make the default model repeat
    itself, and a generation cut short would time fewer tokens than it counts)."""
    return SamplingParams(max_new_tokens=max_new_tokens, ignore_eos=True, stop_on_loop=False)


DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def engine_takes_state_dict() -> bool:
    return "state_dict" in inspect.signature(LLMEngine.__init__).parameters


def kv_cache_bytes(
    shape: Shape, dtype: torch.dtype, num_tokens: int, block_size: int, kv_dtype: str = "auto"
) -> int:
    """K and V of every layer for num_tokens + 1 tokens, rounded up to whole blocks; kv_dtype
    "fp8": a byte a value and an fp32 scale a token and KV head (engine/attention/fp8_kv.py)."""
    num_blocks = -(-(num_tokens + 1) // block_size)
    heads = 2 * shape.num_layers * shape.num_kv_heads
    if kv_dtype == "fp8":
        per_token = heads * (shape.head_dim + SCALE_BYTES)
    else:
        per_token = heads * shape.head_dim * torch.tensor([], dtype=dtype).element_size()
    return num_blocks * block_size * per_token


def engine_config_kwargs(
    *,
    shape: Shape,
    device: torch.device,
    dtype: torch.dtype,
    num_tokens: int,
    chunk: int | None,
    backend: str,
    block_size: int,
    compile: bool,
    cache_dir: Path | None = None,
    kv_dtype: str = "auto",
) -> dict:
    """EngineConfig arguments (all but model_path) for timing one prompt of num_tokens."""
    return dict(
        model_cache_dir=cache_dir,
        device=str(device),
        dtype=DTYPE_NAMES[dtype],
        attention_backend=backend,
        block_size=block_size,
        kv_dtype=kv_dtype,
        max_kv_cache_bytes=kv_cache_bytes(shape, dtype, num_tokens, block_size, kv_dtype),
        max_model_len=num_tokens + 1,
        chunk_size=chunk or None,  # None: the engine plans it from free memory
        min_chunk_size=min(32, chunk or 32),
        max_chunk_size=max(8192, chunk or 0),
        # Every timed run must compute the whole prompt: no reuse of the previous run's blocks.
        enable_prefix_cache=False,
        oom_policy="fail",
        compile=compile,
    )


def make_engine(model: torch.nn.Module, folder: Path, config_kwargs: dict) -> tuple[LLMEngine, str]:
    """An engine on the weights of transformers' `model` (which the caller may then drop).

    In memory when the engine accepts a state dict: the engine keeps the tensors it uses as they
    are and fuses q/k/v and gate/up into new ones, so once transformers' model is dropped only
    the engine's weights remain allocated. Otherwise through a safetensors folder, written once
    per folder. Returns the engine and how it was loaded.
    """
    write_config_and_tokenizer(model, folder)
    config = EngineConfig(model_path=folder, **config_kwargs)
    if engine_takes_state_dict():
        return LLMEngine(config, state_dict=hf_state_dict(model)), "in memory (state_dict)"
    if not (folder / "model.safetensors").exists():
        write_weights(model, folder)
    return LLMEngine(config), "safetensors folder"


def engine_from_hf(hf_holder: list, folder: Path, config_kwargs: dict) -> tuple[LLMEngine, str]:
    """make_engine on the model in hf_holder[0], then drop transformers' model."""
    engine, how = make_engine(hf_holder[0], folder, config_kwargs)
    hf_holder.clear()
    free_memory()
    return engine, how


def fp8_engine(shape: str, folder: Path, config_kwargs: dict) -> LLMEngine:
    """An engine on random FP8 weights of `shape` built directly on the config's device (no
    transformers model: a 70B does not fit in bf16), handed over tensor by tensor."""
    device = torch.device(config_kwargs["device"])
    state = random_fp8_checkpoint(shape, folder, device=device)
    engine = LLMEngine(EngineConfig(model_path=folder, **config_kwargs), state_dict=state)
    del state
    free_memory()
    return engine


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_engine(engine: LLMEngine, token_ids: list[int], chunk: int | None) -> torch.Tensor:
    """fp32 logits of the last position [V]."""
    return engine.prefill_logits(token_ids, chunk_size=chunk)
