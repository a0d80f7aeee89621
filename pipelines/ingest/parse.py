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
without a usable text layer that hold an image are OCR'd, and text hidden under bad redactions
is removed. OCR'd text is cleaned with the rest, so stamps and page numbers that repeat go.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError, LimitReachedError

from pipelines.documents import PageText, ParsedDocument, RedactionBox
from pipelines.errors import (
    DamagedPdfError,
    DocumentError,
    NotAPdfError,
    NoTextLayerError,
    ParseMemoryError,
    PasswordRequiredError,
    TooComplexError,
    TooLargeError,
    TooManyPagesError,
    WrongPasswordError,
)
from pipelines.ingest.page_sources import (
    MIN_CHARS_PER_PAGE,
    OcrProgress,
    SourceOptions,
    read_sources,
)
from pipelines.ingest.parse_child import run_child
from pipelines.ingest.pdf_text import clean_pages, clean_title, extract_page_texts, quiet_pypdf
from pipelines.ingest.text_caps import TextBudget, check_cleaned

logger = logging.getLogger(__name__)

MiB = 1024 * 1024
# pypdf accepts a header anywhere in the first KiB (some producers prepend junk).
HEADER_WINDOW_BYTES = 1024
DAMAGED = (
    "This PDF is damaged and LongDoc cannot read it. Re-save it from a PDF viewer and try again."
)
_TOO_COMPLEX = (
    "This PDF goes past one of the safety limits LongDoc reads PDFs with (a part that expands "
    "to more than 75 MB, a loop in its structure, or a list of more than 100,000 items), so it "
    "was not read and nothing was stored. If it is a genuine document, print it to a new PDF "
    "or split it, and try again."
)


@dataclass(frozen=True)
class ParseLimits:
    max_bytes: int = 200 * MiB
    max_pages: int = 2000
    timeout_s: float = 120.0
    # Address space the parse may take beyond the libraries the child loads before reading
    # (Python, pypdf, numpy, pdfium: about 150 MB). OCR's models and work count against it.
    max_memory_mb: int = 2048
    # Text caps, decided inside the child (pipelines/ingest/text_caps.py): past them, a refusal.
    max_page_chars: int = 100_000
    max_document_chars: int = 10_000_000
    # OCR and the redaction check (pipelines/ingest/page_sources.py).
    sources: SourceOptions = field(default_factory=SourceOptions)


@dataclass(frozen=True)
class ParseOutcome:
    """A parsed document and what went wrong along the way without failing it."""

    document: ParsedDocument
    failed_pages: tuple[int, ...] = ()  # numbers of pages pypdf could not read: kept empty
    num_furniture_lines: int = 0  # running header, footer and page-number lines removed

    @property
    def num_failed_pages(self) -> int:
        return len(self.failed_pages)


def parse_pdf(
    path: Path, *, password: str | None = None, limits: ParseLimits = ParseLimits()
) -> ParsedDocument:
    """Parse in a child process with `limits`; raise a `DocumentError` subclass when refused.

    A path that cannot be opened at all (missing, unreadable) raises OSError, as does a failure
    to start the child: those are the caller's or the host's trouble, not the document's.
    """
    return parse_pdf_outcome(path, password=password, limits=limits).document


def parse_pdf_in_process(
    path: Path, *, password: str | None = None, limits: ParseLimits = ParseLimits()
) -> ParsedDocument:
    """Same as `parse_pdf` in this process: no time limit and no memory cap."""
    return parse_pdf_outcome(path, password=password, limits=limits, in_child=False).document


