"""`longdoc ingest --collection NAME`: the stored and the already present files' documents go
into the collection, which is created if new; a second run adds nothing twice."""

from __future__ import annotations

from sqlalchemy import select
from typer.testing import CliRunner

from app.db.models import Collection, Document
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


def test_ingest_as_an_editor_into_a_name_of_a_hidden_collection(
    env, tmp_path, count_tokens
) -> None:
    """Names are unique per owner: an editor who may not read the admins' "Matter 7" ingests
    into a "Matter 7" of their own, told nothing of the other; the admin, who reads both, is
    refused the name with their ids before any file is read, and picks one with "#ID"."""
    folder = tmp_path / "matter"
    folder.mkdir()
    pdf_factory.text_pdf(folder, ["Lease.\nThe tenant pays 900 dollars each month."], name="a.pdf")
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
    assert runner.invoke(cli, ["collections", "create", "Matter 7"]).exit_code == 0
    added = runner.invoke(
        cli, ["users", "add", "edna", "--role", "editor", "--password-stdin"], input="a" * 16
    )
    assert added.exit_code == 0, added.output

    theirs = runner.invoke(cli, ["--as", "edna", "ingest", "--collection", "Matter 7", str(folder)])
    assert theirs.exit_code == 0, theirs.output
    assert "Added 1 document(s) to the new collection 'Matter 7'." in " ".join(
        theirs.output.split()
    )
    engine = make_engine(get_settings().database_url)
    try:
        with session_factory(engine)() as session:
            admins, ednas = session.scalars(select(Collection).order_by(Collection.id))
            assert ednas.owner_id is not None and admins.owner_id is None
            assert collections.document_ids_of(session=session, collection_id=admins.id) == []
            (document,) = session.scalars(select(Document))
            assert collections.document_ids_of(session=session, collection_id=ednas.id) == [
                document.id
            ]
    finally:
        engine.dispose()
    both = runner.invoke(cli, ["ingest", "--collection", "Matter 7", str(folder)])
    assert both.exit_code == 1
    assert f"#{admins.id} (the admins'), #{ednas.id} (edna's)" in " ".join(both.output.split())
    picked = runner.invoke(cli, ["ingest", "--collection", f"#{admins.id}", str(folder)])
    assert picked.exit_code == 0, picked.output
    assert "Added 1 document(s) to collection 'Matter 7'." in " ".join(picked.output.split())
    assert "Ingestion" in picked.output and "Ingestion" not in both.output  # no file was read
