"""OCR of scanned pages, through the parse child: accuracy on known text, mixed documents in page
order, a page scanned sideways, OCR turned off, and no network, ever."""

from __future__ import annotations

import difflib
import logging
import socket
from pathlib import Path

import pytest

from pipelines.documents import OCR, TEXT_LAYER
from pipelines.errors import (
    DamagedPdfError,
    NoTextLayerError,
    OcrModelDownloadError,
    OcrUnavailableError,
    ParseMemoryError,
)
from pipelines.ingest.limits import ParseLimits
from pipelines.ingest.page_sources import SourceOptions
from pipelines.ingest.parse import parse_pdf, parse_pdf_outcome
from tests.pipelines import pdf_factory, scan_factory

pytestmark = pytest.mark.slow
TEXT_BEFORE = "The first page of this exhibit bundle carries a real text layer that pypdf reads."
TEXT_AFTER = "The last page of this exhibit bundle also carries a real text layer of its own."


def char_accuracy(expected: str, got: str) -> float:
    """Share of the expected characters OCR got right (spaces and line breaks ignored in
    alignment: 1 - edit distance / length, from difflib's matching blocks)."""
    expected, got = " ".join(expected.split()), " ".join(got.split())
    matcher = difflib.SequenceMatcher(None, expected, got, autojunk=False)
    matched = sum(block.size for block in matcher.get_matching_blocks())
    return matched / len(expected)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[int, int]]]:
    """Text, scan, scan turned a quarter turn, text; parsed once in the child for the module."""
    directory = tmp_path_factory.mktemp("ocr")
    path = scan_factory.scan_pdf(
        directory,
        [
            TEXT_BEFORE,
            scan_factory.scan_image(),
            scan_factory.scan_image(rotation=90),
            TEXT_AFTER,
        ],
        name="mixed.pdf",
    )
    return path, []


@pytest.fixture(scope="module")
def mixed_outcome(mixed):
    path, events = mixed
    return parse_pdf_outcome(path, on_ocr_page=lambda done, total: events.append((done, total)))


def test_a_scanned_page_is_read_with_97_percent_of_characters_right(mixed_outcome) -> None:
    page = mixed_outcome.document.pages[1]
    assert page.source == OCR
    assert char_accuracy(scan_factory.SCAN_TEXT, page.text) >= 0.97
    assert 0.9 <= page.ocr_confidence <= 1.0


def test_a_mixed_document_keeps_text_and_scanned_pages_in_order(mixed_outcome, mixed) -> None:
    document = mixed_outcome.document
    assert [p.source for p in document.pages] == [TEXT_LAYER, OCR, OCR, TEXT_LAYER]
    assert document.pages[0].text == TEXT_BEFORE
    assert document.pages[3].text == TEXT_AFTER
    assert document.pages[0].ocr_confidence is None
    assert document.ocr_pages == (2, 3)
    _, events = mixed
    assert events == [(0, 2), (1, 2), (2, 2)]  # progress before each page, and at the end


def test_a_page_scanned_sideways_is_turned_and_read(mixed_outcome) -> None:
    page = mixed_outcome.document.pages[2]
    assert char_accuracy(scan_factory.SCAN_TEXT, page.text) >= 0.97
    assert page.text.startswith("This Services Agreement")


def test_with_ocr_off_a_scan_is_refused_and_a_mixed_document_keeps_its_text_pages(
    tmp_path: Path,
) -> None:
    off = ParseLimits(sources=SourceOptions(ocr_enabled=False))
    scan = scan_factory.scan_pdf(tmp_path, [scan_factory.scan_image()], name="scan.pdf")
    with pytest.raises(NoTextLayerError, match=r"OCR.*turned off"):
        parse_pdf(scan, limits=off)
    mixed = scan_factory.scan_pdf(
        tmp_path, [TEXT_BEFORE, scan_factory.scan_image(), TEXT_AFTER], name="mixed.pdf"
    )
    document = parse_pdf(mixed, limits=off)
    assert [p.text for p in document.pages] == [TEXT_BEFORE, "", TEXT_AFTER]
    assert document.ocr_pages == ()


