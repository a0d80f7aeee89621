"""Read a PDF into cleaned page texts, in a child process with a time limit and a memory cap.

`parse_pdf` runs `python -m pipelines.parse` as a subprocess (not a multiprocessing child: a
Celery prefork worker is daemonic and may not have those) and passes it the request on stdin, so
a password never shows in the process list. The child caps its address space (RLIMIT_AS), parses
with `parse_pdf_in_process` and writes one JSON reply on stdout: the pages, or an error code and
sentence. The parent kills it at the time limit. Whatever goes wrong reaches the caller as a
`DocumentError` subclass with a sentence a person understands, never as a pypdf traceback.

No text from a document is logged: pypdf's own logging and warnings are silenced while it reads.

A document has no text layer when its cleaned text (running headers, footers and page numbers
removed) averages fewer than MIN_CHARS_PER_PAGE characters a page. A page of body text holds
1,500 to 3,500; a scan carries at most a stamp or a Bates number, and those repeat, so they go
with the footers. We do not also require a small total (e.g. under 200 characters): that would
let a long scan through whenever each page carries a few words of stamp that do not repeat.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError

from pipelines.documents import PageText, ParsedDocument
from pipelines.errors import (
    DamagedPdfError,
    DocumentError,
    NotAPdfError,
    NoTextLayerError,
    ParseMemoryError,
    ParseTimeoutError,
    PasswordRequiredError,
    TooLargeError,
    TooManyPagesError,
    WrongPasswordError,
)
from pipelines.pdf_text import clean_pages, clean_title, extract_page_texts, quiet_pypdf

logger = logging.getLogger(__name__)

MiB = 1024 * 1024
MIN_CHARS_PER_PAGE = 20
# pypdf accepts a header anywhere in the first KiB (some producers prepend junk).
HEADER_WINDOW_BYTES = 1024
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
_ERRORS_BY_CODE = {cls.code: cls for cls in (DocumentError, *DocumentError.__subclasses__())}
_DAMAGED = (
    "This PDF is damaged and LongDoc cannot read it. Re-save it from a PDF viewer and try again."
)


@dataclass(frozen=True)
class ParseLimits:
    max_bytes: int = 200 * MiB
    max_pages: int = 2000
    timeout_s: float = 120.0
    max_memory_mb: int = 2048


@dataclass(frozen=True)
class ParseOutcome:
    """A parsed document and what went wrong along the way without failing it."""

    document: ParsedDocument
    num_failed_pages: int = 0  # pages whose text pypdf could not extract: kept empty
    num_furniture_lines: int = 0  # running header, footer and page-number lines removed


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
) -> ParseOutcome:
    """`parse_pdf` (or, with in_child=False, `parse_pdf_in_process`) with the counts kept."""
    path = Path(path).resolve()
    check_file(path, limits)
    started = time.perf_counter()
    outcome = _run_child(path, password, limits) if in_child else _parse(path, password, limits)
    logger.info(
        "parsed pdf: pages=%d chars=%d failed_pages=%d furniture_lines=%d seconds=%.2f child=%s",
        outcome.document.num_pages,
        outcome.document.num_chars,
        outcome.num_failed_pages,
        outcome.num_furniture_lines,
        time.perf_counter() - started,
        in_child,
    )
    return outcome


def check_file(path: Path, limits: ParseLimits) -> None:
    """Refuse, before parsing, a file that is too large or is not a PDF at all."""
    num_bytes = path.stat().st_size
    if num_bytes > limits.max_bytes:
        raise TooLargeError(
            f"This file is {num_bytes / MiB:.0f} MB and LongDoc takes PDFs up to "
            f"{limits.max_bytes / MiB:.0f} MB. Split it into smaller PDFs and try again."
        )
    if num_bytes == 0:
        raise NotAPdfError("This file is empty. Upload the PDF again.")
    with path.open("rb") as file:
        head = file.read(HEADER_WINDOW_BYTES)
    if b"%PDF-" not in head:
        raise NotAPdfError(
            "This file is not a PDF. LongDoc reads PDF files only: save or export the document "
            "as a PDF and try again."
        )


def _parse(path: Path, password: str | None, limits: ParseLimits) -> ParseOutcome:
    try:
        with quiet_pypdf():
            return _read(path, password, limits)
    except DocumentError:
        raise
    except MemoryError:
        pass  # leave the handler first: its traceback holds on to all that the parse allocated
    except Exception as error:
        logger.info("pdf unreadable: %s", type(error).__name__)
        raise DamagedPdfError(_DAMAGED) from error
    raise _memory_error(limits)


def _read(path: Path, password: str | None, limits: ParseLimits) -> ParseOutcome:
    reader = PdfReader(path, strict=False)
    was_encrypted = reader.is_encrypted
    if was_encrypted:
        _decrypt(reader, password)
    num_pages = len(reader.pages)
    if num_pages > limits.max_pages:
        raise TooManyPagesError(
            f"This PDF has {num_pages} pages and LongDoc takes up to {limits.max_pages}. "
            "Split it into smaller PDFs and try again."
        )
    if num_pages == 0:
        raise DamagedPdfError("This PDF has no pages. Re-save it from a PDF viewer and try again.")
    raw_texts, num_failed_pages = extract_page_texts(reader)
    texts, num_furniture_lines = clean_pages(raw_texts)
    if sum(len(text) for text in texts) < MIN_CHARS_PER_PAGE * num_pages:
        if num_failed_pages:
            raise DamagedPdfError(_DAMAGED)
        raise NoTextLayerError(
            "This PDF has no text LongDoc can read: it looks like a scan or a set of images. "
            "LongDoc does not do OCR (reading text from images); run it through OCR software "
            "first and upload the result."
        )
    try:
        title = clean_title(reader.metadata.title if reader.metadata else None)
    except Exception:  # a damaged /Info dictionary costs the title, not the document
        title = None
    pages = tuple(PageText(number=i + 1, text=text) for i, text in enumerate(texts))
    document = ParsedDocument(title=title, pages=pages, was_encrypted=was_encrypted)
    return ParseOutcome(document, num_failed_pages, num_furniture_lines)


def _decrypt(reader: PdfReader, password: str | None) -> None:
    try:
        if reader.decrypt("") != PasswordType.NOT_DECRYPTED:
            return
        if password is None:
            raise PasswordRequiredError(
                "This PDF is protected by a password. Enter its password and try again."
            )
        if reader.decrypt(password) == PasswordType.NOT_DECRYPTED:
            raise WrongPasswordError(
                "The password does not open this PDF. Check it (capitals count) and try again."
            )
    except (DependencyError, NotImplementedError) as error:
        raise DamagedPdfError(
            "This PDF is locked with a kind of encryption LongDoc cannot open. Save an "
            "unprotected copy from a PDF viewer and upload that."
        ) from error


def _run_child(path: Path, password: str | None, limits: ParseLimits) -> ParseOutcome:
    request = {"path": str(path), "password": password, "max_pages": limits.max_pages}
    request["max_memory_mb"] = limits.max_memory_mb
    try:
        child = subprocess.run(
            [sys.executable, "-m", "pipelines.parse"],
            input=json.dumps(request).encode(),
            capture_output=True,
            timeout=limits.timeout_s,
            cwd=_PACKAGE_ROOT,  # `-m` imports from the working directory: this same code
            check=False,
        )
    except subprocess.TimeoutExpired:  # run() has killed the child already
        raise ParseTimeoutError(
            f"Reading this PDF took longer than {limits.timeout_s:.0f} seconds, so LongDoc "
            "stopped. The file may be damaged or unusually complex: re-save it from a PDF viewer "
            "and try again."
        ) from None
    try:
        reply = json.loads(child.stdout)
    except ValueError:
        reply = None
    if isinstance(reply, dict) and "pages" in reply:
        pages = tuple(PageText(number=i + 1, text=t) for i, t in enumerate(reply["pages"]))
        document = ParsedDocument(reply["title"], pages, reply["was_encrypted"])
        return ParseOutcome(document, reply["num_failed_pages"], reply["num_furniture_lines"])
    if isinstance(reply, dict) and "code" in reply:
        raise _ERRORS_BY_CODE.get(reply["code"], DamagedPdfError)(reply["message"])
    # No reply: the child died. Its stderr may quote the document, so only its size is logged.
    logger.warning("parse child died: rc=%s stderr_bytes=%d", child.returncode, len(child.stderr))
    if child.returncode == -signal.SIGKILL or any(
        marker in child.stderr
        for marker in (b"MemoryError", b"Cannot allocate memory", b"bad_alloc")
    ):
        raise _memory_error(limits)
    raise DamagedPdfError(_DAMAGED)


def _memory_error(limits: ParseLimits) -> ParseMemoryError:
    return ParseMemoryError(
        f"Reading this PDF needed more than {limits.max_memory_mb} MB of memory, so LongDoc "
        "stopped. The file may be damaged or hold very large images: re-save it as a smaller PDF "
        "and try again."
    )


def _error_reply(error: DocumentError) -> bytes:
    return json.dumps({"code": error.code, "message": error.message}).encode()


def _child_main() -> int:
    import resource

    request = json.loads(sys.stdin.buffer.read())
    limits = ParseLimits(max_pages=request["max_pages"], max_memory_mb=request["max_memory_mb"])
    # Replies for the worst cases are ready before the cap: writing them needs no new memory.
    memory_reply = _error_reply(_memory_error(limits))
    damaged_reply = _error_reply(DamagedPdfError(_DAMAGED))
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = limits.max_memory_mb * MiB
    resource.setrlimit(
        resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard)
    )
    reply_stream = sys.stdout.buffer
    sys.stdout = sys.stderr  # stray prints must not corrupt the reply
    try:
        outcome = _parse(Path(request["path"]), request["password"], limits)
        document = outcome.document
        reply = {
            "title": document.title,
            "pages": [page.text for page in document.pages],
            "was_encrypted": document.was_encrypted,
            "num_failed_pages": outcome.num_failed_pages,
            "num_furniture_lines": outcome.num_furniture_lines,
        }
        encoded = json.dumps(reply, ensure_ascii=False).encode("utf-8", "replace")
    except DocumentError as error:
        encoded = _error_reply(error)
    except MemoryError:
        encoded = memory_reply
    except BaseException:  # never a traceback: whatever it was, the caller gets a sentence
        encoded = damaged_reply
    reply_stream.write(encoded)
    reply_stream.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
