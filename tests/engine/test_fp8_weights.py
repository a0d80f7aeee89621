"""FP8 weights: checkpoints in vLLM's layouts ("fp8" per tensor, per row or in blocks, and
"compressed-tensors"), written here from a tiny random transformers checkpoint, load as they are;
a bf16/fp32 checkpoint quantizes at load (weights="fp8"); logits stay within a derived bound of
the unquantized model and greedy agrees. On the CPU the products dequantize; on CUDA they run
torch._scaled_mm (the GPU tests at the end)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from engine import SamplingParams
from engine.errors import UnsupportedModelError
from engine.loader import load_model
from engine.models import ModelArgs
from engine.models.fp8 import (
    FP8_DTYPE,
    FP8_MAX,
    Fp8Linear,
    dequantize,
    fp8_weight_block,
    quantize_rows,
    requantize_rows,
    row_scales,
)
from tests.engine.conftest import save_tiny_model, tiny_engine

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# E4M3 keeps 3 mantissa bits: a value in its normal range rounds within 2**-4 of itself; below
# 2**-6 (subnormals, in units of the scale) within 2**-10 of the scale.
E4M3_RELATIVE = 2.0**-4
E4M3_SUBNORMAL_STEP = 2.0**-10
# Logits of the tiny 2-layer model (weights' std 0.1), rel-L2 against the unquantized model.
# Each product errs by about the weights' RMS relative rounding error (E4M3: ~2% for normally
# spread weights); a random model amplifies that through its layers (measured: 5.4-6.8% for
# every layout, 11-15% with weights of std 0.2). 10% is that with room to spare, while a wrong
# scale (transposed, inverted, off by a block) gives 100% or more. The exact check is
# test_fp8_computes_what_its_dequantized_weights_compute.
LOGITS_REL_L2 = 0.10
# Our FP8 path on the CPU against the same weights dequantized by the test: fp32 sums in another
# order only.
EXACT_REL_L2 = 1e-5
NUM_GREEDY = 5
PROMPT = [(7 * i + 3) % 256 for i in range(48)]


def _rel_l2(ours: torch.Tensor, reference: torch.Tensor) -> float:
    return ((ours.float() - reference.float()).norm() / reference.float().norm()).item()


def _block_quantize(weight: torch.Tensor, block: tuple[int, int]):
    """weight [out, in] -> E4M3 and [ceil(out/r), ceil(in/c)] scales (DeepSeek's layout)."""
    rows, cols = block
    out_features, in_features = weight.shape
    scales = torch.empty(-(-out_features // rows), -(-in_features // cols))
    quantized = torch.empty(out_features, in_features, dtype=FP8_DTYPE)
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            tile = weight[i * rows : (i + 1) * rows, j * cols : (j + 1) * cols].float()
            scale = max(tile.abs().max().item() / FP8_MAX, 1e-12)
            scales[i, j] = scale
            quantized[i * rows : (i + 1) * rows, j * cols : (j + 1) * cols] = (tile / scale).to(
                FP8_DTYPE
            )
    return quantized, scales


def write_fp8_checkpoint(source: Path, target: Path, *, layout: str) -> Path:
    """The checkpoint in `source` with its projections in FP8, as vLLM/SGLang serve them:
    layout "tensor" / "channel" / "block" (the "fp8" method; block: weight_scale_inv) or
    "ct-channel" (compressed-tensors, per channel)."""
    target.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.suffix != ".safetensors":
            shutil.copy(path, target / path.name)
    tensors = load_file(source / "model.safetensors")
    block = (32, 48)  # partial blocks on both sides of the tiny model's 64/32/128 dimensions
    for name in [n for n in tensors if n.rsplit(".", 2)[-2] in PROJECTIONS]:
        if not name.endswith(".weight"):
            continue
        weight = tensors[name]
        prefix = name.removesuffix("weight")
        if layout == "block":
            tensors[name], tensors[prefix + "weight_scale_inv"] = _block_quantize(weight, block)
        elif layout == "tensor":
            scale = weight.abs().max().float() / FP8_MAX
            tensors[name] = (weight / scale).to(FP8_DTYPE)
            tensors[prefix + "weight_scale"] = scale.reshape(())
            tensors[prefix + "input_scale"] = torch.tensor(0.05)  # static, unused
        else:
            tensors[name], tensors[prefix + "weight_scale"] = quantize_rows(weight)
    save_file(tensors, target / "model.safetensors")
    config = json.loads((source / "config.json").read_text())
    if layout == "ct-channel":
        config["quantization_config"] = {
            "quant_method": "compressed-tensors",
            "format": "float-quantized",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                    "input_activations": {
                        "num_bits": 8,
                        "type": "float",
                        "strategy": "token",
                        "dynamic": True,
                    },
                }
            },
            "ignore": ["lm_head"],
        }
    else:
        config["quantization_config"] = {
            "quant_method": "fp8",
            "activation_scheme": "static" if layout == "tensor" else "dynamic",
            **({"weight_block_size": list(block)} if layout == "block" else {}),
        }
    (target / "config.json").write_text(json.dumps(config))
    return target


def write_dequantized_checkpoint(fp8: Path, target: Path) -> Path:
    """The FP8 checkpoint's weights dequantized here, independently of the engine, as fp32."""
    target.mkdir(parents=True, exist_ok=True)
    for path in fp8.iterdir():
        if path.suffix != ".safetensors":
            shutil.copy(path, target / path.name)
    config = json.loads((fp8 / "config.json").read_text())
    block = config.pop("quantization_config").get("weight_block_size")
    tensors = load_file(fp8 / "model.safetensors")
    out = {}
    for name, tensor in tensors.items():
        if tensor.dtype != FP8_DTYPE:
            if "scale" not in name.rsplit(".", 1)[-1]:
                out[name] = tensor
            continue
        prefix = name.removesuffix("weight")
        scale = tensors.get(prefix + "weight_scale_inv", tensors.get(prefix + "weight_scale"))
        if block is not None:  # each block's scale over its [rows, cols] tile
            rows, cols = tensor.shape
            scale = scale.repeat_interleave(block[0], 0)[:rows].repeat_interleave(block[1], 1)
            scale = scale[:, :cols]
        elif scale.numel() > 1:
            scale = scale.reshape(-1, 1)
        out[name] = tensor.float() * scale
    save_file(out, target / "model.safetensors")
    (target / "config.json").write_text(json.dumps(config))
    return target


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    # Biases too (they stay in the model's dtype); weights of std 0.1 (see LOGITS_REL_L2).
    folder = tmp_path_factory.mktemp("fp8-llama")
    save_tiny_model(folder, "llama_bias", initializer_range=0.1)
    return folder


@pytest.fixture(scope="module")
def reference(llama):
    engine = tiny_engine(llama)
    logits = engine.prefill_logits(PROMPT, all_positions=True)
    tokens = engine.generate(PROMPT, SamplingParams(max_new_tokens=NUM_GREEDY)).token_ids
    return logits, tokens


def test_quantize_rows_rounds_within_e4m3_precision() -> None:
    weight = torch.randn(64, 96, generator=torch.Generator().manual_seed(0)) * 0.3
    weight[3] = 0.0  # an all-zero row: scale stays finite, values 0
    quantized, scale = quantize_rows(weight)
    assert quantized.dtype == FP8_DTYPE and scale.shape == (64, 1)
    error = (dequantize(quantized, scale, torch.float32) - weight).abs()
    assert (error <= weight.abs() * E4M3_RELATIVE + scale * E4M3_SUBNORMAL_STEP).all()
    assert (
        torch.isfinite(scale).all() and (dequantize(quantized, scale, torch.float32)[3] == 0).all()
    )


def test_block_scales_become_rows_of_their_blocks() -> None:
    weight = torch.randn(70, 100, generator=torch.Generator().manual_seed(1))
    quantized, blocks = _block_quantize(weight, (32, 48))  # [3, 3]: partial last blocks
    rows = row_scales(blocks, 70, 100, (32, 48))
    assert rows.shape == (70, 3) and torch.equal(rows[33], blocks[1])
    error = (dequantize(quantized, rows, torch.float32, 48) - weight).abs()
    bound = weight.abs() * E4M3_RELATIVE + rows.repeat_interleave(48, 1)[:, :100] * 2.0**-10
    assert (error <= bound).all()
    # One scale for the tensor, or one per row, become one per row.
    assert torch.equal(row_scales(torch.tensor(0.5), 4, 8, None), torch.full((4, 1), 0.5))
    assert row_scales(torch.arange(4.0), 4, 8, None).shape == (4, 1)


def test_block_scales_requantized_as_rows_stay_within_two_roundings() -> None:
    """What the loader does where torch._scaled_mm runs (CUDA): one scale per row."""
    weight = torch.randn(70, 100, generator=torch.Generator().manual_seed(4))
    quantized, blocks = _block_quantize(weight, (32, 48))
    rows = row_scales(blocks, 70, 100, (32, 48))
    requantized, scale = requantize_rows(quantized, rows, 48)
    assert requantized.dtype == FP8_DTYPE and scale.shape == (70, 1)
    error = (dequantize(requantized, scale, torch.float32) - weight).abs()
    r = E4M3_RELATIVE
    block_scale = rows.repeat_interleave(48, 1)[:, :100]
    bound = weight.abs() * (2 * r + r * r) + (block_scale * (1 + r) + scale) * E4M3_SUBNORMAL_STEP
    assert (error <= bound).all()


def test_quantization_configs_we_load_and_those_we_refuse() -> None:
    assert fp8_weight_block({"quant_method": "fp8", "activation_scheme": "dynamic"}) is None
    block = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}
    assert fp8_weight_block(block) == (128, 128)
    ct_block = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "g": {
                "weights": {
                    "num_bits": 8,
                    "type": "float",
                    "strategy": "block",
                    "block_structure": [128, 128],
                }
            }
        },
    }
    assert fp8_weight_block(ct_block) == (128, 128)
    int4 = {
        "quant_method": "compressed-tensors",
        "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "strategy": "group"}}},
    }
    with pytest.raises(UnsupportedModelError, match="8-bit float"):
        fp8_weight_block(int4)
    with pytest.raises(UnsupportedModelError, match=r"quantized \(gptq\)"):
        fp8_weight_block({"quant_method": "gptq"})


