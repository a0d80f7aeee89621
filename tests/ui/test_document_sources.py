"""The document page says where the text came from: a warning for boxes that hide readable text
and one for text a reader cannot see, a note for pages read by OCR, "(OCR)" on citations of
those pages and their confidence on the page viewer."""

from __future__ import annotations

from app.db.models import Job, JobKind, JobStatus, Page, Redaction
from tests.ui.conftest import all_text, open_page
from tests.ui.seed import add_answer, add_document

PAGES = [
    "Settlement between Acme and Beta. The parties settle every claim.",
    "A scanned exhibit with the signatures of both parties.",
    "Each party bears its own costs.",
]


def _seed(sessions, files_dir) -> int:
    with sessions() as session:
        document = add_document(session, files_dir, title="Settlement", pages=PAGES)
        page = session.query(Page).filter_by(document_id=document.id, number=2).one()
        page.source, page.ocr_confidence = "ocr", 0.964
        document.num_ocr_pages = 1
        for number in (1, 3, 3):
            session.add(
                Redaction(
                    document_id=document.id,
                    page=number,
                    left=50,
                    bottom=600,
                    right=300,
                    top=615,
                    num_chars=40,
                )
            )
        document.num_redactions = 3
        add_answer(session, document.id, "Who signed?", "Both parties [p. 2].", [2, 3], [])
        session.commit()
        return document.id


def test_the_page_warns_of_hidden_text_and_marks_ocr_pages(app_test, ui_settings, sessions) -> None:
    document_id = _seed(sessions, ui_settings.files_dir)
    at = open_page(app_test(), "views/document.py", doc=str(document_id))
    assert not at.exception
    text = all_text(at)
    assert "This document has 3 boxes that hide readable text, on pages 1 and 3." in text
    assert "left out of what LongDoc stored" in text
    assert "Page 2 was read by OCR (mean confidence 96%)." in text
    labels = [button.label for button in at.button]
    assert "p. 2 (OCR)" in labels and "p. 3" in labels

    at.number_input(key="page_number").set_value(2).run()
    assert "Read by OCR, 96% confidence" in all_text(at)
    at.number_input(key="page_number").set_value(1).run()
    assert "Read by OCR" not in all_text(at)


def test_a_document_without_either_says_nothing_of_them(app_test, ui_settings, sessions) -> None:
    with sessions() as session:
        document_id = add_document(session, ui_settings.files_dir, title="Plain", pages=PAGES).id
        session.commit()
    at = open_page(app_test(), "views/document.py", doc=str(document_id))
    assert not at.exception
    text = all_text(at)
    assert "hide readable text" not in text and "read by OCR" not in text
    assert "a reader cannot see" not in text


def test_the_page_warns_of_invisible_text_left_out(app_test, ui_settings, sessions) -> None:
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Plain", pages=PAGES)
        stats = {"invisible_text": [[1, 45], [3, 5]], "is_hidden_text_kept": False}
        session.add(
            Job(
                kind=JobKind.INGEST,
                status=JobStatus.SUCCEEDED,
                document_id=document.id,
                stats=stats,
            )
        )
        session.commit()
        document_id = document.id
    at = open_page(app_test(), "views/document.py", doc=str(document_id))
    assert not at.exception
    text = all_text(at)
    assert "This document has 50 character(s) of text a reader cannot see" in text
    assert "on pages 1 and 3. It was left out of what LongDoc stored" in text
