"""Load a checkpoint folder (or a converted GGUF) into our model and a HF tokenizer."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import safe_open

from engine.errors import ModelLoadError
from engine.gguf_convert import convert_gguf
from engine.models import LlamaModel, ModelArgs
from engine.models.fp8 import (
    FP8_PROJECTIONS,
    Fp8Linear,
    dequantize,
    is_fp8,
    quantize_per_token,
    quantize_rows,
    requantize_rows,
    row_scales,
    supports_scaled_mm,
)
from engine.models.linear import Linear
from engine.models.llama import DecoderLayer

SAFETENSORS_INDEX = "model.safetensors.index.json"
# FP8 checkpoints' scales that we do not use: activations are quantized per token as they come,
# and the KV cache (kv_dtype "fp8") keeps a scale per token and head.
_UNUSED_SCALES = ("input_scale", "k_scale", "v_scale", "kv_scale")
_SCALES = ("weight_scale", "weight_scale_inv", *_UNUSED_SCALES)
# The checkpoint's projections (fused at load into fp8.FP8_PROJECTIONS).
_CHECKPOINT_PROJECTIONS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)


def resolve_checkpoint(model_path: Path, model_cache_dir: Path | None) -> Path:
    """The checkpoint folder for model_path: the folder itself, or a GGUF converted once."""
    model_path = Path(model_path)
    if model_path.suffix.lower() == ".gguf":
        if model_cache_dir is None:
            raise ModelLoadError(f"{model_path} is a GGUF file: a model_cache_dir is needed.")
        return convert_gguf(model_path, model_cache_dir)
    if not (model_path / "config.json").is_file():
        raise ModelLoadError(
            f"{model_path} is neither a checkpoint folder with config.json nor a .gguf file."
        )
    return model_path


def load_tokenizer(folder: Path):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(folder)
    except Exception as exc:
        raise ModelLoadError(f"Could not load the tokenizer from {folder}: {exc}") from exc


def load_model(
    folder: Path,
    *,
    device: torch.device,
    dtype: torch.dtype,
    state_dict: Mapping[str, torch.Tensor] | None = None,
    weights: str = "auto",
    fp8_small_batch_kernel: bool = True,
    fp8_w8a8_decode: bool = True,
    fp8_one_row_fusion: bool = False,
    bf16_one_row_fusion: bool = False,
) -> tuple[LlamaModel, ModelArgs]:
    """Build on `meta` and assign the checkpoint's tensors (no random init, no second copy).

    FP8 tensors stay FP8 (with their scales as fp32); every other tensor is cast to `dtype`.
    weights "fp8": projections stored in another dtype are quantized to FP8 at load.
    fp8_small_batch_kernel: FP8 products of up to 64 rows (fp8_small_batch.LINEAR_ROWS) through
    the Triton kernels on CUDA; fp8_w8a8_decode: from 2 rows with FP8 activations;
    fp8_one_row_fusion: one row through GEMVs that do the layer's work around them (EngineConfig);
    bf16_one_row_fusion: the same for bf16 projections.
    state_dict: tensors in checkpoint naming to use instead of folder's *.safetensors (added for
    the benchmarks, which hand over an 8B model's weights already on the GPU); tensors already
    on `device` in `dtype` are kept as they are, not copied.
    """
    args = ModelArgs.from_folder(folder)
    with torch.device("meta"):
        model = LlamaModel(args)
    if state_dict is None:
        state = _read_state_dict(folder, args, device=device, dtype=dtype, weights=weights)
    else:
        raw = {
            name.removeprefix("model."): _cast(name, t.to(device=device), dtype)
            for name, t in state_dict.items()
        }
        state = _prepare_state_dict(raw, args, folder, dtype=dtype, weights=weights)
    if supports_scaled_mm(device) and dtype == torch.bfloat16:
        block_scales_as_rows(state, args)  # every product on _scaled_mm (engine/models/fp8.py)
    _use_fp8_where_stored(model, state, args)
    try:
        model.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as exc:
        raise ModelLoadError(
            f"The checkpoint in {folder} does not match its config: {exc}"
        ) from exc
    model.init_rope(device)
    small_batch_rows, outputs, scaled_mm_inputs = 0, set(), set()
    for module in model.modules():
        if isinstance(module, Fp8Linear):
            module.use_scaled_mm(
                device,
                small_batch_kernel=fp8_small_batch_kernel,
                w8a8=fp8_w8a8_decode,
                one_row_fusion=fp8_one_row_fusion,
            )
            small_batch_rows = max(small_batch_rows, module.small_batch_rows)
            outputs.add(module.out_features)
            if module.scaled_mm:
                scaled_mm_inputs.add(module.in_features)
    if dtype == torch.bfloat16:  # the activations' rounding for each row length, not in a step
        for inputs in sorted(scaled_mm_inputs):
            quantize_per_token(torch.zeros(1, inputs, device=device, dtype=dtype))
    if bf16_one_row_fusion and dtype == torch.bfloat16:
        for layer in model.layers:
            for projection in _projections(layer):
                if isinstance(projection, Linear):
                    projection.enable_one_row(device)
    fused = [layer.enable_one_row_fusion() for layer in model.layers]
    if small_batch_rows and dtype == torch.bfloat16:  # their variants now, not in a step
        from engine.models.fp8_small_batch import prebuild

        prebuild(device, small_batch_rows, w8a8=fp8_w8a8_decode, outputs=tuple(outputs))
    built = set()  # the kernel's variants for each weight dtype (FP8, bf16) among fused layers
    for layer, on in zip(model.layers, fused, strict=True):
        dtypes = tuple(p.weight.dtype for p in _projections(layer))
        if on and dtypes not in built:
            built.add(dtypes)
            _prebuild_one_row(layer, device)
    return model.eval().requires_grad_(False), args


def _projections(layer: DecoderLayer) -> tuple[torch.nn.Module, ...]:
    """A layer's four products, in the order a step runs them."""
    attention, mlp = layer.self_attn, layer.mlp
    return attention.qkv_proj, attention.o_proj, mlp.gate_up_proj, mlp.down_proj