@pytest.mark.parametrize("layout", ["tensor", "channel", "block", "ct-channel"])
def test_an_fp8_checkpoint_loads_as_fp8_and_stays_close(llama, reference, layout, tmp_path):
    folder = write_fp8_checkpoint(llama, tmp_path / layout, layout=layout)
    model, args = load_model(folder, device=torch.device("cpu"), dtype=torch.float32)
    assert args.is_fp8 and args.fp8_weight_block == ((32, 48) if layout == "block" else None)
    qkv = model.layers[0].self_attn.qkv_proj
    assert isinstance(qkv, Fp8Linear) and qkv.weight.dtype == FP8_DTYPE
    assert qkv.bias is not None and qkv.bias.dtype == torch.float32
    assert model.embed_tokens.weight.dtype == torch.float32  # bf16/fp32 outside the products
    engine = tiny_engine(folder)
    logits = engine.prefill_logits(PROMPT, all_positions=True)
    expected_logits, expected_tokens = reference
    assert _rel_l2(logits, expected_logits) <= LOGITS_REL_L2
    tokens = engine.generate(PROMPT, SamplingParams(max_new_tokens=NUM_GREEDY)).token_ids
    assert tokens == expected_tokens


@pytest.mark.parametrize("layout", ["tensor", "block"])
def test_fp8_computes_what_its_dequantized_weights_compute(llama, layout, tmp_path) -> None:
    folder = write_fp8_checkpoint(llama, tmp_path / layout, layout=layout)
    dequantized = write_dequantized_checkpoint(folder, tmp_path / f"{layout}-fp32")
    ours = tiny_engine(folder).prefill_logits(PROMPT, all_positions=True)
    expected = tiny_engine(dequantized).prefill_logits(PROMPT, all_positions=True)
    assert _rel_l2(ours, expected) <= EXACT_REL_L2


