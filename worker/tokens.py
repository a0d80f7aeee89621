"""Token counting with the model's own tokenizer, without loading the model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer

from engine.gguf_convert import ensure_tokenizer


class TokenizerCounter:
    """A `pipelines.protocols.TokenCounter` over a tokenizer.json (Rust tokenizers, batched)."""

    def __init__(self, tokenizer_json: Path) -> None:
        self._tokenizer = Tokenizer.from_file(str(tokenizer_json))

    def __call__(self, texts: Sequence[str], /) -> list[int]:
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [len(encoding.ids) for encoding in encodings]


def token_counter_for(model_path: Path, cache_dir: Path) -> TokenizerCounter:
    """The counter of the model at model_path (a .gguf is converted once, tokenizer only)."""
    folder = ensure_tokenizer(model_path, cache_dir)
    return TokenizerCounter(folder / "tokenizer.json")
