"""LLMEngine(state_dict=...): weights handed over in memory give the engine loaded from files."""

from __future__ import annotations

import torch

from engine import EngineConfig, LLMEngine


def test_state_dict_engine_matches_folder_engine(tiny_models) -> None:
    folder, hf_model = tiny_models("llama3_rope")
    options = {"device": "cpu", "min_chunk_size": 1, "max_kv_cache_bytes": 4 << 20}
    from_files = LLMEngine(EngineConfig(model_path=folder, **options))
    state = dict(hf_model.state_dict())
    in_memory = LLMEngine(EngineConfig(model_path=folder, **options), state_dict=state)
    prompt = list(range(3, 60))
    expected = from_files.prefill_logits(prompt, chunk_size=16, all_positions=True)
    got = in_memory.prefill_logits(prompt, chunk_size=16, all_positions=True)
    assert torch.equal(got, expected)
    # Tensors already in place are used as they are, not copied.
    model = in_memory._placement.runner.model
    assert model.embed_tokens.weight.data_ptr() == state["model.embed_tokens.weight"].data_ptr()