def _prebuild_one_row(layer: DecoderLayer, device: torch.device) -> None:
    """The fused one-row GEMV's variants (norm; residual; SiLU * up with residual) on a fused
    layer's projections, so that no decode step compiles them."""
    attention, mlp = layer.self_attn, layer.mlp
    hidden = attention.o_proj.out_features
    x = torch.zeros(1, hidden, device=device, dtype=torch.bfloat16)
    norm = (layer.input_layernorm.weight, layer.input_layernorm.eps)
    attention.qkv_proj.one_row(x, norm=norm)
    attention.o_proj.one_row(
        torch.zeros(1, attention.o_proj.in_features, device=device, dtype=x.dtype), residual=x
    )
    gate_up = mlp.gate_up_proj.one_row(x, norm=norm)
    mlp.down_proj.one_row(gate_up, gated=True, residual=x)


def safetensors_files(folder: Path) -> list[Path]:
    """The checkpoint's weight files: the shards its index (model.safetensors.index.json) names,
    else model.safetensors, else every *.safetensors but Mistral's consolidated.safetensors (the
    same weights in another naming, shipped beside the HF files)."""
    folder = Path(folder)
    index = folder / SAFETENSORS_INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelLoadError(f"Could not read the weights index {index}: {exc}.") from exc
        files = [folder / name for name in sorted(set(weight_map.values()))]
        missing = [path.name for path in files if not path.is_file()]
        if missing:
            raise ModelLoadError(
                f"The weights index {index} names shards that are not in {folder}: "
                f"{', '.join(missing)}."
            )
        return files
    if (folder / "model.safetensors").is_file():
        return [folder / "model.safetensors"]
    files = sorted(folder.glob("*.safetensors"))
    hf_files = [path for path in files if not path.name.startswith("consolidated")]
    if not files:
        raise ModelLoadError(f"No *.safetensors weights in {folder}.")
    return hf_files or files


def _read_state_dict(
    folder: Path, args: ModelArgs, *, device: torch.device, dtype: torch.dtype, weights: str
) -> dict[str, torch.Tensor]:
    raw: dict[str, torch.Tensor] = {}
    for path in safetensors_files(folder):
        with safe_open(str(path), framework="pt", device=str(device)) as handle:
            for name in handle.keys():  # noqa: SIM118 (safe_open is not a dict)
                key = name.removeprefix("model.")
                raw[key] = _cast(key, handle.get_tensor(name), dtype)
    return _prepare_state_dict(raw, args, folder, dtype=dtype, weights=weights)


