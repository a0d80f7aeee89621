"""LLMEngine: load a model once, then prefill long prompts chunk by chunk and generate."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from collections.abc import Sequence as SequenceOf
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.attention import select_backend
from engine.block_manager import BlockManager
from engine.chunk_planner import ModelShape
from engine.config import DTYPE_NUM_BYTES, EngineConfig
from engine.device_memory import free_bytes, peak_bytes, reset_peak
from engine.errors import EngineError, PromptTooLongError
from engine.kv_cache import KVCache, plan_num_blocks
from engine.loader import load_model, load_tokenizer, resolve_checkpoint
from engine.model_runner import ModelRunner
from engine.models.linear import CPU_MLP_MAX_ROWS, cpu_linear_fn
from engine.prefill import FaultInjector, Placement, PrefillRequest, ProgressCallback, run_prefill
from engine.sampler import make_generator, sample
from engine.sampling_params import SamplingParams
from engine.sequence import Sequence, SequenceStatus
from engine.stats import RequestStats

# (token_id, text_delta) -> None, called for every generated token.
TokenCallback = Callable[[int, str], None]
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class GenerationResult:
    token_ids: list[int]  # generated tokens, without the stop token
    text: str
    finish_reason: str  # "stop" (stop token or string) or "length"
    stats: RequestStats


class LLMEngine:
    def __init__(
        self,
        config: EngineConfig,
        *,
        fault_injector: FaultInjector | None = None,
        state_dict: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        """state_dict: the weights, in checkpoint naming, instead of model_path's safetensors
        (config.json and the tokenizer are still read from model_path; the 'cpu' OOM policy
        still loads its copy from the files). For benchmarks and tests: the caller's tensors
        are used as they are when already on the device in the engine's dtype."""
        self.config = config
        self.fault_injector = fault_injector
        self.device = _resolve_device(config.device)
        self.dtype = _resolve_dtype(config.dtype, self.device)
        self.checkpoint_dir = resolve_checkpoint(config.model_path, config.model_cache_dir)
        self.tokenizer = load_tokenizer(self.checkpoint_dir)
        self._placement = self._build_placement(
            self.device, self.dtype, config.attention_backend, state_dict
        )
        self.model_args = self._placement.runner.model.args
        self.model_shape = self._placement.shape
        self.attention_backend = self._placement.runner.backend.name
        self.max_model_len = config.max_model_len or self.model_args.max_position_embeddings
        self._eos_ids = _eos_token_ids(self.checkpoint_dir, self.tokenizer)
        self._cpu_placement: Placement | None = None
        self._next_request_id = 0

    # ---- public API -----------------------------------------------------------------------

    def apply_chat_template(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of a chat, ending with the assistant's turn prompt."""
        encoded = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True
        )
        return list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)

    def count_tokens(self, texts: SequenceOf[str]) -> list[int]:
        """Tokens of each text without special tokens (what a passage costs in a prompt)."""
        if not texts:
            return []
        encoded = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def generate(
        self,
        prompt_token_ids: list[int],
        params: SamplingParams,
        *,
        on_token: TokenCallback | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> GenerationResult:
        seq, stats = self._start_request(prompt_token_ids)
        placement = self._placement
        try:
            request = PrefillRequest(
                seq, stats, fault_injector=self.fault_injector, on_progress=on_progress
            )
            placement, logits = run_prefill(request, placement, self.config, self._cpu)
            return self._decode(seq, stats, placement, logits[-1], params, on_token)
        finally:
            placement.blocks.free(seq)
            stats.peak_memory_bytes = peak_bytes(placement.runner.device)

    def prefill_logits(
        self,
        prompt_token_ids: list[int],
        *,
        chunk_size: int | None = None,
        all_positions: bool = False,
    ) -> torch.Tensor:
        """fp32 logits of the last position [V], or with all_positions of every position
        computed (not reused from the prefix cache) [N, V]. For tests and benchmarks."""
        seq, stats = self._start_request(prompt_token_ids)
        placement = self._placement
        try:
            request = PrefillRequest(
                seq,
                stats,
                chunk_size=chunk_size,
                all_logits=all_positions,
                fault_injector=self.fault_injector,
            )
            placement, logits = run_prefill(request, placement, self.config, self._cpu)
            return logits if all_positions else logits[-1]
        finally:
            placement.blocks.free(seq)

    # ---- request lifecycle ----------------------------------------------------------------

    def _start_request(self, prompt_token_ids: list[int]) -> tuple[Sequence, RequestStats]:
        prompt = [int(t) for t in prompt_token_ids]
        if not prompt:
            raise EngineError("The prompt is empty: give at least one token.")
        if min(prompt) < 0 or max(prompt) >= self.model_args.vocab_size:
            raise EngineError(
                f"The prompt holds token ids outside the model's vocabulary "
                f"(0 to {self.model_args.vocab_size - 1})."
            )
        if len(prompt) >= self.max_model_len:
            raise PromptTooLongError(
                f"The prompt has {len(prompt)} tokens; the model takes at most "
                f"{self.max_model_len} including the answer."
            )
        request_id = self._next_request_id
        self._next_request_id += 1
        seq = Sequence(request_id, prompt, len(prompt))
        blocks = self._placement.blocks
        if not blocks.can_allocate(seq):
            raise PromptTooLongError(
                f"The prompt has {len(prompt)} tokens but the KV cache holds "
                f"{blocks.num_blocks * blocks.block_size}; give the engine more memory "
                "(max_kv_cache_bytes) or shorten the document."
            )
        blocks.allocate(seq)
        seq.status = SequenceStatus.PREFILLING
        reset_peak(self.device)
        stats = RequestStats(
            num_prompt_tokens=len(prompt),
            num_cached_tokens=seq.num_cached_tokens,
            attention_backend=self.attention_backend,
            device=str(self.device),
            request_id=request_id,
        )
        return seq, stats

    def _decode(
        self,
        seq: Sequence,
        stats: RequestStats,
        placement: Placement,
        logits: torch.Tensor,
        params: SamplingParams,
        on_token: TokenCallback | None,
    ) -> GenerationResult:
        seq.status = SequenceStatus.DECODING
        started = time.perf_counter()
        generator = make_generator(params, self.config.seed)
        stop_ids = set(params.stop_token_ids) | self._eos_ids
        max_new_tokens = min(params.max_new_tokens, self.max_model_len - seq.num_tokens)
        generated: list[int] = []
        text, finish_reason = "", "length"
        while True:
            token_id = sample(logits, params, generator)
            if token_id in stop_ids:
                finish_reason = "stop"
                break
            generated.append(token_id)
            seq.append_token(token_id)
            new_text = self.tokenizer.decode(generated, skip_special_tokens=True)
            delta = ""
            if not new_text.endswith("\ufffd"):  # wait for the rest of a multi-byte character
                delta, text = new_text[len(text) :], new_text
            if on_token is not None:
                on_token(token_id, delta)
            stop_at = _first_stop(text, params.stop_strings)
            if stop_at is not None:
                text, finish_reason = text[:stop_at], "stop"
                break
            if len(generated) >= max_new_tokens or not placement.blocks.can_append(seq):
                break
            placement.blocks.append_slot(seq)
            logits = placement.runner.forward([token_id], seq.num_tokens - 1, seq.block_table)[-1]
            placement.blocks.commit_computed(seq, seq.num_tokens)
        text = (
            self.tokenizer.decode(generated, skip_special_tokens=True)
            if finish_reason == "length"
            else text
        )
        seq.status = SequenceStatus.FINISHED
        stats.num_decode_tokens = len(generated)
        stats.decode_seconds = time.perf_counter() - started
        stats.finish_reason = finish_reason
        return GenerationResult(generated, text, finish_reason, stats)

    # ---- placements -----------------------------------------------------------------------

    def _build_placement(
        self,
        device: torch.device,
        dtype: torch.dtype,
        backend_name: str,
        state_dict: Mapping[str, torch.Tensor] | None = None,
    ) -> Placement:
        config = self.config
        model, args = load_model(
            self.checkpoint_dir, device=device, dtype=dtype, state_dict=state_dict
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
        dtype_bytes = torch.tensor([], dtype=dtype).element_size()
        num_blocks = plan_num_blocks(
            shape=shape,
            dtype_bytes=dtype_bytes,
            block_size=config.block_size,
            max_model_len=config.max_model_len or args.max_position_embeddings,
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
            shape, num_blocks=num_blocks, block_size=config.block_size, dtype=dtype, device=device
        )
        if device.type == "cpu":
            model.use_matmul(cpu_linear_fn(dtype), mlp_max_rows=CPU_MLP_MAX_ROWS)
        backend = select_backend(
            backend_name, device, block_size=config.block_size, dtype=dtype, head_dim=args.head_dim
        )
        if config.compile and device.type == "cuda":
            model.compile_layers()
        runner = ModelRunner(model, kv_cache, backend, device)
        blocks = BlockManager(num_blocks, config.block_size, config.enable_prefix_cache)
        return Placement(runner, blocks, shape, dtype_bytes)

    def _cpu(self) -> Placement:
        """A CPU copy of the model for oom_policy 'cpu', loaded on first use (fp32)."""
        if self._cpu_placement is None:
            self._cpu_placement = self._build_placement(torch.device("cpu"), torch.float32, "auto")
        return self._cpu_placement


def _resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise EngineError(f"The device {name!r} was asked for but no CUDA GPU is available.")
    return device


def _resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    assert name in DTYPE_NUM_BYTES
    return _DTYPES[name]


def _eos_token_ids(folder: Path, tokenizer: Any) -> set[int]:
    """End-of-sequence ids from the tokenizer, config.json and generation_config.json."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    for name in ("generation_config.json", "config.json"):
        path = Path(folder) / name
        if path.is_file():
            value = json.loads(path.read_text()).get("eos_token_id")
            ids.update([value] if isinstance(value, int) else (value or []))
    return ids


def _first_stop(text: str, stop_strings: tuple[str, ...]) -> int | None:
    positions = [text.find(s) for s in stop_strings if s in text]
    return min(positions) if positions else None
