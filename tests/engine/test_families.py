"""Checkpoint layouts and settings of the families we run, written by transformers itself: shards
with an index, the checkpoint's stop tokens and chat template, Mistral's sliding window, and the
clear refusal of what we do not run. (Logits and greedy outputs of each family against
transformers: tests/engine/test_models.py, over TINY_CONFIGS.)"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from engine import (
    EngineError,
    ModelLoadError,
    PromptTooLongError,
    SamplingParams,
    UnsupportedModelError,
)
from engine.loader import SAFETENSORS_INDEX, load_model, safetensors_files
from engine.models import ModelArgs
from engine.tokenizer import ChatTokenizer
from tests.engine.conftest import EOS_ID, save_byte_tokenizer, save_tiny_model, tiny_engine
from tests.engine.test_models import MAX_ABS_DIFF, _reference_greedy, _reference_logits

PROMPT = list(b"The parties agree that the contract ends on")


def _random_prompt(length: int) -> list[int]:
    generator = torch.Generator().manual_seed(3)
    return torch.randint(0, 256, (length,), generator=generator).tolist()


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-qwen3-sharded")
    hf_model = save_tiny_model(folder, "qwen3", seed=5, max_shard_size="40KB")
    return folder, hf_model


def test_sharded_checkpoint_loads_the_shards_its_index_names(sharded) -> None:
    folder, hf_model = sharded
    weight_map = json.loads((folder / SAFETENSORS_INDEX).read_text())["weight_map"]
    shards = sorted(set(weight_map.values()))
    assert len(shards) > 1 and not (folder / "model.safetensors").exists()
    # Mistral ships consolidated.safetensors (other names, same weights) beside its shards.
    save_file({"tok_embeddings.weight": torch.zeros(4, 4)}, folder / "consolidated.safetensors")
    assert [p.name for p in safetensors_files(folder)] == shards
    engine = tiny_engine(folder, enable_prefix_cache=False)
    prompt = _random_prompt(120)
    diff = engine.prefill_logits(prompt, all_positions=True) - _reference_logits(hf_model, prompt)
    assert diff.abs().max().item() <= MAX_ABS_DIFF
    expected = _reference_greedy(hf_model, PROMPT, 24, {EOS_ID})
    assert engine.generate(PROMPT, SamplingParams(max_new_tokens=24)).token_ids == expected


def test_a_shard_missing_from_the_folder_is_a_clear_error(sharded, tmp_path) -> None:
    folder, _ = sharded
    for path in folder.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    shard = sorted(tmp_path.glob("model-*.safetensors"))[-1]
    shard.unlink()
    with pytest.raises(ModelLoadError, match=f"names shards that are not in .*{shard.name}"):
        load_model(tmp_path, device=torch.device("cpu"), dtype=torch.float32)


def test_stop_tokens_and_chat_template_are_the_checkpoints_own(tiny_models, tmp_path) -> None:
    source, hf_model = tiny_models("mistral")
    for path in source.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    greedy = _reference_greedy(hf_model, PROMPT, 24, set())
    stop_at = next(i for i in range(3, 24) if greedy[i] not in greedy[:i] and greedy[i] != EOS_ID)
    # generation_config.json names a list of stop tokens (Llama 3.1 and Qwen2.5 name two or three).
    (tmp_path / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [EOS_ID, greedy[stop_at]], "do_sample": False})
    )
    (tmp_path / "chat_template.jinja").write_text(
        "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}[assistant] {% endif %}"
    )
    assert ChatTokenizer.load(tmp_path).eos_token_ids == {EOS_ID, greedy[stop_at]}
    engine = tiny_engine(tmp_path, enable_prefix_cache=False)
    result = engine.generate(PROMPT, SamplingParams(max_new_tokens=24))
    assert result.token_ids == greedy[:stop_at] and result.finish_reason == "stop"
    ids = engine.apply_chat_template([{"role": "user", "content": "Hi."}])
    assert engine.tokenizer.decode(ids) == "[user] Hi.\n[assistant] "


def test_a_tokenizer_without_chat_template_is_a_clear_error(tiny_models) -> None:
    folder, _ = tiny_models("llama")
    chat = ChatTokenizer.load(folder)
    chat.tokenizer.chat_template = None
    with pytest.raises(EngineError, match="no chat template"):
        chat.apply_chat_template([{"role": "user", "content": "Hi."}])


def test_sliding_window_caps_the_context_where_full_attention_is_the_same(tmp_path) -> None:
    hf_model = save_tiny_model(tmp_path, "mistral", seed=2, sliding_window=32)
    save_byte_tokenizer(tmp_path)
    engine = tiny_engine(tmp_path, enable_prefix_cache=False)
    assert engine.max_model_len == 32 and engine.model_args.max_context == 32
    prompt = _random_prompt(20)
    diff = engine.prefill_logits(prompt, all_positions=True) - _reference_logits(hf_model, prompt)
    assert diff.abs().max().item() <= MAX_ABS_DIFF
    # The answer stops at the window: 12 tokens, as transformers' (within the window) greedy.
    result = engine.generate(prompt, SamplingParams(max_new_tokens=30, ignore_eos=True))
    expected = _reference_greedy(hf_model, prompt, 12, set())  # up to its end-of-sequence
    assert len(result.token_ids) == 12 and result.token_ids[: len(expected)] == expected
    with pytest.raises(PromptTooLongError, match="sliding attention window"):
        engine.generate(_random_prompt(40), SamplingParams(max_new_tokens=4))
    with pytest.raises(UnsupportedModelError, match="sliding window of 32 tokens"):
        tiny_engine(tmp_path, max_model_len=64)


def test_an_architecture_we_do_not_run_is_refused_naming_those_we_do(tmp_path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=260, n_embd=64, n_layer=2, n_head=4, n_positions=128)
    GPT2LMHeadModel(config).save_pretrained(tmp_path)
    save_byte_tokenizer(tmp_path)
    with pytest.raises(
        UnsupportedModelError, match=r"GPT2LMHeadModel.*llama, mistral, qwen2, qwen3.*Qwen3"
    ):
        tiny_engine(tmp_path)


BASE = {
    "vocab_size": 10,
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
}


def test_biases_follow_each_familys_transformers_class() -> None:
    def biases(model_type: str, **cfg) -> tuple[bool, bool, bool]:
        args = ModelArgs.from_hf_config(BASE | {"model_type": model_type} | cfg)
        return args.attention_bias, args.o_bias, args.mlp_bias

    assert biases("llama") == (False, False, False)
    assert biases("llama", attention_bias=True, mlp_bias=True) == (True, True, True)
    assert biases("qwen2") == (True, False, False)  # Qwen2 always has q/k/v biases, no o bias
    assert biases("qwen3", attention_bias=True) == (True, True, False)
    assert biases("mistral", attention_bias=True) == (False, False, False)  # Mistral has none
    assert ModelArgs.from_hf_config(BASE | {"model_type": "qwen3"}).qk_norm


def test_settings_that_change_the_computation_are_refused() -> None:
    awq = {"quant_method": "awq", "bits": 4}
    with pytest.raises(UnsupportedModelError, match=r"quantized \(awq\)"):
        ModelArgs.from_hf_config(BASE | {"model_type": "llama", "quantization_config": awq})
    with pytest.raises(UnsupportedModelError, match="gelu"):
        ModelArgs.from_hf_config(BASE | {"model_type": "llama", "hidden_act": "gelu"})
    with pytest.raises(UnsupportedModelError, match="chunked_attention"):
        ModelArgs.from_hf_config(
            BASE | {"model_type": "llama", "layer_types": ["chunked_attention"]}
        )
    # Qwen's declared but disabled window is no cap; an enabled one on some layers is.
    qwen = BASE | {"model_type": "qwen2", "sliding_window": 4096, "max_position_embeddings": 32768}
    assert ModelArgs.from_hf_config(qwen | {"use_sliding_window": False}).max_context == 32768
    on = ModelArgs.from_hf_config(
        qwen | {"use_sliding_window": True, "layer_types": ["full_attention", "sliding_attention"]}
    )
    assert on.max_context == 4096


def test_llama3_frequencies_are_transformers_own() -> None:
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from engine.models.rope import inv_frequencies

    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    config = LlamaConfig(
        hidden_size=4096,
        num_attention_heads=32,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling=scaling,
    )
    expected, attention_factor = ROPE_INIT_FUNCTIONS["llama3"](config, torch.device("cpu"))
    args = ModelArgs.from_hf_config(json.loads(config.to_json_string()))
    assert args.rope_scaling["factor"] == 8.0 and attention_factor == 1.0
    ours = inv_frequencies(args.head_dim, args.rope_theta, args.rope_scaling)
    assert torch.allclose(ours, expected.float(), rtol=1e-6, atol=0)
    assert not torch.allclose(ours, inv_frequencies(128, 500000.0, {}))
