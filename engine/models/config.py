"""ModelArgs: the few numbers our Llama-family implementation needs, read from a HF config.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import ModelLoadError, UnsupportedModelError

# config.json `model_type` -> what differs from plain Llama.
SUPPORTED_MODEL_TYPES: dict[str, dict[str, Any]] = {
    "llama": {},  # Llama 2/3/3.1/3.2, SmolLM2, TinyLlama
    "mistral": {},
    "qwen2": {"attention_bias": True},
    "qwen3": {"qk_norm": True},
}
SUPPORTED_ROPE_TYPES = ("default", "llama3", "linear")


@dataclass(frozen=True)
class ModelArgs:
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    max_position_embeddings: int
    rope_theta: float = 10000.0
    # Empty for plain RoPE; otherwise {"rope_type": "llama3" | "linear", "factor": ..., ...}.
    rope_scaling: dict[str, Any] = field(default_factory=dict)
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    qk_norm: bool = False
    # Set when the checkpoint declares a sliding window we do not apply (see from_hf_config).
    ignored_sliding_window: int | None = None

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any]) -> ModelArgs:
        model_type = cfg.get("model_type", "")
        if model_type not in SUPPORTED_MODEL_TYPES:
            archs = ", ".join(cfg.get("architectures") or [model_type or "unknown"])
            raise UnsupportedModelError(
                f"The model's architecture ({archs}) is not supported; the engine runs "
                f"{', '.join(sorted(SUPPORTED_MODEL_TYPES))} checkpoints (Llama 2/3, SmolLM2, "
                "Mistral, Qwen2/2.5, Qwen3)."
            )
        if cfg.get("hidden_act", "silu") != "silu":
            raise UnsupportedModelError(
                f"The model uses the activation {cfg['hidden_act']!r}; the engine implements SwiGLU (silu) only."
            )
        extra = SUPPORTED_MODEL_TYPES[model_type]
        num_heads = cfg["num_attention_heads"]
        rope_theta, rope_scaling = _rope_from_config(cfg)
        return cls(
            model_type=model_type,
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=num_heads,
            num_kv_heads=cfg.get("num_key_value_heads") or num_heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // num_heads,
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            max_position_embeddings=cfg.get("max_position_embeddings", 4096),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            attention_bias=bool(cfg.get("attention_bias", extra.get("attention_bias", False))),
            qk_norm=bool(extra.get("qk_norm", False)),
            ignored_sliding_window=_sliding_window(cfg),
        )

    @classmethod
    def from_folder(cls, folder: Path) -> ModelArgs:
        path = Path(folder) / "config.json"
        try:
            cfg = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"Could not read the model configuration {path}: {exc}.") from exc
        return cls.from_hf_config(cfg)


def _rope_from_config(cfg: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    # transformers 5 writes `rope_parameters` (theta inside); older checkpoints write
    # `rope_theta` + `rope_scaling` at the top level.
    params = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
    theta = float(params.pop("rope_theta", cfg.get("rope_theta", 10000.0)))
    rope_type = params.pop("rope_type", None) or params.pop("type", None) or "default"
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise UnsupportedModelError(
            f"The model uses RoPE scaling {rope_type!r}; the engine supports "
            f"{', '.join(SUPPORTED_ROPE_TYPES)}."
        )
    if rope_type == "default":
        return theta, {}
    params["rope_type"] = rope_type
    if rope_type == "llama3":
        params.setdefault("original_max_position_embeddings", cfg.get("max_position_embeddings"))
    return theta, params


def _sliding_window(cfg: dict[str, Any]) -> int | None:
    """The window the checkpoint asks for and we ignore: we always attend to the full context.

    Mistral v0.1 declares a 4096-token window; within 4096 tokens full attention is identical, and
    beyond it full attention is what later Mistral releases use. Qwen2 declares a window but turns
    it off (`use_sliding_window: false`).
    """
    window = cfg.get("sliding_window")
    if not window or cfg.get("use_sliding_window") is False:
        return None
    return int(window)