def test_a_picture_with_no_text_is_refused_even_with_ocr(tmp_path: Path) -> None:
    with pytest.raises(NoTextLayerError, match="even with OCR"):
        parse_pdf(pdf_factory.image_only_pdf(tmp_path))


def test_a_page_past_its_ocr_time_is_left_empty_and_listed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = scan_factory.scan_pdf(
        tmp_path, [TEXT_BEFORE, scan_factory.scan_image(), TEXT_AFTER], name="slow.pdf"
    )
    limits = ParseLimits(sources=SourceOptions(ocr_page_timeout_s=0.05))
    # Twice in CI under load (never in hundreds of runs here) the child refused this file as
    # damaged on an error it did not expect: on failure, say which (its type and our frame).
    with caplog.at_level(logging.WARNING, logger="pipelines.ingest.parse_child"):
        try:
            outcome = parse_pdf_outcome(path, limits=limits)
        except DamagedPdfError:
            pytest.fail(f"refused as damaged; the parse child's log: {caplog.text!r}")
    assert outcome.failed_pages == (2,)
    assert [p.source for p in outcome.document.pages] == [TEXT_LAYER] * 3
    assert outcome.document.pages[1].text == ""


def test_ocr_never_touches_the_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import pypdfium2

    from pipelines.ingest.ocr import PageReader
    from pipelines.ingest.pdf_render import render_page

    attempts: list[object] = []

    def no_network(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError("network is cut in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: no_network(None, a))

    path = scan_factory.scan_pdf(tmp_path, [scan_factory.scan_image()])
    pdf = pypdfium2.PdfDocument(str(path))
    try:
        page = pdf[0]
        reading = PageReader(num_threads=2).read(render_page(page, dpi=150))
        page.close()
    finally:
        pdf.close()
    assert attempts == []
    assert "Northwind" in reading.text


def test_a_download_attempt_is_an_error_with_a_sentence() -> None:
    from rapidocr.utils.download_file import DownloadFile, DownloadFileInput

    from pipelines.ingest.ocr import refuse_downloads

    refuse_downloads()
    with pytest.raises(OcrModelDownloadError, match="only uses the models installed"):
        DownloadFile.run(
            DownloadFileInput(
                file_url="https://example.invalid/m.onnx", save_path="/tmp/m", logger=None
            )
        )


def test_missing_models_are_an_error_with_a_sentence_not_a_download(tmp_path: Path) -> None:
    from pipelines.ingest.ocr import PageReader

    with pytest.raises(OcrUnavailableError, match="models are missing"):
        PageReader(models=tmp_path)


def test_ocr_past_the_memory_cap_is_refused_for_memory_not_as_damaged(tmp_path: Path) -> None:
    path = scan_factory.scan_pdf(tmp_path, [scan_factory.scan_image()])
    with pytest.raises(ParseMemoryError, match="300 MB"):
        parse_pdf(path, limits=ParseLimits(max_memory_mb=300))


def test_a_child_stuck_on_an_ocr_page_is_killed_with_a_sentence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import subprocess
    import sys
    import time

    from pipelines.errors import ParseTimeoutError
    from pipelines.ingest import parse_child

    # A child that announces a page and then hangs, as one stuck in native code would.
    script = "import sys, time; print('{\"ocr\": [0, 1]}', flush=True); time.sleep(60)"
    monkeypatch.setattr(parse_child, "OCR_PAGE_GRACE_S", 0.5)
    limits = ParseLimits(timeout_s=30, sources=SourceOptions(ocr_page_timeout_s=0.5))
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    events: list[tuple[int, int]] = []
    started = time.monotonic()
    try:
        with pytest.raises(ParseTimeoutError, match="scanned page"):
            parse_child._read_replies(child, limits, lambda d, t: events.append((d, t)))
    finally:
        child.kill()
        child.wait()
    assert events == [(0, 1)]
    assert time.monotonic() - started < 10  # the page's limit, not the document's 30 s
