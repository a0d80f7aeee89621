import dataclasses
from pathlib import Path

import pytest

from engine.config import DTYPE_NUM_BYTES, EngineConfig, MiB


def test_defaults_match_the_contract():
    config = EngineConfig(model_path=Path("models/llama"))
    assert config.block_size == 16
    assert config.min_chunk_size == 32
    assert config.max_chunk_size == 8192
    assert config.memory_headroom_bytes == 256 * MiB
    assert config.oom_policy == "fail"
    assert config.enable_prefix_cache
    assert not config.is_gguf
    assert DTYPE_NUM_BYTES["bfloat16"] == 2


def test_config_is_frozen_and_paths_are_coerced():
    config = EngineConfig(model_path="m.GGUF", model_cache_dir="cache")
    assert config.model_path == Path("m.GGUF")
    assert config.model_cache_dir == Path("cache")
    assert config.is_gguf
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.block_size = 32  # type: ignore[misc]


def test_gguf_needs_a_cache_dir():
    with pytest.raises(ValueError, match="model_cache_dir"):
        EngineConfig(model_path=Path("model.gguf"))


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "cuda:12"])
def test_valid_devices(device):
    assert EngineConfig(model_path=Path("m"), device=device).device == device


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"device": "gpu"}, "device"),
        ({"device": "cuda:"}, "device"),
        ({"dtype": "fp8"}, "dtype"),
        ({"attention_backend": "xformers"}, "attention_backend"),
        ({"oom_policy": "retry"}, "oom_policy"),
        ({"block_size": 0}, "block_size"),
        ({"block_size": 16.0}, "block_size"),
        ({"max_kv_cache_bytes": 0}, "max_kv_cache_bytes"),
        ({"kv_cache_memory_fraction": 0.0}, "kv_cache_memory_fraction"),
        ({"kv_cache_memory_fraction": 1.5}, "kv_cache_memory_fraction"),
        ({"max_model_len": -1}, "max_model_len"),
        ({"min_chunk_size": 0}, "min_chunk_size"),
        ({"min_chunk_size": 512, "max_chunk_size": 256}, "min_chunk_size"),
        ({"chunk_size": 16}, "chunk_size"),
        ({"memory_headroom_bytes": -1}, "memory_headroom_bytes"),
        ({"seed": -1}, "seed"),
    ],
)
def test_invalid_values_are_refused_with_a_sentence(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EngineConfig(model_path=Path("m"), **kwargs)


def test_fixed_chunk_size_may_exceed_max_chunk_size():
    config = EngineConfig(model_path=Path("m"), chunk_size=16384)
    assert config.chunk_size == 16384
