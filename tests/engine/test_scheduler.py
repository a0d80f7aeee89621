"""The step scheduler alone: plain Python, no model, milliseconds."""

from __future__ import annotations

import pytest

from engine.block_manager import BlockManager
from engine.scheduler import Scheduler, SchedulerConfig, Step
from engine.sequence import Sequence, SequenceStatus

BLOCK = 4


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _scheduler(num_blocks=64, window=0.0, **config) -> tuple[Scheduler, Clock]:
    clock = Clock()
    options = {"max_num_batched_tokens": 16, "min_num_batched_tokens": 2, **config}
    scheduler = Scheduler(
        SchedulerConfig(admission_window_s=window, **options),
        BlockManager(num_blocks, BLOCK, enable_prefix_cache=True),
        clock=clock,
    )
    return scheduler, clock


_ids = iter(range(10_000))


def _seq(num_tokens: int, priority: int = 0, first_token: int | None = None) -> Sequence:
    """Distinct tokens per sequence unless first_token is given: no accidental prefix hits."""
    request_id = next(_ids)
    first = request_id * 1000 if first_token is None else first_token
    return Sequence(
        request_id, list(range(first, first + num_tokens)), num_tokens, priority=priority
    )


def _run(scheduler: Scheduler, step: Step, token: int = 7) -> None:
    """What the engine does after a step: commit, then append a token where one is sampled."""
    scheduler.complete(step)
    for chunk in step.chunks:
        if chunk.is_last:
            chunk.seq.append_token(token)


def _plan(step: Step) -> list[tuple[int, int, int]]:
    return [(c.seq.request_id, c.start, c.num_tokens) for c in step.chunks]


def test_a_long_prompt_is_prefilled_over_several_steps_within_the_budget() -> None:
    scheduler, _ = _scheduler()
    seq = _seq(40)
    scheduler.add(seq)
    sizes = []
    while not seq.is_decoding:
        step = scheduler.schedule()
        assert step.num_tokens <= 16
        sizes.append(step.num_tokens)
        _run(scheduler, step)
    assert sizes == [16, 16, 8]
    assert seq.num_computed_tokens == 40 and seq.num_tokens == 41


def test_decodes_go_first_and_prefill_fills_the_rest_of_the_budget() -> None:
    scheduler, _ = _scheduler()
    writers = [_seq(3), _seq(5)]
    for seq in writers:
        scheduler.add(seq)
    _run(scheduler, scheduler.schedule())  # both prompts in one step
    assert all(seq.is_decoding for seq in writers)
    reader = _seq(50)
    scheduler.add(reader)
    for _ in range(3):
        step = scheduler.schedule()
        plan = _plan(step)
        # Two decodes of one token first, then 14 tokens of the long prompt.
        assert [p[2] for p in plan[:2]] == [1, 1] and {p[0] for p in plan[:2]} == {
            s.request_id for s in writers
        }
        assert plan[2][0] == reader.request_id and plan[2][2] == 14
        assert step.num_tokens == 16
        _run(scheduler, step)
    assert reader.num_computed_tokens == 42


def test_admission_reserves_blocks_for_the_whole_prompt() -> None:
    scheduler, _ = _scheduler(num_blocks=12)
    big = _seq(40)  # 10 blocks, prefilled over three steps
    small = _seq(12)  # 3 blocks: does not fit next to it
    scheduler.add(big)
    scheduler.add(small)
    step = scheduler.schedule()
    assert len(big.block_table) == 10
    assert _plan(step) == [(big.request_id, 0, 16)]
    assert small.status is SequenceStatus.WAITING and not small.block_table


def test_the_admission_window_holds_an_idle_engine_then_admits_together() -> None:
    scheduler, clock = _scheduler(window=0.01)
    first, second = _seq(4), _seq(6)
    scheduler.add(first)
    assert scheduler.wait_time() == pytest.approx(0.01)
    clock.now += 0.004
    scheduler.add(second)
    assert scheduler.wait_time() == pytest.approx(0.006)
    clock.now += 0.006
    assert scheduler.wait_time() == 0.0
    step = scheduler.schedule()
    assert {c.seq.request_id for c in step.chunks} == {first.request_id, second.request_id}
    # While requests run, newcomers join at the next step boundary: no waiting.
    scheduler.add(_seq(3))
    assert scheduler.wait_time() == 0.0


