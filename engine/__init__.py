"""LongDoc's inference engine: long prompts prefilled chunk by chunk into a paged KV cache.

Imports nothing else of ours and reads no environment variables; everything comes in an
EngineConfig.
"""

from engine.config import EngineConfig
from engine.errors import (
    EngineError,
    ModelLoadError,
    OutOfMemoryError,
    PromptTooLongError,
    UnsupportedModelError,
)
from engine.gguf_convert import convert_gguf, ensure_tokenizer
from engine.llm_engine import GenerationResult, LLMEngine
from engine.sampling_params import SamplingParams
from engine.stats import RequestStats

__all__ = [
    "EngineConfig",
    "EngineError",
    "GenerationResult",
    "LLMEngine",
    "ModelLoadError",
    "OutOfMemoryError",
    "PromptTooLongError",
    "RequestStats",
    "SamplingParams",
    "UnsupportedModelError",
    "convert_gguf",
    "ensure_tokenizer",
]
