"""What a block's KV is valid for: the namespace every lower-tier block is filed under.

Two engines reuse each other's blocks only when their namespaces are equal: same weights, same
dtype and KV dtype, same block size, same model shape, same tokenizer and config files. The
block's own key is then the chain hash of its tokens (engine/block_manager.py), and a hit also
compares the block's token ids, as the device's prefix cache does.

The weights are fingerprinted, not hashed whole (an 8B checkpoint is 16 GB): each safetensors
file's name, size and header (every tensor's name, dtype, shape and offsets), and 64 KiB read at
16 places spread over its data. A fine-tune of the same shape differs at every one of them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

import torch

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
_MAX_SMALL_FILE_BYTES = 64 * 1024 * 1024  # tokenizer.json of a large vocabulary is ~20 MB
_NUM_SAMPLES = 16
_SAMPLE_BYTES = 4096


def files_fingerprint(checkpoint_dir: Path) -> str:
    """sha256 over the checkpoint folder's small files whole (config, tokenizer, chat template)
    and its weight files sampled (module doc)."""
    digest = hashlib.sha256()
    for path in sorted(Path(checkpoint_dir).iterdir()):
        if not path.is_file():
            continue
        size = path.stat().st_size
        digest.update(f"{path.name}\0{size}\0".encode())
        if path.suffix.lower() in _WEIGHT_SUFFIXES:
            digest.update(_sampled(path, size))
        elif size <= _MAX_SMALL_FILE_BYTES:
            digest.update(path.read_bytes())
    return digest.hexdigest()


def state_dict_fingerprint(state_dict: Mapping[str, torch.Tensor]) -> str:
    """sha256 over the tensors' names, shapes, dtypes and first 256 values: weights handed over in
    memory (benchmarks) have no files to read."""
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name]
        digest.update(f"{name}\0{tuple(tensor.shape)}\0{tensor.dtype}\0".encode())
        head = tensor.detach().reshape(-1)[:256].to("cpu").contiguous()
        digest.update(head.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def tier_namespace(
    *,
    weights: str,
    tokenizer_and_config: str,
    dtype: torch.dtype,
    kv_dtype: torch.dtype,
    block_size: int,
    kv_block_shape: tuple[int, ...],
    weights_format: str = "auto",
) -> str:
    """32 hex digits naming everything a block's KV depends on besides its tokens. dtype is the
    model's, kv_dtype the cache's; weights_format how the weights were loaded ("auto": as the
    checkpoint holds them, "fp8": quantized at load), named only when not "auto", so the
    namespaces of caches written before it are unchanged."""
    parts: dict[str, object] = {
        "format": 1,
        "weights": weights,
        "tokenizer_and_config": tokenizer_and_config,
        "dtype": str(dtype),
        "kv_dtype": str(kv_dtype),
        "block_size": block_size,
        "kv_block_shape": list(kv_block_shape),
    }
    if weights_format != "auto":
        parts["weights_format"] = weights_format
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def _sampled(path: Path, size: int) -> bytes:
    digest = hashlib.blake2b(digest_size=32)
    with path.open("rb") as file:
        if path.suffix.lower() == ".safetensors" and size >= 8:
            header_len = int.from_bytes(file.read(8), "little")
            digest.update(file.read(min(header_len, _MAX_SMALL_FILE_BYTES)))
        for index in range(_NUM_SAMPLES):
            file.seek(size * index // _NUM_SAMPLES)
            digest.update(file.read(_SAMPLE_BYTES))
    return digest.digest()
