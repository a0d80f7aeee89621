"""ModelArgs: the few numbers our Llama-family implementation needs, read from a HF config.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import ModelLoadError, UnsupportedModelError
from engine.models.fp8 import fp8_weight_block

# config.json `model_type` -> what differs from plain Llama, as transformers builds each family:
# which projections have biases (None: as config.json's `attention_bias` / `mlp_bias` say, False
# when absent; True/False: always, whatever it says) and whether q and k are RMS-normed per head.
SUPPORTED_MODEL_TYPES: dict[str, dict[str, Any]] = {
    "llama": {"qkv_bias": None, "o_bias": None, "mlp_bias": None},  # Llama 2/3.x, SmolLM2
    "mistral": {"qkv_bias": False, "o_bias": False, "mlp_bias": False},
    "qwen2": {"qkv_bias": True, "o_bias": False, "mlp_bias": False},  # Qwen2, Qwen2.5
    "qwen3": {"qkv_bias": None, "o_bias": None, "mlp_bias": False, "qk_norm": True},
}
SUPPORTED_FAMILIES = "Llama 2/3/3.1/3.2/3.3, SmolLM2, Mistral, Qwen2/2.5, Qwen3"
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
    attention_bias: bool = False  # q, k and v projections
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    # The sliding window the checkpoint declares, which we do not apply: the context is capped
    # at it instead (max_context), where full attention is the same computation.
    ignored_sliding_window: int | None = None
    # An FP8 checkpoint (engine/models/fp8.py), and its scales' block (rows, cols) if blocked.
    is_fp8: bool = False
    fp8_weight_block: tuple[int, int] | None = None

    @property
    def max_context(self) -> int:
        """The most tokens (prompt and answer) this model computes exactly as it was trained."""
        if self.ignored_sliding_window is None:
            return self.max_position_embeddings
        return min(self.max_position_embeddings, self.ignored_sliding_window)

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any]) -> ModelArgs:
        model_type = cfg.get("model_type", "")
        if model_type not in SUPPORTED_MODEL_TYPES:
            archs = ", ".join(cfg.get("architectures") or [model_type or "unknown"])
            raise UnsupportedModelError(
                f"The model's architecture ({archs}) is not supported; the engine runs "
                f"{', '.join(sorted(SUPPORTED_MODEL_TYPES))} checkpoints ({SUPPORTED_FAMILIES})."
            )
        _refuse_what_we_do_not_compute(cfg)
        quantization = cfg.get("quantization_config")
        # Raises for any quantization other than FP8 weights.
        weight_block = fp8_weight_block(quantization) if quantization else None
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
            attention_bias=_bias(extra["qkv_bias"], cfg.get("attention_bias")),
            o_bias=_bias(extra["o_bias"], cfg.get("attention_bias")),
            mlp_bias=_bias(extra["mlp_bias"], cfg.get("mlp_bias")),
            qk_norm=bool(extra.get("qk_norm", False)),
            ignored_sliding_window=_sliding_window(cfg),
            is_fp8=bool(quantization),
            fp8_weight_block=weight_block,
        )

    @classmethod
    def from_folder(cls, folder: Path) -> ModelArgs:
        path = Path(folder) / "config.json"
        try:
            cfg = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"Could not read the model configuration {path}: {exc}.") from exc
        return cls.from_hf_config(cfg)


def _bias(fixed: bool | None, configured: Any) -> bool:
    return bool(configured) if fixed is None else fixed


def _refuse_what_we_do_not_compute(cfg: dict[str, Any]) -> None:
    """Settings of a supported family that would change the computation in ways we do not
    implement: an error, never a wrong answer."""
    if cfg.get("hidden_act", "silu") != "silu":
        raise UnsupportedModelError(
            f"The model uses the activation {cfg['hidden_act']!r}; the engine implements "
            "SwiGLU (silu) only."
        )
    layer_types = set(cfg.get("layer_types") or ())
    if layer_types - {"full_attention", "sliding_attention"}:
        raise UnsupportedModelError(
            f"The model uses the attention layer types {sorted(layer_types)}; the engine runs "
            "full (and, within the window, sliding-window) attention only."
        )


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
    """The window the checkpoint asks for, which we do not apply: we attend to the whole context
    and cap the context at the window (ModelArgs.max_context), within which the two are the same
    computation.

    Mistral v0.1 declares a 4096-token window (later Mistral releases declare none). Qwen2 and
    Qwen3 declare one but turn it off (`use_sliding_window: false`); when on, transformers applies
    it to some layers only, and the cap covers those.
    """
    window = cfg.get("sliding_window")
    if not window or cfg.get("use_sliding_window") is False:
        return None
    layer_types = cfg.get("layer_types")
    if layer_types and "sliding_attention" not in layer_types:
        return None
    return int(window)
