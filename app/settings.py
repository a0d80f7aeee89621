"""LongDoc's settings: one object, read from `LONGDOC_*` environment variables and `.env`.

Only entry points (the CLI, the worker, the UI) call `get_settings()`; services take explicit
arguments so they can be tested without touching the environment.

`environment` is "development" or "production". Production refuses unsafe defaults: today the
one secret, the UI password, must be set there (`_production_needs_a_ui_password`).
"""

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_MODEL = "smollm2-135m-instruct"
MIB = 1024 * 1024
UI_PASSWORD_HASH_PATTERN = r"^(|pbkdf2_sha256\$[0-9]+\$[A-Za-z0-9+/=_-]+\$[A-Za-z0-9+/=_-]+)$"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="LONGDOC_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        validate_default=True,
    )

    environment: Literal["development", "production"] = "development"
    data_dir: Path = Path("./var")
    # The three below default to places inside data_dir; see `_fill_paths_from_data_dir`.
    database_url: str = Field(default="", description="Default: sqlite:///<data_dir>/longdoc.db")
    files_dir: Path = Field(default=Path(), description="Uploaded PDFs, stored by content hash.")
    model_cache_dir: Path = Field(default=Path(), description="Converted model weights.")
    # "smollm2-135m-instruct" is the packaged GGUF; otherwise a path to an HF checkpoint folder
    # or to a .gguf file.
    model: str = DEFAULT_MODEL
    max_upload_bytes: int = Field(default=200 * MIB, gt=0)
    max_pages: int = Field(default=2000, gt=0)
    parse_timeout_s: float = Field(default=120.0, gt=0)
    parse_memory_mb: int = Field(default=2048, gt=0)
    passage_max_tokens: int = Field(default=384, gt=0)

    # --- Background work (worker/celery_app.py) ---
    # "" means the embedded broker: kombu's filesystem transport under data_dir/broker (no server
    # to run; bench/results/embedded_broker.md says why not SQLAlchemy-on-SQLite). Production:
    # redis://host:6379/0.
    broker_url: str = ""
    # "" means the database above (Celery's `db+` backend); job rows stay the source of truth.
    result_backend: str = ""
    # Longest a task may run before it is stopped; soft limits come a minute earlier.
    ingest_time_limit_s: float = Field(default=30 * 60, gt=0)
    model_time_limit_s: float = Field(default=4 * 3600, gt=0)
    # How long Redis waits for an unacknowledged task before giving it to another worker. Must
    # exceed the longest task (None: model_time_limit_s + 10 minutes), else it runs twice.
    visibility_timeout_s: float | None = Field(default=None, gt=0)
    inbox_dir: Path = Field(default=Path(), description="Default: <data_dir>/inbox")
    inbox_scan_enabled: bool = True
    inbox_scan_interval_s: float = Field(default=300, gt=0)
    auto_summarize_enabled: bool = True
    auto_summarize_interval_s: float = Field(default=600, gt=0)

    # --- The engine (worker/engine_holder.py) ---
    engine_device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:[0-9]+)?)$")
    engine_dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    engine_chunk_size: int | None = Field(default=None, gt=0)  # None: planned from free memory
    engine_oom_policy: Literal["fail", "truncate", "cpu"] = "fail"
    engine_max_kv_cache_bytes: int | None = Field(default=None, gt=0)
    engine_num_threads: int | None = Field(default=None, gt=0)  # CPU threads; None: torch's
    # "auto": flash-attn 4/2, else cuDNN, else flex on a GPU; our AVX-512 kernel, else SDPA on a CPU.
    engine_attention_backend: Literal[
        "auto", "flash_attn", "cudnn", "flex", "cpu_flash", "sdpa"
    ] = "auto"
    # torch.compile the layers on a GPU (a minute of compiling on the first requests, then a
    # 32K prefill ~10% faster on an H200: bench/results/prefill_h200.md); ignored on a CPU.
    engine_compile: bool = False
    summary_max_new_tokens: int = Field(default=512, gt=0)
    answer_max_new_tokens: int = Field(default=256, gt=0)

    # --- The web UI (ui/) ---
    # "" leaves the UI open (fine on one's own machine); production refuses "". Make a hash with
    # `python -m ui.auth`: "pbkdf2_sha256$<iterations>$<salt>$<hash>", never the password itself.
    ui_password_hash: str = Field(default="", pattern=UI_PASSWORD_HASH_PATTERN)
    ui_port: int = Field(default=8501, gt=0, lt=65536)

    @model_validator(mode="before")
    @classmethod
    def _fill_paths_from_data_dir(cls, values: Any) -> Any:
        # Before validation so that a value given as "" or not at all is derived, while one given
        # explicitly (even ".") is kept as the user wrote it.
        if not isinstance(values, dict):
            return values
        data_dir = Path(values.get("data_dir") or "./var").expanduser().absolute()
        values["data_dir"] = data_dir
        if not values.get("database_url"):
            values["database_url"] = f"sqlite:///{data_dir / 'longdoc.db'}"
        for name, default in (
            ("files_dir", "files"),
            ("model_cache_dir", "models"),
            ("inbox_dir", "inbox"),
        ):
            given = values.get(name)
            values[name] = Path(given).expanduser().absolute() if given else data_dir / default
        return values

    @model_validator(mode="after")
    def _production_needs_a_ui_password(self) -> "Settings":
        if self.is_production and not self.ui_password_hash:
            raise ValueError(
                "production needs a UI password: set LONGDOC_UI_PASSWORD_HASH to the output of "
                "`python -m ui.auth`"
            )
        return self

    @property
    def is_production(self) -> bool:
        return self.environment == "production"

    @property
    def is_embedded_broker(self) -> bool:
        return not self.broker_url

    @property
    def effective_visibility_timeout_s(self) -> float:
        if self.visibility_timeout_s is not None:
            return self.visibility_timeout_s
        return max(self.model_time_limit_s, self.ingest_time_limit_s) + 600


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once. Tests call `get_settings.cache_clear()`."""
    return Settings()
