"""The engine's config from the settings: every choice the settings accept is one the engine
takes, and none is missing (app/settings.py writes out engine/config.py's lists)."""

from __future__ import annotations

from typing import get_args

import pytest

from app.settings import Settings
from engine.config import ATTENTION_BACKENDS, DTYPES, KV_DTYPES, OOM_POLICIES, WEIGHTS
from worker.model.engine_holder import engine_config


@pytest.mark.parametrize(
    ("setting", "engine_choices"),
    [
        ("engine_attention_backend", ATTENTION_BACKENDS),
        ("engine_dtype", DTYPES),
        ("engine_oom_policy", OOM_POLICIES),
        ("engine_weights", WEIGHTS),
        ("engine_kv_dtype", KV_DTYPES),
    ],
)
def test_the_settings_offer_exactly_the_engine_s_choices(
    setting: str, engine_choices: tuple[str, ...]
) -> None:
    assert set(get_args(Settings.model_fields[setting].annotation)) == set(engine_choices)


@pytest.mark.parametrize("backend", ATTENTION_BACKENDS)
def test_each_backend_setting_reaches_the_engine_config(backend: str, tmp_path) -> None:
    settings = Settings(data_dir=tmp_path, engine_attention_backend=backend)
    assert engine_config(settings).attention_backend == backend


def test_the_fp8_settings_reach_the_engine_config(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path, engine_weights="fp8", engine_kv_dtype="fp8")
    config = engine_config(settings)
    assert (config.weights, config.kv_dtype) == ("fp8", "fp8")
    assert engine_config(Settings(data_dir=tmp_path)).kv_dtype == "auto"
    assert engine_config(Settings(data_dir=tmp_path)).fp8_w8a8_decode
    exact = Settings(data_dir=tmp_path, engine_fp8_w8a8_decode=False)
    assert engine_config(exact).fp8_w8a8_decode is False
