"""LLMEngine: load a model once, then serve many requests together, one step at a time.

Each step is schedule() -> run() -> postprocess(): the scheduler picks the running decodes and
prefill chunks that fit the step's token budget (engine/scheduler.py), the model runner prepares
their inputs, computes them in one forward pass and samples the next ids on the device
(ModelRunner.launch), and the sampled tokens go to their requests (Request.take_token), whose
text is made last (Request.process_text). engine/step_pipeline.py schedules and launches each
step before it reads the previous one's tokens back; the engine owns the requests (each step is
given them to read) and makes their text, through its RequestBook (engine/request_book.py:
admitting, aborting and collecting requests). `add_request`, `step` and `abort` are the serving
API; `generate_many` and `generate` are loops over step(). Not thread-safe: one thread drives an
engine (engine/engine_loop.py serves other threads).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Sequence as SequenceOf
from dataclasses import asdict, replace
from functools import partial

import torch

from engine.config import EngineConfig
from engine.errors import EngineError
from engine.kv_tiers import TierCounters, check_tag
from engine.loader import resolve_checkpoint
from engine.oom_policies import on_out_of_memory
from engine.placement import CPU, MAIN, Placement, build_placement, resolve_device, resolve_dtype
from engine.request import GenerationResult, ProgressCallback, Request, TokenCallback
from engine.request_book import RequestBook, max_model_len
from engine.sampling_params import SamplingParams
from engine.sequence import Sequence
from engine.step_pipeline import FaultInjector, StepPipeline
from engine.tokenizer import ChatTokenizer

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
        self.device = resolve_device(config.device)
        self.dtype = resolve_dtype(config.dtype, self.device)
        self.checkpoint_dir = resolve_checkpoint(config.model_path, config.model_cache_dir)
        self.chat_tokenizer = ChatTokenizer.load(self.checkpoint_dir)
        self.tokenizer = self.chat_tokenizer.tokenizer  # the Hugging Face tokenizer
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
        self.max_model_len = max_model_len(config.max_model_len, self.model_args)
        self._cpu_placement: Placement | None = None
        self._book = RequestBook(
            main=self._main,
            chat_tokenizer=self.chat_tokenizer,
            model_args=self.model_args,
            max_model_len=self.max_model_len,
            attention_backend=self.attention_backend,
            device=self.device,
            seed=config.seed,
        )
        self._requests: dict[int, Request] = self._book.requests  # the same dict, never replaced
        self._pipelines: dict[str, StepPipeline] = {}
        self._add_pipeline(self._main)

    # ---- tokens ---------------------------------------------------------------------------

    def apply_chat_template(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of a chat, ending with the assistant's turn prompt; control strings inside
        a message's text stay text (ChatTokenizer.apply_chat_template)."""
        return self.chat_tokenizer.apply_chat_template(messages)

    def count_tokens(self, texts: SequenceOf[str]) -> list[int]:
        """Tokens of each text without special tokens (what a passage costs in a prompt)."""
        return self.chat_tokenizer.count_tokens(texts)

    # ---- serving API ----------------------------------------------------------------------

    def add_request(
        self,
        prompt_token_ids: SequenceOf[int],
        params: SamplingParams,
        *,
        priority: int = 0,
        on_token: TokenCallback | None = None,
        on_progress: ProgressCallback | None = None,
        cache_tag: str | None = None,
    ) -> int:
        """Queue a request; its tokens come from later step() calls. Returns its id. cache_tag:
        the document its prompt belongs to; only tagged prompts' blocks go to the lower KV
        tiers, and forget_cache_tag(tag) removes them from every tier."""
        request = self._book.add(
            prompt_token_ids, params, priority, on_token, on_progress, cache_tag
        )
        return request.request_id

    def step(self) -> list[GenerationResult]:
        """One step on every placement with work; the requests that finished (with async
        scheduling, the host reads a step's tokens during the next step: a request's result
        comes one step after its last token was computed).

        Per placement (the main one, and the CPU copy of oom_policy "cpu"), its StepPipeline
        schedules (Scheduler.schedule), runs (ModelRunner.launch: inputs, forward, sampled ids)
        and gives the sampled ids to their requests, one step ahead where it can; then the
        engine makes the requests' text. EngineLoop (engine_loop.py) calls this between serving
        other threads."""
        for pipeline in self._pipelines_with_work():
            # schedule -> run -> sampled ids to their requests
            self._book.text_pending += pipeline.step(self._requests)
        return self._postprocess()  # text, stop strings, loops, callbacks; the results

    # ---- lower KV tiers (engine/kv_tiers/) ------------------------------------------------

    def forget_cache_tag(self, tag: str) -> None:
        """Delete every KV block of tag's prompts from every tier (a deleted document): from the
        device's prefix cache, the CPU tier, and the disk folder for every process sharing it.
        A placement without lower tiers records no tag's blocks, so every cached prefix nobody
        uses leaves its cache instead."""
        check_tag(tag)
        for placement in self._placements():
            if placement.tiers is not None:
                placement.tiers.forget(tag)
            else:
                placement.blocks.forget_cached_free()

    def drop_device_prefix_cache(self) -> int:
        """Forget the prefixes cached on the device that no request uses, as if evicted (the lower
        tiers keep theirs). For benchmarks and tests; returns the blocks dropped."""
        return self._main.blocks.forget_cached_free()

    def poll_kv_tiers(self) -> None:
        """Finish the copies down the tiers that are done, and take in the tags other processes
        forgot (an idle engine's loop calls this)."""
        if self._main.tiers is not None:
            self._main.tiers.poll()

    def flush_kv_tiers(self) -> None:
        """Wait until the blocks computed so far are in the CPU tier and on disk."""
        if self._main.tiers is not None:
            self._main.tiers.flush()

    def kv_tier_counters(self) -> dict[str, TierCounters]:
        """Hits, misses, bytes and load seconds of each lower tier since the engine started."""
        if self._main.tiers is None:
            return {}
        return {tier: replace(c) for tier, c in self._main.tiers.counters.items()}

    def kv_tier_sizes(self) -> dict[str, int]:
        """What the caches hold now: prefixes cached on the device (in use or not) and the CPU
        tier's blocks and bytes (0 without one)."""
        tiers = self._main.tiers
        cpu = tiers.cpu if tiers is not None else None
        return {
            "num_device_cached_blocks": self._main.blocks.num_cached_blocks,
            "num_cpu_blocks": len(cpu) if cpu is not None else 0,
            "num_cpu_bytes": cpu.num_bytes if cpu is not None else 0,
        }

    def kv_write_behind_stats(self) -> dict[str, float]:
        """The write-behind's time on the engine's thread and how its host memory was pinned
        (ahead or on demand), since the engine started; {} without tiers."""
        tiers = self._main.tiers
        if tiers is None:
            return {}
        host = {f"host_{key}": value for key, value in asdict(tiers.host_counters()).items()}
        return {**asdict(tiers.write_behind), **host}

    def wait_kv_host_pool(self, timeout_s: float | None = None) -> bool:
        """Wait until the tiers' host memory pinned at start is ready (True at once without
        tiers or on a CPU); False if timeout_s passed first."""
        return self._main.tiers is None or self._main.tiers.wait_host_pool(timeout_s)

    def close(self) -> None:
        """Finish the writes down the tiers and stop their threads."""
        if self._main.tiers is not None:
            self._main.tiers.close()

    @property
    def num_steps(self) -> int:
        """Steps launched so far, on every placement."""
        return sum(pipeline.num_steps for pipeline in self._pipelines.values())

    def abort(self, request_id: int) -> GenerationResult | None:
        """Stop a request wherever it is and free its blocks; None when it is unknown."""
        return self._book.abort(request_id)

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
        cache_tag: str | None = None,
    ) -> GenerationResult:
        request_id = self.add_request(
            prompt_token_ids,
            params,
            priority=priority,
            on_token=on_token,
            on_progress=on_progress,
            cache_tag=cache_tag,
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
        request = self._book.add(
            prompt_token_ids, SamplingParams(max_new_tokens=1), 0, None, None, None
        )
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

    def _pipelines_with_work(self) -> Iterator[StepPipeline]:
        """Each placement's pipeline, if it has work when its turn comes (the main one's step
        may move a request to the CPU placement)."""
        for placement in self._placements():
            pipeline = self._pipelines[placement.name]
            if pipeline.has_work:
                yield pipeline

    def _postprocess(self) -> list[GenerationResult]:
        """The requests done: those whose text ended them or that the steps ended, then those
        an out-of-memory policy failed."""
        return self._process_text() + self._collect_failed()

    def _process_text(self) -> list[GenerationResult]:
        """Text of the tokens taken so far; the results of the requests that are done."""
        return self._book.process_text()

    def _collect_failed(self) -> list[GenerationResult]:
        """Requests that an out-of-memory policy failed (they are out of every scheduler)."""
        return self._book.collect_failed()

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
            is_async=self.config.async_scheduling,
            on_out_of_memory=partial(on_out_of_memory, self),
            fault_injector=self._fault_injector,
        )

    def request_of(self, seq: Sequence) -> Request:
        """The request of a scheduled sequence (for the OOM policies)."""
        return self._requests[seq.request_id]


def _indexed(on_token: Callable[[int, int, str], None], index: int) -> TokenCallback:
    return lambda token_id, delta: on_token(index, token_id, delta)
