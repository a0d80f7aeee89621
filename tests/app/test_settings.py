import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.errors import InvalidSettings
from app.settings import DEFAULT_MODEL, Settings, get_settings, load_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # No LONGDOC_* from the caller's shell, and no .env from the repo.
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()


def test_defaults_live_in_data_dir(tmp_path: Path) -> None:
    settings = Settings()
    data_dir = tmp_path / "var"
    assert settings.data_dir == data_dir
    assert settings.database_url == f"sqlite:///{data_dir / 'longdoc.db'}"
    assert settings.files_dir == data_dir / "files"
    assert settings.model_cache_dir == data_dir / "models"
    assert settings.model == DEFAULT_MODEL
    assert settings.max_upload_bytes == 200 * 1024 * 1024
    assert (settings.max_pages, settings.parse_timeout_s) == (2000, 120.0)
    assert (settings.parse_memory_mb, settings.passage_max_tokens) == (2048, 384)
    assert settings.environment == "development"
    assert not settings.is_production


def test_environment_overrides_and_derived_paths_follow_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LONGDOC_DATA_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("LONGDOC_MAX_PAGES", "50")
    monkeypatch.setenv("LONGDOC_PARSE_TIMEOUT_S", "7.5")
    monkeypatch.setenv("LONGDOC_ENVIRONMENT", "production")
    monkeypatch.setenv("LONGDOC_UI_PASSWORD_HASH", "pbkdf2_sha256$1000$c2FsdA$aGFzaA")
    monkeypatch.setenv("LONGDOC_MODEL", "/models/checkpoint")
    settings = Settings()
    assert settings.database_url == f"sqlite:///{tmp_path / 'elsewhere' / 'longdoc.db'}"
    assert settings.files_dir == tmp_path / "elsewhere" / "files"
    assert (settings.max_pages, settings.parse_timeout_s) == (50, 7.5)
    assert settings.is_production
    assert settings.model == "/models/checkpoint"


def test_explicit_values_win_over_derived_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LONGDOC_DATABASE_URL", "postgresql+psycopg://u@db/longdoc")
    monkeypatch.setenv("LONGDOC_FILES_DIR", "uploads")
    settings = Settings()
    assert settings.database_url == "postgresql+psycopg://u@db/longdoc"
    assert settings.files_dir == tmp_path / "uploads"  # relative paths: from the working folder
    assert settings.model_cache_dir == tmp_path / "var" / "models"


def test_dotenv_file_is_read_and_environment_beats_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("LONGDOC_MAX_PAGES=12\nLONGDOC_PASSAGE_MAX_TOKENS=256\n")
    monkeypatch.setenv("LONGDOC_PASSAGE_MAX_TOKENS", "128")
    settings = Settings()
    assert settings.max_pages == 12
    assert settings.passage_max_tokens == 128


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LONGDOC_MAX_PAGES", "many"),
        ("LONGDOC_MAX_PAGES", "0"),
        ("LONGDOC_MAX_UPLOAD_BYTES", "-1"),
        ("LONGDOC_ENVIRONMENT", "staging"),
    ],
)
def test_unusable_values_are_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()


def test_get_settings_reads_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_MAX_PAGES", "3")
    first = get_settings()
    monkeypatch.setenv("LONGDOC_MAX_PAGES", "4")
    assert get_settings() is first
    assert first.max_pages == 3
    get_settings.cache_clear()
    assert get_settings().max_pages == 4
    get_settings.cache_clear()


def test_background_work_defaults_are_embedded_and_on(tmp_path: Path) -> None:
    settings = Settings()
    assert settings.is_embedded_broker and settings.broker_url == ""
    assert settings.result_backend == ""
    assert settings.inbox_dir == tmp_path / "var" / "inbox"
    assert settings.inbox_scan_enabled and settings.auto_summarize_enabled
    assert settings.inbox_scan_interval_s == 300
    # Redis must not hand a running summary to a second worker: longer than the longest task.
    assert settings.effective_visibility_timeout_s > settings.model_time_limit_s
    assert settings.effective_visibility_timeout_s > settings.ingest_time_limit_s
    assert (settings.engine_device, settings.engine_dtype, settings.engine_oom_policy) == (
        "auto",
        "auto",
        "fail",
    )
    assert settings.engine_chunk_size is None
    assert (settings.engine_attention_backend, settings.engine_compile) == ("auto", False)


