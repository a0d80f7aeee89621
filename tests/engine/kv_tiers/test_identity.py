"""The namespace: anything the KV depends on besides the tokens changes it."""

from __future__ import annotations

import torch

from engine.kv_tiers.identity import files_fingerprint, state_dict_fingerprint, tier_namespace

BASE = {
    "weights": "w",
    "tokenizer_and_config": "t",
    "dtype": torch.bfloat16,
    "kv_dtype": torch.bfloat16,
    "block_size": 16,
    "kv_block_shape": (2, 30, 16, 3, 64),
}


def test_every_part_changes_the_namespace() -> None:
    changes = {
        "weights": "w2",
        "tokenizer_and_config": "t2",
        "dtype": torch.float32,
        "kv_dtype": torch.float16,
        "block_size": 32,
        "kv_block_shape": (2, 30, 16, 3, 128),
    }
    base = tier_namespace(**BASE)
    assert base == tier_namespace(**BASE)
    for name, value in changes.items():
        assert tier_namespace(**(BASE | {name: value})) != base, name
    # Weights quantized to FP8 at load write other KV than the same files in bf16; "auto" (as
    # the checkpoint holds them) leaves the namespaces of caches written before it as they were.
    assert tier_namespace(**BASE, weights_format="fp8") != base
    assert tier_namespace(**BASE, weights_format="auto") == base


def test_fingerprints_see_the_weights_and_the_tokenizer(tmp_path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"\x08" + b"\0" * 7 + b"{}      " + b"a" * 50000)
    (tmp_path / "tokenizer.json").write_text("{}")
    first = files_fingerprint(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"x": 1}')
    second = files_fingerprint(tmp_path)
    data = bytearray((tmp_path / "model.safetensors").read_bytes())
    data[40000] = ord("b")
    (tmp_path / "model.safetensors").write_bytes(bytes(data))
    third = files_fingerprint(tmp_path)
    assert len({first, second, third}) == 3
    weights = {"w": torch.ones(4)}
    assert state_dict_fingerprint(weights) != state_dict_fingerprint({"w": torch.zeros(4)})
