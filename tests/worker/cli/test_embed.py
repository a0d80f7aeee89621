"""`longdoc ingest` stores passage vectors; `longdoc embed --missing` fills those of older documents."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.db.session import make_engine, session_factory
from app.services import documents
from app.settings import get_settings
from tests.pipelines import pdf_factory
from tests.worker.paraphrased_contract import CONTRACT_PAGES
from worker.cli import cli

pytestmark = pytest.mark.slow
runner = CliRunner()
MODEL_NAME = "all-MiniLM-L6-v2"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model_cache_dir: Path) -> None:
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LONGDOC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LONGDOC_MODEL_CACHE_DIR", str(model_cache_dir))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _missing() -> list[int]:
    engine = make_engine(get_settings().database_url)
    try:
        with session_factory(engine)() as session:
            return documents.documents_missing_embeddings(session=session, model=MODEL_NAME)
    finally:
        engine.dispose()


def test_ingest_embeds_and_embed_missing_fills_older_documents(
    env, tmp_path, monkeypatch, count_tokens
) -> None:
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
    old = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="old.pdf")
    new = pdf_factory.text_pdf(tmp_path, [*CONTRACT_PAGES, "7. Signatures."], name="new.pdf")
    monkeypatch.setenv("LONGDOC_EMBEDDING_MODEL", "none")
    get_settings.cache_clear()
    assert runner.invoke(cli, ["ingest", str(old)]).exit_code == 0
    monkeypatch.delenv("LONGDOC_EMBEDDING_MODEL")
    get_settings.cache_clear()
    assert runner.invoke(cli, ["ingest", str(new)]).exit_code == 0
    assert _missing() == [1]  # only the document ingested with embeddings off

    result = runner.invoke(cli, ["embed", "--missing"])

    assert result.exit_code == 0, result.output
    assert "1 document(s)" in result.output and MODEL_NAME in result.output
    assert _missing() == []
    again = runner.invoke(cli, ["embed", "--missing"])
    assert again.exit_code == 0 and "nothing to do" in again.output


def test_embed_needs_ids_or_missing_and_known_documents(env) -> None:
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
    assert runner.invoke(cli, ["embed"]).exit_code != 0
    result = runner.invoke(cli, ["embed", "7"])
    assert result.exit_code == 1 and "no document with id 7" in result.output
