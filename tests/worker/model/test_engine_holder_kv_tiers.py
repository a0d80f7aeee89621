"""The KV tier settings reach the engine's config; the disk tier's switch turns it off."""

from __future__ import annotations

from app.settings import Settings
from worker.model.engine_holder import engine_config


def test_the_kv_tier_settings_reach_the_engine_config(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path, kv_cpu_tier_bytes=123, kv_disk_tier_bytes=456)
    config = engine_config(settings)
    assert config.kv_cpu_tier_bytes == 123 and config.kv_disk_tier_bytes == 456
    assert config.kv_disk_tier_dir == tmp_path / "kv_cache" and config.has_kv_tiers


def test_the_disk_tier_can_be_turned_off(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path, kv_disk_tier_enabled=False, kv_cpu_tier_bytes=0)
    config = engine_config(settings)
    assert config.kv_disk_tier_dir is None and not config.has_kv_tiers
    assert settings.kv_cache_dir is None
