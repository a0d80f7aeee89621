"""What the pipelines need from a model, as protocols: the worker passes in the engine's side of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class TokenCounter(Protocol):
    """Counts tokens of the model's tokenizer for each text (no special tokens)."""

    def __call__(self, texts: Sequence[str], /) -> list[int]: ...
