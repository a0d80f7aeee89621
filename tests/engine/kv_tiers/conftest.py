"""Engines with KV tiers over the tiny random Llama of tests/engine/conftest.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine import LLMEngine, SamplingParams
from tests.engine.conftest import tiny_engine

# The tiny Llama's KV: 2 layers x 2 heads x 16 dims x (K, V) x 4 bytes = 512 bytes a token.
KV_BYTES_PER_TOKEN = 512
# With an FP8 cache: 128 bytes of E4M3 values and 2 x 2 x 2 fp32 scales (one a token and head).
FP8_KV_BYTES_PER_TOKEN = 128 + 32
BLOCK_SIZE = 16
GREEDY = SamplingParams(max_new_tokens=6)


def document(num_tokens: int, seed: int) -> list[int]:
    return torch.randint(
        0, 256, (num_tokens,), generator=torch.Generator().manual_seed(seed)
    ).tolist()


def question(doc: list[int], seed: int) -> list[int]:
    return [*doc, *document(7, 1000 + seed)]


def tiered_engine(folder: Path, **overrides) -> LLMEngine:
    # SDPA: no kernel to build (the tiers do not depend on the attention backend).
    options = {"chunk_size": 64, "kv_cpu_tier_bytes": 0, "attention_backend": "sdpa"}
    options.update(overrides)
    return tiny_engine(folder, **options)


def kv_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.kv"))


@pytest.fixture(scope="module")
def llama(tiny_models) -> Path:
    folder, _ = tiny_models("llama")
    return folder


@pytest.fixture(scope="module")
def cold_engine(llama) -> LLMEngine:
    """No tiers, no prefix reuse: every answer computed from scratch."""
    return tiny_engine(llama, chunk_size=64, enable_prefix_cache=False, attention_backend="sdpa")