def test_decode_growth_preempts_the_newest_lowest_priority_request_and_it_resumes() -> None:
    scheduler, _ = _scheduler(num_blocks=4, max_num_batched_tokens=32)
    old, new = _seq(8, first_token=0), _seq(7, first_token=100)  # 2 blocks each
    scheduler.add(old)
    scheduler.add(new)
    _run(scheduler, scheduler.schedule())
    assert old.num_tokens == 9 and new.num_tokens == 8
    # old's 9th token needs a third block: none is free, so `new` is preempted.
    step = scheduler.schedule()
    assert step.preempted == [new] and step.is_cache_full
    assert _plan(step) == [(old.request_id, 8, 1)]
    assert new.status is SequenceStatus.WAITING and new.num_computed_tokens == 0
    assert new.num_tokens == 8  # its generated token is kept and recomputed
    _run(scheduler, step)
    scheduler.finish(old)
    step = scheduler.schedule()
    # Resumed: the whole sequence, prompt and generated token, in one chunk that samples.
    (chunk,) = step.chunks
    assert chunk.seq is new and chunk.start == 4 and chunk.num_tokens == 4 and chunk.is_last
    assert new.num_cached_tokens == 4  # its first full block came back from the prefix cache
    assert new.num_preemptions == 1


def test_a_higher_priority_request_preempts_lower_ones_at_a_step_boundary() -> None:
    scheduler, _ = _scheduler(num_blocks=6, max_num_seqs=8)
    low = _seq(16, priority=0)  # 4 of 6 blocks
    scheduler.add(low)
    _run(scheduler, scheduler.schedule())
    urgent = _seq(12, priority=10)  # 3 blocks: does not fit beside low
    scheduler.add(urgent)
    step = scheduler.schedule()
    assert step.preempted == [low]
    assert _plan(step)[0][0] == urgent.request_id
    # An equal priority never preempts.
    scheduler2, _ = _scheduler(num_blocks=6)
    a = _seq(16)
    scheduler2.add(a)
    _run(scheduler2, scheduler2.schedule())
    scheduler2.add(_seq(12))
    assert scheduler2.schedule().preempted == []


def test_priority_orders_admission_and_max_num_seqs_caps_it() -> None:
    scheduler, _ = _scheduler(max_num_seqs=2)
    batch = [_seq(2), _seq(2)]
    question = _seq(2, priority=5)
    for seq in [*batch, question]:
        scheduler.add(seq)
    step = scheduler.schedule()
    assert [c.seq for c in step.chunks] == [question, batch[0]]
    assert batch[1].status is SequenceStatus.WAITING


def test_out_of_memory_halves_the_budget_down_to_the_minimum_then_recovers() -> None:
    scheduler, _ = _scheduler(max_num_batched_tokens=16, min_num_batched_tokens=4)
    seq = _seq(60)
    scheduler.add(seq)
    step = scheduler.schedule()
    assert step.num_tokens == 16
    assert scheduler.on_out_of_memory() and scheduler.budget == 8
    step = scheduler.schedule()  # the same chunk, smaller; nothing was committed
    assert _plan(step) == [(seq.request_id, 0, 8)]
    assert scheduler.on_out_of_memory() and scheduler.budget == 4
    assert not scheduler.on_out_of_memory()  # at the minimum: the engine's policy decides
    for _ in range(32):
        step = scheduler.schedule()
        if not step.chunks:
            break
        _run(scheduler, step)
    assert scheduler.budget == 8  # doubled again after a run of steps without trouble


def test_abort_frees_blocks_wherever_the_request_is() -> None:
    scheduler, _ = _scheduler(num_blocks=16)
    running, waiting = _seq(20), _seq(40)
    scheduler.add(running)
    scheduler.schedule()
    scheduler.add(waiting)
    assert scheduler.abort(running.request_id) is running
    assert scheduler.abort(waiting.request_id) is waiting
    assert scheduler.abort(12345) is None
    assert scheduler.blocks.num_free_blocks == 16 and not scheduler.has_unfinished


def test_the_oom_policies_edit_requests_through_the_scheduler() -> None:
    scheduler, clock = _scheduler(num_blocks=16, max_num_seqs=8)
    long = _seq(20)  # 5 blocks
    scheduler.add(long)
    step = scheduler.schedule()
    scheduler.complete(step)  # 16 of 20 tokens computed
    tail = long.token_ids[-3:]
    scheduler.truncate_prompt(long, 10, tail)  # "truncate": head 10 kept, the last 3 after it
    assert long.token_ids == [*range(long.request_id * 1000, long.request_id * 1000 + 10), *tail]
    assert long.num_prompt_tokens == long.num_tokens == 13
    assert long.num_computed_tokens == 10  # the head's KV is kept; the tail is computed
    assert len(long.block_table) == 4 and scheduler.blocks.num_free_blocks == 12
    assert _plan(scheduler.schedule()) == [(long.request_id, 10, 3)]
    # A decode step at the smallest budget fails the lowest priority, newest among equals.
    clock.now += 1
    newer, urgent = _seq(2), _seq(2, priority=3)
    scheduler.add(newer)
    scheduler.add(urgent)
    scheduler.schedule()
    assert scheduler.lowest_priority_running() is newer
    # "cpu": off this scheduler, its blocks freed, to be added elsewhere.
    scheduler.evict(long)
    assert long not in scheduler.running and long.num_cached_tokens == 0
    assert scheduler.lowest_priority_running() is newer
    assert scheduler.blocks.num_free_blocks == 14


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="admission_window_s"):
        SchedulerConfig(admission_window_s=0.2)
    with pytest.raises(ValueError, match="min_num_batched_tokens"):
        SchedulerConfig(max_num_batched_tokens=8, min_num_batched_tokens=16)