def _cast(name: str, tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """FP8 weights as they are, their scales in fp32, every other tensor in the model's dtype."""
    if is_fp8(tensor):
        return tensor
    if name.rsplit(".", 1)[-1] in _SCALES:
        return tensor.float()
    return tensor.to(dtype)


def _prepare_state_dict(
    raw: dict[str, torch.Tensor],
    args: ModelArgs,
    folder: Path,
    *,
    dtype: torch.dtype,
    weights: str = "auto",
) -> dict[str, torch.Tensor]:
    if args.tie_word_embeddings:
        raw.pop("lm_head.weight", None)
    # Older Llama checkpoints store their RoPE frequencies; we compute them (init_rope).
    for name in [name for name in raw if name.endswith("rotary_emb.inv_freq")]:
        del raw[name]
    _normalize_fp8_scales(raw, args)
    # An FP8 tensor outside the projections (an lm_head a quantizer did not leave out) runs in
    # the model's dtype, as embeddings and the logits always do.
    for name in [n for n in raw if n.endswith(".weight") and is_fp8(raw[n])]:
        prefix = name.removesuffix(".weight")
        if name.rsplit(".", 2)[-2] not in _CHECKPOINT_PROJECTIONS:
            _dequantize_in_place(raw, prefix, dtype, _block_k(raw, prefix, args))
    try:
        state = _fuse_projections(raw, args, dtype)
    except KeyError as exc:
        raise ModelLoadError(f"The checkpoint in {folder} lacks the tensor {exc}.") from exc
    if weights == "fp8":
        _quantize_projections(state)
    return state


def _normalize_fp8_scales(raw: dict[str, torch.Tensor], args: ModelArgs) -> None:
    """Every FP8 weight's scale as fp32 rows under `<name>.weight_scale` (fp8.row_scales); the
    scales we do not use dropped."""
    for name in [n for n in raw if n.rsplit(".", 1)[-1] in _UNUSED_SCALES]:
        del raw[name]
    for name in [n for n in raw if n.endswith(".weight") and is_fp8(raw[n])]:
        prefix = name.removesuffix("weight")
        scale = raw.pop(prefix + "weight_scale_inv", None)
        if scale is None:
            scale = raw.pop(prefix + "weight_scale", None)
        if scale is None:
            raise ModelLoadError(f"The FP8 weight {name} has no weight_scale in the checkpoint.")
        out_features, in_features = raw[name].shape
        raw[prefix + "weight_scale"] = row_scales(
            scale, out_features, in_features, args.fp8_weight_block
        )


def _fuse_projections(
    raw: dict[str, torch.Tensor], args: ModelArgs, dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """q/k/v into qkv_proj and gate/up into gate_up_proj: one matrix product each."""
    for i in range(args.num_layers):
        prefix = f"layers.{i}."
        for fused, parts in (
            ("self_attn.qkv_proj", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
            ("mlp.gate_up_proj", ("mlp.gate_proj", "mlp.up_proj")),
        ):
            names = [prefix + part for part in parts]
            fp8_parts = [is_fp8(raw[f"{name}.weight"]) for name in names]
            if any(fp8_parts) and not all(fp8_parts):  # one part left unquantized: none is
                for name in names:
                    _dequantize_in_place(raw, name, dtype, _block_k(raw, name, args))
            tensor_kinds = ("weight", "weight_scale", "bias")
            for kind in tensor_kinds:
                if f"{names[0]}.{kind}" in raw:
                    raw[f"{prefix}{fused}.{kind}"] = torch.cat(
                        [raw.pop(f"{name}.{kind}") for name in names]
                    )
    return raw


def _dequantize_in_place(
    raw: dict[str, torch.Tensor], name: str, dtype: torch.dtype, block_k: int | None
) -> None:
    weight = raw[f"{name}.weight"]
    if is_fp8(weight):
        scale = raw.pop(f"{name}.weight_scale")
        raw[f"{name}.weight"] = dequantize(weight, scale, dtype, block_k)


def _block_k(state: dict[str, torch.Tensor], name: str, args: ModelArgs) -> int | None:
    """The inputs per scale of name's FP8 weight: None for row scales (quantized at load, or a
    checkpoint's per-tensor or per-row scales), else the checkpoint's block."""
    scale = state.get(f"{name}.weight_scale")
    if scale is None or scale.shape[1] == 1 or args.fp8_weight_block is None:
        return None
    return args.fp8_weight_block[1]


def _quantize_projections(state: dict[str, torch.Tensor]) -> None:
    """weights "fp8": each projection not stored in FP8 quantized with one scale per row."""
    for name in [n for n in state if n.endswith(".weight") and _is_projection(n)]:
        if not is_fp8(state[name]):
            weight, scale = quantize_rows(state[name])
            state[name] = weight
            state[name.removesuffix("weight") + "weight_scale"] = scale


def block_scales_as_rows(state: dict[str, torch.Tensor], args: ModelArgs) -> None:
    """Each FP8 weight with block scales requantized with one scale per row (fp8.requantize_rows)."""
    for name in [n for n in state if n.endswith(".weight_scale") and state[n].shape[1] > 1]:
        prefix = name.removesuffix(".weight_scale")
        weight_name = f"{prefix}.weight"
        block_k = _block_k(state, prefix, args)
        state[weight_name], state[name] = requantize_rows(state[weight_name], state[name], block_k)


def _is_projection(name: str) -> bool:
    return name.rsplit(".", 2)[-2] in FP8_PROJECTIONS


def _use_fp8_where_stored(
    model: LlamaModel, state: dict[str, torch.Tensor], args: ModelArgs
) -> None:
    """Swap each projection whose weight is FP8 in `state` for an Fp8Linear (still on meta)."""
    for name, module in list(model.named_modules()):
        weight = state.get(f"{name}.weight")
        if name.rsplit(".", 1)[-1] not in FP8_PROJECTIONS or weight is None or not is_fp8(weight):
            continue
        parent_name, child = name.rsplit(".", 1)
        with torch.device("meta"):
            fp8 = Fp8Linear(
                module.in_features,
                module.out_features,
                bias=module.bias is not None,
                block_k=_block_k(state, name, args),
            )
        setattr(model.get_submodule(parent_name), child, fp8)
