"""Out-of-memory in the middle of a prefill (injected through the test hook) and each policy."""

from __future__ import annotations

import pytest
import torch

from engine import OutOfMemoryError, SamplingParams
from tests.engine.conftest import tiny_engine

PROMPT = torch.randint(0, 256, (200,), generator=torch.Generator().manual_seed(11)).tolist()
PARAMS = SamplingParams(max_new_tokens=12)


class FailAtOrAfter:
    """Raises torch.OutOfMemoryError for chunks starting at or after `start` larger than `max_ok`."""

    def __init__(self, start: int, max_ok: int) -> None:
        self.start, self.max_ok = start, max_ok
        self.calls: list[tuple[int, int, int]] = []

    def __call__(self, chunk_index: int, chunk_start: int, chunk_size: int) -> None:
        self.calls.append((chunk_index, chunk_start, chunk_size))
        if chunk_start >= self.start and chunk_size > self.max_ok:
            raise torch.OutOfMemoryError("injected")


@pytest.fixture(scope="module")
def folder(tiny_models):
    return tiny_models("qwen2")[0]


def _engine(folder, **overrides):
    fault = overrides.pop("fault", None)
    engine = tiny_engine(
        folder, chunk_size=64, min_chunk_size=16, enable_prefix_cache=False, **overrides
    )
    engine.fault_injector = fault
    return engine


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
    assert [c for c in fault.calls if c[1] == 0] == [(0, 0, 64)]


def test_policy_fail_raises_a_sentence(folder) -> None:
    engine = _engine(folder, fault=FailAtOrAfter(start=64, max_ok=0), oom_policy="fail")
    with pytest.raises(OutOfMemoryError, match="prompt token 64 of 200"):
        engine.generate(PROMPT, PARAMS)
    engine.fault_injector = None  # the engine is still usable and its blocks were freed
    assert len(engine.generate(PROMPT, PARAMS).token_ids) > 0


def test_policy_cpu_finishes_the_request_on_a_cpu_copy(folder) -> None:
    expected = _engine(folder).generate(PROMPT, PARAMS)
    engine = _engine(folder, fault=FailAtOrAfter(start=128, max_ok=0), oom_policy="cpu")
    result = engine.generate(PROMPT, PARAMS)
    assert result.token_ids == expected.token_ids
    kinds = [f["kind"] for f in result.stats.fallbacks]
    assert kinds == ["oom_halved", "oom_halved", "cpu"]
    assert result.stats.fallbacks[-1]["detail"]["at_token"] == 128
    assert result.stats.fallbacks[-1]["detail"]["kv_moved"] is False


def test_policy_truncate_keeps_head_and_tail(folder) -> None:
    engine = _engine(folder, fault=FailAtOrAfter(start=128, max_ok=0), oom_policy="truncate")
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