def test_quantize_at_load(llama, reference) -> None:
    engine = tiny_engine(llama, weights="fp8")
    layer = engine._main.runner.model.layers[1]
    for linear in (layer.self_attn.qkv_proj, layer.self_attn.o_proj, layer.mlp.down_proj):
        assert isinstance(linear, Fp8Linear) and linear.weight.dtype == FP8_DTYPE
    logits = engine.prefill_logits(PROMPT, all_positions=True)
    expected_logits, expected_tokens = reference
    error = _rel_l2(logits, expected_logits)
    assert 0 < error <= LOGITS_REL_L2  # quantized, and close
    params = SamplingParams(max_new_tokens=NUM_GREEDY)
    assert engine.generate(PROMPT, params).token_ids == expected_tokens


def test_model_args_read_the_fp8_config(llama, tmp_path) -> None:
    folder = write_fp8_checkpoint(llama, tmp_path / "b", layout="block")
    args = ModelArgs.from_folder(folder)
    assert args.is_fp8 and args.fp8_weight_block == (32, 48)


needs_fp8_cuda = pytest.mark.skipif(
    not (torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)),
    reason="needs a CUDA device with FP8 tensor cores (sm_89+)",
)


@needs_fp8_cuda
def test_scaled_mm_matches_the_dequantized_product_cuda() -> None:
    device = torch.device("cuda")
    generator = torch.Generator().manual_seed(2)
    weight = torch.randn(256, 512, generator=generator) * 0.05
    x = torch.randn(37, 512, generator=generator).to(device, torch.bfloat16)
    linear = Fp8Linear(512, 256, bias=False)
    quantized, scale = quantize_rows(weight)
    linear.weight.data, linear.weight_scale.data = quantized.to(device), scale.to(device)
    linear.use_scaled_mm(device)
    assert linear.scaled_mm
    ours = linear(x).float()
    reference = x.float() @ dequantize(quantized, scale, torch.float32).to(device).t()
    # The activations are quantized too (per token): twice one operand's rounding.
    assert _rel_l2(ours, reference) <= 2 * E4M3_RELATIVE


