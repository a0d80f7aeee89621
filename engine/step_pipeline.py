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

What a step computes is the model runner's (ModelRunner.launch: inputs, forward, sampling on
the device); what is done with its tokens is the request's (Request.take_token). This module
holds only the overlap: when to schedule ahead, launch, read back, and the retry of a step that
ran out of device memory. It keeps no request of its own: step() is given the engine's requests
to read (it never changes which exist) and returns the requests it read, whose text the engine
makes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from engine.device_memory import peak_bytes, release_cached
from engine.placement import MAIN, Placement
from engine.request import FINISH_ABORT, Request, monotonic
from engine.scheduler import Step
from engine.sequence import PLACEHOLDER_TOKEN_ID
from engine.step_inputs import LaunchedStep

# (placement name, step) -> None; raises torch.OutOfMemoryError to simulate one (tests).
FaultInjector = Callable[[str, Step], None]


class StepPipeline:
    def __init__(
        self,
        placement: Placement,
        *,
        is_async: bool,
        on_out_of_memory: Callable[[Placement, Step], None],
        fault_injector: FaultInjector | None = None,
    ) -> None:
        """fault_injector: called before each step of the main placement (tests inject
        faults)."""
        self.placement = placement
        self.is_async = is_async
        self.num_steps = 0
        self._on_out_of_memory = on_out_of_memory
        self._fault_injector = fault_injector
        self._in_flight: LaunchedStep | None = None
        # Read since step() last returned; kept for the next step() if a callback raised.
        self._read_requests: list[Request] = []

    @property
    def has_work(self) -> bool:
        return self._in_flight is not None or self.placement.scheduler.has_unfinished

    def step(self, requests: Mapping[int, Request]) -> list[Request]:
        """Launch the next step, then read the one before it (async) or this one (not). requests:
        the engine's requests by id, read (a request absent, or finished, has its token dropped).
        Returns the requests read that took a token or ended: their text is still to be made."""
        previous, self._in_flight = self._in_flight, None
        if previous is not None and not self._can_schedule_ahead(requests):
            self._read(previous, requests)  # its tokens are needed to schedule: no overlap
            previous = None
        current, previous = self._launch_next(previous, requests)  # schedule -> run
        if self.is_async:
            self._in_flight, due = current, previous  # current is read in the next step()
        else:
            due = current
        if due is not None:
            self._read(due, requests)  # the sampled ids to their requests
        read, self._read_requests = self._read_requests, []
        return read

    # ---- launch ---------------------------------------------------------------------------

    def _can_schedule_ahead(self, requests: Mapping[int, Request]) -> bool:
        scheduler = self.placement.scheduler
        for seq in scheduler.running:
            request = requests.get(seq.request_id)
            if request is not None and request.params.has_penalties:
                return False
        return scheduler.can_schedule_without_preemption()

    def _launch_next(
        self, previous: LaunchedStep | None, requests: Mapping[int, Request]
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
                return self._launch(step, previous, requests), previous
            except torch.OutOfMemoryError:
                release_cached(placement.device)
                if previous is not None:  # the policies below need every token known
                    self._read(previous, requests)
                    previous = None
                self._on_out_of_memory(placement, step)

    def _launch(
        self, step: Step, previous: LaunchedStep | None, requests: Mapping[int, Request]
    ) -> LaunchedStep:
        launched = self.placement.runner.launch(step, requests, previous)
        # Nothing below can run out of device memory: the step is committed.
        self.placement.scheduler.complete(step)
        if self.placement.tiers is not None:
            self.placement.tiers.after_step()  # copies down, off the critical path
        for chunk in step.chunks:
            if chunk.seq.request_id in launched.row_of:
                chunk.seq.append_token(PLACEHOLDER_TOKEN_ID)
        self.num_steps += 1
        return launched

    # ---- read back ------------------------------------------------------------------------

    def _read(self, launched: LaunchedStep, requests: Mapping[int, Request]) -> None:
        """The step's output: counters, tokens, stop tokens and lengths. Text comes later, in
        the engine's pass over the requests step() returns (while the next step computes)."""
        token_ids = launched.token_ids()
        now = monotonic()
        seconds = now - launched.started
        placement = self.placement
        interrupt: BaseException | None = None
        for chunk in launched.step.chunks:
            request = requests.get(chunk.seq.request_id)
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
                self._read_requests.append(request)
        if interrupt is not None:
            raise interrupt
