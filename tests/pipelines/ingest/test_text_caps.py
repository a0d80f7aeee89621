"""Text caps, decided inside the parse child: text bombs are refused with a sentence, early, and
a document under the caps is read as before."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pipelines.errors import TooComplexError, TooMuchTextError
from pipelines.ingest.limits import ParseLimits
from pipelines.ingest.parse import parse_pdf, parse_pdf_outcome
from tests.pipelines import pdf_factory


def test_a_small_stream_drawn_on_several_pages_is_refused_in_the_child(tmp_path: Path) -> None:
    bomb = pdf_factory.amplified_pdf(tmp_path, num_pages=4, chars_per_page=400_000)
    assert bomb.stat().st_size < 10_000  # a few KB that give 1.6 million characters
    with pytest.raises(TooMuchTextError, match=r"Page 1 .* more than 100,000 characters"):
        parse_pdf(bomb)


def test_a_bomb_on_one_line_is_stopped_early(tmp_path: Path) -> None:
    # pypdf hands out a line's text only at its end: the shown bytes stop it well before that.
    bomb = pdf_factory.amplified_pdf(tmp_path, num_pages=2, chars_per_page=4_000_000, lines=False)
    started = time.monotonic()
    with pytest.raises(TooMuchTextError, match="Page 1"):
        parse_pdf(bomb)
    assert time.monotonic() - started < 20  # pypdf reads the whole line in about a minute here


def test_the_document_cap_counts_every_page(tmp_path: Path) -> None:
    pdf = pdf_factory.amplified_pdf(tmp_path, num_pages=30, chars_per_page=20_000)
    with pytest.raises(TooMuchTextError, match=r"more than 200,000 characters of text"):
        parse_pdf(pdf, limits=ParseLimits(max_document_chars=200_000))
    document = parse_pdf(pdf, limits=ParseLimits(max_document_chars=1_000_000))
    assert document.num_pages == 30
    assert 500_000 < document.num_chars <= 600_000


def test_the_exact_cap_applies_to_the_cleaned_text(tmp_path: Path) -> None:
    # 60,000 raw characters pass the early stop (1.25 x 50,000); the cleaned page is still over.
    pdf = pdf_factory.amplified_pdf(tmp_path, num_pages=1, chars_per_page=60_000)
    with pytest.raises(TooMuchTextError, match=r"Page 1 .* 50,000"):
        parse_pdf_outcome(pdf, limits=ParseLimits(max_page_chars=50_000), in_child=False)
    assert parse_pdf(pdf, limits=ParseLimits(max_page_chars=70_000)).num_pages == 1


def test_a_pypdf_safety_limit_is_not_called_damage(tmp_path: Path) -> None:
    pdf = pdf_factory.overflowing_stream_pdf(tmp_path)
    with pytest.raises(TooComplexError, match="safety limits") as refused:
        parse_pdf(pdf)
    assert "damaged" not in str(refused.value)
    assert refused.value.code == "too_complex"