@needs_fp8_cuda
@pytest.mark.parametrize("layout", ["channel", "block"])
def test_an_fp8_checkpoint_on_cuda_stays_close(llama, layout, tmp_path) -> None:
    """On CUDA every product runs torch._scaled_mm, which quantizes the activations too (and
    block scales are requantized per row): twice the CPU's allowance, and the first tokens of
    greedy agree."""
    folder = write_fp8_checkpoint(llama, tmp_path / layout, layout=layout)
    options = {"device": "cuda", "dtype": "bfloat16"}
    reference = tiny_engine(llama, **options)
    engine = tiny_engine(folder, **options)
    qkv = engine._main.runner.model.layers[0].self_attn.qkv_proj
    assert qkv.scaled_mm  # block scales too: requantized with a scale per row at load
    expected = reference.prefill_logits(PROMPT, all_positions=True)
    ours = engine.prefill_logits(PROMPT, all_positions=True)
    assert _rel_l2(ours, expected) <= 2 * LOGITS_REL_L2
    params = SamplingParams(max_new_tokens=3)
    assert engine.generate(PROMPT, params).token_ids == reference.generate(PROMPT, params).token_ids


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton (dev extra)")
def test_per_token_rounding_in_one_pass_matches_the_torch_path_interpreted() -> None:
    """The prefill products' one-pass rounding (CUDA's path) under Triton's interpreter writes
    the bytes and scales of the torch path: strided rows, an all-zero row, a NaN, values past
    E4M3's range, bf16, fp16 and fp32."""
    from tests.engine.run_fp8_tokens_interpreted import SHAPES
    from tests.engine.test_fp8_kv import _run_interpreted

    results = _run_interpreted("tests.engine.run_fp8_tokens_interpreted")
    assert len(results) == len(SHAPES), results
    assert all(r["same_values"] and r["same_scales"] for r in results), results


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton (dev extra)")
def test_per_token_rounding_builds_for_hopper() -> None:
    """Ahead of time (Triton's bundled ptxas): the rounding builds for sm_90 at the down
    projection's rows (14,336 inputs), dividing as torch (IEEE) and rounding to nearest."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("this process runs Triton's interpreter: nothing to compile")
    from engine.models.fp8_tokens import _quantize_tokens_kernel as fn
    from tests.engine.test_fp8_kv import _assert_rounds_as_torch, _sm90_ptx

    kinds = {"x_ptr": "*bf16", "q_ptr": "*fp8e4nv", "s_ptr": "*fp32", "K": "i32"}
    kinds |= {"stride_x": "i32", "fp8_max": "fp32", "min_scale": "fp32"}
    _assert_rounds_as_torch(
        _sm90_ptx(fn, kinds, {"BLOCK_K": 16384, "USE_PDL": False}, num_warps=16)
    )


@pytest.mark.skipif(
    importlib.util.find_spec("triton") is None or not torch.cuda.is_available(),
    reason="needs a CUDA device (and triton)",
)
def test_per_token_rounding_matches_the_torch_path_cuda() -> None:
    from tests.engine.run_fp8_tokens_interpreted import SHAPES, check

    for shape in SHAPES:
        result = check(*shape, torch.device("cuda"))
        assert result["same_values"] and result["same_scales"], result
