"""One implementation of the Llama family: Llama 2/3.x, SmolLM2, Mistral, Qwen2/2.5 (qkv bias),
Qwen3 (q/k norm per head before RoPE).

Tokens of one sequence are flattened to [T, hidden]; attention (KV cache writes and reads) is done by
the callable passed to forward, so the model itself holds no cache and no device logic.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.models.config import ModelArgs
from engine.models.linear import Linear, LinearFn
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
        self.qkv_proj = Linear(args.hidden_size, qkv_out, bias=args.attention_bias)
        self.o_proj = Linear(args.num_heads * args.head_dim, args.hidden_size, bias=args.o_bias)
        self.q_norm = RMSNorm(args.head_dim, args.rms_norm_eps) if args.qk_norm else None
        self.k_norm = RMSNorm(args.head_dim, args.rms_norm_eps) if args.qk_norm else None

    def project(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [T, hidden] -> q [T, H, D], k [T, KV, D] (rotated), v [T, KV, D]."""
        return self.heads(self.qkv_proj(x), cos, sin)

    def heads(
        self, qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The fused projection's output [T, (H + 2 KV) * D] -> q, k (rotated), v as project's."""
        num_tokens = qkv.shape[0]
        q_size = self.num_heads * self.head_dim
        kv_size = self.num_kv_heads * self.head_dim
        q, k, v = qkv.split([q_size, kv_size, kv_size], dim=-1)
        q = q.view(num_tokens, self.num_heads, self.head_dim)  # q: [T, H, D]
        k = k.view(num_tokens, self.num_kv_heads, self.head_dim)  # k: [T, KV, D]
        v = v.view(num_tokens, self.num_kv_heads, self.head_dim)  # v: [T, KV, D]
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v


class MLP(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.intermediate_size = args.intermediate_size
        self.gate_up_proj = Linear(args.hidden_size, 2 * args.intermediate_size, bias=args.mlp_bias)
        self.down_proj = Linear(args.intermediate_size, args.hidden_size, bias=args.mlp_bias)
        # Tokens per pass (None: all at once). On the CPU a [T, 2I] intermediate larger than the
        # caches costs more than the extra calls: 512 rows took SmolLM2's MLP at 8K tokens from
        # 152 to 113 ms a layer (bench/results/cpu_matmul.md).
        self.max_rows: int | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        num_tokens, rows = x.shape[0], self.max_rows
        if rows is None or num_tokens <= rows:
            return self._forward(x)
        out = x.new_empty(num_tokens, self.down_proj.out_features)  # [T, hidden]
        for start in range(0, num_tokens, rows):
            out[start : start + rows] = self._forward(x[start : start + rows])
        return out

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.activation(x))

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        """x [T, hidden] -> SiLU(gate) * up [T, I]: the MLP up to its down_proj."""
        gate, up = self.gate_up_proj(x).split(self.intermediate_size, dim=-1)  # [T, I] each
        return F.silu(gate) * up


class DecoderLayer(nn.Module):
    def __init__(self, args: ModelArgs, layer_idx: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.self_attn = Attention(args, layer_idx)
        self.post_attention_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.mlp = MLP(args)
        # One bf16 row (a single stream's decode step) through GEMVs that also do the norms,
        # SiLU and residual adds around them (enable_one_row_fusion).
        self.one_row_fused = False

    def enable_one_row_fusion(self) -> bool:
        """Take the one-row path wherever all four projections can (one_row_fusion: FP8 ones,
        engine/models/fp8.py, or bf16 ones, engine/models/linear.py); returns whether they
        can."""
        attention, mlp = self.self_attn, self.mlp
        projections = (attention.qkv_proj, attention.o_proj, mlp.gate_up_proj, mlp.down_proj)
        self.one_row_fused = all(getattr(p, "one_row_fusion", False) for p in projections)
        return self.one_row_fused

    def _takes_one_row(self, x: torch.Tensor) -> bool:
        return self.one_row_fused and x.shape[0] == 1 and x.dtype == torch.bfloat16

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attention: AttentionFn
    ) -> torch.Tensor:
        q, k, v = self.before_attention(x, cos, sin)
        out = attention(self.self_attn.layer_idx, q, k, v)  # out: [T, H, D]
        return self.after_attention(x, out)

    # The two halves around the attention call are what compile_layers hands to torch.compile:
    # everything but the matrix products fuses into a few kernels (norm, RoPE, norm, SiLU * up),
    # the attention kernel and its KV cache writes stay outside the graphs.
    # One row with one_row_fused: the norm inside the q/k/v GEMV; the residual add inside o's,
    # the next norm inside gate/up's, SiLU * up and the residual add inside down's.
    def before_attention(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self._takes_one_row(x):
            norm = self.input_layernorm
            qkv = self.self_attn.qkv_proj.one_row(x, norm=(norm.weight, norm.eps))
            return self.self_attn.heads(qkv, cos, sin)
        return self.self_attn.project(self.input_layernorm(x), cos, sin)

    def after_attention(self, x: torch.Tensor, attention_out: torch.Tensor) -> torch.Tensor:
        if self._takes_one_row(x):
            mlp, norm = self.mlp, self.post_attention_layernorm
            x = self.self_attn.o_proj.one_row(attention_out.flatten(1), residual=x)
            gate_up = mlp.gate_up_proj.one_row(x, norm=(norm.weight, norm.eps))
            return mlp.down_proj.one_row(gate_up, gated=True, residual=x)
        x = x + self.self_attn.o_proj(attention_out.flatten(1))  # [T, hidden]
        return x + self.mlp(self.post_attention_layernorm(x))

    def mlp_activation(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP's activation [T, I] of x's post-attention norm (what down_proj multiplies)."""
        return self.mlp.activation(self.post_attention_layernorm(x))

    def after_attention_in_place(
        self, x: torch.Tensor, attention_out: torch.Tensor
    ) -> torch.Tensor:
        """after_attention with both residual adds done by the matrix products themselves, into
        x (C = x, beta = 1). Compiled whole, Inductor emits addmm, which first copies x into a new
        buffer: in place, a 128K prefill on an H200 took 9.82 s instead of 9.99 s
        (bench/results/prefill_h200.md). x is the layer's input; nothing reads it afterwards."""
        x.addmm_(attention_out.flatten(1), self.self_attn.o_proj.weight.t())
        return x.addmm_(self.mlp_activation(x), self.mlp.down_proj.weight.t())

    def compile_halves(self) -> None:
        """torch.compile the code around the attention call: before it, and after it either the
        MLP's inside (when the residual products can run in place: plain F.linear, no bias, the
        MLP in one pass) or the whole half."""
        self.before_attention = torch.compile(self.before_attention, dynamic=True)
        residual_products = (self.self_attn.o_proj, self.mlp.down_proj)
        if self.mlp.max_rows is None and all(
            linear.matmul is F.linear and linear.bias is None for linear in residual_products
        ):
            self.mlp_activation = torch.compile(self.mlp_activation, dynamic=True)
            self.after_attention = self.after_attention_in_place
        else:
            self.after_attention = torch.compile(self.after_attention, dynamic=True)


class LlamaModel(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = args
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(args, i) for i in range(args.num_layers))
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.lm_head = (
            None if args.tie_word_embeddings else Linear(args.hidden_size, args.vocab_size, False)
        )
        self.inv_freq: torch.Tensor | None = None
        self.matmul: LinearFn = F.linear  # the logits' product; layers hold their own

    def use_matmul(self, matmul: LinearFn, *, mlp_max_rows: int | None = None) -> None:
        """Compute every linear layer and the logits with `matmul` (see engine/models/linear.py),
        and the MLP at most `mlp_max_rows` tokens at a time (None: all at once)."""
        self.matmul = matmul
        for module in self.modules():
            if isinstance(module, Linear):
                module.matmul = matmul
            elif isinstance(module, MLP):
                module.max_rows = mlp_max_rows

    def init_rope(self, device: torch.device) -> None:
        """Called once the weights are on their device (the model is built on `meta`)."""
        args = self.args
        self.inv_freq = inv_frequencies(args.head_dim, args.rope_theta, args.rope_scaling).to(
            device
        )

    def compile_layers(self) -> None:
        """torch.compile each layer's halves around its attention call (CUDA): on an H200 the
        norms, RoPE, residual adds and SiLU took 19% of a 32K prefill's GPU time uncompiled
        (bench/results/prefill_h200.md). All layers share the two compiled graphs."""
        for layer in self.layers:
            layer.compile_halves()

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
        return self.matmul(x, weight, None)  # [N, V]
