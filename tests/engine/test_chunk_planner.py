import pytest

from engine.chunk_planner import (
    ModelShape,
    activation_bytes_per_token,
    chunk_peak_bytes,
    kv_bytes_per_token,
    logits_bytes,
    plan_chunk_size,
    plan_num_kv_blocks,
)

MiB = 1024 * 1024
GiB = 1024 * MiB

LLAMA_3_8B = ModelShape(
    num_layers=32,
    hidden_size=4096,
    intermediate_size=14336,
    num_heads=32,
    num_kv_heads=8,
    head_dim=128,
    vocab_size=128256,
)
SMOLLM2_135M = ModelShape(
    num_layers=30,
    hidden_size=576,
    intermediate_size=1536,
    num_heads=9,
    num_kv_heads=3,
    head_dim=64,
    vocab_size=49152,
)

# Per-token activation elements, 4h + 2q + 2kv + 3I, worked out by hand:
#   Llama-3-8B:   4*4096 + 2*4096 + 2*1024 + 3*14336 = 16384 + 8192 + 2048 + 43008 = 69632
#   SmolLM2-135M: 4*576 + 2*576 + 2*192 + 3*1536     = 2304 + 1152 + 384 + 4608    = 8448
LLAMA_BF16_BYTES_PER_TOKEN = 139264  # 69632 * 2
SMOL_FP32_BYTES_PER_TOKEN = 33792  # 8448 * 4
# Scores + softmax in fp32 per query token and context token: 2 * heads * 4.
LLAMA_SCORE_BYTES = 256  # 2 * 32 * 4
SMOL_SCORE_BYTES = 72  # 2 * 9 * 4


def plan(shape, dtype_bytes, budget, **overrides):
    """plan_chunk_size with budget = bytes left after headroom and the last-token logits."""
    headroom = 256 * MiB
    kwargs = {
        "free_bytes": budget + headroom + logits_bytes(shape, dtype_bytes),
        "shape": shape,
        "dtype_bytes": dtype_bytes,
        "num_prior_tokens": 0,
        "num_remaining_tokens": 100_000,
        "min_chunk": 32,
        "max_chunk": 8192,
        "headroom_bytes": headroom,
        "attention_materializes_scores": False,
    }
    kwargs.update(overrides)
    return plan_chunk_size(**kwargs)


def test_kv_bytes_per_token():
    assert kv_bytes_per_token(LLAMA_3_8B, 2) == 131072  # 2 * 32 * 8 * 128 * 2
    assert kv_bytes_per_token(SMOLLM2_135M, 4) == 46080  # 2 * 30 * 3 * 64 * 4
    assert kv_bytes_per_token(SMOLLM2_135M, 2) == 23040


def test_num_kv_blocks():
    # 8 GiB of bf16 Llama-3-8B KV: 8 GiB / (131072 B * 16 tokens) = 4096 blocks.
    assert (
        plan_num_kv_blocks(kv_budget_bytes=8 * GiB, shape=LLAMA_3_8B, dtype_bytes=2, block_size=16)
        == 4096
    )
    assert (
        plan_num_kv_blocks(kv_budget_bytes=-5, shape=LLAMA_3_8B, dtype_bytes=2, block_size=16) == 0
    )


def test_activation_bytes_per_token_by_hand():
    no_scores = {"num_key_tokens": 5000, "attention_materializes_scores": False}
    assert activation_bytes_per_token(LLAMA_3_8B, 2, **no_scores) == LLAMA_BF16_BYTES_PER_TOKEN
    assert activation_bytes_per_token(SMOLLM2_135M, 4, **no_scores) == SMOL_FP32_BYTES_PER_TOKEN
    # The math path adds the fp32 scores of one query row against the whole context.
    assert (
        activation_bytes_per_token(
            SMOLLM2_135M, 4, num_key_tokens=1000, attention_materializes_scores=True
        )
        == 33792 + 72 * 1000
    )


def test_chunk_peak_uses_the_chunk_end_as_key_length():
    # A chunk of 512 after 4096 cached tokens attends to 4608 keys, not 512.
    peak = chunk_peak_bytes(
        LLAMA_3_8B,
        2,
        chunk_size=512,
        num_prior_tokens=4096,
        attention_materializes_scores=True,
    )
    assert peak == 512 * (139264 + 256 * 4608)


