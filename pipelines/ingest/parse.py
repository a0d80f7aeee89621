"""Read a PDF into cleaned page texts, in a child process with a time limit and a memory cap.

`parse_pdf` runs the parse child (pipelines/ingest/parse_child.py: a subprocess with RLIMIT_AS and a
time limit, which hands back JSON) and turns its reply into a ParsedDocument. Whatever goes
wrong reaches the caller as a `DocumentError` subclass with a sentence a person understands,
never as a pypdf traceback.

The text a PDF gives is capped per page and per document inside the child (ParseLimits'
max_page_chars and max_document_chars, pipelines/ingest/text_caps.py): a small file that inflates into
megabytes of text is refused there, so the parent, which splits and stores the text without a
memory cap, never receives more than it can hold. pypdf's own safety limits (LimitReachedError)
are refused as TooComplexError, not as a damaged file.

Inside the child, after pypdf, each page's source is decided (pipelines/ingest/page_sources.py): pages
without a usable text layer that hold an image are OCR'd, and text hidden under bad redactions,
or invisible on the rendered page, is removed. OCR'd text is cleaned with the rest, so stamps
and page numbers that repeat go.

No text from a document is logged: pypdf's own logging and warnings are silenced while it reads.

A document has no text when its cleaned text (running headers, footers and page numbers
removed), OCR'd pages included, averages fewer than MIN_CHARS_PER_PAGE characters a page. A page
of body text holds 1,500 to 3,500; a blank page or a scan too faint to read carries at most a
stamp or a Bates number, and those repeat, so they go with the footers. We do not also require a
small total (e.g. under 200 characters): that would let a long scan through whenever each page
carries a few words of stamp that do not repeat.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from pipelines.documents import ParsedDocument
from pipelines.ingest.limits import ParseLimits, check_file
from pipelines.ingest.page_sources import OcrProgress
from pipelines.ingest.parse_child import run_child
from pipelines.ingest.pdf_read import ParseOutcome, outcome_of, read_pdf

logger = logging.getLogger(__name__)

DEFAULT_LIMITS = ParseLimits()


def parse_pdf(
    path: Path, *, password: str | None = None, limits: ParseLimits = DEFAULT_LIMITS
) -> ParsedDocument:
    """Parse in a child process with `limits`; raise a `DocumentError` subclass when refused.

    A path that cannot be opened at all (missing, unreadable) raises OSError, as does a failure
    to start the child: those are the caller's or the host's trouble, not the document's.
    """
    return parse_pdf_outcome(path, password=password, limits=limits).document


def parse_pdf_in_process(
    path: Path, *, password: str | None = None, limits: ParseLimits = DEFAULT_LIMITS
) -> ParsedDocument:
    """Same as `parse_pdf` in this process: no time limit and no memory cap."""
    return parse_pdf_outcome(path, password=password, limits=limits, in_child=False).document


def parse_pdf_outcome(
    path: Path,
    *,
    password: str | None = None,
    limits: ParseLimits = DEFAULT_LIMITS,
    in_child: bool = True,
    on_ocr_page: OcrProgress | None = None,
) -> ParseOutcome:
    """`parse_pdf` (or, with in_child=False, `parse_pdf_in_process`) with the counts kept.
    `on_ocr_page(done, total)` is called before each page OCR reads, and once at the end."""
    path = Path(path).resolve()
    check_file(path, limits)
    started = time.perf_counter()
    if in_child:
        outcome = _run_child(path, password, limits, on_ocr_page)
    else:
        outcome = read_pdf(path, password, limits, on_ocr_page)
    logger.info(
        "parsed pdf: pages=%d ocr_pages=%d redactions=%d chars=%d failed_pages=%d "
        "furniture_lines=%d seconds=%.2f child=%s",
        outcome.document.num_pages,
        len(outcome.document.ocr_pages),
        len(outcome.document.redactions),
        outcome.document.num_chars,
        outcome.num_failed_pages,
        outcome.num_furniture_lines,
        time.perf_counter() - started,
        in_child,
    )
    return outcome


def _run_child(
    path: Path, password: str | None, limits: ParseLimits, on_ocr_page: OcrProgress | None = None
) -> ParseOutcome:
    return outcome_of(run_child(path, password, limits, on_ocr_page))
