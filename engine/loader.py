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

SAFETENSORS_INDEX = "model.safetensors.index.json"


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
) -> tuple[LlamaModel, ModelArgs]:
    """Build on `meta` and assign the checkpoint's tensors (no random init, no second copy).

    state_dict: tensors in checkpoint naming to use instead of folder's *.safetensors (added for
    the benchmarks, which hand over an 8B model's weights already on the GPU); tensors already
    on `device` in `dtype` are kept as they are, not copied.
    """
    args = ModelArgs.from_folder(folder)
    with torch.device("meta"):
        model = LlamaModel(args)
    if state_dict is None:
        state = _read_state_dict(folder, args, device=device, dtype=dtype)
    else:
        raw = {
            name.removeprefix("model."): t.to(device=device, dtype=dtype)
            for name, t in state_dict.items()
        }
        state = _prepare_state_dict(raw, args, folder)
    try:
        model.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as exc:
        raise ModelLoadError(
            f"The checkpoint in {folder} does not match its config: {exc}"
        ) from exc
    model.init_rope(device)
    return model.eval().requires_grad_(False), args


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
    folder: Path, args: ModelArgs, *, device: torch.device, dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    raw: dict[str, torch.Tensor] = {}
    for path in safetensors_files(folder):
        with safe_open(str(path), framework="pt", device=str(device)) as handle:
            for name in handle.keys():  # noqa: SIM118 (safe_open is not a dict)
                key = name.removeprefix("model.")
                raw[key] = handle.get_tensor(name).to(dtype)
    return _prepare_state_dict(raw, args, folder)


def _prepare_state_dict(
    raw: dict[str, torch.Tensor], args: ModelArgs, folder: Path
) -> dict[str, torch.Tensor]:
    if args.tie_word_embeddings:
        raw.pop("lm_head.weight", None)
    # Older Llama checkpoints store their RoPE frequencies; we compute them (init_rope).
    for name in [name for name in raw if name.endswith("rotary_emb.inv_freq")]:
        del raw[name]
    try:
        return _fuse_projections(raw, args.num_layers)
    except KeyError as exc:
        raise ModelLoadError(f"The checkpoint in {folder} lacks the tensor {exc}.") from exc


def _fuse_projections(raw: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    """q/k/v into qkv_proj and gate/up into gate_up_proj: one matrix product each."""
    for i in range(num_layers):
        prefix = f"layers.{i}."
        for kind in ("weight", "bias"):
            names = [f"{prefix}self_attn.{p}_proj.{kind}" for p in ("q", "k", "v")]
            if kind == "weight" or names[0] in raw:
                raw[f"{prefix}self_attn.qkv_proj.{kind}"] = torch.cat([raw.pop(n) for n in names])
            gate_up = [f"{prefix}mlp.{p}_proj.{kind}" for p in ("gate", "up")]
            if kind == "weight" or gate_up[0] in raw:
                raw[f"{prefix}mlp.gate_up_proj.{kind}"] = torch.cat([raw.pop(n) for n in gate_up])
    return raw
