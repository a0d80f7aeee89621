"""`longdoc summarize/ask/jobs` queue by task name; `longdoc up` runs worker and beat together
and stops both on Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from app.db.models import Document, Job, JobKind, JobStatus
from app.db.session import make_engine, session_factory
from app.settings import get_settings
from tests.pipelines import pdf_factory
from tests.worker import celery_support
from worker.cli import cli

runner = CliRunner()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LONGDOC_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
    yield {"LONGDOC_DATA_DIR": str(tmp_path / "data")}
    get_settings.cache_clear()


def _jobs() -> list[Job]:
    engine = make_engine(get_settings().database_url)
    try:
        with session_factory(engine)() as session:
            return list(session.scalars(select(Job).order_by(Job.id)))
    finally:
        engine.dispose()


def test_summarize_no_wait_stores_the_file_and_queues_by_name(env, tmp_path) -> None:
    pdf = pdf_factory.text_pdf(tmp_path, ["Clause 1. Rent is due monthly."], name="lease.pdf")

    result = runner.invoke(cli, ["summarize", str(pdf), "--no-wait"])

    assert result.exit_code == 0, result.output
    (job,) = _jobs()
    assert f"Queued job {job.id}." in result.output
    assert (job.kind, job.status) == (JobKind.INGEST, JobStatus.QUEUED)
    assert job.params["then_summarize"] and job.params["file_name"] == "lease.pdf"
    assert Path(job.params["path"]).read_bytes() == pdf.read_bytes()  # in the document store
    queue = Path(env["LONGDOC_DATA_DIR"]) / "broker" / "queue"
    (message,) = list(queue.glob("*.ingest.msg"))
    assert job.task_id in message.read_text()

    listing = runner.invoke(cli, ["jobs"])
    assert listing.exit_code == 0 and "ingest" in listing.output and "queued" in listing.output


def test_ask_and_summarize_of_a_missing_document_are_one_sentence(env) -> None:
    asked = runner.invoke(cli, ["ask", "42", "What is the rent?", "--no-wait"])
    summarized = runner.invoke(cli, ["summarize", "42", "--no-wait"])

    for result in (asked, summarized):
        assert result.exit_code == 1
        assert "no document with id 42" in result.output and "Traceback" not in result.output
    assert _jobs() == []


def test_worker_refuses_unknown_queues(env) -> None:
    result = runner.invoke(cli, ["worker", "--queues=gpu,fast"])

    assert result.exit_code != 0 and "--queues" in result.output


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_up_ingests_the_inbox_and_stops_on_ctrl_c(env, tmp_path, converted_model_cache) -> None:
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("LONGDOC_")}
    child_env.update(
        env,
        # This checkout's code, whatever checkout the `longdoc` script was installed from.
        PYTHONPATH=os.pathsep.join(
            filter(None, [str(celery_support.REPO), os.environ.get("PYTHONPATH")])
        ),
        LONGDOC_MODEL_CACHE_DIR=str(converted_model_cache),
        LONGDOC_INBOX_SCAN_INTERVAL_S="1",
        LONGDOC_AUTO_SUMMARIZE_ENABLED="false",
    )
    inbox = Path(env["LONGDOC_DATA_DIR"]) / "inbox"
    inbox.mkdir(parents=True)
    pages = [
        "Referral letter.\nThe patient has had asthma since childhood and uses an inhaler daily.",
        "Plan.\nReview the inhaler technique and repeat the lung function test in three months.",
    ]
    pdf = pdf_factory.text_pdf(inbox, pages, name="r.pdf")
    settled = time.time() - 60
    os.utime(pdf, (settled, settled))
    log = (tmp_path / "up.log").open("wb")
    up = subprocess.Popen(
        [celery_support.LONGDOC, "up"], env=child_env, stdout=log, stderr=subprocess.STDOUT
    )
    children: list[int] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not _documents():
            assert up.poll() is None, (tmp_path / "up.log").read_text()[-3000:]
            children = _children(up.pid) or children
            time.sleep(0.5)
        assert [d.file_name for d in _documents()] == ["r.pdf"]
        children = _children(up.pid)
        assert len(children) == 3  # the model worker, the ingest worker and beat

        started = time.monotonic()
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=60) == 0
        assert time.monotonic() - started < 60
        assert not any(_alive(pid) for pid in children)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait(timeout=10)
        # Children are read before `up` is gone: once it is, they belong to init.
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        log.close()
    output = (tmp_path / "up.log").read_text()
    assert "Stopped." in output and "Traceback" not in output


def _documents() -> list[Document]:
    engine = make_engine(get_settings().database_url)
    try:
        with session_factory(engine)() as session:
            return list(session.scalars(select(Document)))
    finally:
        engine.dispose()


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status
