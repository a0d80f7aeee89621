"""LongDoc's settings: one object, read from `LONGDOC_*` environment variables and `.env`.

Only entry points (the CLI, the worker, the UI) call `get_settings()`; services take explicit
arguments so they can be tested without touching the environment.

`environment` is "development" or "production". Production refuses unsafe defaults where one
exists; today none does (there is no secret yet), so the two behave alike. The first secret
(e.g. a UI password) gets no default, or a development-only default that an after-validator
refuses when `is_production`, with a sentence naming the variable to set.
"""

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_MODEL = "smollm2-135m-instruct"
MIB = 1024 * 1024


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
        for name, default in (("files_dir", "files"), ("model_cache_dir", "models")):
            given = values.get(name)
            values[name] = Path(given).expanduser().absolute() if given else data_dir / default
        return values

    @property
    def is_production(self) -> bool:
        return self.environment == "production"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once. Tests call `get_settings.cache_clear()`."""
    return Settings()
