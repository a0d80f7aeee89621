"""Convert a GGUF file once into a safetensors checkpoint folder, so later loads take seconds.

transformers dequantizes the GGUF on every load (~30 s for SmolLM2-135M); we keep the result
in model_cache_dir/<file stem>-<short content hash>/, written to a temporary folder first and
renamed into place, so a crash never leaves a half-written checkpoint behind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from engine.errors import ModelLoadError

# Hash the size and the first and last MiBs: enough to tell GGUF files apart, fast on 5 GB ones.
_HASH_EDGE_BYTES = 1 << 20
CHECKPOINT_FILES = ("config.json", "model.safetensors", "tokenizer.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def content_key(path: Path) -> str:
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as handle:
        digest.update(handle.read(_HASH_EDGE_BYTES))
        handle.seek(max(0, size - _HASH_EDGE_BYTES))
        digest.update(handle.read(_HASH_EDGE_BYTES))
    return f"{path.stem}-{digest.hexdigest()[:12]}"


def converted_folder(gguf_path: Path, cache_dir: Path) -> Path:
    """Where convert_gguf puts (or has put) the checkpoint of gguf_path."""
    return Path(cache_dir) / content_key(Path(gguf_path))


def convert_gguf(gguf_path: Path, cache_dir: Path) -> Path:
    """The safetensors folder of gguf_path, converting (fp32) on first use."""
    gguf_path = Path(gguf_path)
    _check_gguf(gguf_path)
    target = converted_folder(gguf_path, cache_dir)
    if all((target / name).exists() for name in CHECKPOINT_FILES):
        return target
    return _write_atomically(target, lambda tmp: _convert_into(gguf_path, tmp))


def ensure_tokenizer(gguf_or_folder: Path, cache_dir: Path) -> Path:
    """A folder with tokenizer.json (readable by the `tokenizers` library), converting only the
    tokenizer of a GGUF file (seconds, no weights), for workers that just count tokens."""
    source = Path(gguf_or_folder)
    if source.is_dir():
        if not (source / "tokenizer.json").exists():
            raise ModelLoadError(f"The model folder {source} has no tokenizer.json.")
        return source
    _check_gguf(source)
    full = converted_folder(source, cache_dir)
    if all((full / name).exists() for name in CHECKPOINT_FILES):
        return full
    target = full.with_name(full.name + "-tokenizer")
    if all((target / name).exists() for name in TOKENIZER_FILES):
        return target
    return _write_atomically(target, lambda tmp: _save_tokenizer(source, tmp))


def _check_gguf(path: Path) -> None:
    if not path.is_file():
        raise ModelLoadError(f"The GGUF file {path} does not exist.")


def _write_atomically(target: Path, write) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        write(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            if not target.exists():  # another process finished first otherwise
                raise
    except ModelLoadError:
        raise
    except Exception as exc:
        raise ModelLoadError(
            f"Could not convert {target.name} into {target.parent}: {exc}"
        ) from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _save_tokenizer(gguf_path: Path, out: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    tokenizer.save_pretrained(out)


def _convert_into(gguf_path: Path, out: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    _save_tokenizer(gguf_path, out)
    model = AutoModelForCausalLM.from_pretrained(
        gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32
    )
    config = model.config
    # The weights we write are plain fp32; the GGUF marker would make loaders dequantize again.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    if getattr(config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # the same tensor as the embeddings
    config.save_pretrained(out)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(out)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
