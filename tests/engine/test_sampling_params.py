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
        {"top_k": -1},
        {"top_k": 2.0},
        {"repetition_penalty": 0.0},
        {"repetition_penalty": -1.2},
        {"repetition_penalty": float("inf")},
        {"repetition_penalty": True},
        {"frequency_penalty": 2.5},
        {"frequency_penalty": float("nan")},
        {"presence_penalty": -3},
        {"no_repeat_ngram_size": -1},
        {"no_repeat_ngram_size": 1.5},
        {"penalty_scope": "prompt"},
        {"stop_on_loop": 1},
        {"max_phrase_repeats": -1},
    ],
)
def test_invalid_values_are_refused(kwargs):
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)


def test_repetition_controls_default_off_and_say_so():
    params = SamplingParams()
    assert not params.has_penalties and params.penalty_scope == "output" and params.top_k == 0
    assert params.stop_on_loop and params.max_phrase_repeats == 2
    for kwargs in (
        {"repetition_penalty": 1.1},
        {"frequency_penalty": 0.5},
        {"presence_penalty": -0.5},
        {"no_repeat_ngram_size": 3},
    ):
        assert SamplingParams(**kwargs).has_penalties
    assert not SamplingParams(penalty_scope="all", top_k=40, temperature=0.7).has_penalties


def test_errors_are_sentences_that_name_the_field():
    with pytest.raises(ValueError, match=r"^penalty_scope must be \"output\".*\.$"):
        SamplingParams(penalty_scope="everything")
    with pytest.raises(ValueError, match=r"^repetition_penalty must be a positive number"):
        SamplingParams(repetition_penalty=0)
