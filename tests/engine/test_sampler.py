"""The batched sampler against transformers' own logits processors and direct formulas."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import (
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
)

from engine.penalties import apply_penalties
from engine.sampler import Sampler, make_generator, sample
from engine.sampling_params import SamplingParams, SamplingRow

VOCAB = 50


def _logits(num_rows: int, seed: int = 0, vocab: int = VOCAB) -> torch.Tensor:
    return torch.randn(num_rows, vocab, generator=torch.Generator().manual_seed(seed)) * 3


def _ids(n: int, seed: int, high: int = VOCAB) -> list[int]:
    # A narrow range of ids, so histories repeat tokens and n-grams.
    return torch.randint(0, high, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def _row(params: SamplingParams, prompt=(), output=(), seed: int | None = None) -> SamplingRow:
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    return SamplingRow(params, generator, list(prompt), list(output))


@pytest.mark.parametrize("penalty", [1.3, 0.7, 2.0])
def test_repetition_penalty_equals_transformers(penalty):
    logits = _logits(4, seed=1)
    rows = [
        _row(
            SamplingParams(repetition_penalty=penalty, penalty_scope="all"),
            _ids(6 + i, 10 + i, high=20),
            _ids(3 * i, 20 + i, high=20),
        )
        for i in range(4)
    ]
    ours = apply_penalties(logits, rows)
    for i, row in enumerate(rows):
        history = torch.tensor([[*row.prompt_token_ids, *row.output_token_ids]])
        theirs = RepetitionPenaltyLogitsProcessor(penalty)(history, logits[i : i + 1].clone())
        assert torch.equal(ours[i], theirs[0])
        # "output" scope is transformers' prompt_ignore_length: the prompt does not count.
        output_only = apply_penalties(
            logits[i : i + 1], [_row(SamplingParams(repetition_penalty=penalty), *_split(row))]
        )
        prompt_ignored = RepetitionPenaltyLogitsProcessor(
            penalty, prompt_ignore_length=len(row.prompt_token_ids)
        )(history, logits[i : i + 1].clone())
        assert torch.equal(output_only, prompt_ignored)
    assert not torch.equal(ours, logits)


def _split(row: SamplingRow) -> tuple[list[int], list[int]]:
    return list(row.prompt_token_ids), list(row.output_token_ids)


def test_output_scope_ignores_prompt_tokens():
    logits = _logits(1, seed=2)
    prompt, output = [3, 4, 5], [7]
    for params in (
        SamplingParams(repetition_penalty=1.5),
        SamplingParams(frequency_penalty=1.0, presence_penalty=0.5),
        SamplingParams(no_repeat_ngram_size=1),
    ):
        ours = apply_penalties(logits, [_row(params, prompt, output)])[0]
        changed = (ours != logits[0]).nonzero().flatten().tolist()
        assert changed == [7]
        everything = apply_penalties(logits, [_row(_with_scope_all(params), prompt, output)])[0]
        assert (everything != logits[0]).nonzero().flatten().tolist() == [3, 4, 5, 7]


def _with_scope_all(params: SamplingParams) -> SamplingParams:
    from dataclasses import replace

    return replace(params, penalty_scope="all")


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_no_repeat_ngram_equals_transformers(n):
    # 256+ generated tokens per row, as the engine sees in a long answer; the last row loops.
    outputs = [_ids(k, 40 + k, 6) for k in (0, n - 1, n, 40, 300)] + [_ids(7, 41) * 43]
    logits = _logits(len(outputs), seed=3)
    params = SamplingParams(no_repeat_ngram_size=n, penalty_scope="all")
    rows = [_row(params, _ids(5, 30 + i, 6), output) for i, output in enumerate(outputs)]
    ours = apply_penalties(logits, rows)
    for i, row in enumerate(rows):
        history = torch.tensor([[*row.prompt_token_ids, *row.output_token_ids]])
        theirs = NoRepeatNGramLogitsProcessor(n)(history, logits[i : i + 1].clone())
        assert torch.equal(ours[i], theirs[0])
    assert torch.isinf(ours[-1]).any()


def test_no_repeat_ngram_bans_the_token_that_repeats_a_trigram():
    logits = torch.zeros(1, 10)
    logits[0, 3] = 5.0  # the model's favourite would repeat "1 2 3"
    row = _row(SamplingParams(no_repeat_ngram_size=3), output=[1, 2, 3, 4, 1, 2])
    assert Sampler().sample(logits, [row]) != [3]
    assert Sampler().sample(logits, [_row(SamplingParams(), output=[1, 2, 3, 4, 1, 2])]) == [3]


def test_frequency_and_presence_follow_the_formula():
    logits = _logits(3, seed=4)
    params = [
        SamplingParams(frequency_penalty=0.5, presence_penalty=1.5),
        SamplingParams(frequency_penalty=-0.4),
        SamplingParams(presence_penalty=2.0, repetition_penalty=1.2),
    ]
    outputs = [_ids(30, 50 + i, high=10) for i in range(3)]
    ours = apply_penalties(
        logits, [_row(p, output=o) for p, o in zip(params, outputs, strict=True)]
    )
    for i, (p, output) in enumerate(zip(params, outputs, strict=True)):
        expected = logits[i].clone()
        for token in set(output):
            value = float(expected[token])
            value = value * p.repetition_penalty if value < 0 else value / p.repetition_penalty
            count = output.count(token)
            expected[token] = value - p.frequency_penalty * count - p.presence_penalty
        torch.testing.assert_close(ours[i], expected, rtol=0, atol=1e-6)


def _mixed_rows(seed_offset: int = 0) -> list[SamplingRow]:
    history = _ids(40, 60, high=12)
    return [
        _row(SamplingParams()),
        _row(SamplingParams(repetition_penalty=1.4, no_repeat_ngram_size=2), _ids(9, 61), history),
        _row(SamplingParams(temperature=0.8, seed=1), seed=1 + seed_offset),
        _row(SamplingParams(temperature=1.2, top_k=5), seed=2 + seed_offset),
        _row(SamplingParams(temperature=1.0, top_p=0.7, frequency_penalty=0.3), (), history, 3),
        _row(
            SamplingParams(
                temperature=0.6, top_k=10, top_p=0.9, presence_penalty=0.8, penalty_scope="all"
            ),
            _ids(9, 62),
            history,
            4 + seed_offset,
        ),
    ]


def test_a_batch_of_mixed_rows_equals_each_row_alone():
    logits = _logits(6, seed=5)
    for step in range(20):
        batched_rows, alone_rows = _mixed_rows(step), _mixed_rows(step)
        batched = Sampler().sample(logits, batched_rows)
        alone = [Sampler().sample(logits[i : i + 1], [alone_rows[i]])[0] for i in range(6)]
        assert batched == alone


def test_seeded_rows_repeat_and_ignore_the_rest_of_the_batch():
    params = SamplingParams(temperature=1.0, top_p=0.95, seed=11)
    steps = [_logits(1, seed=100 + s) for s in range(30)]

    def run(batch_size: int, position: int) -> list[int]:
        generator = make_generator(params, default_seed=None)
        others = [torch.Generator().manual_seed(99 + k) for k in range(batch_size)]
        out = []
        for s, row_logits in enumerate(steps):
            rows = [
                SamplingRow(SamplingParams(temperature=0.5 + k / 4, top_k=3 + k), others[k])
                for k in range(batch_size)
            ]
            rows.insert(position, SamplingRow(params, generator, (), out))
            logits = _logits(batch_size + 1, seed=200 + s)
            logits[position] = row_logits[0]
            out.append(Sampler().sample(logits, rows)[position])
        return out

    alone = run(0, 0)
    assert alone == run(0, 0)
    assert alone == run(3, 1) == run(7, 7)
    assert len(set(alone)) > 5  # it did sample


def test_greedy_fast_path_is_argmax():
    logits = _logits(64, seed=6, vocab=1000)
    rows = [SamplingRow(SamplingParams()) for _ in range(64)]
    assert Sampler().sample(logits, rows) == logits.argmax(dim=-1).tolist()
    assert sample(logits[5], SamplingParams(), None) == int(logits[5].argmax())
    assert Sampler().sample(torch.empty(0, 10), []) == []


@pytest.mark.parametrize("width", [128_256, 1000, 4096, 5003])
@pytest.mark.parametrize("chunk", [512, 1024])
def test_two_stage_argmax_gives_torch_argmax(width: int, chunk: int) -> None:
    """argmax_rows (Sampler.greedy's on CUDA over a large vocabulary) returns torch.argmax's
    index: ties to the first (within a slice, across slices, in the tail), a NaN wins as there,
    a row of -inf, a vocabulary shorter than a slice or not a multiple of it."""
    from engine.sampler import argmax_rows

    logits = torch.randn(6, width, generator=torch.Generator().manual_seed(width))
    logits[0, 7] = logits[0, width - 3] = 99.0  # across slices (or both in the tail)
    logits[1, 3] = logits[1, 4] = 50.0  # within one slice
    logits[2, width - 1] = 60.0  # the last index, in the tail where there is one
    logits[3, 5] = logits[3, width // 2] = float("nan")
    logits[4] = float("-inf")
    for rows in (logits, logits.to(torch.bfloat16), logits[:1]):
        assert torch.equal(argmax_rows(rows, chunk), torch.argmax(rows, dim=-1))


def test_sampling_follows_the_distribution_and_its_cuts():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, 0.5, 1.5]])
    probs = torch.softmax(logits[0], dim=-1)
    draws = 6000
    counts = torch.zeros(6)
    generator = torch.Generator().manual_seed(0)
    for _ in range(draws):
        counts[sample(logits[0], SamplingParams(temperature=1.0), generator)] += 1
    torch.testing.assert_close(counts / draws, probs, atol=0.02, rtol=0)
    # top_k=2 keeps ids 0 and 5; top_p=0.5 keeps the fewest most likely whose mass reaches 0.5.
    for params, allowed in (
        (SamplingParams(temperature=2.0, top_k=2), {0, 5}),
        (SamplingParams(temperature=1.0, top_p=0.5), {0, 5}),
        (SamplingParams(temperature=1.0, top_p=1e-6), {0}),
    ):
        seen = {sample(logits[0], params, generator) for _ in range(300)}
        assert seen == allowed


def test_rows_must_match_logits():
    with pytest.raises(ValueError, match="rows"):
        Sampler().sample(torch.zeros(2, 5), [SamplingRow(SamplingParams())])


def test_long_prompt_as_a_tensor_counts_like_a_list():
    prompt = _ids(5000, 70)
    params = SamplingParams(repetition_penalty=1.3, no_repeat_ngram_size=3, penalty_scope="all")
    logits = _logits(1, seed=7)
    as_list = apply_penalties(logits, [_row(params, prompt, [1, 2])])
    as_tensor = apply_penalties(logits, [SamplingRow(params, None, torch.tensor(prompt), [1, 2])])
    assert torch.equal(as_list, as_tensor)
