"""`longdoc ingest --collection NAME`: the stored and the already present files' documents go
into the collection, which is created if new; a second run adds nothing twice."""

from __future__ import annotations

from sqlalchemy import select
from typer.testing import CliRunner

from app.db.models import Document
from app.db.session import make_engine, session_factory
from app.services import collections
from app.settings import get_settings
from tests.pipelines import pdf_factory
from tests.worker.cli import test_ingest as test_cli
from worker.cli import cli

env = test_cli.env  # the fixture: LONGDOC_* for this test, the real tokenizer's cache
runner = CliRunner()


def test_ingest_into_a_collection(env, tmp_path, count_tokens) -> None:
    folder = tmp_path / "matter"
    folder.mkdir()
    pdf_factory.text_pdf(
        folder,
        [
            "Lease.\nThe tenant pays 900 dollars each month to the landlord.",
            "Either party may end it with three months written notice.",
        ],
        name="a.pdf",
    )
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0

    first = runner.invoke(cli, ["ingest", "--collection", "Matter 7", str(folder)])
    again = runner.invoke(cli, ["ingest", "--collection", "Matter 7", str(folder)])

    assert first.exit_code == 0, first.output
    assert "Added 1 document(s) to the new collection 'Matter 7'." in " ".join(first.output.split())
    assert "Added 0 document(s) to collection 'Matter 7'." in " ".join(again.output.split())
    engine = make_engine(get_settings().database_url)
    try:
        with session_factory(engine)() as session:
            (document,) = session.scalars(select(Document))
            matter = collections.find_collection(session=session, name="Matter 7")
            assert collections.document_ids_of(session=session, collection_id=matter.id) == [
                document.id
            ]
    finally:
        engine.dispose()
