"""`longdoc model check`: our engine against transformers on tiny random checkpoints of each family
that transformers writes itself, on the CPU; a corrupted copy and an unsupported family fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from tests.engine.conftest import TINY_CONFIGS, save_byte_tokenizer, save_tiny_model
from worker.cli import cli

runner = CliRunner()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """Each family (TINY_CONFIGS), and a Qwen2 saved in shards with an index."""
    folders = {}
    for kind in TINY_CONFIGS:
        folders[kind] = tmp_path_factory.mktemp(f"check-{kind}")
        save_tiny_model(folders[kind], kind)
    folders["qwen2_sharded"] = tmp_path_factory.mktemp("check-qwen2-sharded")
    save_tiny_model(folders["qwen2_sharded"], "qwen2", max_shard_size="40KB")
    return folders


def _check(folder: Path, *extra: str):
    return runner.invoke(cli, ["model", "check", str(folder), "--tokens", "8", *extra])


@pytest.mark.parametrize("kind", [*sorted(TINY_CONFIGS), "qwen2_sharded"])
def test_each_family_agrees_with_transformers(checkpoints, kind) -> None:
    result = _check(checkpoints[kind])
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    assert "Greedy outputs agree: all 8 tokens." in output
    assert "Largest logit difference:" in output and ": ok." in output
    assert "Our engine and transformers agree on this checkpoint." in output


def test_a_corrupted_copy_fails(checkpoints, tmp_path) -> None:
    original = checkpoints["qwen2"]
    corrupted = tmp_path / "corrupted"
    shutil.copytree(original, corrupted)
    weights = load_file(corrupted / "model.safetensors")
    # One row of a middle projection off by a little: the kind of damage a bad copy does.
    weights["model.layers.1.mlp.down_proj.weight"][:, :8] += 0.05
    save_file(weights, corrupted / "model.safetensors", metadata={"format": "pt"})

    compared = _check(corrupted, "--reference", str(original))
    assert compared.exit_code == 1, compared.output
    assert "disagree" in compared.output and "too large" in compared.output

    del weights["model.layers.0.self_attn.k_proj.bias"]
    save_file(weights, corrupted / "model.safetensors", metadata={"format": "pt"})
    missing = _check(corrupted)
    assert missing.exit_code == 1
    assert "Our engine cannot run" in missing.output and "k_proj" in missing.output


def test_an_unsupported_family_is_a_clear_failure(tmp_path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=260, n_embd=64, n_layer=2, n_head=4, n_positions=128)
    GPT2LMHeadModel(config).save_pretrained(tmp_path)
    save_byte_tokenizer(tmp_path)
    result = _check(tmp_path)
    assert result.exit_code == 1
    output = " ".join(result.output.split())
    assert "GPT2LMHeadModel" in output and "llama, mistral, qwen2, qwen3" in output


def test_bad_options_are_sentences(checkpoints) -> None:
    result = _check(checkpoints["llama"], "--device", "tpu")
    assert result.exit_code == 1 and "cpu or cuda" in result.output
    missing = _check(checkpoints["llama"].parent / "nowhere")
    assert missing.exit_code == 1 and "config.json" in missing.output
