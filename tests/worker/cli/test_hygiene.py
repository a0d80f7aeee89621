"""`longdoc ingest`, `docs` and `show` with a hostile file name and PDF title: nothing that can
rewrite a terminal is printed, and no bidi override is stored."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from typer.testing import CliRunner

from app.db.models import Document
from app.db.session import make_engine, session_factory
from app.settings import get_settings
from tests.pipelines import pdf_factory
from worker.cli import cli

HOSTILE = "\x1b[2J\x1b]0;owned\x07inv\u202efdp.exe"
UNSAFE = ("\x1b", "\x07", "\x9b", "\u202e")
runner = CliRunner()


def test_escape_codes_and_overrides_never_reach_the_terminal_or_the_database(
    cli_env, count_tokens, tmp_path: Path
) -> None:
    pdf = pdf_factory.text_pdf(
        tmp_path,
        ["The tenant pays the rent on the first day of each month."],
        name=f"{HOSTILE}.pdf",
        title=f"Lease {HOSTILE}",
    )
    missing = tmp_path / f"gone{HOSTILE}.pdf"

    ingested = runner.invoke(cli, ["ingest", str(pdf), str(missing)])
    listed = runner.invoke(cli, ["docs"])
    shown = runner.invoke(cli, ["show", "1"])

    assert ingested.exit_code == 0, ingested.output
    for result in (ingested, listed, shown):
        assert not [c for c in UNSAFE if c in result.output], repr(result.output)
    assert "invfdp.exe" in " ".join(ingested.output.split()).replace(" ", "")
    engine = make_engine(get_settings().database_url)
    try:
        with session_factory(engine)() as session:
            (document,) = session.scalars(select(Document))
    finally:
        engine.dispose()
    for value in (document.file_name, document.title):
        assert not [c for c in UNSAFE if c in value], repr(value)
    assert document.file_name == "inv fdp.exe.pdf"
