"""The engine as the pipelines' ChatModel: chat messages in, text and stats out.

Every model task of a worker process shares one engine through its EngineLoop: each call
submits its prompts and waits, so the calls of all running tasks are batched together. A task
passes its priority (questions before summaries) and its deadline (the threads pool has no
Celery time limits, so the wait itself ends at the task's limit and frees the request's blocks).
Each request's engine stats, and each token as it comes, go into the metrics (app/metrics.py).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from app import metrics
from engine import LLMEngine, SamplingParams
from engine.engine_loop import EngineLoop, RequestTimeout
from pipelines.protocols import ProgressCallback, TokenProgressCallback

# Request priorities: a question asked while summaries run goes first.
PRIORITY_INTERACTIVE = 10
PRIORITY_BATCH = 0
# Prompts a model keeps tokenized between counting and sending (a pipeline counts a few
# candidates, then sends one); the oldest go first.
MAX_COUNTED_PROMPTS = 8
# How long a call waits for its first request's next event before looking at the others.
_POLL_S = 0.02


@dataclass(frozen=True)
class EngineCompletion:
    text: str
    stats: dict[str, Any] = field(default_factory=dict)


class EngineChatModel:
    """A `pipelines.protocols.ChatModel` over one engine (greedy decoding: faithful, repeatable)."""

    def __init__(
        self,
        engine: LLMEngine,
        name: str,
        *,
        loop: EngineLoop | None = None,
        priority: int = PRIORITY_BATCH,
        deadline: float | None = None,
        sampling: SamplingParams | None = None,
        cache_tag: str | None = None,
    ) -> None:
        self._engine = engine
        # max_new_tokens is set per call; the rest (repetition control) comes from settings.
        self.sampling = sampling or SamplingParams()
        self._loop = loop if loop is not None else EngineLoop(engine)
        self._name = name
        self.priority = priority
        self.deadline = deadline  # time.monotonic() value, or None
        # The document the prompts belong to: their KV is kept in the lower tiers under it.
        self.cache_tag = cache_tag
        # Prompts counted and not yet sent, oldest first.
        self._counted: dict[tuple, list[int]] = {}
        self._counted_lock = threading.Lock()

    def for_task(
        self, *, priority: int, time_limit_s: float | None, cache_tag: str | None = None
    ) -> EngineChatModel:
        """The same engine and loop, with a task's priority, deadline and document tag."""
        deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
        return EngineChatModel(
            self._engine,
            self._name,
            loop=self._loop,
            priority=priority,
            deadline=deadline,
            sampling=self.sampling,
            cache_tag=cache_tag,
        )

    @property
    def max_context_tokens(self) -> int:
        return int(self._engine.max_model_len)

    @property
    def name(self) -> str:
        return self._name

    def count_tokens(self, texts: Sequence[str], /) -> list[int]:
        return self._engine.count_tokens(list(texts))

    def count_chat_tokens(self, messages: Sequence[dict[str, str]], /) -> int:
        """The prompt's tokens; its ids are kept for the call that sends it (a pipeline counts
        a prompt to see that it fits, then sends it: tokenized once)."""
        key = _chat_key(messages)
        with self._counted_lock:
            ids = self._counted.pop(key, None)
        if ids is None:
            ids = self._engine.apply_chat_template(list(messages))
        with self._counted_lock:
            self._counted[key] = ids
            while len(self._counted) > MAX_COUNTED_PROMPTS:
                self._counted.pop(next(iter(self._counted)))
        return len(ids)

    def _prompt_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """The prompt's token ids: those count_chat_tokens kept, else templated now."""
        with self._counted_lock:
            ids = self._counted.pop(_chat_key(messages), None)
        return ids if ids is not None else self._engine.apply_chat_template(list(messages))

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_new_tokens: int,
        on_progress: ProgressCallback | None = None,
        on_tokens: TokenProgressCallback | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> EngineCompletion:
        (completion,) = self.complete_many(
            [messages], max_new_tokens=max_new_tokens, on_progress=on_progress, on_tokens=on_tokens
        )
        return completion

    def complete_many(
        self,
        conversations: Sequence[Sequence[dict[str, str]]],
        *,
        max_new_tokens: int,
        on_progress: ProgressCallback | None = None,
        on_tokens: TokenProgressCallback | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> list[EngineCompletion]:
        """Every conversation submitted at once, the results in order. on_progress gets the
        prefill tokens done over all of them, on_tokens the tokens written so far.
        `response_schema` is not used: the engine has no constrained decoding, so the reply is
        plain text, which the caller parses as it does a model server's unstructured reply."""
        prompts = [self._prompt_ids(m) for m in conversations]
        params = dataclasses.replace(self.sampling, max_new_tokens=max_new_tokens)
        handles = [
            self._loop.submit(p, params, priority=self.priority, cache_tag=self.cache_tag)
            for p in prompts
        ]
        tracker = _Progress(len(prompts), sum(len(p) for p in prompts), on_progress, on_tokens)
        tracker.limit = len(prompts) * max_new_tokens
        results: dict[int, EngineCompletion] = {}
        try:
            # Every request in turn, so the tokens of all of them (a summary's sections decode
            # together) reach on_tokens as they come, not one request's after another's.
            while len(results) < len(handles):
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    raise RequestTimeout("The model did not finish in time.")
                is_first = True
                for index, handle in enumerate(handles):
                    if index in results:
                        continue
                    result = handle.poll(
                        on_token=lambda _id, _delta: tracker.token(),
                        on_progress=lambda done, _total, _chunks, i=index: tracker.prefill(i, done),
                        timeout=_POLL_S if is_first else 0.0,
                    )
                    is_first = False
                    if result is None:
                        continue
                    stats = result.stats.to_dict()
                    stats["finish_reason"] = result.finish_reason
                    metrics.record_model_request(stats)
                    _record_stored_bytes(self._engine)
                    results[index] = EngineCompletion(text=result.text, stats=stats)
        except RequestTimeout:
            for handle in handles:
                handle.cancel()
            raise SoftTimeLimitExceeded(
                "the model did not finish within the task's time limit"
            ) from None
        except BaseException:
            for handle in handles:
                handle.cancel()
            raise
        return [results[index] for index in range(len(handles))]


_stored_lock = threading.Lock()
_stored_seen: dict[str, int] = {}


def _record_stored_bytes(engine: LLMEngine) -> None:
    """Bytes the engine copied down each lower KV tier since the last call, into the metrics."""
    with _stored_lock:
        for tier, counters in engine.kv_tier_counters().items():
            delta = counters.num_stored_bytes - _stored_seen.get(tier, 0)
            _stored_seen[tier] = counters.num_stored_bytes
            if delta > 0:
                metrics.record_kv_tier_stored(tier, delta)


class _Progress:
    """Prefill tokens over all prompts of one call, and tokens written."""

    def __init__(self, num_prompts, total_tokens, on_progress, on_tokens) -> None:
        self.done = [0] * num_prompts
        self.total = total_tokens
        self.on_progress, self.on_tokens = on_progress, on_tokens
        self.written = 0
        self.limit = 0

    def prefill(self, index: int, done: int) -> None:
        self.done[index] = done
        if self.on_progress is not None:
            self.on_progress(sum(self.done), self.total)

    def token(self) -> None:
        self.written += 1
        metrics.record_generated_tokens()
        if self.on_tokens is not None:
            self.on_tokens(self.written, self.limit)


def _chat_key(messages: Sequence[dict[str, str]]) -> tuple:
    return tuple(tuple(sorted(m.items())) for m in messages)
