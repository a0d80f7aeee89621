"""Async scheduling: each step is launched before the previous step's tokens are read back. The
outputs must be exactly those of the engine without overlap, however requests end, and a request
that ends (or is aborted) while a step of it is in flight frees its blocks once."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from engine import SamplingParams
from engine.scheduler import Step
from engine.step_inputs import FedTokens
from tests.engine.conftest import tiny_engine


def _prompt(n: int, seed: int) -> list[int]:
    return torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.fixture(scope="module")
def llama(tiny_models):
    return tiny_models("llama")[0]


class StepLog:
    """The fault-injection hook, used only to record how many steps each request was in."""

    def __init__(self) -> None:
        self.rows: Counter[int] = Counter()

    def __call__(self, _placement: str, step: Step) -> None:
        self.rows.update(chunk.seq.request_id for chunk in step.chunks if chunk.is_decode)


def _assert_all_blocks_free(blocks) -> None:
    free = list(blocks._free_block_ids) + list(blocks._cached_free_block_ids)
    assert len(free) == len(set(free)) == blocks.num_blocks
    assert all(block.ref_count == 0 for block in blocks.blocks)


def _run(llama, prompts, params, **options):
    log = StepLog()
    engine = tiny_engine(llama, chunk_size=64, fault_injector=log, **options)
    results = engine.generate_many(prompts, params)
    _assert_all_blocks_free(engine._main.blocks)
    return results, log, engine


def _summary(results):
    return [(r.token_ids, r.text, r.finish_reason) for r in results]


def test_overlapped_steps_give_exactly_the_outputs_of_steps_read_at_once(llama) -> None:
    prompts = [_prompt(n, seed) for seed, n in enumerate([5, 40, 130, 17, 64, 90])]
    free_run, _, _ = _run(llama, prompts, SamplingParams(max_new_tokens=24), async_scheduling=False)
    stop_token = free_run[1].token_ids[6]
    assert len(free_run[3].text) >= 8
    stop_text = free_run[3].text[5:8]
    params = [
        SamplingParams(max_new_tokens=24),
        SamplingParams(max_new_tokens=24, stop_token_ids=(stop_token,)),
        SamplingParams(max_new_tokens=3),
        SamplingParams(max_new_tokens=24, stop_strings=(stop_text,)),
        SamplingParams(max_new_tokens=24, temperature=0.8, top_p=0.9, seed=5),
        SamplingParams(max_new_tokens=1),
    ]
    expected, sync_log, _ = _run(llama, prompts, params, async_scheduling=False)
    results, async_log, engine = _run(llama, prompts, params, async_scheduling=True)
    assert _summary(results) == _summary(expected)
    assert expected[1].finish_reason == "stop" and expected[3].finish_reason == "stop"
    assert [r.finish_reason for r in expected].count("length") == 4
    # The stop token was known one step late: the request had one more decode row, whose
    # token was dropped. Requests ended by their length were never scheduled past it.
    stopped = results[1].request_id
    assert async_log.rows[stopped] == sync_log.rows[stopped] + 1
    ended = results[2].request_id
    assert async_log.rows[ended] == sync_log.rows[ended] == 2
    assert engine.num_steps < sum(len(r.token_ids) for r in results)


def test_a_request_with_penalties_is_read_before_the_next_step_and_matches(llama) -> None:
    prompts = [_prompt(n, seed) for seed, n in enumerate([30, 70, 12])]
    params = [
        SamplingParams(max_new_tokens=16, repetition_penalty=1.3, no_repeat_ngram_size=2),
        SamplingParams(max_new_tokens=20),
        SamplingParams(max_new_tokens=9, frequency_penalty=0.5, penalty_scope="all"),
    ]
    expected, _, _ = _run(llama, prompts, params, async_scheduling=False)
    results, _, _ = _run(llama, prompts, params, async_scheduling=True)
    assert _summary(results) == _summary(expected)


def test_abort_while_a_step_is_in_flight_frees_its_blocks_once(llama) -> None:
    params = SamplingParams(max_new_tokens=30)
    prompts = [_prompt(50, 1), _prompt(37, 2)]
    alone = tiny_engine(llama, chunk_size=64).generate(prompts[1], params).token_ids
    engine = tiny_engine(llama, chunk_size=64)
    victim, kept = (engine.add_request(p, params) for p in prompts)
    pipeline = engine._pipelines["main"]
    while pipeline._in_flight is None or len(pipeline._in_flight.step.chunks) < 2:
        engine.step()
    for _ in range(3):
        engine.step()
    in_flight = {chunk.seq.request_id for chunk in pipeline._in_flight.step.chunks}
    assert in_flight == {victim, kept}
    result = engine.abort(victim)
    assert result.finish_reason == "abort" and -1 not in result.token_ids
    assert len(result.token_ids) >= 3
    outputs = {}
    while engine.has_unfinished_requests():
        outputs.update({r.request_id: r.token_ids for r in engine.step()})
    assert outputs == {kept: alone}
    assert engine.abort(victim) is None
    _assert_all_blocks_free(engine._main.blocks)


def test_preemption_and_priorities_under_overlap_keep_each_output(llama) -> None:
    prompts = [_prompt(n, seed) for seed, n in enumerate([40, 130, 64, 90, 33])]
    params = SamplingParams(max_new_tokens=40)
    expected, _, _ = _run(llama, prompts, params, async_scheduling=False)
    shape = tiny_engine(llama).model_shape
    token_bytes = 2 * shape.num_layers * shape.num_kv_heads * shape.head_dim * 4
    engine = tiny_engine(llama, chunk_size=64, max_kv_cache_bytes=30 * 16 * token_bytes)
    ids = [engine.add_request(p, params) for p in prompts[:4]]
    outputs, order = {}, []
    for step in range(400):
        if step == 12:  # a question arrives while the others decode
            ids.append(engine.add_request(prompts[4], params, priority=10))
        for result in engine.step():
            outputs[result.request_id] = result
            order.append(result.request_id)
        if not engine.has_unfinished_requests():
            break
    assert [outputs[i].token_ids for i in ids] == [r.token_ids for r in expected]
    assert sum(outputs[i].stats.num_preemptions for i in ids) > 0
    _assert_all_blocks_free(engine._main.blocks)


def test_fed_tokens_take_the_previous_samples_by_row() -> None:
    source = torch.tensor([11, 22, 33, 44])
    input_ids = torch.zeros(6, dtype=torch.long)
    FedTokens([0, 1, 2], source, [0, 1, 2]).write_into(input_ids)
    assert input_ids.tolist() == [11, 22, 33, 0, 0, 0]
    FedTokens([0, 1, 4], source, [3, 0, 2]).write_into(input_ids)
    assert input_ids.tolist() == [44, 11, 33, 0, 33, 0]
