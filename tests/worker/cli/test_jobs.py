"""`longdoc summarize` queues through app.services.dispatch.queue_job, as the UI does: with the
broker (a real redis-server) stopped, the job is failed with a sentence and the command says so."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from app.db.models import Job, JobKind, JobStatus
from app.db.session import make_engine, session_factory
from app.services import dispatch
from app.settings import get_settings
from tests.pipelines import pdf_factory
from tests.worker.redis_server import redis_server  # noqa: F401 (fixture)
from worker.cli import cli

runner = CliRunner()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, redis_server) -> None:  # noqa: F811
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LONGDOC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LONGDOC_BROKER_URL", redis_server.url)
    get_settings.cache_clear()
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
    yield
    get_settings.cache_clear()


def _jobs() -> list[Job]:
    engine = make_engine(get_settings().database_url)
    try:
        with session_factory(engine)() as session:
            return list(session.scalars(select(Job).order_by(Job.id)))
    finally:
        engine.dispose()


def test_with_the_broker_stopped_the_cli_fails_its_job_with_a_sentence(
    env,
    tmp_path: Path,
    redis_server,  # noqa: F811
) -> None:
    first = pdf_factory.text_pdf(tmp_path, ["Clause 1. Rent is due monthly."], name="a.pdf")
    second = pdf_factory.text_pdf(tmp_path, ["Clause 2. Notice is 30 days."], name="b.pdf")

    queued = runner.invoke(cli, ["summarize", str(first), "--no-wait"])
    assert queued.exit_code == 0, queued.output
    assert redis_server.llen(dispatch.QUEUE_INGEST) == 1  # the message is on the real broker

    redis_server.stop()
    started = time.monotonic()
    refused = runner.invoke(cli, ["summarize", str(second), "--no-wait"])
    seconds = time.monotonic() - started

    ok, failed = _jobs()
    assert (ok.kind, ok.status) == (JobKind.INGEST, JobStatus.QUEUED)
    assert (failed.status, failed.error_code) == (JobStatus.FAILED, "broker_unavailable")
    assert "could not reach its task queue" in failed.error
    assert refused.exit_code == 1
    assert f"Job {failed.id} failed" in refused.output
    assert "could not reach its task queue" in refused.output
    assert "Traceback" not in refused.output
    assert seconds < 60  # a sentence within seconds, not a hang

    listing = runner.invoke(cli, ["jobs", "--status", "failed"])
    assert listing.exit_code == 0 and str(failed.id) in listing.output
