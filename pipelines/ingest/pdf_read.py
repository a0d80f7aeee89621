"""Reading a PDF into cleaned page texts, in whatever process runs it: the parse child
(pipelines/ingest/parse_child.py, capped) or, for tests and benchmarks, the caller's own.

pypdf reads the text layer (capped per page and document: text_caps.py); each page's source is
decided (page_sources.py: OCR for image pages, text under bad redactions removed); running
headers, footers and page numbers are cleaned away (pdf_text.py). Whatever goes wrong becomes a
DocumentError with a sentence a person understands. `reply_of` and `outcome_of` carry the
outcome across the process boundary as JSON-ready data.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError, LimitReachedError

from pipelines.documents import InvisibleText, PageText, ParsedDocument, RedactionBox
from pipelines.errors import (
    DamagedPdfError,
    DocumentError,
    NoTextLayerError,
    PasswordRequiredError,
    TooComplexError,
    TooManyPagesError,
    WrongPasswordError,
)
from pipelines.ingest.limits import DAMAGED, TOO_COMPLEX, ParseLimits, memory_error
from pipelines.ingest.page_sources import (
    MIN_CHARS_PER_PAGE,
    OcrProgress,
    SourceOptions,
    read_sources,
)
from pipelines.ingest.pdf_text import clean_pages, clean_title, extract_page_texts, quiet_pypdf
from pipelines.ingest.text_caps import TextBudget, check_cleaned

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ParseOutcome:
    """A parsed document and what went wrong along the way without failing it."""

    document: ParsedDocument
    failed_pages: tuple[int, ...] = ()  # numbers of pages pypdf could not read: kept empty
    num_furniture_lines: int = 0  # running header, footer and page-number lines removed

    @property
    def num_failed_pages(self) -> int:
        return len(self.failed_pages)


def read_pdf(
    path: Path,
    password: str | None,
    limits: ParseLimits,
    on_ocr_page: OcrProgress | None = None,
    on_check: Callable[[int], None] | None = None,
) -> ParseOutcome:
    """`on_check(num_pages)` is called before the hidden-text check looks at the pages."""
    try:
        with quiet_pypdf():
            return _read(path, password, limits, on_ocr_page, on_check)
    except DocumentError:
        raise
    except MemoryError:
        pass  # leave the handler first: its traceback holds on to all that the parse allocated
    except LimitReachedError as error:
        logger.info("pdf past a pypdf limit")
        raise TooComplexError(TOO_COMPLEX) from error
    except Exception as error:
        logger.info("pdf unreadable: %s", type(error).__name__)
        raise DamagedPdfError(DAMAGED) from error
    raise memory_error(limits)


def _read(
    path: Path,
    password: str | None,
    limits: ParseLimits,
    on_ocr_page: OcrProgress | None,
    on_check: Callable[[int], None] | None,
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
    if on_check is not None and limits.sources.check_redactions:
        on_check(num_pages)
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
        invisible_text=tuple(
            InvisibleText(page, count) for page, count in sorted(sources.invisible_chars.items())
        ),
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


def parse_in_child(
    path: Path,
    password: str | None,
    limits: ParseLimits,
    on_ocr_page: OcrProgress,
    on_check: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """The child's side: parse and return the reply as JSON-ready data (see `outcome_of`)."""
    outcome = read_pdf(path, password, limits, on_ocr_page, on_check)
    document = outcome.document
    return {
        "title": document.title,
        "pages": [[page.text, page.source, page.ocr_confidence] for page in document.pages],
        "was_encrypted": document.was_encrypted,
        "redactions": [list(vars(box).values()) for box in document.redactions],
        "is_hidden_text_removed": document.is_hidden_text_removed,
        "invisible_text": [[item.page, item.num_chars] for item in document.invisible_text],
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
        invisible_text=tuple(InvisibleText(*fields) for fields in reply["invisible_text"]),
    )
    return ParseOutcome(document, tuple(reply["failed_pages"]), reply["num_furniture_lines"])
