"""What happens when a step runs out of device memory.

The step is planned again with half the token budget (each of its prefill chunks' requests
records the fallback), down to the scheduler's minimum. A request whose prefill does not fit even
a minimum-budget step is named by the step's largest prefill chunk; the others go on. Its
oom_policy:
- "truncate": keep the prompt's start (its KV is already computed) and its end (instructions and
  the question), dropping the middle; once per request, then "fail";
- "cpu": free its blocks here and queue it on the engine's CPU copy of the model, which prefills
  it again and finishes it there;
- "fail": the request ends with an OutOfMemoryError that says what to change.
A decode-only step that runs out of memory at the minimum fails its lowest-priority request.
"""

from __future__ import annotations

from typing import Protocol

from engine.config import EngineConfig
from engine.errors import OutOfMemoryError
from engine.placement import CPU, Placement
from engine.request import FINISH_ABORT, Request
from engine.scheduler import Step
from engine.sequence import Sequence
from engine.stats import FALLBACK_CPU, FALLBACK_OOM_HALVED, FALLBACK_TRUNCATED


class OomHost(Protocol):
    """What a policy needs of the engine (LLMEngine is one)."""

    config: EngineConfig

    def request_of(self, seq: Sequence) -> Request: ...

    def cpu_placement(self) -> Placement: ...


# Share of the kept tokens given to the end of the prompt when truncating (the question lives there).
TRUNCATE_TAIL_SHARE = 4


def on_out_of_memory(engine: OomHost, placement: Placement, step: Step) -> None:
    """`step` ran out of device memory and was not committed: halve the budget for it to be
    planned again, or at the minimum apply the policy of the request that does not fit."""
    if placement.scheduler.on_out_of_memory():
        for chunk in step.chunks:
            if not chunk.is_decode:
                engine.request_of(chunk.seq).stats.record_fallback(
                    FALLBACK_OOM_HALVED,
                    {"at_token": chunk.start, "budget": placement.scheduler.budget},
                )
        return
    apply_oom_policy(engine, placement, step)


def apply_oom_policy(engine: OomHost, placement: Placement, step: Step) -> None:
    chunk = step.largest_prefill
    if chunk is None:
        _fail(engine, placement, placement.scheduler.lowest_priority_running())
        return
    seq = chunk.seq
    request = engine.request_of(seq)
    policy = engine.config.oom_policy
    if policy == "cpu" and placement.name != CPU:
        _move_to_cpu(engine, placement, seq)
    elif policy == "truncate" and not request.is_truncated and seq.num_computed_tokens >= 2:
        _truncate(engine, placement, seq)
    else:
        _fail(engine, placement, seq)


def _fail(engine: OomHost, placement: Placement, seq: Sequence) -> None:
    request = engine.request_of(seq)
    request.error = OutOfMemoryError(
        f"Out of device memory at prompt token {seq.num_computed_tokens} of "
        f"{seq.num_tokens}, even with steps of {placement.scheduler.budget} tokens "
        f"(min_chunk_size {engine.config.min_chunk_size}); free memory, shorten the document, "
        "or set oom_policy to 'truncate' or 'cpu'."
    )
    request.finish_reason = FINISH_ABORT
    placement.scheduler.abort(seq.request_id)


def _move_to_cpu(engine: OomHost, placement: Placement, seq: Sequence) -> None:
    request = engine.request_of(seq)
    at_token = seq.num_computed_tokens
    cpu = engine.cpu_placement()
    placement.scheduler.evict(seq)
    request.placement = cpu
    cpu.scheduler.add(seq)
    request.stats.record_fallback(
        FALLBACK_CPU,
        {
            "at_token": at_token,
            "kv_moved": False,
            "recomputed_tokens": seq.num_tokens,
            "note": "the prompt was recomputed on the CPU and the request finished there",
        },
    )
    request.stats.device = "cpu"


def _truncate(engine: OomHost, placement: Placement, seq: Sequence) -> None:
    """Keep as many tokens as fitted: the computed head and a tail of a quarter of that."""
    request = engine.request_of(seq)
    num_fitted = seq.num_computed_tokens
    num_original = seq.num_tokens
    num_tail = max(1, num_fitted // TRUNCATE_TAIL_SHARE)
    num_head = num_fitted - num_tail
    tail = seq.token_ids[num_original - num_tail :]
    placement.scheduler.truncate_prompt(seq, num_head, tail)
    request.is_truncated = True
    request.stats.record_fallback(
        FALLBACK_TRUNCATED,
        {
            "original_prompt_tokens": num_original,
            "kept_head_tokens": num_head,
            "kept_tail_tokens": num_tail,
            "dropped_tokens": num_original - num_fitted,
        },
    )
