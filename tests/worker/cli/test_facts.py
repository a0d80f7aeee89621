"""`longdoc facts ID` (a table with quotes and pages), `--run` (queued by task name), and
`--export` to CSV and JSON, on SQLite in a temp folder through the real entry point."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.db.models import Job, JobKind, JobStatus
from app.db.session import make_engine, session_factory
from app.services import documents, jobs
from app.services import facts as fact_service
from app.settings import get_settings
from tests.app.new_documents import new_document
from worker.cli import cli

runner = CliRunner()
CLAUSE = "This Agreement is governed by the laws of the State of Oregon."


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LONGDOC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "200")  # rich tables keep whole words in the output
    get_settings.cache_clear()
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
    yield tmp_path / "data"
    get_settings.cache_clear()


def _session():
    engine = make_engine(get_settings().database_url)
    return engine, session_factory(engine)()


def _document_with_facts() -> int:
    engine, session = _session()
    try:
        document = documents.store_document(session=session, new=new_document())
        job = jobs.create_job(session=session, kind=JobKind.FACTS, document_id=document.id)
        fact_service.save_facts(
            session=session,
            job_id=job.id,
            document_id=document.id,
            model="m",
            facts=[
                fact_service.NewFact(
                    "governing_law",
                    "Governing law",
                    0,
                    "Oregon",
                    "Oregon",
                    0.6,
                    "rule",
                    page=2,
                    evidence=[{"text": CLAUSE, "page": 2, "start_char": 0, "end_char": 62}],
                ),
                fact_service.NewFact("renewal_term", "Renewal term", 1, "", "", 0.0, "none"),
            ],
        )
        jobs.finish_job(session=session, job_id=job.id)
        session.commit()
        return document.id
    finally:
        session.close()
        engine.dispose()


def test_facts_of_a_document_are_a_table_with_quote_and_page(env) -> None:
    document_id = _document_with_facts()
    result = runner.invoke(cli, ["facts", str(document_id)])
    assert result.exit_code == 0, result.output
    assert "Governing law" in result.output and "Oregon" in result.output
    assert "laws of the State of Oregon" in result.output
    assert "not found" in result.output  # the renewal term: empty, not guessed
    assert "1 of 2 fields found" in result.output


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_export_writes_the_whole_library(env, tmp_path, suffix) -> None:
    document_id = _document_with_facts()
    target = tmp_path / f"facts{suffix}"
    result = runner.invoke(cli, ["facts", "--export", str(target)])
    assert result.exit_code == 0, result.output
    assert "Wrote the key facts of 1 document(s)" in result.output
    if suffix == ".csv":
        with target.open(newline="", encoding="utf-8") as handle:
            (row,) = list(csv.DictReader(handle))
    else:
        (row,) = json.loads(target.read_text(encoding="utf-8"))
    assert str(row["document_id"]) == str(document_id)
    assert (row["governing_law"], row["renewal_term"]) == ("Oregon", "")


def test_run_queues_a_facts_job_by_task_name(env) -> None:
    document_id = _document_with_facts()
    result = runner.invoke(cli, ["facts", str(document_id), "--run", "--no-wait"])
    assert result.exit_code == 0, result.output
    engine, session = _session()
    try:
        queued = jobs.list_jobs(session=session, kind=JobKind.FACTS, status=JobStatus.QUEUED)
        (job,) = queued
        assert isinstance(job, Job) and job.document_id == document_id
        assert f"Queued job {job.id}." in result.output
    finally:
        session.close()
        engine.dispose()
    (message,) = list((env / "broker" / "queue").glob("*.gpu_batch.msg"))
    assert job.task_id in message.read_text() and "longdoc.facts" in message.read_text()


def test_missing_document_bad_format_and_no_target_are_sentences(env, tmp_path) -> None:
    missing = runner.invoke(cli, ["facts", "42"])
    bad = runner.invoke(cli, ["facts", "--export", str(tmp_path / "facts.xlsx")])
    neither = runner.invoke(cli, ["facts"])
    assert missing.exit_code == 1 and "no document with id 42" in missing.output
    assert bad.exit_code == 1 and "as .csv or .json" in bad.output
    assert neither.exit_code != 0 and "Traceback" not in neither.output
