"""Ingest of scanned pages and bad redactions: what is stored (page sources, confidence, boxes,
passages without the hidden text), the job's stats, and what `longdoc ingest` and `longdoc show`
say about them."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.db.models import Job, JobKind
from app.db.session import make_engine, session_factory
from app.services import documents
from app.settings import get_settings
from tests.pipelines import scan_factory
from tests.pipelines.scan_factory import REDACTED_SENTENCE
from worker.cli import cli
from worker.ingest.store import STORED, IngestOptions
from worker.jobs.ingest import ingest_file

runner = CliRunner()
TEXT_PAGE = "The cover page of the exhibit bundle has a real text layer that pypdf reads well."


def test_hidden_text_is_flagged_counted_and_kept_out_of_passages(
    sessions, count_tokens, tmp_path: Path
) -> None:
    path = scan_factory.boxed_text_pdf(tmp_path, box="black")
    options = IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=16)

    outcome = ingest_file(path, sessions=sessions, options=options, count_tokens=count_tokens)

    assert outcome.status == STORED, outcome.reason
    assert outcome.num_redactions == 1
    assert outcome.notice.startswith(
        "This document has 1 box that hides readable text, on page 1. That text was left out"
    )
    with sessions() as session:
        document = documents.get_document(session=session, document_id=outcome.document_id)
        assert (document.num_redactions, document.is_hidden_text_kept) == (1, False)
        (box,) = documents.get_redactions(session=session, document_id=document.id)
        assert (box.page, box.num_chars) == (1, len(REDACTED_SENTENCE.replace(" ", "")))
        passages = documents.get_passages(session=session, document_id=document.id)
        assert passages and not any("settlement" in p.text for p in passages)
        pages = documents.get_pages(session=session, document_id=document.id)
        assert "settlement" not in pages[0].text and pages[0].source == "text_layer"
        stats = session.get(Job, outcome.job_id).stats
        assert stats["num_redactions"] == 1 and stats["redaction_pages"] == [1]
        assert stats["num_hidden_chars"] == box.num_chars
        assert stats["num_ocr_pages"] == 0 and stats["ocr_mean_confidence"] is None
        assert "settlement" not in repr(stats)


def _flat(output: str) -> str:
    return " ".join(output.split())


@pytest.mark.slow
def test_the_cli_reports_ocr_pages_and_hidden_text(cli_env, tmp_path: Path) -> None:
    mixed = scan_factory.scan_pdf(tmp_path, [TEXT_PAGE, scan_factory.scan_image()], name="m.pdf")
    boxed = scan_factory.boxed_text_pdf(tmp_path, box="black", name="b.pdf")

    result = runner.invoke(cli, ["ingest", str(mixed), str(boxed)])

    assert result.exit_code == 0, result.output
    output = _flat(result.output)
    assert "┃ OCR " in result.output and "┃ hidden " in result.output
    assert "2 stored, 0 already present, 0 refused." in output
    assert "1 page read by OCR; 1 document with boxes that hide readable text." in output
    assert "settlement" not in output
    engine = make_engine(get_settings().database_url)
    try:
        with session_factory(engine)() as session:
            by_name = {d.file_name: d for d in documents.list_documents(session=session)}
            scanned, redacted = by_name["m.pdf"], by_name["b.pdf"]
            assert scanned.num_ocr_pages == 1
            pages = documents.get_pages(session=session, document_id=scanned.id)
            assert [p.source for p in pages] == ["text_layer", "ocr"]
            assert pages[1].ocr_confidence > 0.9 and "Northwind" in pages[1].text
            job = session.query(Job).filter_by(document_id=scanned.id, kind=JobKind.INGEST).one()
            assert job.stats["ocr_pages"] == [2] and job.stats["num_ocr_pages"] == 1
            assert job.stats["ocr_mean_confidence"] == pages[1].ocr_confidence
    finally:
        engine.dispose()

    shown = _flat(runner.invoke(cli, ["show", str(scanned.id), "--no-passages"]).output)
    assert "OCR pages 1 (page 2, mean confidence" in shown
    assert "Page 2 · OCR," in shown and "confidence" in shown

    listed = runner.invoke(cli, ["show", str(redacted.id), "--redactions"])
    assert listed.exit_code == 0, listed.output
    flat = _flat(listed.output)
    assert "This document has 1 box that hides readable text, on page 1." in flat
    assert f" {len(REDACTED_SENTENCE.replace(' ', ''))} " in flat  # characters hidden
    assert "box(es) hide" in flat and "left out of them" in flat
    assert "settlement" not in flat and "Passage" not in flat  # never the text


def test_invisible_text_is_counted_left_out_and_shown_like_redactions(
    sessions, count_tokens, tmp_path: Path
) -> None:
    from rich.console import Console

    from tests.pipelines.raw_pdf import HIDDEN_LINE, VISIBLE_LINE, page_with, text_op, write
    from worker.cli.sources import print_redactions, source_fields

    white = f"{text_op(VISIBLE_LINE, 72, 700)} 1 g {text_op(HIDDEN_LINE, 72, 650)} 0 g"
    path = write(tmp_path, "white.pdf", page_with(white))
    options = IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=16)

    outcome = ingest_file(path, sessions=sessions, options=options, count_tokens=count_tokens)

    assert outcome.status == STORED, outcome.reason
    num_hidden = len(HIDDEN_LINE.replace(" ", ""))
    assert outcome.notice.startswith(
        f"This document has {num_hidden} character(s) of text a reader cannot see"
    )
    assert "left out of what LongDoc stored" in outcome.notice
    with sessions() as session:
        document = documents.get_document(session=session, document_id=outcome.document_id)
        assert document.num_redactions == 0
        assert documents.invisible_text_of(session=session, document_id=document.id) == (
            {1: num_hidden},
            False,
        )
        stats = session.get(Job, outcome.job_id).stats
        assert stats["num_invisible_chars"] == num_hidden and stats["invisible_text"] == [
            [1, num_hidden]
        ]
        pages = documents.get_pages(session=session, document_id=document.id)
        passages = documents.get_passages(session=session, document_id=document.id)
        assert VISIBLE_LINE in pages[0].text and "Secret" not in pages[0].text
        assert not any("Secret" in p.text for p in passages)
        fields = dict(source_fields(session=session, document=document))
        assert fields["Invisible text"].startswith(f"This document has {num_hidden} character(s)")
        console = Console(record=True, width=120)
        assert print_redactions(console, session=session, document=document) == 0
        shown = _flat(console.export_text())
        assert f"{num_hidden} invisible character(s), left out of them." in shown
        assert "Secret" not in shown and "Secret" not in repr(stats)
