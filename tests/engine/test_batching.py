"""Batched equals unbatched: requests served together give token for token what each gives alone
(greedy, fp32), whatever joins or leaves the batch, and with a shared document prefix."""

from __future__ import annotations

import pytest
import torch

from engine import SamplingParams
from tests.engine.conftest import tiny_engine


def _prompt(n: int, seed: int, vocab: int = 256) -> list[int]:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def _mixed(vocab: int) -> tuple[list[list[int]], list[SamplingParams]]:
    lengths = [5, 40, 130, 17, 64, 250, 33, 90]
    prompts = [_prompt(n, seed, vocab) for seed, n in enumerate(lengths)]
    params = [SamplingParams(max_new_tokens=n) for n in (9, 14, 3, 20, 11, 6, 16, 12)]
    return prompts, params


def _alone(engine, prompts, params) -> list[list[int]]:
    return [engine.generate(p, q).token_ids for p, q in zip(prompts, params, strict=True)]


@pytest.fixture(scope="module")
def llama(tiny_models):
    return tiny_models("llama")[0]


def test_generate_many_equals_each_request_alone(llama) -> None:
    prompts, params = _mixed(256)
    expected = _alone(tiny_engine(llama, chunk_size=64), prompts, params)
    engine = tiny_engine(llama, chunk_size=64)
    results = engine.generate_many(prompts, params)
    assert [r.token_ids for r in results] == expected
    assert engine.num_steps < sum(len(t) for t in expected)  # they really shared steps
    assert not engine.has_unfinished_requests()


def test_stop_tokens_and_strings_end_only_their_request(llama) -> None:
    engine = tiny_engine(llama, chunk_size=64)
    prompts, params = _mixed(256)
    free_run = _alone(engine, prompts[:3], params[:3])
    stop_at = free_run[1][4]
    stopped = [
        params[0],
        SamplingParams(max_new_tokens=14, stop_token_ids=(stop_at,)),
        params[2],
    ]
    results = engine.generate_many(prompts[:3], stopped)
    assert results[0].token_ids == free_run[0] and results[2].token_ids == free_run[2]
    assert results[1].token_ids == free_run[1][: free_run[1].index(stop_at)]
    assert results[1].finish_reason == "stop"


def test_requests_joining_mid_batch_get_their_own_output(llama) -> None:
    prompts, params = _mixed(256)
    expected = _alone(tiny_engine(llama, chunk_size=48), prompts, params)
    engine = tiny_engine(llama, chunk_size=48)
    outputs: dict[int, list[int]] = {}
    ids = {engine.add_request(prompts[i], params[i]): i for i in range(3)}
    joined = 3
    while engine.has_unfinished_requests() or joined < len(prompts):
        for result in engine.step():
            outputs[ids[result.request_id]] = result.token_ids
        if joined < len(prompts):  # one more request every step, while others decode
            ids[engine.add_request(prompts[joined], params[joined])] = joined
            joined += 1
    assert [outputs[i] for i in range(len(prompts))] == expected


def test_two_questions_on_one_document_share_its_cached_prefix(llama) -> None:
    document = _prompt(160, 99)
    questions = [[*document, 3, 4, 5], [*document, 9, 8, 7, 6]]
    params = SamplingParams(max_new_tokens=8)
    expected = _alone(
        tiny_engine(llama, chunk_size=64, enable_prefix_cache=False), questions, [params] * 2
    )
    engine = tiny_engine(llama, chunk_size=64)
    engine.generate([*document[:100], 1], params)  # a first read of part of the document
    results = engine.generate_many(questions, params)
    assert [r.token_ids for r in results] == expected
    assert results[0].stats.num_cached_tokens == 96
    later = engine.generate(questions[1], params)
    assert later.token_ids == expected[1] and later.stats.num_cached_tokens == 160


def test_preemption_under_a_small_cache_resumes_with_identical_output(llama) -> None:
    prompts, _ = _mixed(256)
    long_params = [SamplingParams(max_new_tokens=40) for _ in prompts]
    expected = _alone(tiny_engine(llama, chunk_size=64), prompts, long_params)
    # 40 blocks of 16 tokens: the prompts and outputs (about 1,000 tokens) do not all fit.
    shape = tiny_engine(llama).model_shape
    token_bytes = 2 * shape.num_layers * shape.num_kv_heads * shape.head_dim * 4
    engine = tiny_engine(llama, chunk_size=64, max_kv_cache_bytes=40 * 16 * token_bytes)
    assert engine._main.blocks.num_blocks == 40
    results = engine.generate_many(prompts, long_params)
    assert [r.token_ids for r in results] == expected
    assert sum(r.stats.num_preemptions for r in results) > 0


def test_priorities_let_a_question_finish_before_the_batch(llama) -> None:
    engine = tiny_engine(llama, chunk_size=32, max_num_seqs=2)
    order = []
    for seed in range(3):
        engine.add_request(_prompt(60, seed), SamplingParams(max_new_tokens=30))
    question = engine.add_request(_prompt(20, 50), SamplingParams(max_new_tokens=5), priority=10)
    while engine.has_unfinished_requests():
        order.extend(result.request_id for result in engine.step())
    assert order[0] == question


@pytest.mark.slow
def test_default_model_batched_equals_alone(default_engine) -> None:
    engine = default_engine
    texts = [
        "Summarize: The lease runs for five years from 1 March 2020.",
        "Which state's law governs? This Agreement is governed by the laws of Delaware.",
        "List the parties. This Agreement is between Acme Corp. and Beta LLC.",
        "What is the notice period? Either party may terminate on 30 days' written notice.",
    ]
    prompts = [engine.apply_chat_template([{"role": "user", "content": t}]) for t in texts]
    params = [SamplingParams(max_new_tokens=n) for n in (24, 16, 20, 12)]
    expected = _alone(engine, prompts, params)
    assert [r.token_ids for r in engine.generate_many(prompts, params)] == expected
