"""The default model's real tokenizer, converted once per test session."""

from pathlib import Path

import pytest

from worker.model_source import find_default_gguf
from worker.tokens import TokenizerCounter, token_counter_for


@pytest.fixture(scope="session")
def model_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(scope="session")
def count_tokens(model_cache_dir: Path) -> TokenizerCounter:
    return token_counter_for(find_default_gguf(), model_cache_dir)
