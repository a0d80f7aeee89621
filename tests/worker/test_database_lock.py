"""Another program holding SQLite's write lock during an ingest: retried with backoff, then a
sentence; the batch goes on, every job ends, and no title or file name reaches a log or an
error's text."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import sessionmaker
from typer.testing import CliRunner

from app.db import retry
from app.db import session as db_session
from app.db.models import Document, Job, JobStatus
from app.db.session import make_engine
from app.migrate import upgrade
from app.settings import get_settings
from tests.pipelines import pdf_factory
from worker.cli import cli
from worker.ingest.store import REFUSED, IngestOptions
from worker.jobs.ingest import ingest_file

TITLE = "Zeta Merger Confidential Terms"
FILE_NAME = "zeta-merger-draft.pdf"
runner = CliRunner()


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's own wait and our pauses shortened, so that a test takes seconds, not minutes."""
    monkeypatch.setattr(db_session, "SQLITE_BUSY_TIMEOUT_S", 0.1)
    monkeypatch.setattr(retry, "LOCK_RETRY_DELAYS_S", (0.2, 0.4, 0.8))


class WriteLock:
    """Another program's write transaction on the SQLite file, held until released."""

    def __init__(self, path: Path) -> None:
        self._connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.is_held = False

    def take(self) -> None:
        self._connection.execute("BEGIN IMMEDIATE")
        self.is_held = True

    def release(self) -> None:
        if self.is_held:
            self._connection.execute("ROLLBACK")
            self.is_held = False

    def close(self) -> None:
        self.release()
        self._connection.close()


@pytest.fixture
def database(tmp_path: Path):
    path = tmp_path / "data" / "longdoc.db"
    path.parent.mkdir()
    upgrade(f"sqlite:///{path}")
    lock = WriteLock(path)
    yield path, lock
    lock.close()


@pytest.fixture
def cli_env(monkeypatch, tmp_path: Path, model_cache_dir: Path, database) -> None:
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LONGDOC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LONGDOC_MODEL_CACHE_DIR", str(model_cache_dir))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def two_pdfs(tmp_path: Path) -> list[Path]:
    return [
        pdf_factory.text_pdf(tmp_path, ["Zeta pays Omega ten million dollars."], name=FILE_NAME),
        pdf_factory.text_pdf(tmp_path, ["The lease ends in May."], name="lease.pdf"),
    ]


def test_a_lock_held_throughout_refuses_each_file_and_the_batch_goes_on(
    cli_env, fast_retries, database, tmp_path: Path, count_tokens
) -> None:
    _, lock = database
    pdfs = two_pdfs(tmp_path)
    lock.take()

    result = runner.invoke(cli, ["ingest", *map(str, pdfs)], env={"COLUMNS": "400"})

    assert result.exit_code == 1  # nothing stored
    assert "0 stored, 0 already present, 2 refused." in result.output
    assert result.output.count("The database stayed busy while recording the ingest") == 2
    assert "Traceback" not in result.output and "database is locked" not in result.output


def test_a_lock_released_in_time_is_waited_for(
    cli_env, fast_retries, database, tmp_path: Path, count_tokens
) -> None:
    _, lock = database
    pdfs = two_pdfs(tmp_path)
    lock.take()
    threading.Timer(0.5, lock.release).start()

    result = runner.invoke(cli, ["ingest", *map(str, pdfs)])

    assert result.exit_code == 0, result.output
    assert "2 stored, 0 already present, 0 refused." in result.output


def test_a_lock_taken_while_storing_ends_the_job_and_leaks_no_title(
    fast_retries, database, tmp_path: Path, count_tokens, caplog, capfd
) -> None:
    path, lock = database
    pdf = pdf_factory.text_pdf(
        tmp_path, ["Zeta pays Omega ten million dollars."], name=FILE_NAME, title=TITLE
    )
    engine = make_engine(f"sqlite:///{path}")
    sessions = sessionmaker(bind=engine, expire_on_commit=False)

    def on_stage(stage: str) -> None:
        if stage == "storing" and not lock.is_held:
            lock.take()

    class ReleaseOnGivingUp(logging.Handler):
        # The store gives up: let the failure be recorded (a program that lets go later).
        def emit(self, record: logging.LogRecord) -> None:
            if "database stayed busy" in record.getMessage():
                lock.release()

    caplog.set_level(logging.DEBUG)
    release = ReleaseOnGivingUp()
    logging.getLogger().addHandler(release)
    try:
        outcome = ingest_file(
            pdf,
            sessions=sessions,
            options=IngestOptions(files_dir=tmp_path / "files"),
            count_tokens=count_tokens,
            on_stage=on_stage,
        )
    finally:
        logging.getLogger().removeHandler(release)

    assert outcome.status == REFUSED and outcome.error_code == "database_busy"
    assert outcome.reason.startswith("The database stayed busy while storing this file")
    with sessions() as session:
        job = session.get(Job, outcome.job_id)
        assert (job.status, job.error_code) == (JobStatus.FAILED, "database_busy")
        assert session.scalars(select(Document)).all() == []
    engine.dispose()
    captured = capfd.readouterr()
    logged = "\n".join(
        [r.getMessage() + (r.exc_text or "") for r in caplog.records] + [captured.out, captured.err]
    )
    for secret in (TITLE, FILE_NAME, "Zeta"):
        assert secret not in logged


def test_errors_never_quote_statement_parameters(database) -> None:
    path, _ = database
    engine = make_engine(f"sqlite:///{path}")
    try:
        with pytest.raises(DBAPIError) as raised, engine.begin() as connection:
            connection.execute(
                text("INSERT INTO documents (id, file_name) VALUES (:id, :name)"),
                {"id": 1, "name": FILE_NAME},  # violates NOT NULL on the other columns
            )
    finally:
        engine.dispose()
    assert FILE_NAME not in str(raised.value)
    assert "parameters hidden" in str(raised.value)


def test_lock_errors_are_told_from_other_errors(database) -> None:
    path, lock = database
    lock.take()
    engine = make_engine(f"sqlite:///{path}")
    started = time.monotonic()
    try:
        db_session.SQLITE_BUSY_TIMEOUT_S, saved = 0.1, db_session.SQLITE_BUSY_TIMEOUT_S
        with pytest.raises(DBAPIError) as locked, engine.begin() as connection:
            connection.execute(text("UPDATE jobs SET stage = 'x'"))
    finally:
        db_session.SQLITE_BUSY_TIMEOUT_S = saved
        engine.dispose()
    assert retry.is_lock_error(locked.value)
    assert time.monotonic() - started < 5