def test_logits_are_a_small_fixed_cost():
    assert logits_bytes(LLAMA_3_8B, 2) == 128256 * 6
    assert logits_bytes(LLAMA_3_8B, 2) < 2 * LLAMA_BF16_BYTES_PER_TOKEN * 3


def test_llama_chunk_with_flash_attention_is_linear_in_memory():
    # 1 GiB / 139264 B = 7710.1 tokens -> 7696, the largest multiple of 16.
    assert plan(LLAMA_3_8B, 2, 1 * GiB) == 7696
    # 4 GiB would allow 30840 tokens: capped by max_chunk.
    assert plan(LLAMA_3_8B, 2, 4 * GiB) == 8192


def test_smollm_chunk_on_cpu_is_quadratic_in_the_chunk():
    # Peak of 1024 tokens from an empty cache: 1024 * (33792 + 72 * 1024) = 110,100,480 B.
    assert plan(SMOLLM2_135M, 4, 110_100_480, attention_materializes_scores=True) == 1024
    # One byte less: 1008 fits, 1008 * (33792 + 72 * 1008) = 107,218,944 B.
    assert plan(SMOLLM2_135M, 4, 110_100_479, attention_materializes_scores=True) == 1008
    # With 10,000 tokens already cached, 1024 tokens cost 1024 * (33792 + 72 * 11024).
    later = 1024 * (33792 + 72 * 11024)
    assert (
        plan(SMOLLM2_135M, 4, later, attention_materializes_scores=True, num_prior_tokens=10_000)
        == 1024
    )
    assert (
        plan(
            SMOLLM2_135M,
            4,
            110_100_480,
            attention_materializes_scores=True,
            num_prior_tokens=10_000,
        )
        < 1024
    )


def test_returns_zero_when_even_the_minimum_does_not_fit():
    # 32 tokens of Llama need 32 * 139264 = 4,456,448 B.
    assert plan(LLAMA_3_8B, 2, 4_456_448) == 32
    assert plan(LLAMA_3_8B, 2, 4_456_447) == 0
    assert plan(LLAMA_3_8B, 2, -GiB) == 0


def test_free_memory_below_the_headroom_plans_nothing():
    assert (
        plan_chunk_size(
            free_bytes=100 * MiB,
            shape=SMOLLM2_135M,
            dtype_bytes=4,
            num_prior_tokens=0,
            num_remaining_tokens=1000,
            min_chunk=32,
            max_chunk=8192,
            headroom_bytes=256 * MiB,
            attention_materializes_scores=False,
        )
        == 0
    )


def test_the_last_chunk_may_be_ragged_or_below_the_minimum():
    assert plan(LLAMA_3_8B, 2, 4 * GiB, num_remaining_tokens=1000) == 1000
    assert plan(LLAMA_3_8B, 2, 4 * GiB, num_remaining_tokens=5) == 5
    # 5 tokens need 696,320 B; below that nothing fits.
    assert plan(LLAMA_3_8B, 2, 696_319, num_remaining_tokens=5) == 0


@pytest.mark.parametrize("scores", [False, True])
@pytest.mark.parametrize("shape", [LLAMA_3_8B, SMOLLM2_135M])
def test_monotonic_in_free_memory_and_within_bounds(shape, scores):
    previous = 0
    for budget in range(0, 3 * GiB, 7 * MiB + 12345):
        size = plan(
            shape,
            2,
            budget,
            attention_materializes_scores=scores,
            num_prior_tokens=3000,
            min_chunk=48,
            max_chunk=4010,
            num_remaining_tokens=50_000,
        )
        assert size >= previous
        assert size == 0 or 48 <= size <= 4010
        assert size in (0, 48) or size % 16 == 0
        previous = size
    if scores:
        assert 48 < previous <= 4000
    else:
        assert previous == 4000  # the largest multiple of 16 within max_chunk


def test_invalid_arguments():
    with pytest.raises(ValueError):
        plan(LLAMA_3_8B, 2, GiB, num_remaining_tokens=0)
    with pytest.raises(ValueError):
        plan(LLAMA_3_8B, 2, GiB, min_chunk=64, max_chunk=32)


def test_shape_from_hf_config():
    config = {
        "num_hidden_layers": 30,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "vocab_size": 49152,
    }
    assert ModelShape.from_hf_config(config) == SMOLLM2_135M
    with pytest.raises(ValueError):
        ModelShape(1, 64, 64, num_heads=3, num_kv_heads=2, head_dim=8, vocab_size=10)
