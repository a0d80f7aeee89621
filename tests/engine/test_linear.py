"""The CPU's matrix products (oneDNN where it runs) and the MLP in row blocks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

from engine.models import LlamaModel, ModelArgs
from engine.models.linear import Linear, cpu_linear_fn, onednn_linear


def _args() -> ModelArgs:
    return ModelArgs(
        model_type="llama",
        vocab_size=50,
        hidden_size=32,
        intermediate_size=48,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        head_dim=8,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        rope_scaling={},
        max_position_embeddings=128,
        tie_word_embeddings=True,
        attention_bias=False,
        qk_norm=False,
    )


def test_onednn_linear_equals_f_linear_where_it_is_chosen() -> None:
    fn = cpu_linear_fn(torch.float32)
    torch.manual_seed(0)
    x, weight, bias = torch.randn(300, 96), torch.randn(40, 96), torch.randn(40)
    expected = F.linear(x.double(), weight.double(), bias.double())
    for inputs in ((x, weight, bias), (x, weight, None), (x.t().contiguous().t(), weight, None)):
        out = fn(*inputs)
        reference = expected if inputs[2] is not None else expected - bias.double()
        assert out.shape == (300, 40)
        assert ((out.double() - reference).norm() / reference.norm()).item() < 1e-6
    if torch.backends.mkldnn.is_available():
        assert fn is onednn_linear  # this project's CPUs: the probe must pick oneDNN
    assert cpu_linear_fn(torch.int64) is F.linear  # no probe for dtypes it does not serve


def test_linear_keeps_nn_linear_parameter_names() -> None:
    layer = Linear(6, 4, bias=True)
    assert set(dict(layer.named_parameters())) == {"weight", "bias"}
    assert layer.weight.shape == (4, 6) and layer.bias.shape == (4,)


def test_one_row_runs_only_where_enabled_for_bf16_weights_without_bias() -> None:
    """Linear.one_row (the fused one-row GEMV, bf16 weights) is on only on CUDA for bf16
    weights without a bias; elsewhere it stays off and one_row refuses with a sentence."""
    plain, biased = Linear(16, 8).to(torch.bfloat16), Linear(16, 8, bias=True).to(torch.bfloat16)
    assert not plain.enable_one_row(torch.device("cpu"))
    assert not biased.enable_one_row(torch.device("cuda"))
    assert not Linear(16, 8).enable_one_row(torch.device("cuda"))  # fp32 weights
    with pytest.raises(ValueError, match=r"Linear\.one_row takes one bf16 row"):
        plain.one_row(torch.zeros(1, 16, dtype=torch.bfloat16))
    plain.one_row_fusion = True  # as on a GPU: still one bf16 row only
    with pytest.raises(ValueError, match="one bf16 row"):
        plain.one_row(torch.zeros(2, 16, dtype=torch.bfloat16))


def test_use_matmul_reaches_every_layer_and_row_blocks_change_nothing() -> None:
    model = _random_model(1)
    calls = []

    def counting(x, weight, bias=None):
        calls.append(x.shape[0])
        return F.linear(x, weight, bias)

    ids, positions = torch.randint(0, 50, (37,)), torch.arange(37)

    with torch.inference_mode():
        whole = model(ids, positions, _causal_attention)
        model.use_matmul(counting, mlp_max_rows=10)
        blocked = model(ids, positions, _causal_attention)
    # Per layer: qkv, o_proj, then gate_up and down for each of 4 row blocks; then the logits.
    assert calls == [37, 37, *([10, 10] * 3), 7, 7, 37, 37, *([10, 10] * 3), 7, 7, 37]
    assert (blocked - whole).abs().max().item() < 1e-5


def _random_model(seed: int) -> LlamaModel:
    torch.manual_seed(seed)
    model = LlamaModel(_args())
    for parameter in model.parameters():
        torch.nn.init.normal_(parameter, std=0.2)
    model.init_rope(torch.device("cpu"))
    return model


def _causal_attention(layer_idx, q, k, v):
    """Plain causal attention over the step's own tokens (q [T, H, D], k/v [T, KV, D])."""
    k = k.repeat_interleave(2, dim=1)
    v = v.repeat_interleave(2, dim=1)
    return F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True
    ).transpose(0, 1)


@pytest.mark.slow
@pytest.mark.parametrize("in_place", [True, False], ids=["residual-in-place", "whole-half"])
def test_compiled_layer_halves_give_the_eager_logits(in_place: bool) -> None:
    # compile_layers is what meets the H200 targets; Inductor's CPU backend compiles the same
    # two graphs here, so what they compute is checked without a GPU. With F.linear and the MLP
    # in one pass the residual products run in place (addmm_ into x); with the MLP in row
    # blocks (as on the CPU) the half after attention is compiled whole.
    model = _random_model(2)
    if not in_place:
        model.use_matmul(F.linear, mlp_max_rows=8)
    inputs = [
        torch.randint(0, 50, (n,), generator=torch.Generator().manual_seed(n)) for n in (9, 23)
    ]
    with torch.inference_mode():
        eager = [model(ids, torch.arange(len(ids)), _causal_attention) for ids in inputs]
        model.compile_layers()
        layer = model.layers[0]
        assert (layer.after_attention == layer.after_attention_in_place) is in_place
        graphs_before = counters["stats"]["unique_graphs"]
        compiled = [model(ids, torch.arange(len(ids)), _causal_attention) for ids in inputs]
    # Both halves compiled, shared by the two layers (no graph per layer).
    assert 2 <= counters["stats"]["unique_graphs"] - graphs_before <= 4
    for ours, reference in zip(compiled, eager, strict=True):
        assert (ours - reference).abs().max().item() < 1e-4
