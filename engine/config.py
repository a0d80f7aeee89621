"""The engine's configuration: one frozen dataclass, validated once when it is built.

Runtime values (the number of KV blocks, the chunk size chosen for a request, the resolved
device) are never written back here; they live in the objects that compute them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MiB = 1024 * 1024

DEVICES_HELP = '"auto", "cpu", "cuda" or "cuda:N"'
# The engine's one list of each choice; engine/attention selects among ATTENTION_BACKENDS (in
# the order "auto" prefers them). app/settings.py repeats the three as Literals, since app imports
# no engine; tests/worker/model/test_engine_holder.py holds the two to the same names.
DTYPES = ("auto", "float32", "bfloat16", "float16")
ATTENTION_BACKENDS = ("auto", "flash_attn", "cudnn", "flex", "cpu_flash", "sdpa")
OOM_POLICIES = ("truncate", "cpu", "fail")
# "auto": the weights as the checkpoint stores them (FP8 checkpoints stay FP8); "fp8": a bf16/fp32
# checkpoint's projections quantized to FP8 E4M3 at load (engine/models/fp8.py).
WEIGHTS = ("auto", "fp8")
# "auto": the KV cache in the model's dtype; "fp8": E4M3 with a scale per token and KV head.
KV_DTYPES = ("auto", "fp8")

# Bytes per element of each concrete dtype name; "auto" is resolved by the runner.
DTYPE_NUM_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}

_DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


@dataclass(frozen=True)
class EngineConfig:
    """Everything the engine needs to know before it loads a model.

    Sizes of the KV cache and of prefill chunks default to None, meaning "chosen from free
    memory at run time"; setting them overrides the planner. The step's token budget (decode
    tokens and prefill chunks of all running requests together) is chunk_size when set, else
    planned from free memory between min_chunk_size and max_chunk_size; out of memory halves it.
    """

    model_path: Path
    model_cache_dir: Path | None = None
    device: str = "auto"
    dtype: str = "auto"
    attention_backend: str = "auto"
    weights: str = "auto"
    kv_dtype: str = "auto"
    # FP8 weights on CUDA: decode-sized products (up to 64 rows) through the FP8-weight Triton
    # kernels (engine/models/fp8_small_batch.py) rather than torch._scaled_mm, which quantizes
    # the activations first: one stream 185.1 tokens/s against 112.1 on one H100 (bench/
    # results/fp8_h100.md; bench/generate.py --no-fp8-small-batch-kernel turns them off).
    fp8_small_batch_kernel: bool = True
    # With those kernels, products of 2-64 rows quantize their activations to E4M3 (one scale
    # per 128 inputs of a row) and multiply on FP8 tensor cores (engine/models/fp8_w8a8.py), as
    # prefill's torch._scaled_mm does per row; False keeps decode's activations bf16 and widens
    # the weights in the kernel instead (exact activations, slower from a few rows on).
    fp8_w8a8_decode: bool = True
    # With those kernels, a single stream's decode step (one row) multiplies through GEMVs that
    # also do the layer's norms, SiLU * up and residual adds (engine/models/llama.py's
    # one_row_fused): three kernels fewer a layer. Off until a GPU has timed it
    # (bench/fp8_gemv_fusion.py, bench/generate.py --fp8-one-row-fusion).
    fp8_one_row_fusion: bool = False
    # The same for a bf16 model's projections (engine/models/linear.py's Linear.one_row, on CUDA
    # with Triton): the GEMV in place of cuBLAS for one row, with the norms, SiLU * up and
    # residual adds inside it. Off until a GPU has timed it (bench/fp8_gemv_fusion.py --weights
    # bf16, bench/generate.py --bf16-one-row-fusion).
    bf16_one_row_fusion: bool = False
    # With the FP8 KV cache and the cuDNN attention backend, long prefill chunks attend in FP8
    # through cuDNN's sdpa_fp8 where it runs (Hopper or newer, the nvidia-cudnn-frontend wheel;
    # engine/attention/cudnn_fp8.py): Q, K, V, the softmax's weights and (on Hopper) the output
    # rounded to E4M3. False: the attention in the model's dtype.
    fp8_attention: bool = False
    # Programmatic dependent launch on Hopper or newer (engine/device_guard.py): decode's kernels
    # (the one-row FP8 GEMV, the paged decode attention, and torch.compile's kernels with
    # compile) may start while the kernel before them finishes, the GEMV loading its first
    # weights meanwhile. Process-wide: on for every engine of the process once one turns it on;
    # nothing changes on older GPUs or the CPU. On an H100 (bench/results/fp8_h100.md, calls L
    # and M): the same tokens, the waits hold against a late producer, one stream 4.7-5.3%
    # faster in FP8 and 1.6-1.7% in bf16. False: each kernel waits for the one before it.
    pdl: bool = True
    block_size: int = 16
    max_kv_cache_bytes: int | None = None
    kv_cache_memory_fraction: float = 0.9
    max_model_len: int | None = None
    chunk_size: int | None = None
    min_chunk_size: int = 32
    max_chunk_size: int = 8192
    memory_headroom_bytes: int = 256 * MiB
    oom_policy: str = "fail"
    enable_prefix_cache: bool = True
    compile: bool = False
    seed: int | None = None
    # Batching: requests running at once, and the wait of an idle engine for companions.
    max_num_seqs: int = 64
    admission_window_s: float = 0.010
    # While a higher-priority request writes, lower-priority ones run in one step of this many
    # (engine/scheduler.py; 1: every step runs everyone).
    lower_priority_every: int = 2
    # Decode steps replayed from CUDA graphs (CUDA with the paged decode kernel only).
    cuda_graphs: bool = True
    # Schedule and launch each step before the previous step's tokens are read back, so the
    # host's work per step overlaps the device's (engine/step_pipeline.py).
    async_scheduling: bool = True
    # Tiers below the GPU's prefix cache for full blocks of tagged prompts (engine/kv_tiers/):
    # CPU memory up to this many bytes (0: none), and files under kv_disk_tier_dir up to
    # kv_disk_tier_bytes (None: no disk tier). kv_model_identity names the weights when the
    # caller knows them better than a fingerprint of the checkpoint's files (None: fingerprint).
    kv_cpu_tier_bytes: int = 0
    kv_disk_tier_dir: Path | None = None
    kv_disk_tier_bytes: int = 20 * 1024 * MiB
    kv_model_identity: str | None = None
    # Disk-tier files checked on the KV cache's device after a load's copy up, with sums made
    # there as blocks go down (engine/kv_tiers/block_sums.py), instead of hashed on the host by
    # the readers: for a GPU, where the host's memory bandwidth bounds a load. Off until it is
    # measured on one; either way every file is checked before its KV is used.
    kv_device_checksums: bool = False

    def __post_init__(self) -> None:
        # Accept str paths from callers; frozen, so coerce through object.__setattr__.
        object.__setattr__(self, "model_path", Path(self.model_path))
        if self.model_cache_dir is not None:
            object.__setattr__(self, "model_cache_dir", Path(self.model_cache_dir))
        if self.kv_disk_tier_dir is not None:
            object.__setattr__(self, "kv_disk_tier_dir", Path(self.kv_disk_tier_dir))
        self._validate_model()
        self._validate_choices()
        self._validate_sizes()

    @property
    def has_kv_tiers(self) -> bool:
        return self.enable_prefix_cache and (
            self.kv_cpu_tier_bytes > 0 or self.kv_disk_tier_dir is not None
        )

    @property
    def is_gguf(self) -> bool:
        return self.model_path.suffix.lower() == ".gguf"

    def _validate_model(self) -> None:
        if not str(self.model_path).strip():
            raise ValueError("model_path is empty: give a checkpoint folder or a .gguf file.")
        if self.is_gguf and self.model_cache_dir is None:
            raise ValueError(
                f"model_path {self.model_path} is a GGUF file, so model_cache_dir must name a "
                "folder where it can be converted once to safetensors."
            )

    def _validate_choices(self) -> None:
        if not _DEVICE_PATTERN.match(self.device):
            raise ValueError(f"device must be {DEVICES_HELP}, not {self.device!r}.")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}.")
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise ValueError(
                f"attention_backend must be one of {', '.join(ATTENTION_BACKENDS)}, "
                f"not {self.attention_backend!r}."
            )
        if self.weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, not {self.weights!r}.")
        if self.kv_dtype not in KV_DTYPES:
            raise ValueError(
                f"kv_dtype must be one of {', '.join(KV_DTYPES)}, not {self.kv_dtype!r}."
            )
        if self.oom_policy not in OOM_POLICIES:
            raise ValueError(
                f"oom_policy must be one of {', '.join(OOM_POLICIES)}, not {self.oom_policy!r}."
            )
        if self.seed is not None and (_is_bad_int(self.seed) or self.seed < 0):
            raise ValueError(f"seed must be a non-negative integer or None, not {self.seed!r}.")

    def _validate_sizes(self) -> None:
        _require_positive("block_size", self.block_size)
        _require_positive("min_chunk_size", self.min_chunk_size)
        _require_positive("max_chunk_size", self.max_chunk_size)
        _require_positive("max_num_seqs", self.max_num_seqs)
        _require_positive("lower_priority_every", self.lower_priority_every)
        window = self.admission_window_s
        if (
            isinstance(window, bool)
            or not isinstance(window, int | float)
            or not 0 <= window <= 0.05
        ):
            raise ValueError(
                f"admission_window_s must be between 0 and 0.05 seconds, not {window!r}."
            )
        if self.max_kv_cache_bytes is not None:
            _require_positive("max_kv_cache_bytes", self.max_kv_cache_bytes)
        if _is_bad_int(self.kv_cpu_tier_bytes) or self.kv_cpu_tier_bytes < 0:
            raise ValueError(
                f"kv_cpu_tier_bytes must be 0 or more, not {self.kv_cpu_tier_bytes!r}."
            )
        _require_positive("kv_disk_tier_bytes", self.kv_disk_tier_bytes)
        if self.max_model_len is not None:
            _require_positive("max_model_len", self.max_model_len)
        if _is_bad_int(self.memory_headroom_bytes) or self.memory_headroom_bytes < 0:
            raise ValueError(
                f"memory_headroom_bytes must be 0 or more, not {self.memory_headroom_bytes!r}."
            )
        fraction = self.kv_cache_memory_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise ValueError(f"kv_cache_memory_fraction must be a number, not {fraction!r}.")
        if not 0.0 < fraction <= 1.0:
            raise ValueError(
                f"kv_cache_memory_fraction must be in (0, 1], not {fraction}: it is the share "
                "of free memory given to the KV cache."
            )
        if self.min_chunk_size > self.max_chunk_size:
            raise ValueError(
                f"min_chunk_size ({self.min_chunk_size}) is larger than max_chunk_size "
                f"({self.max_chunk_size})."
            )
        if self.chunk_size is not None:
            _require_positive("chunk_size", self.chunk_size)
            # A fixed chunk overrides max_chunk_size, but halving on out-of-memory still
            # stops at min_chunk_size, so a chunk below it could never be retried.
            if self.chunk_size < self.min_chunk_size:
                raise ValueError(
                    f"chunk_size ({self.chunk_size}) is below min_chunk_size "
                    f"({self.min_chunk_size}); lower min_chunk_size too."
                )


def _is_bad_int(value: object) -> bool:
    return isinstance(value, bool) or not isinstance(value, int)


def _require_positive(name: str, value: object) -> None:
    if _is_bad_int(value) or value < 1:  # type: ignore[operator]
        raise ValueError(f"{name} must be a positive integer, not {value!r}.")
