"""LongDoc's inference engine: long prompts prefilled chunk by chunk into a paged KV cache.

Imports nothing else of ours and reads no environment variables; everything comes in an
EngineConfig.
"""

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
