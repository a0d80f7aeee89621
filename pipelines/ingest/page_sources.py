"""Where each page's text comes from: the text layer, OCR, or the text layer less hidden text.

Runs in the parse child (pipelines/ingest/parse_child.py), after pypdf has read every page's text:

- Text a reader cannot see (pipelines/ingest/redactions.py) is looked for on every page: under
  bad redactions, or invisible (white on white, tiny, render mode 3 or 7, off the page, clipped,
  in a hidden layer). On a page that has any, the text is rebuilt from pdfium's characters less
  those, unless `keep_hidden_text` is set (for a reviewer who must see what the filer failed to
  hide). A page whose check cannot finish (too large to render, past CHECK_PAGE_TIMEOUT_S, out
  of memory, any failure) fails closed: it is left empty and listed in `failed_pages`, and the rest of the document goes
  on.
- A page is OCR'd when its text layer is not usable and it holds an image: fewer than
  MIN_CHARS_PER_PAGE characters once cleaned (running headers, footers, page numbers and
  stamps that repeat removed: a scan carries at most those) and at least one image object.
  A blank page (no image) is left blank, and a page with a real text layer keeps it, even when
  it also holds images. The pages keep their order, whatever their source.
- OCR renders the page with pdfium at `ocr_dpi` and reads it (pipelines/ingest/ocr.py). Each page has
  `ocr_page_timeout_s`: past it the page is left empty and listed in `failed_pages`, and the rest
  of the document goes on; so is a page too large to render within MAX_OCR_PIXELS, or whose
  render runs out of memory. The parent process also watches the child and kills it when a page
  runs far past its limit (stuck inside onnxruntime, where the alarm cannot reach).
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pypdfium2

from pipelines.documents import OCR, TEXT_LAYER, RedactionBox
from pipelines.errors import DocumentError
from pipelines.ingest.pdf_text import clean_pages

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

MIN_CHARS_PER_PAGE = 20
# The hidden-text check of one page (about 40 ms of CPU for a page of text): past this, the
# page is not passed but left empty.
CHECK_PAGE_TIMEOUT_S = 30.0
# Pixels of a page rendered for OCR (RGB, 3 bytes each): an A0 page at 200 dpi is 61 million.
MAX_OCR_PIXELS = 100_000_000
# Called with (pages OCR'd so far, pages to OCR) before each page and once at the end.
OcrProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class SourceOptions:
    ocr_enabled: bool = True
    ocr_dpi: int = 200
    ocr_page_timeout_s: float = 60.0
    ocr_num_threads: int = 2
    check_redactions: bool = True
    keep_hidden_text: bool = False


@dataclass
class PageSources:
    """The raw text of each page (before cleaning) and where it came from."""

    raw_texts: list[str]
    sources: list[str]
    confidences: list[float | None]
    redactions: list[RedactionBox] = field(default_factory=list)
    # Characters a reader of the rendered page cannot see, by page: left out like redactions.
    invisible_chars: dict[int, int] = field(default_factory=dict)
    # Pages left empty: OCR ran past its time, or the page could not be rendered or checked
    # within its caps (the hidden-text check fails closed).
    failed_pages: list[int] = field(default_factory=list)


class _PageTimeout(Exception):
    pass


class _PageUnreadable(Exception):
    pass


_ALLOCATION_MARKERS = ("bad_alloc", "allocate", "insufficient memory", "out of memory")
T = TypeVar("T")


def _checked(work: Callable[[], T], page_number: int | None) -> T:
    """`work()`, with the native libraries' failures sorted: running out of memory (under the
    child's cap) is a MemoryError, so the document is refused for memory; any other failure on
    a page leaves that page empty (_PageUnreadable); one building the engine goes up as it is."""
    try:
        return work()
    except (MemoryError, _PageTimeout, DocumentError):
        raise
    except Exception as error:
        if any(marker in str(error).lower() for marker in _ALLOCATION_MARKERS):
            raise MemoryError from None
        if page_number is None:
            raise
        logger.info("page %d: OCR failed (%s), left empty", page_number, type(error).__name__)
        raise _PageUnreadable from None


def read_sources(
    path: Path,
    password: str | None,
    raw_texts: list[str],
    options: SourceOptions,
    on_ocr_page: OcrProgress | None = None,
) -> PageSources:
    """Each page's text and source; `raw_texts` are pypdf's, one per page."""
    sources = PageSources(list(raw_texts), [TEXT_LAYER] * len(raw_texts), [None] * len(raw_texts))
    if not (options.ocr_enabled or options.check_redactions):
        return sources
    try:
        pdf = pypdfium2.PdfDocument(str(path), password=password or None)
    except pypdfium2.PdfiumError:
        logger.info("pdfium cannot open the file: text layer only, no OCR or redaction check")
        return sources
    try:
        if len(pdf) != len(raw_texts):
            logger.info("pdfium and pypdf count the pages differently: text layer only")
            return sources
        if options.check_redactions:
            _remove_hidden_text(pdf, sources, options.keep_hidden_text)
        cleaned, _ = clean_pages(sources.raw_texts)
        short = [i for i, text in enumerate(cleaned) if len(text) < MIN_CHARS_PER_PAGE]
        del cleaned
        unchecked = {number - 1 for number in sources.failed_pages}
        to_ocr = [i for i in short if i not in unchecked and _has_images(pdf, i)]
        if to_ocr and options.ocr_enabled:
            _ocr_pages(pdf, to_ocr, sources, options, on_ocr_page or (lambda _done, _total: None))
    finally:
        pdf.close()
    return sources


def _has_images(pdf: pypdfium2.PdfDocument, index: int) -> bool:
    from pipelines.ingest.pdf_render import has_images

    page = pdf[index]
    try:
        return has_images(page)
    finally:
        page.close()


def _remove_hidden_text(
    pdf: pypdfium2.PdfDocument, sources: PageSources, keep_hidden_text: bool
) -> None:
    from pipelines.ingest.redactions import PageRedactions, find_redactions

    for index in range(len(sources.raw_texts)):
        try:
            page = pdf[index]
        except (pypdfium2.PdfiumError, MemoryError):
            found = PageRedactions(is_unchecked=True)
        else:
            try:
                with _time_limit(CHECK_PAGE_TIMEOUT_S):
                    found = find_redactions(page, index + 1)
            except (
                Exception
            ) as error:  # whatever it was (MemoryError, time): the page is not passed
                logger.info(
                    "page %d: hidden-text check failed (%s)", index + 1, type(error).__name__
                )
                found = PageRedactions(is_unchecked=True)
            finally:
                page.close()
        if found.is_unchecked:
            # Fail closed: text that could not be checked is not stored as if it were visible.
            logger.info("page %d: hidden-text check could not finish, page left empty", index + 1)
            if not keep_hidden_text:
                sources.raw_texts[index] = ""
                sources.failed_pages.append(index + 1)
            continue
        sources.redactions.extend(found.boxes)
        if found.num_invisible_chars:
            sources.invisible_chars[index + 1] = found.num_invisible_chars
        if found.text_without_hidden is not None and not keep_hidden_text:
            sources.raw_texts[index] = found.text_without_hidden


def _rendered(page: pypdfium2.PdfPage, dpi: int, number: int) -> np.ndarray:
    """The page at `dpi` for OCR; _PageUnreadable when it is past MAX_OCR_PIXELS or the render
    runs out of memory: that page is left empty, the rest of the document goes on."""
    from pipelines.ingest.pdf_render import render_page
    from pipelines.ingest.redactions import PageTooLargeError, check_render_size

    try:
        check_render_size(page, dpi, MAX_OCR_PIXELS)
        return render_page(page, dpi=dpi)
    except PageTooLargeError:
        logger.info("page %d: too large to render for OCR, left empty", number)
    except MemoryError:
        logger.info("page %d: rendering for OCR ran out of memory, left empty", number)
    except pypdfium2.PdfiumError:
        logger.info("page %d: pdfium cannot render it, left empty", number)
    raise _PageUnreadable


def _ocr_pages(
    pdf: pypdfium2.PdfDocument,
    to_ocr: list[int],
    sources: PageSources,
    options: SourceOptions,
    on_ocr_page: OcrProgress,
) -> None:
    from pipelines.ingest.ocr import PageReader

    reader = _checked(lambda: PageReader(num_threads=options.ocr_num_threads), None)
    for done, index in enumerate(to_ocr):
        on_ocr_page(done, len(to_ocr))
        page = pdf[index]
        try:
            with _time_limit(options.ocr_page_timeout_s):
                pixels = _rendered(page, options.ocr_dpi, index + 1)
                reading = _checked(lambda pixels=pixels: reader.read(pixels), index + 1)
                del pixels
        except _PageTimeout:
            logger.info(
                "page %d: OCR past %.0f s, left empty", index + 1, options.ocr_page_timeout_s
            )
            sources.failed_pages.append(index + 1)
            continue
        except _PageUnreadable:
            sources.failed_pages.append(index + 1)
            continue
        finally:
            page.close()
        sources.raw_texts[index] = reading.text
        sources.sources[index] = OCR
        sources.confidences[index] = reading.confidence
    on_ocr_page(len(to_ocr), len(to_ocr))


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise _PageTimeout in this (main) thread after `seconds`; elsewhere, no limit."""
    try:
        previous = signal.signal(signal.SIGALRM, _raise_timeout)
    except ValueError:  # not the main thread: the parent's watch is the only limit
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _raise_timeout(_signum: int, _frame: object) -> None:
    raise _PageTimeout
