import pytest

from engine.sequence import Sequence, SequenceStatus


def test_block_properties():
    seq = Sequence(request_id=1, token_ids=list(range(37)), num_prompt_tokens=37, block_size=16)
    assert seq.num_tokens == 37
    assert seq.num_blocks == 3
    assert seq.num_full_blocks == 2
    assert seq.last_block_num_tokens == 5
    assert seq.block_token_ids(2) == [32, 33, 34, 35, 36]
    assert seq.status is SequenceStatus.WAITING


def test_block_aligned_sequence_has_a_full_last_block():
    seq = Sequence(request_id=1, token_ids=list(range(32)), num_prompt_tokens=32, block_size=16)
    assert seq.num_blocks == 2
    assert seq.last_block_num_tokens == 16


def test_append_token_tracks_completion():
    prompt = [5, 6, 7]
    seq = Sequence(request_id=1, token_ids=prompt, num_prompt_tokens=3, block_size=4)
    seq.append_token(8)
    seq.append_token(9)
    assert seq.num_completion_tokens == 2
    assert seq.completion_token_ids == [8, 9]
    assert seq.prompt_token_ids == [5, 6, 7]
    assert seq.num_blocks == 2
    assert prompt == [5, 6, 7]  # the caller's list is copied, not grown


def test_num_prompt_tokens_must_fit_the_tokens():
    with pytest.raises(ValueError):
        Sequence(request_id=1, token_ids=[1, 2], num_prompt_tokens=3)
    with pytest.raises(ValueError):
        Sequence(request_id=1, token_ids=[], num_prompt_tokens=0)
