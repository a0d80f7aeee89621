"""The step scheduler: which requests run in the next forward step, and how many tokens of each.

vLLM V1's policy in nano-vllm's shape (the engine calls schedule(), runs the step, complete()):
- every step has a token budget; running decodes go first (one token each) and prefill chunks fill
  the rest, so a long document's prefill never stops the requests that are writing;
- admission reserves KV blocks for the request's whole prompt (prefix-cache hits included), so a
  prompt never runs out of blocks half-way through its prefill; only generated tokens need new
  blocks, and when none is free the lowest-priority, newest request is preempted by recompute:
  its blocks are freed, its tokens kept, and it is prefilled again later (its full blocks stay in
  the prefix cache, so that is mostly a cache hit) and goes on with the same output;
- a higher priority is served first, and a waiting request may preempt running ones of lower
  priority at a step boundary;
- while a request of the highest running priority decodes, lower-priority requests take part in
  one step of every `lower_priority_every` only; the steps between run the high-priority ones
  alone. A question asked while 32 long summaries write would otherwise pay for a 33-row step
  per token (each row reads its own KV: 32 x 8K tokens of an 8B model read twice the weights'
  bytes), writing at about 40% of its speed alone; every other step alone, it writes at about
  60%, and the summaries lose a third of their speed for the seconds the answer takes;
- an idle engine waits an admission window after the first arrival, so requests that arrive
  together are prefilled together;
- with lower KV tiers (a `loader`), an admitted request whose prefix is on disk waits in
  `loading` while its blocks are read, and the other requests go on; it is allocated when its
  load ends;
- out of memory: the same step is planned again with half the budget, down to a minimum.

Plain Python, no torch: the scheduler decides, the model runner computes.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from engine.block_manager import BlockManager
from engine.sequence import Sequence, SequenceStatus

# Consecutive steps without running out of memory after which a halved budget doubles again.
BUDGET_RECOVERY_STEPS = 32


@dataclass(frozen=True)
class SchedulerConfig:
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 8192  # the step budget, decodes and prefill chunks together
    min_num_batched_tokens: int = 32  # out-of-memory halving stops here
    admission_window_s: float = 0.010
    # While a higher-priority request decodes, lower ones run in 1 step of this many (1: all).
    lower_priority_every: int = 2

    def __post_init__(self) -> None:
        for name in (
            "max_num_seqs",
            "max_num_batched_tokens",
            "min_num_batched_tokens",
            "lower_priority_every",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}.")
        if self.min_num_batched_tokens > self.max_num_batched_tokens:
            raise ValueError(
                f"min_num_batched_tokens ({self.min_num_batched_tokens}) is larger than "
                f"max_num_batched_tokens ({self.max_num_batched_tokens})."
            )
        if not 0.0 <= self.admission_window_s <= 0.050:
            raise ValueError(
                f"admission_window_s must be between 0 and 0.05 s, not {self.admission_window_s}."
            )


@dataclass(frozen=True)
class ScheduledChunk:
    """Positions [start, start + num_tokens) of one sequence, computed in this step. is_last:
    the chunk reaches the sequence's last token, so the step samples the next one (fixed when
    scheduled: the sequence grows after the step)."""

    seq: Sequence
    start: int
    num_tokens: int
    is_decode: bool
    is_last: bool

    @classmethod
    def of(cls, seq: Sequence, num_tokens: int) -> ScheduledChunk:
        start = seq.num_computed_tokens
        return cls(seq, start, num_tokens, seq.is_decoding, start + num_tokens == seq.num_tokens)

    @property
    def end(self) -> int:
        return self.start + self.num_tokens


@dataclass
class Step:
    chunks: list[ScheduledChunk]  # decodes first, then prefill chunks
    budget: int
    preempted: list[Sequence] = field(default_factory=list)
    # A running request was preempted because the cache was full: admit nothing this step.
    is_cache_full: bool = False

    @property
    def num_tokens(self) -> int:
        return sum(chunk.num_tokens for chunk in self.chunks)

    @property
    def num_decodes(self) -> int:
        return sum(1 for chunk in self.chunks if chunk.is_decode)

    @property
    def largest_prefill(self) -> ScheduledChunk | None:
        prefills = [chunk for chunk in self.chunks if not chunk.is_decode]
        return max(prefills, key=lambda chunk: chunk.num_tokens, default=None)


class PrefixLoader(Protocol):
    """Brings a request's prompt prefix up from lower KV tiers (engine/kv_tiers/)."""

    def start_load(self, seq: Sequence) -> bool:
        """True: allocate seq now; False: its load is under way (advance() ends it)."""
        ...

    def advance(self, *, wait: bool) -> list[Sequence]:
        """The requests whose loads ended since the last call (wait: block for progress)."""
        ...

    def num_blocks_loading(self) -> int:
        """Cache blocks the loads under way may still take."""
        ...

    def allocated(self, seq: Sequence) -> None:
        """seq was allocated (the load's holds on its blocks can go)."""
        ...

    def cancel_load(self, seq: Sequence) -> list[Sequence]:
        """seq left before its allocation; returns the requests that waited for its load."""
        ...


