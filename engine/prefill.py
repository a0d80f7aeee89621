"""The chunked prefill loop: plan a chunk from free memory, run it, and on out-of-memory halve it
and resume from the last completed chunk; below min_chunk_size apply the configured policy."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.block_manager import BlockManager
from engine.chunk_planner import ModelShape, plan_chunk_size
from engine.config import EngineConfig
from engine.device_memory import free_bytes, release_cached
from engine.errors import OutOfMemoryError
from engine.model_runner import ModelRunner
from engine.prefill_plan import PrefillProgress
from engine.sequence import Sequence
from engine.stats import FALLBACK_CPU, FALLBACK_TRUNCATED, RequestStats

# (chunk_index, chunk_start, chunk_size) -> None; raises torch.OutOfMemoryError to simulate one.
FaultInjector = Callable[[int, int, int], None]
# (done_tokens, total_tokens, num_chunks_done) -> None
ProgressCallback = Callable[[int, int, int], None]
# Share of the kept tokens given to the end of the prompt when truncating (the question lives there).
TRUNCATE_TAIL_SHARE = 4


@dataclass
class Placement:
    """Where a request runs: a model runner and the block manager of its KV cache."""

    runner: ModelRunner
    blocks: BlockManager
    shape: ModelShape
    dtype_bytes: int


@dataclass
class PrefillRequest:
    seq: Sequence
    stats: RequestStats
    chunk_size: int | None = None  # overrides config.chunk_size (tests, benchmarks)
    all_logits: bool = False
    fault_injector: FaultInjector | None = None
    on_progress: ProgressCallback | None = None


def run_prefill(
    request: PrefillRequest,
    placement: Placement,
    config: EngineConfig,
    cpu_placement: Callable[[], Placement],
) -> tuple[Placement, torch.Tensor]:
    """Compute the KV of every prompt token of request.seq; return where it ran and the logits
    ([1, V] for the last position, or [computed positions, V] with all_logits)."""
    seq, stats = request.seq, request.stats
    started = time.perf_counter()
    progress = _new_progress(request, placement, config)
    is_truncated = False
    chunk_logits: list[torch.Tensor] = []
    chunk_index = 0
    while not progress.is_done:
        chunk = progress.next_chunk()
        try:
            if request.fault_injector is not None:
                request.fault_injector(chunk_index, chunk.start, chunk.num_query_tokens)
            logits = placement.runner.forward(
                seq.token_ids[chunk.start : chunk.end],
                chunk.start,
                seq.block_table,
                all_logits=request.all_logits,
            )
        except torch.OutOfMemoryError:
            logits = None  # drop the chunk's tensors before asking for memory back
            release_cached(placement.runner.device)
            if progress.halve():
                continue
            stats.fallbacks.extend(progress.fallbacks)
            stats.chunk_sizes.extend(progress.chunk_sizes)
            if config.oom_policy == "cpu":
                placement = _move_to_cpu(seq, stats, placement, cpu_placement())
                request.fault_injector = None  # the injected faults simulate the first device
            elif config.oom_policy == "truncate" and not is_truncated:
                _truncate(seq, stats, placement.blocks, progress.num_computed_tokens)
                is_truncated = True
            else:
                raise _out_of_memory(progress, config) from None
            chunk_logits.clear()
            progress = _new_progress(request, placement, config)
            continue
        progress.complete(chunk)
        placement.blocks.commit_computed(seq, chunk.end)
        chunk_logits.append(logits)
        chunk_index += 1
        if request.on_progress is not None:
            request.on_progress(chunk.end, seq.num_tokens, chunk_index)
    stats.fallbacks.extend(progress.fallbacks)
    stats.chunk_sizes.extend(progress.chunk_sizes)
    stats.prefill_seconds += time.perf_counter() - started
    logits = torch.cat(chunk_logits) if request.all_logits else chunk_logits[-1]
    return placement, logits


def _new_progress(
    request: PrefillRequest, placement: Placement, config: EngineConfig
) -> PrefillProgress:
    seq = request.seq
    chunk_size = request.chunk_size or config.chunk_size
    min_chunk = min(config.min_chunk_size, chunk_size or config.min_chunk_size)
    if chunk_size is None:
        planned = plan_chunk_size(
            free_bytes=free_bytes(placement.runner.device),
            shape=placement.shape,
            dtype_bytes=placement.dtype_bytes,
            num_context_tokens=seq.num_computed_tokens,
            num_remaining_tokens=seq.num_tokens - seq.num_computed_tokens,
            min_chunk=config.min_chunk_size,
            max_chunk=config.max_chunk_size,
            headroom_bytes=config.memory_headroom_bytes,
            attention_materializes_scores=placement.runner.backend.materializes_scores,
        )
        # 0 means "even the minimum looks too big": try it anyway, the real OOM decides.
        chunk_size = max(planned, config.min_chunk_size)
    return PrefillProgress(
        num_prompt_tokens=seq.num_tokens,
        chunk_size=chunk_size,
        min_chunk_size=min_chunk,
        num_computed_tokens=seq.num_computed_tokens,
    )


def _move_to_cpu(
    seq: Sequence, stats: RequestStats, placement: Placement, cpu: Placement
) -> Placement:
    at_token = seq.num_computed_tokens
    placement.blocks.free(seq)
    seq.block_table, seq.block_hashes, seq.num_cached_tokens = [], [], 0
    cpu.blocks.allocate(seq)
    stats.record_fallback(
        FALLBACK_CPU,
        {
            "at_token": at_token,
            "kv_moved": False,
            "recomputed_tokens": seq.num_tokens - seq.num_computed_tokens,
            "note": "the prompt was recomputed on the CPU and the request finished there",
        },
    )
    stats.device = "cpu"
    return cpu


def _truncate(seq: Sequence, stats: RequestStats, blocks: BlockManager, num_fitted: int) -> None:
    """Keep as many tokens as fitted: the start of the prompt (its KV is already computed)
    and its end (instructions and question), dropping the middle."""
    if num_fitted < 2:
        raise OutOfMemoryError(
            "Out of device memory before the first chunk of the prompt finished, so there is "
            "nothing to keep when truncating; use a smaller model, a smaller min_chunk_size or "
            "oom_policy 'cpu'."
        )
    num_original = seq.num_tokens
    num_tail = max(1, num_fitted // TRUNCATE_TAIL_SHARE)
    num_head = num_fitted - num_tail
    tail = seq.token_ids[num_original - num_tail :]
    blocks.truncate(seq, num_head)
    for token_id in tail:
        seq.append_token(token_id)
        blocks.append_slot(seq)
    seq.num_prompt_tokens = seq.num_tokens
    stats.record_fallback(
        FALLBACK_TRUNCATED,
        {
            "original_prompt_tokens": num_original,
            "kept_head_tokens": num_head,
            "kept_tail_tokens": num_tail,
            "dropped_tokens": num_original - num_fitted,
        },
    )


def _out_of_memory(progress: PrefillProgress, config: EngineConfig) -> OutOfMemoryError:
    return OutOfMemoryError(
        f"Out of device memory at prompt token {progress.num_computed_tokens} of "
        f"{progress.num_prompt_tokens}, even with chunks of {progress.chunk_size} tokens "
        f"(min_chunk_size {config.min_chunk_size}); free memory, shorten the document, or set "
        "oom_policy to 'truncate' or 'cpu'."
    )
