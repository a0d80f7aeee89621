"""One request's life in the engine besides its tokens: sampling state, text, stop rules, timings.

The scheduler sees only the Sequence; everything a caller gets back (text streamed and final,
finish reason, per-request stats) is kept here and filled in as the engine's steps finish.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from engine.detokenizer import IncrementalDetokenizer, StopStrings
from engine.loop_detector import Loop, LoopDetector
from engine.sampling_params import SamplingParams
from engine.sequence import PLACEHOLDER_TOKEN_ID, Sequence
from engine.stats import RequestStats

# (token_id, text_delta) -> None, called for every generated token.
TokenCallback = Callable[[int, str], None]
# (done_tokens, total_tokens, num_chunks_done) -> None, after every prefill chunk.
ProgressCallback = Callable[[int, int, int], None]

FINISH_STOP, FINISH_LENGTH, FINISH_LOOP, FINISH_ABORT = "stop", "length", "loop", "abort"


@dataclass
class GenerationResult:
    token_ids: list[int]  # generated tokens, without the stop token
    text: str
    finish_reason: str  # "stop" (stop token or string), "length", "loop" or "abort"
    stats: RequestStats
    request_id: int = -1
    error: BaseException | None = None  # set when the request failed (out of memory, ...)


@dataclass
class Request:
    seq: Sequence
    params: SamplingParams
    stats: RequestStats
    generator: torch.Generator | None
    detokenizer: IncrementalDetokenizer
    stop_strings: StopStrings
    stop_token_ids: frozenset[int]
    max_new_tokens: int
    on_token: TokenCallback | None = None
    on_progress: ProgressCallback | None = None
    # Prefill only (prefill_logits): no token is sampled; the logits are kept instead.
    prefill_only: bool = False
    all_logits: bool = False
    logits: list[torch.Tensor] = field(default_factory=list)
    placement: Any = None  # the Placement whose scheduler holds the request now
    loop_detector: LoopDetector | None = None
    loop: Loop | None = None
    finish_reason: str | None = None
    error: BaseException | None = None
    is_truncated: bool = False
    num_chunks_done: int = 0
    # Tokens taken in the steps but not yet through process_text.
    pending_token_ids: list[int] = field(default_factory=list)
    num_text_tokens: int = 0  # tokens through process_text
    num_kept_tokens: int = 2**62  # fewer once a stop string or a loop ends the output
    _is_text_ended: bool = False
    _is_flushed: bool = False
    _first_token_at: float | None = None
    _last_token_at: float | None = None
    _token_gaps: list[float] = field(default_factory=list)

    @property
    def request_id(self) -> int:
        return self.seq.request_id

    @property
    def is_finished(self) -> bool:
        return self.finish_reason is not None

    def on_admitted(self, now: float) -> None:
        """First prefill chunk done: the time in the queue and the prefix-cache hit."""
        if self.num_chunks_done == 0 and self.seq.num_preemptions == 0:
            self.stats.queue_seconds = max(0.0, now - self.seq.arrival_time)
            self.stats.num_cached_tokens = self.seq.num_cached_tokens
            self.stats.tier_loads = dict(self.seq.tier_loads)

    def on_prefill_chunk(self, num_tokens: int, end: int, seconds: float) -> None:
        self.stats.chunk_sizes.append(num_tokens)
        self.stats.prefill_seconds += seconds
        self.num_chunks_done += 1
        if self.on_progress is not None:
            self.on_progress(end, self.seq.num_known_tokens, self.num_chunks_done)

    @property
    def is_plain_greedy(self) -> bool:
        """Greedy without penalties: the token is the logits' argmax, nothing else is needed."""
        return self.params.is_greedy and not self.params.has_penalties

    def take_token(self, token_id: int, position: int, now: float) -> None:
        """Take the token sampled for `position`, which holds a placeholder until now (cheap:
        counters and stop rules). Ends the request on a stop token (not kept, nor anything
        after it) or at its length; its text comes in process_text."""
        if self._first_token_at is None:
            self._first_token_at = now
            self.stats.time_to_first_token_seconds = now - self.seq.arrival_time
            self._note_kv_cache()
        else:
            self._token_gaps.append(now - (self._last_token_at or now))
        self._last_token_at = now
        token_ids = self.seq.token_ids
        assert token_ids[position] == PLACEHOLDER_TOKEN_ID, "a token taken twice"
        if token_id in self.stop_token_ids:
            self.finish_reason = FINISH_STOP
            del token_ids[position:]  # with the next step's placeholder, if one was launched
            return
        token_ids[position] = token_id
        self.pending_token_ids.append(token_id)
        if position + 1 - self.seq.num_prompt_tokens >= self.max_new_tokens:
            self.finish_reason = FINISH_LENGTH

    def _note_kv_cache(self) -> None:
        blocks = getattr(self.placement, "blocks", None)
        if blocks is not None:
            self.stats.num_kv_blocks_used = blocks.num_used_blocks
            self.stats.num_kv_blocks_free = blocks.num_free_blocks

    def process_text(self) -> None:
        """Text, stop strings, loop detection and the token callback of the tokens taken since
        the last call (run while the next step computes: it lags the tokens by one step). A
        stop string or a loop ends the request; tokens taken after it are dropped."""
        pending, self.pending_token_ids = self.pending_token_ids, []
        for index, token_id in enumerate(pending):
            if self._is_text_ended:
                break
            delta = self.detokenizer.append(token_id)
            self.num_text_tokens += 1
            if self.loop_detector is not None:
                self.loop = self.loop_detector.append(token_id, delta)
            shown = self.stop_strings.feed(delta)
            if self.stop_strings.is_stopped or self.loop is not None:
                self.finish_reason = FINISH_STOP if self.stop_strings.is_stopped else FINISH_LOOP
                self.num_kept_tokens = self.num_text_tokens
                self._is_text_ended = True
            elif self.finish_reason is not None and index == len(pending) - 1:
                shown += self._flush()
            if self.on_token is not None:
                self.on_token(token_id, shown)
        if self.finish_reason is not None and not self._is_text_ended:
            self._flush()  # e.g. a stop token right after text already shown

    def _flush(self) -> str:
        """What the detokenizer and the stop-string filter still hold back, at the end (once)."""
        if self._is_flushed:
            return ""
        self._is_flushed = True
        return self.stop_strings.feed(self.detokenizer.finish()) + self.stop_strings.finish()

    def result(self) -> GenerationResult:
        stats = self.stats
        completion = self.seq.completion_token_ids
        while completion and completion[-1] == PLACEHOLDER_TOKEN_ID:
            completion.pop()  # ended while a step of it was in flight: never read
        tokens = completion[: self.num_kept_tokens]
        text = self.stop_strings.text
        if self.finish_reason == FINISH_LOOP and self.loop is not None:
            # Keep the output up to and with the loop's first copy.
            tokens = tokens[: self.loop.cut_at]
            text = self.detokenizer.decode(tokens)
            stats.num_loop_tokens_dropped = len(completion) - len(tokens)
            stats.loop = self.loop.to_dict()
        stats.num_decode_tokens = len(tokens)
        if self._first_token_at is not None and self._last_token_at is not None:
            stats.decode_seconds = self._last_token_at - self._first_token_at
        stats.set_inter_token_latencies(self._token_gaps)
        stats.num_preemptions = self.seq.num_preemptions
        stats.finish_reason = self.finish_reason
        return GenerationResult(
            list(tokens),
            text,
            self.finish_reason or FINISH_ABORT,
            stats,
            self.request_id,
            self.error,
        )


def monotonic() -> float:
    return time.perf_counter()
