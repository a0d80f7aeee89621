"""KV tiers below the device's prefix cache: CPU memory and a disk folder (tiered_cache.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import torch

from engine.block_manager import BlockManager
from engine.config import EngineConfig
from engine.kv_cache import KVCache
from engine.kv_tiers.cache_blocks import CacheBlocks
from engine.kv_tiers.cpu_tier import CpuTier
from engine.kv_tiers.disk_tier import DiskTier, InvalidCacheTag, check_tag
from engine.kv_tiers.identity import files_fingerprint, state_dict_fingerprint, tier_namespace
from engine.kv_tiers.tiered_cache import CPU_TIER, DISK_TIER, TierCounters, TieredKVCache
from engine.kv_tiers.tombstones import forget_tag_files

logger = logging.getLogger(__name__)

__all__ = [
    "CPU_TIER",
    "DISK_TIER",
    "InvalidCacheTag",
    "TierCounters",
    "TieredKVCache",
    "build_kv_tiers",
    "check_tag",
    "forget_tag_files",
]


def build_kv_tiers(
    config: EngineConfig,
    *,
    kv_cache: KVCache,
    model_dtype: torch.dtype,
    blocks: BlockManager,
    checkpoint_dir: Path,
    state_dict: Mapping[str, torch.Tensor] | None,
) -> TieredKVCache | None:
    """The tiers config asks for over this cache, or None when it asks for none. An FP8 cache's
    blocks travel with their scales (cache_blocks.py)."""
    if not config.has_kv_tiers:
        return None
    files = files_fingerprint(checkpoint_dir)
    if config.kv_model_identity is not None:
        weights = config.kv_model_identity
    elif state_dict is not None:
        weights = state_dict_fingerprint(state_dict)
    else:
        weights = files
    cache_blocks = CacheBlocks(kv_cache.tensor, kv_cache.scales)
    namespace = tier_namespace(
        weights=weights,
        tokenizer_and_config=files,
        dtype=model_dtype,
        kv_dtype=kv_cache.tensor.dtype,
        block_size=kv_cache.block_size,
        kv_block_shape=cache_blocks.block_shape,
        # The same files quantized to FP8 at load write other KV than in bf16.
        weights_format=config.weights,
    )
    cpu = CpuTier(config.kv_cpu_tier_bytes) if config.kv_cpu_tier_bytes > 0 else None
    disk = None
    if config.kv_disk_tier_dir is not None:
        disk = DiskTier(config.kv_disk_tier_dir, namespace, max_bytes=config.kv_disk_tier_bytes)
    return TieredKVCache(
        kv_cache=kv_cache,
        blocks=blocks,
        cpu=cpu,
        disk=disk,
        device_sums=config.kv_device_checksums,
    )