def parse_pdf_outcome(
    path: Path,
    *,
    password: str | None = None,
    limits: ParseLimits = ParseLimits(),
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
        outcome = _parse(path, password, limits, on_ocr_page)
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


def check_file(path: Path, limits: ParseLimits) -> None:
    """Refuse, before parsing, a file that is too large or is not a PDF at all."""
    with path.open("rb") as file:
        check_open_file(file, path.stat().st_size, limits)


def check_open_file(file: BinaryIO, num_bytes: int, limits: ParseLimits) -> None:
    """`check_file` on a file already open (at its start; it is left after its first KiB)."""
    if num_bytes > limits.max_bytes:
        raise TooLargeError(
            f"This file is {num_bytes / MiB:.0f} MB and LongDoc takes PDFs up to "
            f"{limits.max_bytes / MiB:.0f} MB. Split it into smaller PDFs and try again."
        )
    if num_bytes == 0:
        raise NotAPdfError("This file is empty. Upload the PDF again.")
    head = file.read(HEADER_WINDOW_BYTES)
    if b"%PDF-" not in head:
        raise NotAPdfError(
            "This file is not a PDF. LongDoc reads PDF files only: save or export the document "
            "as a PDF and try again."
        )


def _parse(
    path: Path, password: str | None, limits: ParseLimits, on_ocr_page: OcrProgress | None = None
) -> ParseOutcome:
    try:
        with quiet_pypdf():
            return _read(path, password, limits, on_ocr_page)
    except DocumentError:
        raise
    except MemoryError:
        pass  # leave the handler first: its traceback holds on to all that the parse allocated
    except LimitReachedError as error:
        logger.info("pdf past a pypdf limit")
        raise TooComplexError(_TOO_COMPLEX) from error
    except Exception as error:
        logger.info("pdf unreadable: %s", type(error).__name__)
        raise DamagedPdfError(DAMAGED) from error
    raise memory_error(limits)


def _read(
    path: Path, password: str | None, limits: ParseLimits, on_ocr_page: OcrProgress | None
) -> ParseOutcome:
    reader = PdfReader(path, strict=False)
    was_encrypted = reader.is_encrypted
    opened_with = _decrypt(reader, password) if was_encrypted else None
    num_pages = len(reader.pages)
    if num_pages > limits.max_pages:
        raise TooManyPagesError(
            f"This PDF has {num_pages} pages and LongDoc takes up to {limits.max_pages}. "
            "Split it into smaller PDFs and try again."
        )
    if num_pages == 0:
        raise DamagedPdfError("This PDF has no pages. Re-save it from a PDF viewer and try again.")
    budget = TextBudget(
        max_page_chars=limits.max_page_chars, max_document_chars=limits.max_document_chars
    )
    raw_texts, failed_pages = extract_page_texts(reader, budget)
    sources = read_sources(path, opened_with, raw_texts, limits.sources, on_ocr_page)
    del raw_texts
    texts, num_furniture_lines = clean_pages(sources.raw_texts)
    check_cleaned(
        texts, max_page_chars=limits.max_page_chars, max_document_chars=limits.max_document_chars
    )
    failed_pages = sorted({*failed_pages, *sources.failed_pages})
    if sum(len(text) for text in texts) < MIN_CHARS_PER_PAGE * num_pages:
        if failed_pages and not sources.failed_pages:
            raise DamagedPdfError(DAMAGED)
        raise NoTextLayerError(_no_text_sentence(limits.sources))
    try:
        title = clean_title(reader.metadata.title if reader.metadata else None)
    except Exception:  # a damaged /Info dictionary costs the title, not the document
        title = None
    pages = tuple(
        PageText(number=i + 1, text=text, source=source, ocr_confidence=confidence)
        for i, (text, source, confidence) in enumerate(
            zip(texts, sources.sources, sources.confidences, strict=True)
        )
    )
    document = ParsedDocument(
        title=title,
        pages=pages,
        was_encrypted=was_encrypted,
        redactions=tuple(sources.redactions),
        is_hidden_text_removed=not limits.sources.keep_hidden_text,
    )
    return ParseOutcome(document, tuple(failed_pages), num_furniture_lines)


def _no_text_sentence(options: SourceOptions) -> str:
    if not options.ocr_enabled:
        return (
            "This PDF has no text LongDoc can read: it looks like a scan or a set of images, "
            "and OCR (reading text from images) is turned off here (LONGDOC_OCR_ENABLED). Turn "
            "it on, or run the file through OCR software first and upload the result."
        )
    return (
        "This PDF has no text LongDoc can read, even with OCR (reading text from images): its "
        "pages are blank, or the scan is too faint or too small to read. Scan it again at 300 "
        "dpi or more and upload the result."
    )


def _decrypt(reader: PdfReader, password: str | None) -> str | None:
    """Open `reader`; the password that did it for pdfium (None: the empty one)."""
    try:
        if reader.decrypt("") != PasswordType.NOT_DECRYPTED:
            return None
        if password is None:
            raise PasswordRequiredError(
                "This PDF is protected by a password. Enter its password and try again."
            )
        if reader.decrypt(password) == PasswordType.NOT_DECRYPTED:
            raise WrongPasswordError(
                "The password does not open this PDF. Check it (capitals count) and try again."
            )
        return password
    except (DependencyError, NotImplementedError) as error:
        raise DamagedPdfError(
            "This PDF is locked with a kind of encryption LongDoc cannot open. Save an "
            "unprotected copy from a PDF viewer and upload that."
        ) from error


def _run_child(
    path: Path, password: str | None, limits: ParseLimits, on_ocr_page: OcrProgress | None = None
) -> ParseOutcome:
    return outcome_of(run_child(path, password, limits, on_ocr_page))


def memory_error(limits: Any) -> ParseMemoryError:
    return ParseMemoryError(
        f"Reading this PDF needed more than {limits.max_memory_mb} MB of memory, so LongDoc "
        "stopped. The file may be damaged or hold very large images: re-save it as a smaller PDF "
        "and try again."
    )


def parse_in_child(
    path: Path, password: str | None, limits: ParseLimits, on_ocr_page: OcrProgress
) -> dict[str, Any]:
    """The child's side: parse and return the reply as JSON-ready data (see `outcome_of`)."""
    outcome = _parse(path, password, limits, on_ocr_page)
    document = outcome.document
    return {
        "title": document.title,
        "pages": [[page.text, page.source, page.ocr_confidence] for page in document.pages],
        "was_encrypted": document.was_encrypted,
        "redactions": [list(vars(box).values()) for box in document.redactions],
        "is_hidden_text_removed": document.is_hidden_text_removed,
        "failed_pages": list(outcome.failed_pages),
        "num_furniture_lines": outcome.num_furniture_lines,
    }


def outcome_of(reply: dict[str, Any]) -> ParseOutcome:
    """The parent's side: the ParseOutcome that `parse_in_child`'s reply describes."""
    pages = tuple(
        PageText(number=i + 1, text=text, source=source, ocr_confidence=confidence)
        for i, (text, source, confidence) in enumerate(reply["pages"])
    )
    document = ParsedDocument(
        reply["title"],
        pages,
        reply["was_encrypted"],
        redactions=tuple(RedactionBox(*fields) for fields in reply["redactions"]),
        is_hidden_text_removed=reply["is_hidden_text_removed"],
    )
    return ParseOutcome(document, tuple(reply["failed_pages"]), reply["num_furniture_lines"])
