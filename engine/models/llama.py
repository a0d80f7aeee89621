"""One implementation of the Llama family: Llama 2/3, SmolLM2, Mistral, Qwen2 (qkv bias), Qwen3 (q/k norm).

Tokens of one sequence are flattened to [T, hidden]; attention (KV cache writes and reads) is done by
the callable passed to forward, so the model itself holds no cache and no device logic.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.models.config import ModelArgs
from engine.models.rope import apply_rope, inv_frequencies, rope_cos_sin

# (layer_idx, q [T, H, D], k [T, KV, D], v [T, KV, D]) -> attention output [T, H, D]
AttentionFn = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in fp32 and scale after casting back, as the HF checkpoints were trained.
        normed = F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps)
        return self.weight * normed.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs, layer_idx: int) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads, self.num_kv_heads, self.head_dim = (
            args.num_heads,
            args.num_kv_heads,
            args.head_dim,
        )
        qkv_out = (args.num_heads + 2 * args.num_kv_heads) * args.head_dim
        # q, k and v in one matrix product (fused at load time).
        self.qkv_proj = nn.Linear(args.hidden_size, qkv_out, bias=args.attention_bias)
        self.o_proj = nn.Linear(args.num_heads * args.head_dim, args.hidden_size, bias=False)
        self.q_norm = RMSNorm(args.head_dim, args.rms_norm_eps) if args.qk_norm else None
        self.k_norm = RMSNorm(args.head_dim, args.rms_norm_eps) if args.qk_norm else None

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attention: AttentionFn
    ) -> torch.Tensor:
        num_tokens = x.shape[0]
        q_size = self.num_heads * self.head_dim
        kv_size = self.num_kv_heads * self.head_dim
        q, k, v = self.qkv_proj(x).split([q_size, kv_size, kv_size], dim=-1)
        q = q.view(num_tokens, self.num_heads, self.head_dim)  # q: [T, H, D]
        k = k.view(num_tokens, self.num_kv_heads, self.head_dim)  # k: [T, KV, D]
        v = v.view(num_tokens, self.num_kv_heads, self.head_dim)  # v: [T, KV, D]
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out = attention(self.layer_idx, q, k, v)  # out: [T, H, D]
        return self.o_proj(out.reshape(num_tokens, q_size))


class MLP(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.intermediate_size = args.intermediate_size
        self.gate_up_proj = nn.Linear(args.hidden_size, 2 * args.intermediate_size, bias=False)
        self.down_proj = nn.Linear(args.intermediate_size, args.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).split(self.intermediate_size, dim=-1)  # [T, I] each
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, args: ModelArgs, layer_idx: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.self_attn = Attention(args, layer_idx)
        self.post_attention_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.mlp = MLP(args)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attention: AttentionFn
    ) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, attention)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = args
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(args, i) for i in range(args.num_layers))
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.lm_head = (
            None
            if args.tie_word_embeddings
            else nn.Linear(args.hidden_size, args.vocab_size, False)
        )
        self.inv_freq: torch.Tensor | None = None

    def init_rope(self, device: torch.device) -> None:
        """Called once the weights are on their device (the model is built on `meta`)."""
        args = self.args
        self.inv_freq = inv_frequencies(args.head_dim, args.rope_theta, args.rope_scaling).to(
            device
        )

    def compile_layers(self) -> None:
        """torch.compile the parts between attention calls (fuses norms, RoPE, SiLU; CUDA)."""
        for layer in self.layers:
            layer.mlp = torch.compile(layer.mlp, dynamic=True)
            layer.input_layernorm = torch.compile(layer.input_layernorm, dynamic=True)
            layer.post_attention_layernorm = torch.compile(
                layer.post_attention_layernorm, dynamic=True
            )

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        attention: AttentionFn,
        logits_indices: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """input_ids, positions: [T]. Returns logits [N, V] for logits_indices (None: all T)."""
        x = self.embed_tokens(input_ids)  # x: [T, hidden]
        cos, sin = rope_cos_sin(positions, self.inv_freq, x.dtype)  # [T, 1, D]
        for layer in self.layers:
            x = layer(x, cos, sin, attention)
        if logits_indices is not None:
            # Only the positions whose next token we need: the full [T, V] matrix dwarfs a layer.
            x = x.index_select(0, logits_indices)
        x = self.norm(x)
        weight = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, weight)  # [N, V]
