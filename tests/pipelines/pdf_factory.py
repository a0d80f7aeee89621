"""Small PDFs for the parse tests, written with fpdf2 (and pypdf's writer to encrypt or break them).

Every helper writes into the directory it is given (a test's tmp_path) and returns the file's path.
Lines are placed one by one with `FPDF.text`, so each line of a page is exactly one line of the
PDF: no wrapping, and fpdf2 leaves soft hyphens as they are.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from pathlib import Path

from fpdf import FPDF
from PIL import Image
from pypdf import PdfWriter
from pypdf.generic import NameObject

LINE_HEIGHT_MM = 6
TOP_MM = 30
# Ligatures and symbols need a Unicode font; the core PDF fonts are Latin-1 only.
UNICODE_FONT_CANDIDATES = (
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
    Path("/usr/share/fonts/dejavu/DejaVuSans.ttf"),
    Path("/Library/Fonts/DejaVuSans.ttf"),
)


def unicode_font() -> Path | None:
    return next((path for path in UNICODE_FONT_CANDIDATES if path.is_file()), None)


def text_pdf(
    directory: Path,
    pages: Sequence[str],
    *,
    name: str = "doc.pdf",
    header: str | None = None,
    footer: str | None = None,
    title: str | None = None,
    font: Path | None = None,
) -> Path:
    """One page per string, one PDF line per "\\n"-separated line ("" leaves a line's gap).

    `header` and `footer` are printed on every page; "{n}" and "{total}" in them become the page
    number and the page count.
    """
    pdf = FPDF()
    pdf.set_auto_page_break(False)
    if title is not None:
        pdf.set_title(title)
    family = "Helvetica"
    if font is not None:
        pdf.add_font("Unicode", fname=str(font))
        family = "Unicode"
    for number, text in enumerate(pages, start=1):
        pdf.add_page()
        pdf.set_font(family, size=11)
        if header is not None:
            pdf.text(20, 15, header.format(n=number, total=len(pages)))
        for i, line in enumerate(text.split("\n") if text else []):
            # A line too long for the page is set smaller, never run off its edge: text beyond
            # the page is invisible to a reader, and ingest leaves it out.
            fits = (pdf.w - 25) / max(pdf.get_string_width(line), 1e-6)
            if fits < 1:
                pdf.set_font_size(max(3.0, 11 * fits))
            pdf.text(20, TOP_MM + i * LINE_HEIGHT_MM, line)
            pdf.set_font_size(11)
        if footer is not None:
            pdf.text(20, 285, footer.format(n=number, total=len(pages)))
    path = directory / name
    pdf.output(str(path))
    return path


def image_only_pdf(directory: Path, *, num_pages: int = 2, name: str = "scan.pdf") -> Path:
    """Pages that hold only a picture, as a scanner makes them: no text layer at all."""
    pdf = FPDF()
    for number in range(num_pages):
        pdf.add_page()
        picture = Image.new("L", (200, 280), color=255)
        for x in range(20, 180):
            for y in range(30 + 20 * number, 40 + 20 * number):
                picture.putpixel((x, y), 0)  # a dark bar standing in for a line of scanned text
        pdf.image(picture, x=10, y=10, w=190)
    path = directory / name
    pdf.output(str(path))
    return path


def encrypted_pdf(
    source: Path, *, user_password: str, owner_password: str, name: str = "locked.pdf"
) -> Path:
    """`source` encrypted with AES-256 by pypdf's writer."""
    writer = PdfWriter(clone_from=source)
    writer.encrypt(user_password=user_password, owner_password=owner_password, algorithm="AES-256")
    path = source.parent / name
    writer.write(path)
    return path


def failing_page_pdf(source: Path, *, page_index: int, name: str = "bad-page.pdf") -> Path:
    """`source` with one page's content stream given a filter no reader knows: pypdf fails there."""
    writer = PdfWriter(clone_from=source)
    contents = writer.pages[page_index]["/Contents"].get_object()
    contents[NameObject("/Filter")] = NameObject("/NoSuchFilter")
    path = source.parent / name
    writer.write(path)
    return path


def heavy_page_pdf(directory: Path, *, num_operators: int, name: str = "heavy.pdf") -> Path:
    """One page whose content stream shows a letter `num_operators` times: slow, and big once inflated.

    The stream is written compressed (a few hundred KB for millions of operators) by hand: this is a
    plain, valid PDF, just an expensive one.
    """
    content = zlib.compress(b"BT /F1 1 Tf 10 10 Td\n" + b"(a) Tj\n" * num_operators + b"ET\n", 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content)
        + content
        + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    path = directory / name
    path.write_bytes(_assemble(objects))
    return path


AMPLIFIED_SENTENCE = b"The tenant shall pay the rent on the first day of each month. "


def amplified_pdf(
    directory: Path,
    *,
    num_pages: int,
    chars_per_page: int,
    lines: bool = True,
    sentence: bytes = AMPLIFIED_SENTENCE,
    name: str = "amplified.pdf",
) -> Path:
    """A text bomb: one small compressed content stream drawn on every page.

    The stream shows `sentence` again and again until a page gives `chars_per_page` characters
    (with `lines`, one sentence a line, else all on one line); zlib shrinks the repetition about
    a thousandfold, so a few KB of file give megabytes of text on each page.
    """
    repeats = max(1, chars_per_page // (len(sentence) + lines))
    # All of it on the page, where a reader sees it (text off the page is left out as invisible):
    # after 60 lines the next line starts at the top again; one long line goes back to its start
    # (Td moves from the line's start) every few sentences. Overlaid text stays visible ink.
    show = b"(" + sentence + b") Tj" + (b" 0 -12 Td\n" if lines else b"\n")
    per_block = 60 if lines else max(1, 400 // (6 * len(sentence)))
    back = b"0 720 Td\n" if lines else b"0 0 Td\n"
    blocks, rest = divmod(repeats, per_block)
    body = (show * per_block + back) * blocks + show * rest
    content = zlib.compress(b"BT /F1 10 Tf 20 760 Td\n" + body + b"ET\n", 9)
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(num_pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % num_pages,
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content)
        + content
        + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R"
        b" /Resources << /Font << /F1 4 0 R >> >> >>"
    )
    objects.extend([page] * num_pages)
    path = directory / name
    path.write_bytes(_assemble(objects))
    return path


def overflowing_stream_pdf(
    directory: Path, *, inflated_bytes: int = 80_000_000, name: str = "overflow.pdf"
) -> Path:
    """One page whose content stream inflates past pypdf's 75 MB limit (a few spaces after a
    line of text): pypdf raises its LimitReachedError."""
    text = b"BT /F1 10 Tf 20 760 Td (Hello there.) Tj ET\n"
    content = zlib.compress(text + b" " * inflated_bytes, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content)
        + content
        + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    path = directory / name
    path.write_bytes(_assemble(objects))
    return path


def _assemble(objects: Sequence[bytes]) -> bytes:
    body = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(body))
        body += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref_at = len(body)
    body += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    body += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    body += b"trailer\n<< /Size %d /Root 1 0 R >>\n" % (len(objects) + 1)
    body += b"startxref\n%d\n%%%%EOF\n" % xref_at
    return bytes(body)


def not_a_pdf(directory: Path, *, name: str = "letter.pdf") -> Path:
    """A Word file's first bytes (a ZIP) behind a .pdf name."""
    path = directory / name
    path.write_bytes(b"PK\x03\x04\x14\x00\x06\x00" + b"word/document.xml" * 100)
    return path


def with_leading_junk(source: Path, *, name: str = "junk-first.pdf") -> Path:
    """`source` behind some bytes of junk, as some mail gateways and old producers leave."""
    path = source.parent / name
    path.write_bytes(b"\r\nX-Mailer junk line\r\n" * 10 + source.read_bytes())
    return path


def truncated(source: Path, *, keep_share: float = 0.4, name: str = "truncated.pdf") -> Path:
    """The first part of `source`, as an interrupted download leaves it."""
    data = source.read_bytes()
    path = source.parent / name
    path.write_bytes(data[: int(len(data) * keep_share)])
    return path


def garbage_pdf(directory: Path, *, name: str = "garbage.pdf") -> Path:
    """A PDF header followed by noise."""
    noise = random.Random(7).randbytes(20_000)
    path = directory / name
    path.write_bytes(b"%PDF-1.7\n" + noise)
    return path
