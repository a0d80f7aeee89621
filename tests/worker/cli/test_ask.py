"""`longdoc ask` prints the answer, its support label and its quotes with pages; `longdoc
summarize` prints the key passages before the model's summary. A thread stands in for the
worker: it runs the queued job's task body (worker/jobs/answer.py, summary.py) with the echo model."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from app.db.models import Job, JobKind, JobStatus
from app.db.session import make_engine, session_factory
from app.services import collections, documents, jobs
from app.services.answer_labels import MODEL_TEXT_TITLE
from app.settings import get_settings
from tests.app.new_documents import new_document
from tests.pipelines.contract_pdf import contract_pdf
from tests.pipelines.echo_model import EchoModel, count_words
from worker.cli import cli
from worker.ingest.store import IngestOptions
from worker.jobs import answer as answer_run
from worker.jobs import ingest as runner_ingest
from worker.jobs import job_run
from worker.jobs import summary as summary_run

cli_runner = CliRunner()
WAIT_S = 30.0


@pytest.fixture
def sessions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    for name in list(os.environ):
        if name.startswith("LONGDOC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LONGDOC_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    assert cli_runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
    engine = make_engine(get_settings().database_url)
    yield session_factory(engine)
    engine.dispose()
    get_settings.cache_clear()


def _document(sessions, tmp_path: Path) -> int:
    path = contract_pdf(tmp_path, num_pages=4, law_page=3)
    with sessions() as session:
        job = jobs.create_job(
            session=session,
            kind=JobKind.INGEST,
            params={"path": str(path), "file_name": path.name},
        )
        session.commit()
        job_id = job.id
    runner_ingest.run_ingest(
        job_id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=40),
        count_tokens=count_words,
    )
    with sessions() as session:
        return session.get(Job, job_id).document_id


def _worker(sessions, kind: JobKind, run: Callable[[int], object]) -> threading.Thread:
    """Runs the first queued job of `kind` once its task reached the broker, as a worker would.
    Not earlier: between committing the job and sending its task the CLI's side still writes
    to the database, and SQLite then refuses the worker's first write ("database is locked")."""
    queue = Path(get_settings().data_dir) / "broker" / "queue"

    def work() -> None:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with sessions() as session:
                job = session.scalars(
                    select(Job).where(Job.kind == kind, Job.status == JobStatus.QUEUED)
                ).first()
                job_id, task_id = (job.id, job.task_id) if job else (None, None)
            sent = task_id is not None and any(
                task_id in message.read_text() for message in queue.glob("*.msg")
            )
            if sent:
                run(job_id)
                return
            time.sleep(0.1)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_ask_prints_the_label_and_the_quotes_with_their_pages(sessions, tmp_path) -> None:
    document_id = _document(sessions, tmp_path)
    thread = _worker(
        sessions,
        JobKind.ANSWER,
        lambda job_id: answer_run.run_answer(
            job_id,
            sessions=sessions,
            model_factory=lambda: EchoModel(extra_text=" Nevada law governs."),
            max_new_tokens=300,
        ),
    )

    result = cli_runner.invoke(cli, ["ask", str(document_id), "Which state's law governs?"])
    thread.join(WAIT_S)

    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    assert "(quoted from p. 3)" in output
    # The clause quoted states the governing law: that quote is the answer, supported, and the
    # model's text is set apart with what it stated that the document does not hold.
    assert "Supported by the quoted text." in output
    assert 'It stated "Nevada", which the document does not contain.' in output
    assert 'Quoted from the document: p. 3: "This Agreement shall be governed by' in output
    assert f"{MODEL_TEXT_TITLE}: " in output and "Nevada law governs." in output  # the UI's words
    assert "Cited pages: 3" in output


def test_summarize_prints_the_key_passages_first(sessions, tmp_path) -> None:
    document_id = _document(sessions, tmp_path)
    thread = _worker(
        sessions,
        JobKind.SUMMARIZE,
        lambda job_id: summary_run.run_summary(
            job_id, sessions=sessions, model_factory=EchoModel, max_new_tokens=300
        ),
    )

    result = cli_runner.invoke(cli, ["summarize", str(document_id)])
    thread.join(WAIT_S)

    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    assert output.index("Key passages") < output.index("Summary by the model")
    assert 'p. 1: "This Supply Agreement is made on March 3, 2021' in output


def test_summarize_prints_each_sentence_with_its_page_and_sets_invented_ones_apart(
    sessions, tmp_path
) -> None:
    document_id = _document(sessions, tmp_path)
    thread = _worker(
        sessions,
        JobKind.SUMMARIZE,
        lambda job_id: summary_run.run_summary(
            job_id,
            sessions=sessions,
            model_factory=lambda: EchoModel(extra_text=" It is governed by Nevada law."),
            max_new_tokens=300,
        ),
    )

    result = cli_runner.invoke(cli, ["summarize", str(document_id)])
    thread.join(WAIT_S)

    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    summary = output[output.index("Summary by the model") :]
    assert "This Supply Agreement is made on March 3, 2021" in summary
    assert "[p. 1]" in summary
    assert "Set apart (not supported by the document):" in summary
    assert '- It is governed by Nevada law. (not in the document: "Nevada")' in summary


def test_summarize_prints_the_lead_from_the_key_facts_before_the_models_summary(
    sessions, tmp_path
) -> None:
    from tests.pipelines.facts_documents import ScriptedModel
    from worker.jobs import facts as runner_facts

    document_id = _document(sessions, tmp_path)
    with sessions() as session:
        facts_job = jobs.create_job(session=session, kind=JobKind.FACTS, document_id=document_id)
        session.commit()
        facts_job_id = facts_job.id
    law = ScriptedModel({"Which state's or country's law governs this agreement?": "Vermont"})
    outcome = runner_facts.run_facts(facts_job_id, sessions=sessions, model_factory=lambda: law)
    assert outcome.status == job_run.SUCCEEDED
    thread = _worker(
        sessions,
        JobKind.SUMMARIZE,
        lambda job_id: summary_run.run_summary(
            job_id, sessions=sessions, model_factory=EchoModel, max_new_tokens=300
        ),
    )

    result = cli_runner.invoke(cli, ["summarize", str(document_id)])
    thread.join(WAIT_S)

    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    lead = output.index("Key facts (each quoted from the document):")
    assert output.index("Key passages") < lead < output.index("Summary by the model")
    assert "Governing law: Vermont. [p. 3]" in output[lead:]
    assert "Parties: Quillfeather Mills LLC; Borrowdale Instruments Inc." in output[lead:]


def test_ask_and_search_refuse_invisible_and_over_long_text_with_the_sentence(
    sessions, tmp_path
) -> None:
    # The services refuse them (app/services/questions.py) before any job exists.
    with sessions() as session:
        document = documents.store_document(session=session, new=new_document())
        collections.create_collection(session=session, name="Leases")
        session.commit()
        document_id = document.id
    for args in (
        ["ask", str(document_id), "\u200b\u200b\u2060"],
        ["ask", "--collection", "Leases", "\u200b\u200b"],
    ):
        result = cli_runner.invoke(cli, args)
        assert result.exit_code == 1 and "The question is empty" in result.output, result.output
    result = cli_runner.invoke(cli, ["ask", str(document_id), "Which law? " * 300])
    assert result.exit_code == 1 and "at most 2,000" in " ".join(result.output.split())
    result = cli_runner.invoke(cli, ["search", "consent " * 100])
    assert result.exit_code == 1 and "at most 500" in " ".join(result.output.split())
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 0
