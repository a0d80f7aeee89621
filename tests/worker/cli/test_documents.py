import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app import migrate
from app.db.models import DocumentKind, JobKind
from app.db.session import make_engine, session_factory
from app.services import documents, file_store, jobs
from app.services.documents import NewDocument, NewPage, NewPassage
from app.settings import get_settings
from worker.cli import cli

runner = CliRunner()
PAGE_TEXT = ("Confidential clause on page one.", "Second page about [bold]rent[/bold].")


@pytest.fixture(autouse=True)
def data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no .env from the repo
    monkeypatch.setenv("LONGDOC_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield tmp_path / "data"
    get_settings.cache_clear()


def _store_document() -> int:
    engine = make_engine(get_settings().database_url)
    try:
        with session_factory(engine)() as session:
            document = documents.store_document(
                session=session,
                new=NewDocument(
                    content_hash=hashlib.sha256(b"lease").hexdigest(),
                    file_name="lease.pdf",
                    kind=DocumentKind.LEGAL,
                    num_tokens=21,
                    title="Office lease",
                    pages=(NewPage(1, PAGE_TEXT[0]), NewPage(2, PAGE_TEXT[1])),
                    passages=(
                        NewPassage(0, 1, 1, 0, 32, PAGE_TEXT[0], 9),
                        NewPassage(1, 2, 2, 32, 70, PAGE_TEXT[1], 12),
                    ),
                ),
            )
            session.commit()
            return document.id
    finally:
        engine.dispose()


def test_commands_before_upgrade_say_how_to_create_the_database(data_dir: Path) -> None:
    result = runner.invoke(cli, ["docs"])
    assert result.exit_code == 1
    assert "run `longdoc db upgrade`" in result.output
    assert "Traceback" not in result.output
    assert not (data_dir / "longdoc.db").exists()  # a read does not create an empty database

    result = runner.invoke(cli, ["db", "current"])
    assert result.exit_code == 0
    assert "No database at" in result.output


def test_upgrade_then_current_then_empty_list(data_dir: Path) -> None:
    result = runner.invoke(cli, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert f"revision {migrate.head_revision()} (newest)" in result.output
    assert (data_dir / "longdoc.db").exists()

    result = runner.invoke(cli, ["db", "current"])
    assert (result.exit_code, f"revision {migrate.head_revision()} (newest)" in result.output) == (
        0,
        True,
    )

    result = runner.invoke(cli, ["docs"])
    assert (result.exit_code, result.output.strip()) == (0, "No documents yet.")


def test_show_of_a_missing_id_fails_with_a_sentence() -> None:
    runner.invoke(cli, ["db", "upgrade"])
    result = runner.invoke(cli, ["show", "42"])
    assert result.exit_code == 1
    assert "There is no document with id 42" in result.output
    assert "Traceback" not in result.output


def test_docs_and_show_a_stored_document() -> None:
    runner.invoke(cli, ["db", "upgrade"])
    document_id = _store_document()

    result = runner.invoke(cli, ["docs"])
    assert result.exit_code == 0, result.output
    assert "Office lease" in result.output and "legal" in result.output
    assert result.output.strip().endswith("1 document.")
    assert PAGE_TEXT[0] not in result.output  # listing never prints document text
    assert "No documents match." in runner.invoke(cli, ["docs", "--kind", "medical"]).output

    result = runner.invoke(cli, ["show", str(document_id)])
    assert result.exit_code == 0, result.output
    assert "Office lease" in result.output and "lease.pdf" in result.output
    assert PAGE_TEXT[0] in result.output
    assert PAGE_TEXT[1] in result.output  # printed as stored: no markup applied
    assert "Passage 1 · page 2 · 12 tokens" in result.output
    assert "printed 2 page(s) and 2 passage(s)." in result.output

    result = runner.invoke(cli, ["show", str(document_id), "--no-pages", "--page", "2"])
    assert result.exit_code == 0, result.output
    assert "Page 2" not in result.output and PAGE_TEXT[0] not in result.output
    assert PAGE_TEXT[1] in result.output  # from passage 1, the one on page 2
    assert "printed 0 page(s) and 1 passage(s) on page 2." in result.output

    result = runner.invoke(cli, ["show", str(document_id), "--no-passages", "--page", "1"])
    assert PAGE_TEXT[0] in result.output and "Passage" not in result.output

    result = runner.invoke(cli, ["show", str(document_id), "--page", "3"])
    assert result.exit_code == 1
    assert "there is no page 3" in result.output


def test_bad_setting_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_MAX_PAGES", "lots")
    result = runner.invoke(cli, ["docs"])
    assert result.exit_code == 1
    assert "Invalid setting LONGDOC_MAX_PAGES" in result.output
    assert "Traceback" not in result.output


def test_unreachable_database_is_one_sentence_without_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Port 1: nothing listens there, so the connection is refused at once.
    monkeypatch.setenv("LONGDOC_DATABASE_URL", "postgresql+psycopg://ann:s3cret@127.0.0.1:1/x")
    for command in (["docs"], ["db", "upgrade"], ["db", "current"]):
        result = runner.invoke(cli, command)
        assert result.exit_code == 1, command
        assert "Cannot open the database at postgresql+psycopg://ann:***@127.0.0.1:1/x" in (
            result.output
        )
        assert "s3cret" not in result.output
        assert "Traceback" not in result.output


def _store_with_file_and_job() -> tuple[int, int, Path]:
    """A document with its stored file and a summary job, as an upload leaves them."""
    settings = get_settings()
    data = b"%PDF-1.4 contract"
    content_hash = hashlib.sha256(data).hexdigest()
    stored = file_store.store_file(
        files_dir=settings.files_dir, content_hash=content_hash, data=data
    )
    engine = make_engine(settings.database_url)
    try:
        with session_factory(engine)() as session:
            document = documents.store_document(
                session=session,
                new=NewDocument(
                    content_hash=content_hash,
                    file_name="contract.pdf",
                    kind=DocumentKind.LEGAL,
                    num_tokens=9,
                    title="Supply contract",
                    pages=(NewPage(1, PAGE_TEXT[0]),),
                    passages=(NewPassage(0, 1, 1, 0, 32, PAGE_TEXT[0], 9),),
                    stored_path=str(stored.relative_to(settings.files_dir)),
                ),
            )
            job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=document.id)
            session.commit()
            return document.id, job.id, stored
    finally:
        engine.dispose()


def _exists(document_id: int, job_id: int) -> tuple[bool, bool]:
    engine = make_engine(get_settings().database_url)
    try:
        with session_factory(engine)() as session:
            return (
                documents.get_document(session=session, document_id=document_id) is not None,
                jobs.get_job(session=session, job_id=job_id) is not None,
            )
    finally:
        engine.dispose()


def test_delete_asks_first_and_removes_the_document_its_jobs_and_its_file() -> None:
    runner.invoke(cli, ["db", "upgrade"])
    document_id, job_id, stored = _store_with_file_and_job()

    declined = runner.invoke(cli, ["delete", str(document_id)], input="n\n")
    assert declined.exit_code == 1
    assert f"Delete document {document_id} (Supply contract)" in declined.output
    assert "Nothing was deleted." in declined.output
    assert _exists(document_id, job_id) == (True, True) and stored.exists()

    accepted = runner.invoke(cli, ["delete", str(document_id)], input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert f"Deleted document {document_id} (Supply contract)." in accepted.output
    assert _exists(document_id, job_id) == (False, False)
    assert not stored.exists()
    assert PAGE_TEXT[0] not in declined.output + accepted.output


def test_delete_with_yes_asks_nothing_and_an_unknown_id_is_one_sentence() -> None:
    runner.invoke(cli, ["db", "upgrade"])
    document_id, job_id, _ = _store_with_file_and_job()

    result = runner.invoke(cli, ["delete", str(document_id), "--yes"])
    assert result.exit_code == 0, result.output
    assert "Delete document" not in result.output  # no question
    assert _exists(document_id, job_id) == (False, False)

    again = runner.invoke(cli, ["delete", str(document_id), "--yes"])
    assert again.exit_code == 1
    assert f"There is no document with id {document_id}; see `longdoc docs`." in again.output
    assert "Traceback" not in again.output
