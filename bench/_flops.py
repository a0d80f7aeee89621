"""Useful causal prefill FLOPs, counted exactly as ../shared/BASELINES.md does.

For a prompt of S tokens of a Llama-family model (L layers, hidden h, H query heads and KV
KV heads of head dim D, MLP width I, vocabulary V), computing logits for N positions:

    linear layers   2 * S * L * (h * (H*D + 2*KV*D)  +  H*D * h  +  3 * h * I)
                    (q/k/v projections, o_proj, and gate/up/down; 2 FLOPs per multiply-add)
    attention       L * 4 * H * D * S**2 / 2
                    (Q K^T and P V, 2 * 2 * H * D FLOPs per query-key pair, over the causal half
                    of the square; the same however the prompt is chunked)
    logits          2 * h * V * N

Norms, RoPE, softmax and the SiLU are not counted. Check against BASELINES.md: the Llama-3-8B
shape at 32,768 tokens with the last position's logits gives 7.39e14 FLOPs, and 1.404 s there
is the 526 TFLOP/s it reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Shape:
    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int

    @classmethod
    def from_hf_config(cls, config: Any) -> Shape:
        """From a transformers PretrainedConfig (Llama-style attribute names)."""
        num_heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // num_heads
        return cls(
            num_layers=config.num_hidden_layers,
            hidden_size=config.hidden_size,
            intermediate_size=config.intermediate_size,
            num_heads=num_heads,
            num_kv_heads=getattr(config, "num_key_value_heads", None) or num_heads,
            head_dim=head_dim,
            vocab_size=config.vocab_size,
        )

    @property
    def num_params(self) -> int:
        """Weights of the decoder layers, embeddings and an untied head (norms left out)."""
        q, kv, h = (
            self.num_heads * self.head_dim,
            self.num_kv_heads * self.head_dim,
            self.hidden_size,
        )
        per_layer = h * (q + 2 * kv) + q * h + 3 * h * self.intermediate_size
        return self.num_layers * per_layer + 2 * self.vocab_size * h


def linear_flops(shape: Shape, num_tokens: int) -> float:
    q = shape.num_heads * shape.head_dim
    kv = shape.num_kv_heads * shape.head_dim
    h = shape.hidden_size
    per_token_per_layer = h * (q + 2 * kv) + q * h + 3 * h * shape.intermediate_size
    return 2.0 * num_tokens * shape.num_layers * per_token_per_layer


def attention_flops(shape: Shape, num_tokens: int) -> float:
    return shape.num_layers * 4.0 * shape.num_heads * shape.head_dim * num_tokens**2 / 2


def logits_flops(shape: Shape, num_logits: int) -> float:
    return 2.0 * shape.hidden_size * shape.vocab_size * num_logits


def prefill_flops(shape: Shape, num_tokens: int, num_logits: int = 1) -> float:
    """Useful FLOPs of prefilling num_tokens tokens and computing num_logits positions' logits."""
    return (
        linear_flops(shape, num_tokens)
        + attention_flops(shape, num_tokens)
        + logits_flops(shape, num_logits)
    )


LLAMA3_8B = Shape(
    num_layers=32,
    hidden_size=4096,
    intermediate_size=14336,
    num_heads=32,
    num_kv_heads=8,
    head_dim=128,
    vocab_size=128256,
)
