"""KV tiers below the device's prefix cache: CPU memory and a disk folder (tiered_cache.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import torch

from engine.block_manager import BlockManager
from engine.config import EngineConfig
from engine.kv_cache import KVCache
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
    blocks: BlockManager,
    checkpoint_dir: Path,
    state_dict: Mapping[str, torch.Tensor] | None,
) -> TieredKVCache | None:
    """The tiers config asks for over this cache, or None when it asks for none."""
    if not config.has_kv_tiers:
        return None
    if kv_cache.is_fp8:
        # A block's FP8 values mean nothing without its scales, which the tiers do not keep yet.
        logger.warning("KV tiers off: they do not keep an FP8 KV cache's scales yet")
        return None
    files = files_fingerprint(checkpoint_dir)
    if config.kv_model_identity is not None:
        weights = config.kv_model_identity
    elif state_dict is not None:
        weights = state_dict_fingerprint(state_dict)
    else:
        weights = files
    tensor = kv_cache.tensor  # [2, L, num_blocks + 1, block_size, KV, D]
    namespace = tier_namespace(
        weights=weights,
        tokenizer_and_config=files,
        dtype=tensor.dtype,
        kv_dtype=tensor.dtype,
        block_size=kv_cache.block_size,
        kv_block_shape=(tensor.shape[0], tensor.shape[1], *tensor.shape[3:]),
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