def _order(seq: Sequence) -> tuple[int, float, int]:
    """Serving order: higher priority, then earlier arrival, then lower id."""
    return (-seq.priority, seq.arrival_time, seq.request_id)


class Scheduler:
    def __init__(
        self,
        config: SchedulerConfig,
        blocks: BlockManager,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.blocks = blocks
        self.clock = clock
        self.waiting: list[Sequence] = []  # in serving order
        self.running: list[Sequence] = []
        self.budget = config.max_num_batched_tokens
        self._num_steps_since_oom = 0
        self._num_steps = 0
        # The lower KV tiers (engine/kv_tiers/): a request about to be allocated (it fits) first
        # has its prefix loaded into the cache, so allocate() finds it. Loads from disk go on
        # while other requests step; the request waits in `loading` until its load ends.
        self.loader: PrefixLoader | None = None
        self.loading: list[Sequence] = []

    # ---- requests -------------------------------------------------------------------------

    def add(self, seq: Sequence) -> None:
        """Queue a request. The caller has checked that its prompt fits the whole cache."""
        if not seq.arrival_time:
            seq.arrival_time = self.clock()
        seq.status = SequenceStatus.WAITING
        self._enqueue(seq)

    def abort(self, request_id: int) -> Sequence | None:
        """Drop a request wherever it is, freeing its blocks; None when it is unknown."""
        for queue in (self.waiting, self.running, self.loading):
            for seq in queue:
                if seq.request_id == request_id:
                    queue.remove(seq)
                    if self.loader is not None and queue is not self.running:
                        self._requeue(self.loader.cancel_load(seq))
                    self._release(seq)
                    return seq
        return None

    def finish(self, seq: Sequence) -> None:
        """A running request is done: free its blocks (full ones stay in the prefix cache)."""
        self.running.remove(seq)
        self._release(seq)

    def evict(self, seq: Sequence) -> None:
        """Take a running request off this scheduler, its blocks freed, to go on elsewhere (the
        OOM policy "cpu" moves it to the CPU placement, which computes its prompt again)."""
        self.running.remove(seq)
        self.blocks.free(seq)
        seq.num_cached_tokens = 0
        seq.tier_loads = {}

    def truncate_prompt(self, seq: Sequence, num_head: int, tail: list[int]) -> None:
        """Make a running request's prompt its first num_head tokens (their KV kept) followed by
        `tail` (to be computed), with cache slots for the tail (the OOM policy "truncate")."""
        self.blocks.truncate(seq, num_head)
        for token_id in tail:
            seq.append_token(token_id)
            self.blocks.append_slot(seq)
        seq.num_prompt_tokens = seq.num_tokens

    def lowest_priority_running(self) -> Sequence:
        """The running request of the lowest priority, the newest among equals: the one a
        decode step that runs out of memory at the smallest budget fails."""
        return max(self.running, key=lambda seq: (-seq.priority, seq.arrival_time))

    @property
    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running or self.loading)

    def wait_time(self) -> float:
        """Seconds to wait before the next step is worth scheduling (the admission window of an
        idle engine); 0 when there is work now."""
        if self.running or not self.waiting:
            return 0.0
        first_arrival = min(seq.arrival_time for seq in self.waiting)
        return max(0.0, self.config.admission_window_s - (self.clock() - first_arrival))

    # ---- one step -------------------------------------------------------------------------

    def schedule(self) -> Step:
        """The next step: running decodes, then prefill chunks, then newly admitted prompts,
        within the token budget. Preempts where blocks or slots run out."""
        step = Step(chunks=[], budget=self.budget)
        if self.loading:
            self._advance_loads(wait=False)
        self._preempt_for_priority(step)
        budget = self.budget
        ordered = sorted(self.running, key=_order)
        floor = self._priority_floor(ordered)
        prefilling = []
        for seq in ordered:
            if budget == 0:
                break
            if seq.priority < floor:
                continue  # a step for the higher-priority requests alone
            if not seq.is_decoding:
                prefilling.append(seq)
            elif seq.has_all_completion_tokens:
                continue  # its last token is still in flight; the engine ends it when read
            elif seq.status is SequenceStatus.RUNNING and self._reserve_decode_slot(seq, step):
                step.chunks.append(ScheduledChunk.of(seq, 1))
                budget -= 1
        for seq in prefilling:
            if budget == 0:
                break
            if seq.status is SequenceStatus.RUNNING and seq.num_uncomputed_tokens > 0:
                budget -= self._add_prefill_chunk(seq, budget, step)
        # No admission in a step that had to preempt: the cache is full, the victim would only
        # be taken back in and thrown out again.
        while budget > 0 and self.waiting and not step.is_cache_full:
            seq = self.waiting[0]
            if seq.priority < floor:
                break
            if len(self.running) >= self.config.max_num_seqs or not self._fits(seq):
                break
            self.waiting.pop(0)
            if self.loader is not None and not self.loader.start_load(seq):
                self.loading.append(seq)  # the others go on meanwhile
                continue
            if not self.blocks.can_allocate(seq):
                # Its load ended at once and dropped a block that failed its check: the blocks
                # after it are no hits now, and the room counted for them is not there.
                self._release_load(seq)
                self._enqueue(seq)
                break
            self.blocks.allocate(seq)
            if self.loader is not None:
                self.loader.allocated(seq)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            budget -= self._add_prefill_chunk(seq, budget, step)
        if not step.chunks and not step.preempted and floor > float("-inf"):
            # The high-priority requests had nothing to run after all (their last tokens are
            # in flight): this step goes to everyone.
            self._num_steps += 1
            return self.schedule()
        if not step.chunks and self.loading:
            self._advance_loads(wait=True)  # nothing to run: wait for the reads, not spin
        return step

    def _fits(self, seq: Sequence) -> bool:
        reserved = self.loader.num_blocks_loading() if self.loader is not None else 0
        return self.blocks.can_allocate(seq, reserved=reserved)

    def _advance_loads(self, *, wait: bool) -> None:
        """Place what the loads read since the last step (with wait, waiting a slice of time for
        reads: no step had anything to run). A request whose load ended is allocated at once
        when it fits (it was admitted: it fitted then), taking its loaded blocks; otherwise its
        load's hold on them goes and it goes back to the queue (a loaded request that held its
        blocks while it waited could keep the request ahead of it from ever fitting). The
        requests that waited for a load go back to the queue."""
        assert self.loader is not None
        self._requeue(self.loader.advance(wait=wait))

    def _requeue(self, seqs: list[Sequence]) -> None:
        assert self.loader is not None
        for seq in seqs:
            if seq not in self.loading:
                continue
            self.loading.remove(seq)
            fits = len(self.running) < self.config.max_num_seqs and self.blocks.can_allocate(seq)
            # The load's own request: loaded. One that followed it: its own load may start now,
            # for what lies past the blocks the other brought up.
            if fits and not self.loader.start_load(seq):
                self.loading.append(seq)
                continue
            if len(self.running) < self.config.max_num_seqs and self.blocks.can_allocate(seq):
                self.blocks.allocate(seq)
                self.loader.allocated(seq)
                seq.status = SequenceStatus.RUNNING
                self.running.append(seq)  # this step gives it a prefill chunk
            else:
                self._release_load(seq)
                self._enqueue(seq)

    def _release_load(self, seq: Sequence) -> None:
        """seq goes back to the queue unallocated: its load's holds on its blocks go (they stay
        in the cache, free to evict)."""
        if self.loader is not None:
            self.loader.allocated(seq)

    def can_schedule_without_preemption(self) -> bool:
        """Whether the next schedule() surely preempts nobody: every running request has a free
        block for its next token, and the first waiting one either fits or outranks no running
        request. The engine schedules a step before it has read the previous step's sampled
        tokens only then: a preempted request would be recomputed from tokens not yet known.
        Never while loads run: a load that ends may bring a request of higher priority, and
        its imports take free blocks."""
        if self.loading or self.blocks.num_free_blocks < len(self.running):
            return False
        if not self.waiting or not self.running:
            return True
        head = self.waiting[0]
        if max(self.running, key=_order).priority >= head.priority:
            return True
        return len(self.running) < self.config.max_num_seqs and self.blocks.can_allocate(head)

    def complete(self, step: Step) -> None:
        """The step is launched: its KV is (being) written, in the device's order. Called before
        the step's sampled tokens are known; the engine appends them (first as placeholders)."""
        for chunk in step.chunks:
            # A request aborted or ended while its step ran has no blocks any more.
            if chunk.seq.status is SequenceStatus.RUNNING:
                self.blocks.commit_computed(chunk.seq, chunk.end)
        self._num_steps += 1
        self._num_steps_since_oom += 1
        if (
            self.budget < self.config.max_num_batched_tokens
            and self._num_steps_since_oom >= BUDGET_RECOVERY_STEPS
        ):
            self.budget = min(self.config.max_num_batched_tokens, self.budget * 2)
            self._num_steps_since_oom = 0

    def on_out_of_memory(self) -> bool:
        """Halve the budget for the step to be planned again; False when it was already at
        the minimum (then the engine applies the request's out-of-memory policy). KV already
        written stays: nothing of a failed step was committed."""
        self._num_steps_since_oom = 0
        if self.budget <= self.config.min_num_batched_tokens:
            return False
        self.budget = max(self.config.min_num_batched_tokens, self.budget // 2)
        return True

    def preempt(self, seq: Sequence) -> None:
        """Free a running request's KV and queue it again; it is recomputed when readmitted."""
        self.running.remove(seq)
        self.blocks.free(seq)
        seq.num_preemptions += 1
        seq.status = SequenceStatus.WAITING
        self._enqueue(seq)

    # ---- internals ------------------------------------------------------------------------

    def _priority_floor(self, ordered: list[Sequence]) -> int | float:
        """The lowest priority that runs in this step: the top one in the steps that belong to
        a decoding higher-priority request alone (module doc), else every priority."""
        every = self.config.lower_priority_every
        if every == 1 or not ordered or self._num_steps % every == 0:
            return float("-inf")
        top = ordered[0].priority
        if ordered[-1].priority == top:
            return float("-inf")
        writing = any(
            seq.priority == top and seq.is_decoding and not seq.has_all_completion_tokens
            for seq in ordered
        )
        if not writing:
            return float("-inf")
        return top

    def _add_prefill_chunk(self, seq: Sequence, budget: int, step: Step) -> int:
        num_tokens = min(seq.num_uncomputed_tokens, budget)
        if seq.max_chunk_tokens is not None:
            num_tokens = min(num_tokens, seq.max_chunk_tokens)
        if num_tokens > 0:
            step.chunks.append(ScheduledChunk.of(seq, num_tokens))
        return num_tokens

    def _reserve_decode_slot(self, seq: Sequence, step: Step) -> bool:
        """A cache slot for seq's next token, preempting the lowest-priority, newest request
        while none is free; False when seq itself was the one preempted."""
        while not self.blocks.can_append(seq):
            victim = max(self.running, key=_order)
            self.preempt(victim)
            step.preempted.append(victim)
            step.is_cache_full = True
            if victim is seq:
                return False
        self.blocks.append_slot(seq)
        return True

    def _preempt_for_priority(self, step: Step) -> None:
        """Make room for the first waiting request by preempting running ones of strictly lower
        priority, lowest and newest first, while it does not fit."""
        if not self.waiting or self.loading:
            # While loads run, the room they will take is not known to be freed by anyone:
            # preempting might free nothing the head can use. It waits for the loads instead.
            return
        head = self.waiting[0]
        while self.running:
            fits = len(self.running) < self.config.max_num_seqs and self.blocks.can_allocate(head)
            victim = max(self.running, key=_order)
            if fits or victim.priority >= head.priority:
                return
            self.preempt(victim)
            step.preempted.append(victim)

    def _enqueue(self, seq: Sequence) -> None:
        keys = [_order(other) for other in self.waiting]
        self.waiting.insert(bisect.bisect_right(keys, _order(seq)), seq)

    def _release(self, seq: Sequence) -> None:
        if seq.block_table:
            self.blocks.free(seq)
        seq.status = SequenceStatus.FINISHED
