"""One placement's steps, run one step ahead: schedule and launch step N+1 while step N computes.

A decode step on a GPU is 5-15 ms of device work, and the host has ~6 ms of its own per step at
batch 64 (scheduling, inputs, sampling bookkeeping, text). Done in series, the device waits for
the host every step. As vLLM V1's async scheduling does, the host here launches step N+1 before
it has read step N's sampled tokens: they stay on the device and are copied into N+1's input ids
by index (FedTokens); the host holds each as a placeholder at its position. Then it reads step
N's tokens back (one small copy, waited for by an event) and does N's bookkeeping -- stop
tokens, lengths, text -- while N+1 computes. So the host learns a request's tokens one step
late: a request that ended in step N still has a row in N+1, whose token is dropped.

The engine schedules ahead only when that is safe: no request of the placement needs its token
history to sample (penalties read it on the host) and the scheduler will preempt nobody (a
preempted request is recomputed from its tokens, which must be known). Otherwise it first reads
the step in flight, then schedules as without overlap. With async_scheduling off, every step is
read right after its launch: the same code, no overlap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.device_memory import peak_bytes, release_cached
from engine.placement import MAIN, Placement
from engine.request import FINISH_ABORT, Request, monotonic
from engine.sampler import Sampler, to_device
from engine.sampling_params import SamplingRow
from engine.scheduler import Step
from engine.sequence import PLACEHOLDER_TOKEN_ID
from engine.step_inputs import LOGITS_ALL, LOGITS_LAST, LOGITS_NONE, ChunkInput, FedTokens

# (placement name, step) -> None; raises torch.OutOfMemoryError to simulate one (tests).
FaultInjector = Callable[[str, Step], None]


@dataclass
class LaunchedStep:
    """A step whose work is queued on the device; its sampled tokens are not read yet."""

    step: Step
    started: float
    sampled: torch.Tensor | None  # [R] int64 on the device, one per sampling request
    sampled_host: torch.Tensor | None  # the same, being copied to the host
    done: torch.cuda.Event | None  # recorded after the copy (CUDA only)
    row_of: dict[int, int]  # request id -> its row in sampled

    def token_ids(self) -> list[int]:
        """Wait for the step and read its sampled tokens."""
        if self.done is not None:
            self.done.synchronize()
        return [] if self.sampled_host is None else self.sampled_host.tolist()


class StepPipeline:
    def __init__(
        self,
        placement: Placement,
        requests: dict[int, Request],
        text_pending: dict[int, Request],
        *,
        is_async: bool,
        on_out_of_memory: Callable[[Placement, Step], None],
        fault_injector: FaultInjector | None = None,
    ) -> None:
        """fault_injector: called before each step of the main placement (tests inject faults)."""
        self.placement = placement
        self.is_async = is_async
        self.num_steps = 0
        self._requests = requests  # the engine's, by id: shared, not copied
        self._text_pending = text_pending  # the engine's: requests whose text is to be made
        self._on_out_of_memory = on_out_of_memory
        self._fault_injector = fault_injector
        self._sampler = Sampler()
        self._in_flight: LaunchedStep | None = None

    @property
    def has_work(self) -> bool:
        return self._in_flight is not None or self.placement.scheduler.has_unfinished

    def step(self) -> None:
        """Launch the next step, then read the one before it (async) or this one (not)."""
        previous, self._in_flight = self._in_flight, None
        if previous is not None and not self._can_schedule_ahead():
            self._read(previous)
            previous = None
        current, previous = self._launch_next(previous)
        if previous is not None and current is None:
            self._read(previous)
            return
        if self.is_async:
            self._in_flight = current
            if previous is not None:
                self._read(previous)
        elif current is not None:
            self._read(current)

    # ---- launch ---------------------------------------------------------------------------

    def _can_schedule_ahead(self) -> bool:
        scheduler = self.placement.scheduler
        for seq in scheduler.running:
            request = self._requests.get(seq.request_id)
            if request is not None and request.params.has_penalties:
                return False
        return scheduler.can_schedule_without_preemption()

    def _launch_next(
        self, previous: LaunchedStep | None
    ) -> tuple[LaunchedStep | None, LaunchedStep | None]:
        """The step launched (None: nothing to run) and `previous` unless it was read here."""
        placement = self.placement
        scheduler = placement.scheduler
        while True:
            step = scheduler.schedule()
            if not step.chunks:
                return None, previous
            try:
                if self._fault_injector is not None and placement.name == MAIN:
                    self._fault_injector(placement.name, step)
                return self._launch(step, previous), previous
            except torch.OutOfMemoryError:
                release_cached(placement.device)
                if previous is not None:  # the policies below need every token known
                    self._read(previous)
                    previous = None
                self._on_out_of_memory(placement, step)

    def _launch(self, step: Step, previous: LaunchedStep | None) -> LaunchedStep:
        started = monotonic()
        inputs, fed = self._inputs(step, previous)
        logits = self.placement.runner.run(inputs, fed)  # launched, not waited for
        sampled, row_of = self._sample(step, logits)
        # Nothing below can run out of device memory: the step is committed.
        self.placement.scheduler.complete(step)
        for chunk in step.chunks:
            if chunk.seq.request_id in row_of:
                chunk.seq.append_token(PLACEHOLDER_TOKEN_ID)
        self.num_steps += 1
        sampled_host, done = sampled, None
        if self.placement.device.type == "cuda":
            if sampled is not None:
                sampled_host = sampled.to("cpu", non_blocking=True)  # into pinned memory
            # Waited for even without samples: a prefill chunk's time is its device time.
            done = torch.cuda.Event()
            done.record()
        return LaunchedStep(step, started, sampled, sampled_host, done, row_of)

    def _inputs(
        self, step: Step, previous: LaunchedStep | None
    ) -> tuple[list[ChunkInput], FedTokens | None]:
        inputs = []
        fed_rows: list[int] = []
        source_rows: list[int] = []
        offset = 0
        for chunk in step.chunks:
            request = self._requests[chunk.seq.request_id]
            if request.prefill_only and request.all_logits:
                mode = LOGITS_ALL
            else:
                mode = LOGITS_LAST if chunk.is_last else LOGITS_NONE
            tokens = chunk.seq.token_ids[chunk.start : chunk.end]
            if tokens[0] == PLACEHOLDER_TOKEN_ID:
                # The previous step's sample, still on the device (only a decode's one token).
                assert previous is not None and chunk.num_tokens == 1
                fed_rows.append(offset)
                source_rows.append(previous.row_of[request.request_id])
                tokens = [0]
            inputs.append(ChunkInput(tokens, chunk.start, chunk.seq.block_table, mode))
            offset += chunk.num_tokens
        if not fed_rows:
            return inputs, None
        assert previous is not None and previous.sampled is not None
        return inputs, FedTokens(fed_rows, previous.sampled, source_rows)

    def _sample(self, step: Step, logits: torch.Tensor) -> tuple[torch.Tensor | None, dict]:
        """Tokens [R] on the device for the chunks that sample, and each request's row."""
        rows: list[int] = []
        requests: list[Request] = []
        row = 0
        for chunk in step.chunks:
            request = self._requests[chunk.seq.request_id]
            if request.prefill_only:
                num_rows = chunk.num_tokens if request.all_logits else int(chunk.is_last)
                request.logits.append(logits[row : row + num_rows].clone())
                row += num_rows
            elif chunk.is_last:
                rows.append(row)
                requests.append(request)
                row += 1
        if not rows:
            return None, {}
        if rows[-1] == len(rows) - 1:  # rows 0..R-1: the logits as they are, no gather
            picked = logits[: len(rows)]
        else:
            picked = logits.index_select(0, to_device(rows, torch.long, logits.device))
        if all(r.is_plain_greedy for r in requests):
            sampled = self._sampler.greedy(picked)
        else:
            sampled = self._sampler.sample_on_device(picked, [_sampling_row(r) for r in requests])
        return sampled, {r.request_id: i for i, r in enumerate(requests)}

    # ---- read back ------------------------------------------------------------------------

    def _read(self, launched: LaunchedStep) -> None:
        """The step's output: counters, tokens, stop tokens and lengths. Text comes later, in
        the engine's pass over text_pending (while the next step computes)."""
        token_ids = launched.token_ids()
        now = monotonic()
        seconds = now - launched.started
        placement = self.placement
        interrupt: BaseException | None = None
        for chunk in launched.step.chunks:
            request = self._requests.get(chunk.seq.request_id)
            if request is None or request.is_finished:
                continue  # aborted, or ended by its text meanwhile: its token is dropped
            try:
                if not chunk.is_decode:
                    request.on_admitted(now - seconds)
                    request.on_prefill_chunk(chunk.num_tokens, chunk.end, seconds)
                if chunk.is_last and request.prefill_only:
                    request.finish_reason = "length"
                elif chunk.is_last:
                    token_id = token_ids[launched.row_of[request.request_id]]
                    request.take_token(token_id, chunk.end, now)
            except BaseException as exc:  # a caller's callback: that request ends, others go on
                request.error, request.finish_reason = exc, FINISH_ABORT
                if not isinstance(exc, Exception):
                    interrupt = exc  # KeyboardInterrupt and the like: raised once all is done
            if request.is_finished:
                placement.scheduler.finish(chunk.seq)
                request.stats.peak_memory_bytes = peak_bytes(placement.device)
            if request.is_finished or request.pending_token_ids:
                self._text_pending[request.request_id] = request
        if interrupt is not None:
            raise interrupt


def _sampling_row(request: Request) -> SamplingRow:
    params, seq = request.params, request.seq
    return SamplingRow(
        params,
        request.generator,
        seq.prompt_token_ids if params.penalty_scope == "all" else (),
        seq.completion_token_ids if params.has_penalties else (),
    )
