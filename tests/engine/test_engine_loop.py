"""The engine loop: many threads submit to one engine, each gets its own output."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from engine import EngineError, SamplingParams
from engine.engine_loop import EngineLoop, RequestTimeout
from tests.engine.conftest import tiny_engine


def _prompt(n: int, seed: int) -> list[int]:
    return torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.fixture(scope="module")
def llama(tiny_models):
    return tiny_models("llama")[0]


def test_threads_sharing_one_engine_get_what_each_gets_alone(llama) -> None:
    prompts = [_prompt(n, seed) for seed, n in enumerate((12, 70, 33, 150, 8, 90))]
    params = SamplingParams(max_new_tokens=10)
    expected = [tiny_engine(llama, chunk_size=64).generate(p, params).token_ids for p in prompts]
    engine = tiny_engine(llama, chunk_size=64)
    loop = EngineLoop(engine)
    outputs: dict[int, list[int]] = {}
    tokens_seen: dict[int, int] = {}
    caller_threads: set[str] = set()

    def task(index: int) -> None:
        count = 0

        def on_token(_token_id: int, _delta: str) -> None:
            nonlocal count
            count += 1
            caller_threads.add(threading.current_thread().name)

        outputs[index] = loop.submit(prompts[index], params).wait(on_token=on_token).token_ids
        tokens_seen[index] = count

    threads = [threading.Thread(target=task, args=(i,), name=f"task-{i}") for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [outputs[i] for i in range(6)] == expected
    assert all(tokens_seen[i] == len(expected[i]) for i in range(6))
    assert "engine-loop" not in caller_threads  # callbacks ran in the waiting threads
    assert engine.num_steps < sum(len(e) for e in expected)
    loop.close()


def test_a_refused_prompt_fails_alone_and_a_deadline_frees_the_request(llama) -> None:
    engine = tiny_engine(llama, chunk_size=64)
    loop = EngineLoop(engine)
    bad = loop.submit([1, 2, 10_000], SamplingParams())
    good = loop.submit(_prompt(20, 1), SamplingParams(max_new_tokens=4))
    with pytest.raises(EngineError, match="vocabulary"):
        bad.wait()
    assert len(good.wait().token_ids) == 4
    slow = loop.submit(_prompt(20, 2), SamplingParams(max_new_tokens=400))
    with pytest.raises(RequestTimeout):
        slow.wait(deadline=time.monotonic() + 0.05)
    deadline = time.monotonic() + 10
    while engine.has_unfinished_requests() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not engine.has_unfinished_requests()
    assert engine._main.blocks.num_free_blocks == engine._main.blocks.num_blocks
    loop.close()


def test_polling_requests_in_turn_delivers_each_ones_tokens_as_they_come(llama) -> None:
    engine = tiny_engine(llama, chunk_size=64)
    loop = EngineLoop(engine)
    params = SamplingParams(max_new_tokens=40)
    handles = [loop.submit(_prompt(30, seed), params) for seed in (3, 4)]
    events: list[tuple[str, int]] = []
    results: dict[int, object] = {}
    deadline = time.monotonic() + 60
    while len(results) < 2 and time.monotonic() < deadline:
        for index, handle in enumerate(handles):
            if index in results:
                continue
            result = handle.poll(
                on_token=lambda _id, _delta, i=index: events.append(("token", i)),
                timeout=0.005,
            )
            if result is not None:
                results[index] = result
                events.append(("done", index))

    assert len(results) == 2
    # The second request's tokens came while the first was still being written.
    assert events.index(("token", 1)) < events.index(("done", 0))
    assert [events.count(("token", i)) for i in (0, 1)] == [
        len(results[i].token_ids) for i in (0, 1)
    ]
    assert handles[0].poll(timeout=0) is results[0]  # done: the same result again, at once
    loop.close()


def test_on_event_wakes_a_waiter_that_only_polls_and_num_requests_counts(llama) -> None:
    """An asyncio server's way: woken by on_event, it takes what has come without waiting."""
    engine = tiny_engine(llama, chunk_size=64)
    loop = EngineLoop(engine)
    woken = threading.Event()
    handle = loop.submit(
        _prompt(20, 7), SamplingParams(max_new_tokens=400, ignore_eos=True), on_event=woken.set
    )
    tokens: list[int] = []
    while len(tokens) < 3:
        assert woken.wait(60)
        woken.clear()
        assert handle.poll(on_token=lambda token_id, _d: tokens.append(token_id)) is None
    assert loop.num_requests == 1
    handle.cancel()
    deadline = time.monotonic() + 60
    while loop.num_requests:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    result = handle.wait(deadline=time.monotonic() + 60)
    assert result.finish_reason == "abort" and len(result.token_ids) < 400
    loop.close()
