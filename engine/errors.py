"""The engine's typed errors: each carries a sentence a person can act on."""

from __future__ import annotations


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class UnsupportedModelError(EngineError):
    """The checkpoint's architecture is not one the engine implements."""


class ModelLoadError(EngineError):
    """A checkpoint folder or GGUF file could not be read or converted."""


class PromptTooLongError(EngineError):
    """The prompt (plus the tokens to generate) exceeds what the model or the KV cache holds."""


class OutOfMemoryError(EngineError):
    """The device ran out of memory even at the smallest chunk size and the policy is `fail`."""
