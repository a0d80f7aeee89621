"""Out-of-memory in the middle of a step (injected through the engine's fault_injector): the step is
planned again with half the budget, and below the minimum each policy applies to the request
whose prefill does not fit while the others go on."""

from __future__ import annotations

import pytest
import torch

from engine import OutOfMemoryError, SamplingParams
from engine.scheduler import Step
from tests.engine.conftest import tiny_engine

PROMPT = torch.randint(0, 256, (200,), generator=torch.Generator().manual_seed(11)).tolist()
PARAMS = SamplingParams(max_new_tokens=12)


class FailAtOrAfter:
    """Raises torch.OutOfMemoryError for steps holding a prefill chunk that starts at or after
    `start` and is larger than `max_ok` tokens, until disarmed."""

    def __init__(self, start: int, max_ok: int) -> None:
        self.start, self.max_ok = start, max_ok
        self.calls: list[list[tuple[int, int]]] = []
        self.is_armed = True

    def __call__(self, _placement: str, step: Step) -> None:
        prefills = [(c.start, c.num_tokens) for c in step.chunks if not c.is_decode]
        self.calls.append(prefills)
        too_large = any(start >= self.start and size > self.max_ok for start, size in prefills)
        if self.is_armed and too_large:
            raise torch.OutOfMemoryError("injected")


@pytest.fixture(scope="module")
def folder(tiny_models):
    return tiny_models("qwen2")[0]


def _engine(folder, fault=None, **overrides):
    return tiny_engine(
        folder,
        chunk_size=64,
        min_chunk_size=16,
        enable_prefix_cache=False,
        fault_injector=fault,
        **overrides,
    )


def _assert_all_blocks_free(blocks) -> None:
    free = list(blocks._free_block_ids) + list(blocks._cached_free_block_ids)
    assert len(free) == len(set(free)) == blocks.num_blocks
    assert all(block.ref_count == 0 for block in blocks.blocks)


def test_halving_resumes_and_matches_an_undisturbed_run(folder) -> None:
    expected = _engine(folder).generate(PROMPT, PARAMS)
    fault = FailAtOrAfter(start=64, max_ok=16)
    result = _engine(folder, fault=fault).generate(PROMPT, PARAMS)
    assert result.token_ids == expected.token_ids
    assert result.stats.chunk_sizes == [64] + [16] * 8 + [8]
    kinds = [f["kind"] for f in result.stats.fallbacks]
    assert kinds == ["oom_halved", "oom_halved"]
    assert result.stats.fallbacks[0]["detail"]["at_token"] == 64
    # The first chunk's KV was kept: it was never computed again.
    assert [call for call in fault.calls if call and call[0][0] == 0] == [[(0, 64)]]


def test_oom_in_a_batched_step_keeps_every_output(folder) -> None:
    prompts = [PROMPT, PROMPT[:90], PROMPT[50:170]]
    params = [SamplingParams(max_new_tokens=n) for n in (12, 20, 7)]
    expected = [
        _engine(folder).generate(p, q).token_ids for p, q in zip(prompts, params, strict=True)
    ]
    fault = FailAtOrAfter(start=64, max_ok=16)
    engine = _engine(folder, fault=fault)
    results = engine.generate_many(prompts, params)
    assert [r.token_ids for r in results] == expected
    assert any(f["kind"] == "oom_halved" for r in results for f in r.stats.fallbacks)
    assert engine._main.scheduler.budget < 64
    _assert_all_blocks_free(engine._main.blocks)


def test_policy_fail_raises_a_sentence(folder) -> None:
    fault = FailAtOrAfter(start=64, max_ok=0)
    engine = _engine(folder, fault, oom_policy="fail")
    with pytest.raises(OutOfMemoryError, match="prompt token 64 of 200"):
        engine.generate(PROMPT, PARAMS)
    fault.is_armed = False  # the engine is still usable and its blocks were freed
    _assert_all_blocks_free(engine._main.blocks)
    assert len(engine.generate(PROMPT, PARAMS).token_ids) > 0


def test_policy_fail_ends_only_the_request_that_does_not_fit(folder) -> None:
    short = PROMPT[:40]
    expected = _engine(folder).generate(short, PARAMS).token_ids
    engine = _engine(folder, FailAtOrAfter(start=64, max_ok=0), oom_policy="fail")
    long_id = engine.add_request(PROMPT, PARAMS)
    short_id = engine.add_request(short, PARAMS)
    results = {}
    while engine.has_unfinished_requests():
        for result in engine.step():
            results[result.request_id] = result
    assert isinstance(results[long_id].error, OutOfMemoryError)
    assert results[short_id].error is None and results[short_id].token_ids == expected


def test_policy_cpu_finishes_the_request_on_a_cpu_copy(folder) -> None:
    expected = _engine(folder).generate(PROMPT, PARAMS)
    engine = _engine(folder, FailAtOrAfter(start=128, max_ok=0), oom_policy="cpu")
    result = engine.generate(PROMPT, PARAMS)
    assert result.token_ids == expected.token_ids
    kinds = [f["kind"] for f in result.stats.fallbacks]
    assert kinds == ["oom_halved", "oom_halved", "cpu"]
    assert result.stats.fallbacks[-1]["detail"]["at_token"] == 128
    assert result.stats.fallbacks[-1]["detail"]["kv_moved"] is False
    _assert_all_blocks_free(engine._main.blocks)
    _assert_all_blocks_free(engine.cpu_placement().blocks)


def test_a_failure_after_the_move_to_the_cpu_frees_each_block_once(folder) -> None:
    """Regression: generate's clean-up freed a request that had moved to the CPU from the GPU's
    block manager, leaving duplicate free ids ("11 free of 8") and ref counts of -1."""
    fault = FailAtOrAfter(start=128, max_ok=0)
    engine = _engine(folder, fault, oom_policy="cpu")

    def cancel(_token_id: int, _delta: str) -> None:
        raise KeyboardInterrupt("cancelled")  # as a soft time limit would, mid-request

    with pytest.raises(KeyboardInterrupt):
        engine.generate(PROMPT, PARAMS, on_token=cancel)
    _assert_all_blocks_free(engine._main.blocks)
    _assert_all_blocks_free(engine.cpu_placement().blocks)
    fault.is_armed = False
    assert len(engine.generate(PROMPT, PARAMS).token_ids) > 0


def test_policy_truncate_keeps_head_and_tail(folder) -> None:
    engine = _engine(folder, FailAtOrAfter(start=128, max_ok=0), oom_policy="truncate")
    result = engine.generate(PROMPT, PARAMS)
    truncated = [f for f in result.stats.fallbacks if f["kind"] == "truncated"]
    assert truncated and truncated[0]["detail"] == {
        "original_prompt_tokens": 200,
        "kept_head_tokens": 96,
        "kept_tail_tokens": 32,
        "dropped_tokens": 72,
    }
    # Same answer as a run on the kept tokens from scratch.
    kept = PROMPT[:96] + PROMPT[-32:]
    assert result.token_ids == _engine(folder).generate(kept, PARAMS).token_ids
