"""A decoder layer with FP8 projections, one row, through its fused one-row path (GEMVs that do the
norms, SiLU * up and residual adds: DecoderLayer.one_row_fused) and through its plain path (the
same GEMV for each product, the layer's work in torch), both under Triton's CPU interpreter;
then a layer with bf16 projections (Linear.one_row) against its plain path (F.linear); prints
how far apart they land (test_fp8_small_batch.py starts it with TRITON_INTERPRET=1)."""

import json

import torch

from tests.engine.run_paged_decode_interpreted import start_interpreted


def fp8_layer(device: torch.device, seed: int = 0, weights: str = "fp8"):
    """A small Llama decoder layer in bf16 (hidden 64, MLP 96, 4 query heads on 2 KV heads of
    16) with random projections: E4M3 ones set up as Fp8Linear.use_scaled_mm sets them on a
    GPU, or (weights "bf16") bf16 ones with Linear's one_row_fusion on."""
    from engine.models.config import ModelArgs
    from engine.models.fp8 import FP8_PROJECTIONS, Fp8Linear, quantize_rows
    from engine.models.llama import DecoderLayer

    args = ModelArgs(
        model_type="llama", vocab_size=32, hidden_size=64, intermediate_size=96, num_layers=1,
        num_heads=4, num_kv_heads=2, head_dim=16, rms_norm_eps=1e-5, max_position_embeddings=64,
    )  # fmt: skip
    generator = torch.Generator().manual_seed(seed)
    layer = DecoderLayer(args, 0).to(torch.bfloat16)
    for name, module in list(layer.named_modules()):
        if name.rsplit(".", 1)[-1] not in FP8_PROJECTIONS:
            continue
        parent, child = name.rsplit(".", 1)
        weight = torch.randn(module.out_features, module.in_features, generator=generator) * 0.1
        if weights == "bf16":
            module.weight.data = weight.to(torch.bfloat16)
            module.one_row_fusion = True  # as Linear.enable_one_row sets it on a GPU
            continue
        fp8 = Fp8Linear(module.in_features, module.out_features)
        fp8.weight.data, fp8.weight_scale.data = quantize_rows(weight)
        fp8.scaled_mm, fp8.small_batch_rows, fp8.one_row_fusion = True, 64, True
        setattr(layer.get_submodule(parent), child, fp8)
    for norm in (layer.input_layernorm, layer.post_attention_layernorm):
        norm.weight.data = (torch.rand(64, generator=generator) + 0.5).to(torch.bfloat16)
    return layer.to(device)


def attention(layer_idx: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Each query head's output from its own q and its KV head's k and v (a stand-in for the
    cache's attention that still reads all three)."""
    group = q.shape[1] // k.shape[1]
    return q * 0.5 + (k + v).repeat_interleave(group, dim=1)


def compare(device: torch.device, weights: str = "fp8") -> dict:
    """The layer's one row through its fused path and its plain one (and two rows both ways)."""
    from engine.models import fp8_gemv
    from engine.models.rope import rope_cos_sin

    layer = fp8_layer(device=device, weights=weights)
    generator = torch.Generator().manual_seed(1)
    # A residual no larger than the layer's change, so that the bound below sees the change.
    x = (torch.randn(1, 64, generator=generator) * 0.1).to(device, torch.bfloat16)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, 16, 2, device=device).float() / 16))
    cos, sin = rope_cos_sin(torch.tensor([5], device=device), inv_freq, torch.bfloat16)
    assert layer.enable_one_row_fusion()
    calls, op = [], fp8_gemv.fp8_gemv_fused_op
    fp8_gemv.fp8_gemv_fused_op = lambda *args: calls.append(1) or op(*args)
    try:
        fused = layer(x, cos, sin, attention)
        fused_calls = len(calls)
        layer.one_row_fused = False
        plain = layer(x, cos, sin, attention)
        two = torch.cat([x, x * 0.5])  # two rows never take the one-row path
        layer.one_row_fused = True
        pair = layer(two, cos, sin, attention)
        layer.one_row_fused = False
        pair_plain = layer(two, cos, sin, attention)
    finally:
        fp8_gemv.fp8_gemv_fused_op = op
    return {
        "max_abs_diff": (fused.float() - plain.float()).abs().max().item(),
        "max_abs": plain.float().abs().max().item(),
        "fused_calls": fused_calls,  # the layer's four products, one row
        "calls_after": len(calls) - fused_calls,  # the plain and two-row passes
        "pair_equal": torch.equal(pair, pair_plain),
        "finite": bool(fused.isfinite().all()),
    }


def main() -> None:
    start_interpreted()
    cpu = torch.device("cpu")
    print(json.dumps({weights: compare(cpu, weights) for weights in ("fp8", "bf16")}))


if __name__ == "__main__":
    main()
