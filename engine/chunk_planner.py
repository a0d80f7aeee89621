"""Memory model of a prefill chunk, and the chunk size that fits in free memory.

Activation model (inference, no autograd): layers run one after another and free their
temporaries, so the peak is one layer's live tensors, not num_layers times that. Per prefill
token of one layer, in elements of the model dtype, with
    h = hidden_size, q = num_heads * head_dim, kv = num_kv_heads * head_dim, I = intermediate_size:

    residual stream              h
    normed input                 h
    q, k, v projections          q + 2 * kv
    attention output             q          (before o_proj)
    o_proj output                h
    MLP gate and up              2 * I
    act(gate) * up               I
    down output                  h
    --------------------------------------
    total                        4h + 2q + 2kv + 3I   elements  ->  * dtype_bytes

We sum every phase instead of taking the largest one: the overestimate (about a third for
Llama-3-8B) covers allocator fragmentation and temporaries this model does not name.

Attention scores: SDPA's math path (the CPU path) materializes the scores and the softmax
probabilities in fp32, each of shape [num_heads, chunk, context], adding per query token
    2 * num_heads * context * 4 bytes,
where context is the key length, i.e. the chunk's END position, not its length. Flash and
flex attention never materialize them (0 bytes). The peak of a chunk of c tokens starting after
`ctx` cached tokens is therefore c * activation_bytes_per_token(context = ctx + c): quadratic in
c on the math path, linear otherwise.

Logits are computed only for the last position, so the vocabulary adds a fixed
    vocab_size * (dtype_bytes + 4)   bytes (logits in the model dtype, then fp32 for sampling)
per chunk, independent of the chunk size. The KV of the chunk goes into the preallocated
paged cache and costs nothing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SCORE_BYTES = 4  # the math path computes scores in fp32
NUM_SCORE_COPIES = 2  # scores and softmax probabilities are alive together


@dataclass(frozen=True)
class ModelShape:
    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ModelShape.{name} must be a positive integer, not {value!r}.")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
                f"({self.num_kv_heads})."
            )

    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any]) -> ModelShape:
        """Shape from a Hugging Face config.json dict (Llama-style names)."""
        num_heads = config["num_attention_heads"]
        return cls(
            num_layers=config["num_hidden_layers"],
            hidden_size=config["hidden_size"],
            intermediate_size=config["intermediate_size"],
            num_heads=num_heads,
            num_kv_heads=config.get("num_key_value_heads") or num_heads,
            head_dim=config.get("head_dim") or config["hidden_size"] // num_heads,
            vocab_size=config["vocab_size"],
        )


def kv_bytes_per_token(shape: ModelShape, dtype_bytes: int, scale_bytes: int = 0) -> int:
    """K and V of every layer for one token: 2 * layers * kv_heads * (head_dim * dtype_bytes +
    scale_bytes), scale_bytes being a quantized cache's scale per token and head (FP8: 4)."""
    per_head = shape.head_dim * dtype_bytes + scale_bytes
    return 2 * shape.num_layers * shape.num_kv_heads * per_head


def plan_num_kv_blocks(
    *,
    kv_budget_bytes: int,
    shape: ModelShape,
    dtype_bytes: int,
    block_size: int,
    scale_bytes: int = 0,
) -> int:
    """How many KV blocks of block_size tokens fit in kv_budget_bytes (0 when none does)."""
    block_bytes = kv_bytes_per_token(shape, dtype_bytes, scale_bytes) * block_size
    return max(0, kv_budget_bytes) // block_bytes


def activation_bytes_per_token(
    shape: ModelShape,
    dtype_bytes: int,
    *,
    num_key_tokens: int,
    attention_materializes_scores: bool,
) -> float:
    """Peak bytes of one layer's forward per prefill token (see the module docstring).

    num_key_tokens is the key length the chunk's queries attend to: the chunk's end.
    """
    q = shape.num_heads * shape.head_dim
    kv = shape.num_kv_heads * shape.head_dim
    num_elements = 4 * shape.hidden_size + 2 * q + 2 * kv + 3 * shape.intermediate_size
    num_bytes = float(num_elements * dtype_bytes)
    if attention_materializes_scores:
        num_bytes += NUM_SCORE_COPIES * shape.num_heads * num_key_tokens * SCORE_BYTES
    return num_bytes


