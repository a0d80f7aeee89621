"""LLMEngine: load a model once, then serve many requests together, one step at a time.

Each step is schedule() -> run() -> postprocess(): the scheduler picks the running decodes and
prefill chunks that fit the step's token budget (engine/scheduler.py), the model runner computes
them in one forward pass (engine/model_runner.py), and the sampled tokens go to their requests
(engine/request.py); engine/step_pipeline.py runs that loop one step ahead of its reads. `add_request`, `step` and `abort` are the serving API; `generate_many` and
`generate` are loops over step(). Not thread-safe: one thread drives an engine
(engine/engine_loop.py serves other threads).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from collections.abc import Sequence as SequenceOf
from pathlib import Path
from typing import Any

import torch

from engine.config import DTYPE_NUM_BYTES, EngineConfig
from engine.detokenizer import IncrementalDetokenizer, StopStrings
from engine.device_memory import peak_bytes, reset_peak
from engine.errors import EngineError, OutOfMemoryError, PromptTooLongError
from engine.loader import load_tokenizer, resolve_checkpoint
from engine.loop_detector import LoopDetector
from engine.oom_policies import apply_oom_policy
from engine.placement import CPU, MAIN, Placement, build_placement
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
from engine.scheduler import Step
from engine.sequence import Sequence
from engine.stats import FALLBACK_OOM_HALVED, RequestStats
from engine.step_pipeline import FaultInjector, StepPipeline

ZERO_WIDTH_SPACE = "\u200b"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

__all__ = ["GenerationResult", "LLMEngine", "ProgressCallback", "TokenCallback"]


class LLMEngine:
    def __init__(
        self,
        config: EngineConfig,
        *,
        fault_injector: FaultInjector | None = None,
        state_dict: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        """fault_injector: called with each step of the main placement before it runs, for the
        engine's life; tests raise torch.OutOfMemoryError from it to exercise the OOM paths.
        state_dict: the weights, in checkpoint naming, instead of model_path's safetensors
        (config.json and the tokenizer are still read from model_path; the 'cpu' OOM policy
        still loads its copy from the files). For benchmarks and tests: the caller's tensors
        are used as they are when already on the device in the engine's dtype."""
        self.config = config
        self._fault_injector = fault_injector
        self.device = _resolve_device(config.device)
        self.dtype = _resolve_dtype(config.dtype, self.device)
        self.checkpoint_dir = resolve_checkpoint(config.model_path, config.model_cache_dir)
        self.tokenizer = load_tokenizer(self.checkpoint_dir)
        self._main = build_placement(
            MAIN,
            config,
            self.checkpoint_dir,
            self.device,
            self.dtype,
            config.attention_backend,
            max_model_len=config.max_model_len,
            state_dict=state_dict,
        )
        self.model_args = self._main.runner.model.args
        self.model_shape = self._main.shape
        self.attention_backend = self._main.runner.backend.name
        self.max_model_len = config.max_model_len or self.model_args.max_position_embeddings
        self._eos_ids = frozenset(_eos_token_ids(self.checkpoint_dir, self.tokenizer))
        self._special_strings = _special_token_strings(self.tokenizer)
        self._cpu_placement: Placement | None = None
        self._requests: dict[int, Request] = {}
        self._text_pending: dict[int, Request] = {}  # tokens taken, text not yet made
        self._pipelines: dict[str, StepPipeline] = {}
        self._add_pipeline(self._main)
        self._next_request_id = 0

    # ---- tokens ---------------------------------------------------------------------------

    def apply_chat_template(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of a chat, ending with the assistant's turn prompt. A control string such
        as <|im_start|> inside a message's text (a document's, a question's) stays text: it is
        broken by a zero-width space, so it can never open a turn of its own."""
        safe = [{**m, "content": self._defuse(m.get("content", ""))} for m in messages]
        encoded = self.tokenizer.apply_chat_template(
            safe, add_generation_prompt=True, tokenize=True
        )
        return list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)

    def _defuse(self, text: str) -> str:
        for special in self._special_strings:
            if special in text:
                text = text.replace(special, special[0] + ZERO_WIDTH_SPACE + special[1:])
        return text

    def count_tokens(self, texts: SequenceOf[str]) -> list[int]:
        """Tokens of each text without special tokens (what a passage costs in a prompt)."""
        if not texts:
            return []
        encoded = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [len(ids) for ids in encoded]

    # ---- serving API ----------------------------------------------------------------------

    def add_request(
        self,
        prompt_token_ids: SequenceOf[int],
        params: SamplingParams,
        *,
        priority: int = 0,
        on_token: TokenCallback | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> int:
        """Queue a request; its tokens come from later step() calls. Returns its id."""
        return self._add(prompt_token_ids, params, priority, on_token, on_progress).request_id

    def step(self) -> list[GenerationResult]:
        """Run one step on every placement with work; the requests that finished (with async
        scheduling, the host reads a step's tokens during the next step: a request's result
        comes one step after its last token was computed)."""
        for placement in self._placements():
            pipeline = self._pipelines[placement.name]
            if pipeline.has_work:
                pipeline.step()
        finished = self._process_text()
        finished.extend(self._collect_failed())
        return finished

    @property
    def num_steps(self) -> int:
        """Steps launched so far, on every placement."""
        return sum(pipeline.num_steps for pipeline in self._pipelines.values())

    def abort(self, request_id: int) -> GenerationResult | None:
        """Stop a request wherever it is and free its blocks; None when it is unknown."""
        request = self._requests.pop(request_id, None)
        if request is None:
            return None
        self._text_pending.pop(request_id, None)
        request.placement.scheduler.abort(request_id)
        request.finish_reason = request.finish_reason or FINISH_ABORT
        return request.result()

    def has_unfinished_requests(self) -> bool:
        return bool(self._requests)

    def wait_time(self) -> float:
        """Seconds until step() has work (the admission window of an idle engine)."""
        waits = [p.scheduler.wait_time() for p in self._placements() if p.scheduler.has_unfinished]
        return min(waits, default=0.0)

    def generate_many(
        self,
        prompts: SequenceOf[SequenceOf[int]],
        params: SamplingParams | SequenceOf[SamplingParams],
        *,
        priorities: SequenceOf[int] | None = None,
        on_token: Callable[[int, int, str], None] | None = None,
    ) -> list[GenerationResult]:
        """Generate for every prompt together; results in the prompts' order. on_token gets
        (index of the prompt, token id, text delta). Raises the first request's error."""
        all_params = [params] * len(prompts) if isinstance(params, SamplingParams) else params
        if len(all_params) != len(prompts):
            raise ValueError("give one SamplingParams, or one per prompt")
        ids: list[int] = []
        try:
            for index, (prompt, request_params) in enumerate(zip(prompts, all_params, strict=True)):
                callback = None if on_token is None else _indexed(on_token, index)
                priority = 0 if priorities is None else priorities[index]
                ids.append(
                    self.add_request(prompt, request_params, priority=priority, on_token=callback)
                )
            results = self._run_until_done(ids)
        finally:
            for request_id in ids:
                self.abort(request_id)
        for result in results:
            if result.error is not None:
                raise result.error
        return results

    def generate(
        self,
        prompt_token_ids: SequenceOf[int],
        params: SamplingParams,
        *,
        on_token: TokenCallback | None = None,
        on_progress: ProgressCallback | None = None,
        priority: int = 0,
    ) -> GenerationResult:
        request_id = self.add_request(
            prompt_token_ids, params, priority=priority, on_token=on_token, on_progress=on_progress
        )
        try:
            (result,) = self._run_until_done([request_id])
        finally:
            self.abort(request_id)
        if result.error is not None:
            raise result.error
        return result

    def prefill_logits(
        self,
        prompt_token_ids: list[int],
        *,
        chunk_size: int | None = None,
        all_positions: bool = False,
    ) -> torch.Tensor:
        """fp32 logits of the last position [V], or with all_positions of every position
        computed (not reused from the prefix cache) [N, V]. For tests and benchmarks."""
        request = self._add(prompt_token_ids, SamplingParams(max_new_tokens=1), 0, None, None)
        request.prefill_only, request.all_logits = True, all_positions
        request.seq.max_chunk_tokens = chunk_size
        try:
            (result,) = self._run_until_done([request.request_id])
        finally:
            self.abort(request.request_id)
        if result.error is not None:
            raise result.error
        return torch.cat(request.logits) if all_positions else request.logits[-1][-1]

    # ---- internals ------------------------------------------------------------------------

    def _add(
        self,
        prompt_token_ids: SequenceOf[int],
        params: SamplingParams,
        priority: int,
        on_token: TokenCallback | None,
        on_progress: ProgressCallback | None,
    ) -> Request:
        prompt = self._checked_prompt(prompt_token_ids)
        request_id = self._next_request_id
        self._next_request_id += 1
        seq = Sequence(request_id, prompt, len(prompt), priority=priority)
        stats = RequestStats(
            num_prompt_tokens=len(prompt),
            attention_backend=self.attention_backend,
            device=str(self.device),
            request_id=request_id,
        )
        request = Request(
            seq=seq,
            params=params,
            stats=stats,
            generator=make_generator(params, self.config.seed),
            detokenizer=IncrementalDetokenizer(self.tokenizer),
            stop_strings=StopStrings(params.stop_strings),
            loop_detector=LoopDetector.from_params(params) if params.stop_on_loop else None,
            stop_token_ids=frozenset(params.stop_token_ids)
            | (frozenset() if params.ignore_eos else self._eos_ids),
            max_new_tokens=min(params.max_new_tokens, self.max_model_len - len(prompt)),
            on_token=on_token,
            on_progress=on_progress,
            placement=self._main,
        )
        seq.max_completion_tokens = request.max_new_tokens
        if not self._requests:
            reset_peak(self.device)
        seq.arrival_time = monotonic()
        self._requests[request_id] = request
        self._main.scheduler.add(seq)
        return request

    def _checked_prompt(self, prompt_token_ids: SequenceOf[int]) -> list[int]:
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
        blocks = self._main.blocks
        if blocks.num_blocks_for(len(prompt) + 1) > blocks.num_blocks:
            raise PromptTooLongError(
                f"The prompt has {len(prompt)} tokens but the KV cache holds "
                f"{blocks.num_blocks * blocks.block_size}; give the engine more memory "
                "(max_kv_cache_bytes) or shorten the document."
            )
        return prompt

    def _run_until_done(self, request_ids: list[int]) -> list[GenerationResult]:
        pending = set(request_ids)
        results: dict[int, GenerationResult] = {}
        while pending:
            wait = self.wait_time()
            if wait > 0:
                time.sleep(wait)
            for result in self.step():
                results[result.request_id] = result
                pending.discard(result.request_id)
            if pending and not self.has_unfinished_requests():
                raise EngineError("The engine lost track of a request; this is a bug.")
        return [results[request_id] for request_id in request_ids]

    def _placements(self) -> list[Placement]:
        return [self._main] if self._cpu_placement is None else [self._main, self._cpu_placement]

    def _process_text(self) -> list[GenerationResult]:
        """Text of the tokens taken so far; the results of the requests that are done."""
        finished: list[GenerationResult] = []
        interrupt: BaseException | None = None
        pending = dict(self._text_pending)
        self._text_pending.clear()  # the same dict: the pipelines fill it
        for request in pending.values():
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
            del self._requests[request.request_id]
        if interrupt is not None:
            raise interrupt
        return finished

    def _on_out_of_memory(self, placement: Placement, step: Step) -> None:
        if placement.scheduler.on_out_of_memory():
            for chunk in step.chunks:
                if not chunk.is_decode:
                    self._requests[chunk.seq.request_id].stats.record_fallback(
                        FALLBACK_OOM_HALVED,
                        {"at_token": chunk.start, "budget": placement.scheduler.budget},
                    )
            return
        apply_oom_policy(self, placement, step)

    def _collect_failed(self) -> list[GenerationResult]:
        """Requests that an out-of-memory policy failed (they are out of every scheduler)."""
        failed = [r for r in self._requests.values() if r.error is not None and r.is_finished]
        for request in failed:
            del self._requests[request.request_id]
        return [request.result() for request in failed]

    def cpu_placement(self) -> Placement:
        """A CPU copy of the model for oom_policy 'cpu', loaded on first use (fp32)."""
        if self._cpu_placement is None:
            self._cpu_placement = build_placement(
                CPU,
                self.config,
                self.checkpoint_dir,
                torch.device("cpu"),
                torch.float32,
                "auto",
                max_model_len=self.config.max_model_len,
            )
            self._add_pipeline(self._cpu_placement)
        return self._cpu_placement

    def _add_pipeline(self, placement: Placement) -> None:
        self._pipelines[placement.name] = StepPipeline(
            placement,
            self._requests,
            self._text_pending,
            is_async=self.config.async_scheduling,
            on_out_of_memory=self._on_out_of_memory,
            fault_injector=self._fault_injector,
        )

    def request_of(self, seq: Sequence) -> Request:
        return self._requests[seq.request_id]

    def out_of_memory_error(self, placement: Placement, seq: Sequence) -> OutOfMemoryError:
        return OutOfMemoryError(
            f"Out of device memory at prompt token {seq.num_computed_tokens} of "
            f"{seq.num_tokens}, even with steps of {placement.scheduler.budget} tokens "
            f"(min_chunk_size {self.config.min_chunk_size}); free memory, shorten the document, "
            "or set oom_policy to 'truncate' or 'cpu'."
        )


def _indexed(on_token: Callable[[int, int, str], None], index: int) -> TokenCallback:
    return lambda token_id, delta: on_token(index, token_id, delta)


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


def _special_token_strings(tokenizer: Any) -> tuple[str, ...]:
    """Every special token's text, longest first (so <|im_start|> goes before <|im|>)."""
    found = set(getattr(tokenizer, "all_special_tokens", ()) or ())
    for token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        if getattr(token, "special", False):
            found.add(str(token.content))
    return tuple(sorted((t for t in found if len(t) > 1), key=len, reverse=True))


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