def test_background_work_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LONGDOC_BROKER_URL", "redis://redis:6379/0")
    monkeypatch.setenv("LONGDOC_VISIBILITY_TIMEOUT_S", "30")
    monkeypatch.setenv("LONGDOC_INBOX_SCAN_ENABLED", "false")
    monkeypatch.setenv("LONGDOC_INBOX_DIR", "drop")
    monkeypatch.setenv("LONGDOC_ENGINE_DEVICE", "cuda:1")
    monkeypatch.setenv("LONGDOC_ENGINE_CHUNK_SIZE", "512")
    monkeypatch.setenv("LONGDOC_ENGINE_ATTENTION_BACKEND", "flash_attn")
    monkeypatch.setenv("LONGDOC_ENGINE_COMPILE", "true")
    settings = Settings()
    assert not settings.is_embedded_broker
    assert settings.effective_visibility_timeout_s == 30
    assert not settings.inbox_scan_enabled
    assert settings.inbox_dir == tmp_path / "drop"
    assert (settings.engine_device, settings.engine_chunk_size) == ("cuda:1", 512)
    assert (settings.engine_attention_backend, settings.engine_compile) == ("flash_attn", True)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LONGDOC_ENGINE_DEVICE", "tpu"),
        ("LONGDOC_ENGINE_DTYPE", "int4"),
        ("LONGDOC_ENGINE_OOM_POLICY", "pray"),
        ("LONGDOC_ENGINE_ATTENTION_BACKEND", "magic"),
        ("LONGDOC_INBOX_SCAN_INTERVAL_S", "0"),
        ("LONGDOC_MODEL_TIME_LIMIT_S", "-5"),
    ],
)
def test_unusable_background_values_are_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()


def test_load_settings_names_the_bad_setting_and_never_repeats_its_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LONGDOC_MAX_PAGES", "secret-ish-value")
    with pytest.raises(InvalidSettings) as caught:
        load_settings()
    assert str(caught.value).startswith("Invalid setting LONGDOC_MAX_PAGES: ")
    assert "secret-ish-value" not in str(caught.value)
    monkeypatch.setenv("LONGDOC_MAX_PAGES", "7")
    get_settings.cache_clear()
    assert load_settings().max_pages == 7
    get_settings.cache_clear()


def test_batch_slots_default_to_concurrency_less_two_except_on_sqlite(tmp_path: Path) -> None:
    postgres = "postgresql+psycopg://longdoc@db/longdoc"
    assert Settings(database_url=postgres).num_model_batch_slots == 6  # 8 threads, 2 kept free
    assert Settings(database_url=postgres, model_worker_concurrency=32).num_model_batch_slots == 30
    assert Settings().num_model_batch_slots == 1  # SQLite: one writer at a time
    assert Settings(model_batch_slots=3).num_model_batch_slots == 3
    # Never every thread: one stays free for questions.
    assert Settings(database_url=postgres, model_batch_slots=8).num_model_batch_slots == 7


def test_optional_key_files_given_empty_are_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    # docker-compose passes an unset ${LONGDOC_LLM_API_KEY_FILE:-} as "": no key, not the folder ".".
    monkeypatch.setenv("LONGDOC_LLM_API_KEY_FILE", "")
    monkeypatch.setenv("LONGDOC_SERVE_API_KEYS_FILE", "")
    settings = Settings()
    assert settings.llm_api_key_file is None and settings.llm_key() is None
    assert settings.serve_api_keys_file is None


def test_oidc_is_off_by_default_and_needs_a_client_when_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = Settings()
    assert not settings.is_oidc_enabled and settings.oidc_secret() == ""
    assert settings.oidc_auto_create_role == "none" and settings.oidc_user_claim == "email"
    monkeypatch.setenv("LONGDOC_OIDC_ISSUER_URL", "https://login.firm.test/realms/law")
    with pytest.raises(InvalidSettings, match="LONGDOC_OIDC_CLIENT_ID"):
        load_settings()
    get_settings.cache_clear()
    monkeypatch.setenv("LONGDOC_OIDC_CLIENT_ID", "longdoc")
    monkeypatch.setenv(
        "LONGDOC_OIDC_CLIENT_SECRET", ""
    )  # given empty, as compose passes unset ones
    with pytest.raises(ValidationError, match="LONGDOC_OIDC_CLIENT_SECRET"):
        Settings()
    monkeypatch.setenv("LONGDOC_OIDC_CLIENT_SECRET", "s3cret-value")
    settings = Settings()
    assert settings.is_oidc_enabled
    assert settings.oidc_server_metadata_url == (
        "https://login.firm.test/realms/law/.well-known/openid-configuration"
    )
    assert settings.oidc_secret() == "s3cret-value"
    assert "s3cret-value" not in repr(settings) and "s3cret-value" not in str(settings)
    assert settings.oidc_redirect_uri == "http://localhost:{port}/oauth2callback"
    # A discovery URL is kept as given; a secret file is read when no secret is set.
    whole = "https://idp.test/.well-known/openid-configuration"
    assert Settings(oidc_issuer_url=whole).oidc_server_metadata_url == whole
    (tmp_path / "oidc_secret").write_text("from-a-file\n")
    monkeypatch.delenv("LONGDOC_OIDC_CLIENT_SECRET")
    monkeypatch.setenv("LONGDOC_OIDC_CLIENT_SECRET_FILE", str(tmp_path / "oidc_secret"))
    assert Settings().oidc_secret() == "from-a-file"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LONGDOC_OIDC_ISSUER_URL", "login.firm.test"),
        ("LONGDOC_OIDC_REDIRECT_URI", "https://longdoc.firm.test/"),
        ("LONGDOC_OIDC_USER_CLAIM", "name"),
        ("LONGDOC_OIDC_AUTO_CREATE_ROLE", "admin"),
    ],
)
def test_unusable_oidc_values_are_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv("LONGDOC_OIDC_CLIENT_ID", "longdoc")
    monkeypatch.setenv("LONGDOC_OIDC_CLIENT_SECRET", "s3cret-value")
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()
