"""Where requests run: a model on a device with its KV cache, block manager and scheduler.

The engine has one placement on its device, and for oom_policy "cpu" a second one on the CPU,
built on first use, that takes over requests which do not fit the first.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.attention import AttentionBackend, select_backend
from engine.attention.cudnn_fp8 import Fp8Attend, is_fp8_attention_available
from engine.attention.cudnn_split import CudnnSplitBackend, cudnn_attend, efficient_attend
from engine.attention.fp8_kv import SCALE_BYTES, Fp8KVBackend, scratch_bytes
from engine.block_manager import BlockManager
from engine.chunk_planner import ModelShape, plan_chunk_size
from engine.config import DTYPE_NUM_BYTES, EngineConfig
from engine.device_guard import set_programmatic_launch
from engine.device_memory import free_bytes
from engine.errors import EngineError
from engine.kv_cache import KVCache, plan_num_blocks
from engine.kv_tiers import TieredKVCache, build_kv_tiers
from engine.loader import load_model
from engine.model_runner import ModelRunner
from engine.models.linear import CPU_MLP_MAX_ROWS, cpu_linear_fn
from engine.scheduler import Scheduler, SchedulerConfig

logger = logging.getLogger(__name__)

MAIN, CPU = "main", "cpu"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class Placement:
    name: str  # MAIN or CPU
    runner: ModelRunner
    blocks: BlockManager
    scheduler: Scheduler
    shape: ModelShape
    dtype_bytes: int
    # The lower KV tiers (engine/kv_tiers/), on the main placement when the config asks.
    tiers: TieredKVCache | None = None

    @property
    def device(self) -> torch.device:
        return self.runner.device


def resolve_device(name: str) -> torch.device:
    """The device an EngineConfig.device names ("auto": the GPU when there is one)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise EngineError(f"The device {name!r} was asked for but no CUDA GPU is available.")
    return device


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """The dtype an EngineConfig.dtype names ("auto": bfloat16 on a GPU, else float32)."""
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    assert name in DTYPE_NUM_BYTES
    return _DTYPES[name]


