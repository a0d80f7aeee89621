import pytest

from engine.sampling_params import SamplingParams


def test_defaults_are_greedy_and_hashable():
    params = SamplingParams()
    assert params.is_greedy
    assert params.max_new_tokens == 256
    assert hash(params) == hash(SamplingParams())


def test_lists_become_tuples():
    params = SamplingParams(stop_token_ids=[2, 3], stop_strings=["</s>"], temperature=0.7)
    assert params.stop_token_ids == (2, 3)
    assert params.stop_strings == ("</s>",)
    assert not params.is_greedy


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_new_tokens": 0},
        {"max_new_tokens": True},
        {"temperature": -0.1},
        {"temperature": float("nan")},
        {"top_p": 0.0},
        {"top_p": 1.5},
        {"stop_token_ids": (-1,)},
        {"stop_strings": ("",)},
        {"seed": -3},
    ],
)
def test_invalid_values_are_refused(kwargs):
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)
