"""The limits a PDF is read within, checked before any parse (size, header) and inside the parse
child (pages, time, memory, text caps), and the sentences that say which one a file went past.
Shared by the parent (pipelines/ingest/parse.py) and the child (parse_child.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pipelines.errors import NotAPdfError, ParseMemoryError, TooLargeError
from pipelines.ingest.page_sources import SourceOptions

MiB = 1024 * 1024
# pypdf accepts a header anywhere in the first KiB (some producers prepend junk).
HEADER_WINDOW_BYTES = 1024
DAMAGED = (
    "This PDF is damaged and LongDoc cannot read it. Re-save it from a PDF viewer and try again."
)
TOO_COMPLEX = (
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


def memory_error(limits: Any) -> ParseMemoryError:
    return ParseMemoryError(
        f"Reading this PDF needed more than {limits.max_memory_mb} MB of memory, so LongDoc "
        "stopped. The file may be damaged or hold very large images: re-save it as a smaller PDF "
        "and try again."
    )


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
