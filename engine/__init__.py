"""LongDoc's inference engine: long prompts prefilled chunk by chunk into a paged KV cache.

Imports nothing else of ours and reads no environment variables; everything comes in an
EngineConfig.
"""

import importlib
from typing import TYPE_CHECKING, Any

# Names and the module each lives in, imported when first used: `from engine import EngineError`
# does not load torch (the CLI's commands that run no model start in a fraction of the time).
_HOMES = {
    "EngineConfig": "engine.config",
    "IncrementalDetokenizer": "engine.detokenizer",
    "StopStrings": "engine.detokenizer",
    "EngineError": "engine.errors",
    "ModelLoadError": "engine.errors",
    "OutOfMemoryError": "engine.errors",
    "PromptTooLongError": "engine.errors",
    "UnsupportedModelError": "engine.errors",
    "convert_gguf": "engine.gguf_convert",
    "ensure_tokenizer": "engine.gguf_convert",
    "GenerationResult": "engine.llm_engine",
    "LLMEngine": "engine.llm_engine",
    "Loop": "engine.loop_detector",
    "LoopDetector": "engine.loop_detector",
    "Sampler": "engine.sampler",
    "SamplingParams": "engine.sampling_params",
    "SamplingRow": "engine.sampling_params",
    "RequestStats": "engine.stats",
}

if TYPE_CHECKING:
    from engine.config import EngineConfig
    from engine.detokenizer import IncrementalDetokenizer, StopStrings
    from engine.errors import (
        EngineError,
        ModelLoadError,
        OutOfMemoryError,
        PromptTooLongError,
        UnsupportedModelError,
    )
    from engine.gguf_convert import convert_gguf, ensure_tokenizer
    from engine.llm_engine import GenerationResult, LLMEngine
    from engine.loop_detector import Loop, LoopDetector
    from engine.sampler import Sampler
    from engine.sampling_params import SamplingParams, SamplingRow
    from engine.stats import RequestStats


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "EngineConfig",
    "EngineError",
    "GenerationResult",
    "IncrementalDetokenizer",
    "LLMEngine",
    "Loop",
    "LoopDetector",
    "ModelLoadError",
    "OutOfMemoryError",
    "PromptTooLongError",
    "RequestStats",
    "Sampler",
    "SamplingParams",
    "SamplingRow",
    "StopStrings",
    "UnsupportedModelError",
    "convert_gguf",
    "ensure_tokenizer",
]