def build_placement(
    name: str,
    config: EngineConfig,
    checkpoint_dir: Path,
    device: torch.device,
    dtype: torch.dtype,
    backend_name: str,
    *,
    max_model_len: int | None,
    state_dict: Mapping[str, torch.Tensor] | None = None,
) -> Placement:
    if config.pdl:  # before the model loads: prebuild compiles the kernels as they will launch
        set_programmatic_launch(device, True)
    model, args = load_model(
        checkpoint_dir,
        device=device,
        dtype=dtype,
        state_dict=state_dict,
        weights=config.weights,
        fp8_small_batch_kernel=config.fp8_small_batch_kernel,
        fp8_w8a8_decode=config.fp8_w8a8_decode,
        fp8_one_row_fusion=config.fp8_one_row_fusion,
        bf16_one_row_fusion=config.bf16_one_row_fusion,
    )
    shape = ModelShape(
        num_layers=args.num_layers,
        hidden_size=args.hidden_size,
        intermediate_size=args.intermediate_size,
        num_heads=args.num_heads,
        num_kv_heads=args.num_kv_heads,
        head_dim=args.head_dim,
        vocab_size=args.vocab_size,
    )
    max_len = max_model_len or args.max_context
    dtype_bytes = torch.tensor([], dtype=dtype).element_size()
    kv_fp8 = config.kv_dtype == "fp8"
    num_blocks = plan_num_blocks(
        shape=shape,
        dtype_bytes=1 if kv_fp8 else dtype_bytes,
        scale_bytes=SCALE_BYTES if kv_fp8 else 0,
        block_size=config.block_size,
        # Room for several whole documents at once (on a GPU a quarter of max_num_seqs, on the
        # CPU two): beyond what memory allows, the scheduler preempts.
        max_model_len=max_len * (2 if device.type == "cpu" else max(1, config.max_num_seqs // 4)),
        free_bytes=free_bytes(device),
        max_kv_cache_bytes=config.max_kv_cache_bytes,
        memory_fraction=config.kv_cache_memory_fraction,
        is_cpu=device.type == "cpu",
    )
    if num_blocks < 1:
        raise EngineError(
            f"No room for a KV cache on {device}: not even one block of "
            f"{config.block_size} tokens fits; raise max_kv_cache_bytes or free memory."
        )
    kv_cache = KVCache(
        shape,
        num_blocks=num_blocks,
        block_size=config.block_size,
        dtype=dtype,
        device=device,
        fp8=kv_fp8,
    )
    if device.type == "cpu":
        model.use_matmul(cpu_linear_fn(dtype), mlp_max_rows=CPU_MLP_MAX_ROWS)
    backend = select_backend(
        backend_name, device, block_size=config.block_size, dtype=dtype, head_dim=args.head_dim
    )
    if kv_fp8 and config.fp8_attention:
        backend = _with_fp8_attention(backend, device)
    if kv_fp8:
        backend = Fp8KVBackend(backend)
    if config.compile and device.type == "cuda":
        model.compile_layers()
    runner = ModelRunner(
        model,
        kv_cache,
        backend,
        device,
        use_cuda_graphs=config.cuda_graphs,
        max_num_seqs=config.max_num_seqs,
        max_model_len=max_len,
    )
    blocks = BlockManager(num_blocks, config.block_size, config.enable_prefix_cache)
    # The FP8 cache's reads dequantize a whole sequence's K and V of one layer at a time.
    fixed_bytes = (
        scratch_bytes(
            num_tokens=max_len,
            num_kv_heads=shape.num_kv_heads,
            head_dim=shape.head_dim,
            dtype_bytes=dtype_bytes,
        )
        if kv_fp8
        else 0
    )
    budget = _step_budget(
        config, device, shape, dtype_bytes, backend.materializes_scores, fixed_bytes
    )
    scheduler = Scheduler(
        SchedulerConfig(
            max_num_seqs=config.max_num_seqs,
            max_num_batched_tokens=budget,
            min_num_batched_tokens=min(config.min_chunk_size, budget),
            admission_window_s=config.admission_window_s,
            lower_priority_every=config.lower_priority_every,
        ),
        blocks,
    )
    tiers = None
    if name == MAIN:
        tiers = build_kv_tiers(
            config,
            kv_cache=kv_cache,
            model_dtype=dtype,
            blocks=blocks,
            checkpoint_dir=checkpoint_dir,
            state_dict=state_dict,
        )
        if tiers is not None:
            scheduler.loader = tiers
    return Placement(name, runner, blocks, scheduler, shape, dtype_bytes, tiers)


def _step_budget(
    config: EngineConfig,
    device: torch.device,
    shape: ModelShape,
    dtype_bytes: int,
    materializes_scores: bool,
    fixed_bytes: int = 0,
) -> int:
    """Tokens per step: chunk_size when set, else what free memory holds (after the weights and
    the KV cache are allocated) between min_chunk_size and max_chunk_size."""
    if config.chunk_size is not None:
        return config.chunk_size
    planned = plan_chunk_size(
        free_bytes=free_bytes(device),
        shape=shape,
        dtype_bytes=dtype_bytes,
        num_prior_tokens=0,
        num_remaining_tokens=config.max_chunk_size,
        min_chunk=config.min_chunk_size,
        max_chunk=config.max_chunk_size,
        headroom_bytes=config.memory_headroom_bytes,
        attention_materializes_scores=materializes_scores,
        fixed_bytes=fixed_bytes,
    )
    # 0 means "even the minimum looks too big": try it anyway, a real OOM decides.
    return max(planned, config.min_chunk_size)


def _with_fp8_attention(backend: AttentionBackend, device: torch.device) -> AttentionBackend:
    """The cuDNN split backend with FP8 attention for long chunks' two dense calls (engine/
    attention/cudnn_fp8.py; short chunks keep the memory-efficient kernel, as in bf16), where it
    can run; else `backend`, and the reason logged once."""
    if backend.name != "cudnn":
        reason = f"it runs with the cudnn attention backend, not {backend.name}"
    elif not is_fp8_attention_available(device):
        reason = "cuDNN's FP8 attention does not run here (a Hopper or newer GPU and the "
        reason += "nvidia-cudnn-frontend package are needed)"
    else:
        fp8 = CudnnSplitBackend(
            device, attend=Fp8Attend(fallback=cudnn_attend), short_attend=efficient_attend
        )
        fp8.name = "cudnn+fp8"
        return fp8
    logger.warning("fp8_attention is on but unused: %s.", reason)
    return backend
