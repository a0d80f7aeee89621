"""The sentences about OCR'd pages and hidden text, and the monitoring page's counts of them."""

from datetime import UTC, datetime

from app.services.ingest_counts import ingest_counts
from app.services.monitoring import JobRecord
from app.services.provenance import (
    invisible_text_warning,
    ocr_notice,
    page_list,
    redaction_warning,
    source_label,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_page_lists_read_as_english() -> None:
    assert page_list([2]) == "2"
    assert page_list([5, 2, 2]) == "2 and 5"
    assert page_list([7, 2, 5]) == "2, 5 and 7"
    assert page_list(list(range(1, 13))) == "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, …"


def test_the_redaction_warning_counts_boxes_and_names_pages() -> None:
    assert redaction_warning(pages=[], is_hidden_text_kept=False) is None
    warning = redaction_warning(pages=[2, 5, 5], is_hidden_text_kept=False)
    assert warning.startswith(
        "This document has 3 boxes that hide readable text, on pages 2 and 5."
    )
    assert "left out" in warning
    kept = redaction_warning(pages=[4], is_hidden_text_kept=True)
    assert kept.startswith("This document has 1 box that hides readable text, on page 4.")
    assert "kept for review" in kept


def test_the_invisible_text_warning_counts_characters_and_names_pages() -> None:
    assert invisible_text_warning(counts={}, is_hidden_text_kept=False) is None
    assert invisible_text_warning(counts={3: 0}, is_hidden_text_kept=False) is None
    warning = invisible_text_warning(counts={5: 1200, 2: 40}, is_hidden_text_kept=False)
    assert warning.startswith("This document has 1,240 character(s) of text a reader cannot see")
    assert "on pages 2 and 5." in warning and "left out" in warning
    kept = invisible_text_warning(counts={4: 9}, is_hidden_text_kept=True)
    assert "on page 4." in kept and "kept for review" in kept


def test_ocr_sentences() -> None:
    assert ocr_notice(ocr_pages=[], mean_confidence=None) is None
    assert ocr_notice(ocr_pages=[3], mean_confidence=0.971) == (
        "Page 3 was read by OCR (mean confidence 97%)."
    )
    assert ocr_notice(ocr_pages=[2, 3], mean_confidence=None) == "Pages 2 and 3 were read by OCR."
    assert source_label(source="text_layer", ocr_confidence=None) == "text layer"
    assert source_label(source="ocr", ocr_confidence=0.9) == "OCR, 90% confidence"


def _ingest(job_id: int, **stats) -> JobRecord:
    return JobRecord(job_id, "ingest", "succeeded", NOW, NOW, NOW, stats)


def test_ingest_counts_weigh_confidence_by_pages_and_skip_files_already_there() -> None:
    records = [
        _ingest(1, num_ocr_pages=3, ocr_mean_confidence=0.9, num_redactions=0),
        _ingest(2, num_ocr_pages=1, ocr_mean_confidence=0.5, num_redactions=2, num_hidden_chars=80),
        _ingest(3, num_ocr_pages=0, ocr_mean_confidence=None),
        _ingest(4, already_present=True),
        JobRecord(5, "ingest", "failed", NOW, stats={"num_ocr_pages": 9}),
        JobRecord(6, "summarize", "succeeded", NOW, stats={"num_ocr_pages": 9}),
    ]
    counts = ingest_counts(records)
    assert (counts.num_stored, counts.num_with_ocr, counts.num_ocr_pages) == (3, 2, 4)
    assert abs(counts.ocr_mean_confidence - 0.8) < 1e-9
    assert (counts.num_with_redactions, counts.num_redactions, counts.num_hidden_chars) == (
        1,
        2,
        80,
    )
    assert ingest_counts([]).ocr_mean_confidence is None
