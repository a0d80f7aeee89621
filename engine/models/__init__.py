"""Our PyTorch implementation of the Llama family, and its configuration."""

from engine.models.config import SUPPORTED_MODEL_TYPES, ModelArgs
from engine.models.llama import AttentionFn, LlamaModel

__all__ = ["SUPPORTED_MODEL_TYPES", "AttentionFn", "LlamaModel", "ModelArgs"]