def test_a_sequence_with_all_its_tokens_is_not_scheduled_again() -> None:
    # With async scheduling its last token may still be a placeholder on the device.
    scheduler, _ = _scheduler()
    done, going = _seq(6), _seq(6)
    done.max_completion_tokens = 1
    for seq in (done, going):
        scheduler.add(seq)
    _run(scheduler, scheduler.schedule())
    assert done.has_all_completion_tokens and not going.has_all_completion_tokens
    assert _plan(scheduler.schedule()) == [(going.request_id, 6, 1)]


def test_scheduling_ahead_is_allowed_only_when_nobody_can_be_preempted() -> None:
    scheduler, _ = _scheduler(num_blocks=5, max_num_batched_tokens=32)
    a, b = _seq(8), _seq(7)  # 2 blocks each, 1 free
    scheduler.add(a)
    scheduler.add(b)
    _run(scheduler, scheduler.schedule())
    # a's next token needs a new block, b's does not: 1 free block for 2 running is too few.
    assert not scheduler.can_schedule_without_preemption()
    scheduler.finish(b)
    assert scheduler.can_schedule_without_preemption()
    # A waiting request of the same priority never preempts, whether it fits or not.
    scheduler.add(_seq(20))
    assert scheduler.can_schedule_without_preemption()
    # One of higher priority that does not fit would preempt a.
    urgent = _seq(16, priority=5)
    scheduler.add(urgent)
    assert not scheduler.can_schedule_without_preemption()
    assert scheduler.schedule().preempted == [a]


def _decoding(scheduler: Scheduler, *seqs: Sequence) -> None:
    """Prefill `seqs` (each within one step, all fit) so they are decoding."""
    for seq in seqs:
        scheduler.add(seq)
    while any(not seq.is_decoding for seq in seqs):
        _run(scheduler, scheduler.schedule())


def test_lower_priority_decodes_sit_out_every_other_step_while_a_question_writes() -> None:
    scheduler, _ = _scheduler(max_num_batched_tokens=64)
    writers = [_seq(4, priority=0) for _ in range(3)]
    _decoding(scheduler, *writers)
    question = _seq(4, priority=10)
    _decoding(scheduler, question)
    plans = []
    for _ in range(4):
        step = scheduler.schedule()
        plans.append(sorted(c.seq.request_id for c in step.chunks))
        _run(scheduler, step)
    everyone = sorted(s.request_id for s in [question, *writers])
    alone = [question.request_id]
    assert plans in ([alone, everyone] * 2, [everyone, alone] * 2)


def test_everyone_runs_every_step_with_one_priority_or_the_share_set_to_one() -> None:
    for every, priorities in ((2, (0, 0)), (1, (0, 10))):
        scheduler, _ = _scheduler(max_num_batched_tokens=64, lower_priority_every=every)
        low, high = _seq(4, priority=priorities[0]), _seq(4, priority=priorities[1])
        _decoding(scheduler, low, high)
        for _ in range(3):
            step = scheduler.schedule()
            assert len(step.chunks) == 2
            _run(scheduler, step)


def test_a_question_still_prefilling_does_not_hold_the_others_back() -> None:
    scheduler, _ = _scheduler(max_num_batched_tokens=8)
    writer = _seq(4, priority=0)
    _decoding(scheduler, writer)
    question = _seq(20, priority=10)  # prefilled over several steps
    scheduler.add(question)
    for _ in range(3):
        step = scheduler.schedule()
        assert writer in [c.seq for c in step.chunks]
        _run(scheduler, step)


def test_a_step_left_empty_by_the_high_priority_requests_goes_to_everyone() -> None:
    scheduler, _ = _scheduler(max_num_batched_tokens=64)
    low = _seq(4, priority=0)
    high = _seq(4, priority=10)
    high.max_completion_tokens = 1  # its token, sampled in its prefill step, is the last
    _decoding(scheduler, low, high)
    step = scheduler.schedule()
    assert [c.seq for c in step.chunks] == [low]


def test_the_engine_config_refuses_a_share_below_one() -> None:
    from engine.config import EngineConfig

    with pytest.raises(ValueError, match="lower_priority_every"):
        EngineConfig(model_path="x", lower_priority_every=0)
