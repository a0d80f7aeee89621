import pytest

from engine.prefill_plan import PrefillChunk, PrefillProgress


def run(progress, oom_at_attempts=()):
    """Drive the engine's loop; attempts listed in oom_at_attempts raise out-of-memory.

    Returns the chunks tried, in order, and the positions whose KV was written.
    """
    tried, written, attempt = [], [], 0
    while not progress.is_done:
        chunk = progress.next_chunk()
        tried.append(chunk)
        attempt += 1
        if attempt in oom_at_attempts:
            if not progress.halve():
                break
            continue
        written.extend(range(chunk.start, chunk.end))
        progress.complete(chunk)
    return tried, written


def test_walks_the_prompt_in_chunks():
    progress = PrefillProgress(num_prompt_tokens=1000, chunk_size=256, min_chunk_size=32)
    tried, written = run(progress)
    assert [(c.start, c.end) for c in tried] == [(0, 256), (256, 512), (512, 768), (768, 1000)]
    assert progress.chunk_sizes == [256, 256, 256, 232]
    assert written == list(range(1000))
    assert progress.fallbacks == []


def test_key_length_is_the_chunk_end():
    chunk = PrefillChunk(256, 512)
    assert chunk.num_query_tokens == 256
    assert chunk.num_key_tokens == 512


def test_starts_after_the_cached_prefix():
    progress = PrefillProgress(
        num_prompt_tokens=100, num_computed_tokens=64, chunk_size=32, min_chunk_size=8
    )
    tried, _ = run(progress)
    assert [(c.start, c.end) for c in tried] == [(64, 96), (96, 100)]


def test_oom_resumes_from_the_last_completed_chunk_with_half_the_size():
    progress = PrefillProgress(num_prompt_tokens=1000, chunk_size=256, min_chunk_size=32)
    tried, written = run(progress, oom_at_attempts={3})  # the chunk (512, 768) fails
    assert (tried[2].start, tried[2].end) == (512, 768)
    assert (tried[3].start, tried[3].end) == (512, 640)  # same start, half the size
    assert progress.chunk_sizes == [256, 256, 128, 128, 128, 104]
    assert written == list(range(1000))  # chunks done before the failure are kept
    assert progress.fallbacks == [
        {
            "kind": "oom_halved",
            "detail": {"at_token": 512, "from_chunk_size": 256, "to_chunk_size": 128},
        }
    ]


def test_a_short_last_chunk_halves_its_own_length():
    progress = PrefillProgress(num_prompt_tokens=300, chunk_size=256, min_chunk_size=16)
    tried, _ = run(progress, oom_at_attempts={2})  # the 44-token tail fails
    assert (tried[2].start, tried[2].end) == (256, 278)
    assert progress.chunk_sizes == [256, 22, 22]


def test_halve_refuses_below_the_minimum_and_changes_nothing():
    progress = PrefillProgress(num_prompt_tokens=1000, chunk_size=64, min_chunk_size=32)
    tried, written = run(progress, oom_at_attempts={2, 3})
    assert progress.chunk_size == 32
    assert progress.num_computed_tokens == 64
    assert written == list(range(64))
    assert not progress.is_done
    assert progress.num_halvings == 1
    assert (tried[-1].start, tried[-1].end) == (64, 96)


def test_halving_rounds_down_to_the_multiple():
    progress = PrefillProgress(
        num_prompt_tokens=1000, chunk_size=200, min_chunk_size=16, multiple_of=16
    )
    progress.next_chunk()
    assert progress.halve()
    assert progress.chunk_size == 96


def test_replanning_never_exceeds_a_halved_size():
    progress = PrefillProgress(num_prompt_tokens=1000, chunk_size=256, min_chunk_size=32)
    progress.set_chunk_size(512)
    assert progress.chunk_size == 512
    progress.next_chunk()
    assert progress.halve()
    progress.set_chunk_size(1024)
    assert progress.chunk_size == 256
    progress.set_chunk_size(100)
    assert progress.chunk_size == 100


def test_only_the_pending_chunk_can_complete():
    progress = PrefillProgress(num_prompt_tokens=100, chunk_size=50, min_chunk_size=8)
    with pytest.raises(ValueError):
        progress.complete(PrefillChunk(0, 50))
    chunk = progress.next_chunk()
    progress.complete(chunk)
    progress.complete(progress.next_chunk())
    assert progress.is_done
    with pytest.raises(RuntimeError):
        progress.next_chunk()


def test_invalid_arguments():
    with pytest.raises(ValueError):
        PrefillProgress(
            num_prompt_tokens=10, num_computed_tokens=11, chunk_size=4, min_chunk_size=1
        )
    with pytest.raises(ValueError):
        PrefillProgress(num_prompt_tokens=10, chunk_size=0, min_chunk_size=1)
