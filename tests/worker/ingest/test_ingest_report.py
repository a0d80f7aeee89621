"""What ingestion tells people beyond stored/refused: a page that could not be read, a finished
job's stage, and `longdoc ingest`'s exit status when nothing was stored."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from app.db.models import Job, JobStatus
from tests.pipelines import pdf_factory
from worker.cli import cli
from worker.ingest.store import STORED, IngestOptions
from worker.jobs.ingest import ingest_file

PAGES = [
    "This Agreement is made between Acme Inc. and Beta Corp. on the first of May.",
    "Beta Corp. shall pay Acme Inc. ten thousand dollars each month.",
    "Either party may end this Agreement on thirty days written notice.",
]
runner = CliRunner()


def test_a_page_that_cannot_be_read_is_reported_not_dropped(
    sessions, count_tokens, tmp_path: Path
) -> None:
    source = pdf_factory.text_pdf(tmp_path, PAGES)
    broken = pdf_factory.failing_page_pdf(source, page_index=1)
    options = IngestOptions(files_dir=tmp_path / "files")

    outcome = ingest_file(broken, sessions=sessions, options=options, count_tokens=count_tokens)

    assert outcome.status == STORED
    assert outcome.notice == (
        "Page 2 could not be read and is stored empty; summaries and answers cannot use it."
    )
    with sessions() as session:
        job = session.get(Job, outcome.job_id)
        assert job.stats["failed_pages"] == [2]
        assert job.stats["notice"] == outcome.notice
        assert (job.status, job.stage) == (JobStatus.SUCCEEDED, "done")  # not "storing"


def test_ingest_exits_1_when_nothing_was_stored(cli_env, count_tokens, tmp_path: Path) -> None:
    refused = pdf_factory.not_a_pdf(tmp_path, name="letter.pdf")
    good = pdf_factory.text_pdf(tmp_path, PAGES, name="good.pdf")

    nothing = runner.invoke(cli, ["ingest", str(refused)])
    some = runner.invoke(cli, ["ingest", str(refused), str(good)])
    again = runner.invoke(cli, ["ingest", str(good)])  # already there: in the library

    assert nothing.exit_code == 1, nothing.output
    assert "0 stored, 0 already present, 1 refused." in nothing.output
    assert some.exit_code == 0, some.output
    assert again.exit_code == 0, again.output
    help_text = runner.invoke(cli, ["ingest", "--help"]).output
    assert "Exit status 1 when no file ends up in the library" in " ".join(help_text.split())


def test_the_table_shows_a_stored_file_s_unreadable_pages(
    cli_env, count_tokens, tmp_path: Path
) -> None:
    source = pdf_factory.text_pdf(tmp_path, PAGES, name="source.pdf")
    broken = pdf_factory.failing_page_pdf(source, page_index=2, name="partly.pdf")

    result = runner.invoke(cli, ["ingest", str(broken)])

    assert result.exit_code == 0, result.output
    assert "Page 3 could not be read" in " ".join(result.output.split())
