"""The bad-redaction check: a black box over text still in the file is found and its text left
out; a box over removed text, a grey highlight and a box over nothing are not redactions."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.ingest.limits import ParseLimits
from pipelines.ingest.page_sources import SourceOptions
from pipelines.ingest.parse import parse_pdf, parse_pdf_in_process
from pipelines.ingest.split import split_into_passages
from tests.pipelines import scan_factory
from tests.pipelines.scan_factory import PAGE_LINES, REDACTED_SENTENCE

KEEP = ParseLimits(sources=SourceOptions(keep_hidden_text=True))


def _words(text: str) -> int:
    return len(text.split())


def test_a_black_box_over_a_sentence_is_flagged_and_the_sentence_left_out(
    tmp_path: Path,
) -> None:
    document = parse_pdf(scan_factory.boxed_text_pdf(tmp_path, box="black"))
    (box,) = document.redactions
    assert box.page == 1
    assert box.num_chars == len(REDACTED_SENTENCE.replace(" ", ""))
    assert box.right > box.left and box.top > box.bottom
    text = document.pages[0].text
    assert "settlement" not in text and "4,250,000" not in text
    assert PAGE_LINES[0] in text and PAGE_LINES[2] in text  # the rest of the page stays
    passages = split_into_passages(
        document.pages, count_tokens=lambda texts: [_words(t) for t in texts], max_tokens=40
    )
    assert passages and not any("settlement" in p.text for p in passages)
    assert document.is_hidden_text_removed


def test_a_reviewer_setting_keeps_the_hidden_text_and_still_flags_it(tmp_path: Path) -> None:
    document = parse_pdf_in_process(scan_factory.boxed_text_pdf(tmp_path, box="black"), limits=KEEP)
    assert len(document.redactions) == 1
    assert REDACTED_SENTENCE in document.pages[0].text
    assert not document.is_hidden_text_removed


@pytest.mark.parametrize("box", ["removed", "grey", "empty", "none"])
def test_boxes_that_hide_nothing_readable_are_not_flagged(tmp_path: Path, box: str) -> None:
    document = parse_pdf_in_process(scan_factory.boxed_text_pdf(tmp_path, box=box))
    assert document.redactions == ()
    text = document.pages[0].text
    # An opaque light box drawn over the sentence hides it too: not a redaction (nothing dark),
    # but text a reader cannot see, so it is left out as invisible text.
    assert (REDACTED_SENTENCE in text) == (box not in ("removed", "grey"))
    assert PAGE_LINES[0] in text and PAGE_LINES[2] in text


def test_white_text_on_a_black_banner_is_readable_not_hidden(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF(unit="mm", format="A4")
    pdf.add_page()
    pdf.set_fill_color(0)
    pdf.rect(15, 20, 180, 14, style="F")
    pdf.set_text_color(255)
    pdf.set_font("Helvetica", size=16)
    pdf.text(20, 30, "EXHIBIT A: MASTER SERVICES AGREEMENT")
    pdf.set_text_color(0)
    pdf.set_font("Helvetica", size=11)
    pdf.text(20, 50, "The body of the exhibit follows the banner and is plain to read.")
    path = tmp_path / "banner.pdf"
    pdf.output(str(path))
    document = parse_pdf_in_process(path)
    assert document.redactions == ()
    assert "EXHIBIT A" in document.pages[0].text


def test_the_check_can_be_turned_off(tmp_path: Path) -> None:
    off = ParseLimits(sources=SourceOptions(check_redactions=False))
    document = parse_pdf_in_process(scan_factory.boxed_text_pdf(tmp_path, box="black"), limits=off)
    assert document.redactions == ()
    assert REDACTED_SENTENCE in document.pages[0].text
