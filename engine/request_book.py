"""The engine's book of requests: each one admitted (its prompt checked, its Request built and
queued on the main placement), aborted, and collected when done (its text made, or failed by an
out-of-memory policy). LLMEngine (engine/llm_engine.py) owns one; its step pipelines are given
`requests` to read, and the requests they read are added to `text_pending`.
"""

from __future__ import annotations

from collections.abc import Sequence as SequenceOf

import torch

from engine.detokenizer import IncrementalDetokenizer, StopStrings
from engine.device_memory import peak_bytes, reset_peak
from engine.errors import EngineError, PromptTooLongError, UnsupportedModelError
from engine.kv_tiers import check_tag
from engine.loop_detector import LoopDetector
from engine.models import ModelArgs
from engine.placement import Placement
from engine.request import (
    FINISH_ABORT,
    GenerationResult,
    ProgressCallback,
    Request,
    TokenCallback,
    monotonic,
)
from engine.sampler import make_generator
from engine.sampling_params import SamplingParams
from engine.sequence import Sequence
from engine.stats import RequestStats
from engine.tokenizer import ChatTokenizer


class RequestBook:
    def __init__(
        self,
        *,
        main: Placement,
        chat_tokenizer: ChatTokenizer,
        model_args: ModelArgs,
        max_model_len: int,
        attention_backend: str,
        device: torch.device,
        seed: int | None,
    ) -> None:
        self._main = main
        self._chat_tokenizer = chat_tokenizer
        self._model_args = model_args
        self._max_model_len = max_model_len
        self._attention_backend = attention_backend
        self._device = device
        self._seed = seed
        self.requests: dict[int, Request] = {}
        # Read by the pipelines (tokens taken, or ended), text not yet made; the engine's own.
        self.text_pending: list[Request] = []
        self._next_request_id = 0

    def add(
        self,
        prompt_token_ids: SequenceOf[int],
        params: SamplingParams,
        priority: int,
        on_token: TokenCallback | None,
        on_progress: ProgressCallback | None,
        cache_tag: str | None,
    ) -> Request:
        """Check the prompt, build its Request and queue it on the main placement's scheduler."""
        prompt = self._checked_prompt(prompt_token_ids)
        if cache_tag is not None:
            check_tag(cache_tag)
        request_id = self._next_request_id
        self._next_request_id += 1
        seq = Sequence(request_id, prompt, len(prompt), priority=priority, cache_tag=cache_tag)
        stats = RequestStats(
            num_prompt_tokens=len(prompt),
            attention_backend=self._attention_backend,
            device=str(self._device),
            request_id=request_id,
        )
        request = Request(
            seq=seq,
            params=params,
            stats=stats,
            generator=make_generator(params, self._seed),
            detokenizer=IncrementalDetokenizer(self._chat_tokenizer.tokenizer),
            stop_strings=StopStrings(params.stop_strings),
            loop_detector=LoopDetector.from_params(params) if params.stop_on_loop else None,
            stop_token_ids=frozenset(params.stop_token_ids)
            | (frozenset() if params.ignore_eos else self._chat_tokenizer.eos_token_ids),
            max_new_tokens=min(params.max_new_tokens, self._max_model_len - len(prompt)),
            on_token=on_token,
            on_progress=on_progress,
            placement=self._main,
        )
        seq.max_completion_tokens = request.max_new_tokens
        if not self.requests:
            reset_peak(self._device)
        seq.arrival_time = monotonic()
        self.requests[request_id] = request
        self._main.scheduler.add(seq)
        return request

    def abort(self, request_id: int) -> GenerationResult | None:
        """Stop a request wherever it is and free its blocks; None when it is unknown."""
        request = self.requests.pop(request_id, None)
        if request is None:
            return None
        request.placement.scheduler.abort(request_id)
        request.finish_reason = request.finish_reason or FINISH_ABORT
        return request.result()

    def process_text(self) -> list[GenerationResult]:
        """Text of the tokens taken so far; the results of the requests that are done."""
        finished: list[GenerationResult] = []
        interrupt: BaseException | None = None
        pending, self.text_pending = self.text_pending, []
        for request in pending:
            if self.requests.get(request.request_id) is not request:
                continue  # aborted since it was read, or already done (read twice)
            was_finished = request.is_finished
            try:
                request.process_text()
            except BaseException as exc:  # the token callback
                request.error, request.finish_reason = exc, FINISH_ABORT
                if not isinstance(exc, Exception):
                    interrupt = exc
            if not request.is_finished:
                continue
            if not was_finished:  # ended by a stop string or a loop: still scheduled
                request.placement.scheduler.abort(request.request_id)
                request.stats.peak_memory_bytes = peak_bytes(request.placement.device)
            finished.append(request.result())
            del self.requests[request.request_id]
        if interrupt is not None:
            raise interrupt
        return finished

    def collect_failed(self) -> list[GenerationResult]:
        """Requests that an out-of-memory policy failed (they are out of every scheduler)."""
        failed = [r for r in self.requests.values() if r.error is not None and r.is_finished]
        for request in failed:
            del self.requests[request.request_id]
        return [request.result() for request in failed]

    def _checked_prompt(self, prompt_token_ids: SequenceOf[int]) -> list[int]:
        prompt = [int(t) for t in prompt_token_ids]
        if not prompt:
            raise EngineError("The prompt is empty: give at least one token.")
        if min(prompt) < 0 or max(prompt) >= self._model_args.vocab_size:
            raise EngineError(
                f"The prompt holds token ids outside the model's vocabulary "
                f"(0 to {self._model_args.vocab_size - 1})."
            )
        if len(prompt) >= self._max_model_len:
            window = self._model_args.ignored_sliding_window
            why = (
                " (its sliding attention window, which the engine does not apply beyond)"
                if window is not None and window <= self._max_model_len
                else ""
            )
            raise PromptTooLongError(
                f"The prompt has {len(prompt)} tokens; the model takes at most "
                f"{self._max_model_len}{why} including the answer."
            )
        blocks = self._main.blocks
        if blocks.num_blocks_for(len(prompt) + 1) > blocks.num_blocks:
            raise PromptTooLongError(
                f"The prompt has {len(prompt)} tokens but the KV cache holds "
                f"{blocks.num_blocks * blocks.block_size}; give the engine more memory "
                "(max_kv_cache_bytes) or shorten the document."
            )
        return prompt


def max_model_len(configured: int | None, args: ModelArgs) -> int:
    """The configured context, or the model's; never beyond a sliding window we do not apply."""
    window = args.ignored_sliding_window
    if configured is not None and window is not None and configured > window:
        raise UnsupportedModelError(
            f"The model attends within a sliding window of {window} tokens, which the engine "
            f"does not implement: it runs this model up to {window} tokens, not the configured "
            f"max_model_len of {configured}."
        )
    return configured or args.max_context