def logits_bytes(shape: ModelShape, dtype_bytes: int, num_tokens: int = 1) -> int:
    """Logits of the last num_tokens positions, in the model dtype and again in fp32."""
    return num_tokens * shape.vocab_size * (dtype_bytes + 4)


def chunk_peak_bytes(
    shape: ModelShape,
    dtype_bytes: int,
    *,
    chunk_size: int,
    num_prior_tokens: int,
    attention_materializes_scores: bool,
) -> float:
    """Activation peak of a chunk of chunk_size tokens after num_prior_tokens in the KV cache."""
    per_token = activation_bytes_per_token(
        shape,
        dtype_bytes,
        num_key_tokens=num_prior_tokens + chunk_size,
        attention_materializes_scores=attention_materializes_scores,
    )
    return chunk_size * per_token


def plan_chunk_size(
    *,
    free_bytes: int,
    shape: ModelShape,
    dtype_bytes: int,
    num_prior_tokens: int,
    num_remaining_tokens: int,
    min_chunk: int,
    max_chunk: int,
    headroom_bytes: int,
    attention_materializes_scores: bool,
    multiple_of: int = 16,
    fixed_bytes: int = 0,
) -> int:
    """Largest chunk whose activation peak fits in free_bytes - headroom; 0 if none fits.

    num_prior_tokens: tokens already in the KV cache before this chunk (its start).
    Candidates are min_chunk, the multiples of multiple_of up to max_chunk, and the whole
    remainder of the prompt when that is within max_chunk (the last chunk may be ragged). A
    remainder shorter than min_chunk is its own minimum. fixed_bytes is any further per-chunk
    cost the caller knows of (e.g. K/V expanded for grouped-query attention).
    The result never decreases when free_bytes grows.
    """
    if num_remaining_tokens < 1:
        raise ValueError(f"num_remaining_tokens must be at least 1, not {num_remaining_tokens}.")
    if not 1 <= min_chunk <= max_chunk:
        raise ValueError(f"need 1 <= min_chunk ({min_chunk}) <= max_chunk ({max_chunk}).")
    if multiple_of < 1 or num_prior_tokens < 0:
        raise ValueError("multiple_of must be positive and num_prior_tokens not negative.")
    budget = free_bytes - headroom_bytes - fixed_bytes - logits_bytes(shape, dtype_bytes)
    candidates = _candidate_sizes(num_remaining_tokens, min_chunk, max_chunk, multiple_of)

    def fits(chunk_size: int) -> bool:
        peak = chunk_peak_bytes(
            shape,
            dtype_bytes,
            chunk_size=chunk_size,
            num_prior_tokens=num_prior_tokens,
            attention_materializes_scores=attention_materializes_scores,
        )
        return peak <= budget

    # The peak grows with the chunk size, so the candidates that fit form a prefix.
    low, high = 0, len(candidates)
    while low < high:
        middle = (low + high) // 2
        if fits(candidates[middle]):
            low = middle + 1
        else:
            high = middle
    return candidates[low - 1] if low else 0


def _candidate_sizes(
    num_remaining_tokens: int, min_chunk: int, max_chunk: int, multiple_of: int
) -> list[int]:
    smallest = min(min_chunk, num_remaining_tokens)
    largest = min(max_chunk, num_remaining_tokens)
    first_multiple = (smallest // multiple_of + 1) * multiple_of
    sizes = {smallest, *range(first_multiple, largest + 1, multiple_of)}
    if num_remaining_tokens <= max_chunk:
        sizes.add(num_remaining_tokens)
    return sorted(sizes)
