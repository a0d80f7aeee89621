"""Scanned pages and redacted pages for the OCR and redaction tests, with fpdf2 and Pillow.

A scanned page is known text drawn by Pillow into a greyscale picture at SCAN_DPI (with a little
noise and a slight blur, as a scanner gives), embedded full-page with no text layer. A redaction
is a rectangle fpdf2 fills over text it has written (so pypdf still extracts that text).
"""

from __future__ import annotations

import random
import textwrap
from collections.abc import Sequence
from pathlib import Path

from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from tests.pipelines.pdf_factory import unicode_font

SCAN_DPI = 300
A4_MM = (210, 297)
MM_PER_INCH = 25.4
SCAN_TEXT = (
    "This Services Agreement is entered into on March 3, 2021 between Northwind Health "
    "Partners LLC and the County of Marin. The Supplier shall deliver the records within "
    "thirty days of each request and shall keep them confidential. Either party may end this "
    "Agreement on sixty days written notice. The patient was admitted with shortness of "
    "breath and was discharged after four days of treatment with oral antibiotics. Any "
    "dispute shall be governed by the laws of the State of California."
)
REDACTED_SENTENCE = "The settlement amount paid to the claimant was 4,250,000 dollars."
PAGE_LINES = (
    "The parties met on June 2, 2022 to settle the claims described in the complaint.",
    REDACTED_SENTENCE,
    "Each party shall bear its own costs and attorney fees in this matter.",
)
_LINE_Y_MM = (40, 50, 60)


def scan_image(text: str = SCAN_TEXT, *, rotation: int = 0, seed: int = 7) -> Image.Image:
    """`text` wrapped and drawn on an A4 page at SCAN_DPI, turned `rotation` degrees clockwise."""
    width, height = (round(mm / MM_PER_INCH * SCAN_DPI) for mm in A4_MM)
    page = Image.new("L", (width, height), color=250)
    draw = ImageDraw.Draw(page)
    font_path = unicode_font()
    size = round(12 / 72 * SCAN_DPI)  # 12 pt
    font = ImageFont.truetype(str(font_path), size) if font_path else ImageFont.load_default(size)
    y = round(25 / MM_PER_INCH * SCAN_DPI)
    for paragraph in text.split("\n"):
        for line in textwrap.wrap(paragraph, width=62):
            draw.text((round(25 / MM_PER_INCH * SCAN_DPI), y), line, fill=20, font=font)
            y += round(size * 1.5)
        y += size
    noise = random.Random(seed)
    pixels = page.load()
    for _ in range(width * height // 200):  # specks of scanner dust
        pixels[noise.randrange(width), noise.randrange(height)] = noise.choice((0, 120, 255))
    page = page.filter(ImageFilter.GaussianBlur(0.6))
    return page.rotate(-rotation, expand=True, fillcolor=250) if rotation else page


def scan_pdf(
    directory: Path,
    pages: Sequence[str | Image.Image],
    *,
    name: str = "scan.pdf",
) -> Path:
    """One page per item: a string is a text page (a real text layer), a picture a scanned page."""
    pdf = FPDF(unit="mm", format="A4")
    pdf.set_auto_page_break(False)
    for item in pages:
        if isinstance(item, str):
            pdf.add_page()
            pdf.set_font("Helvetica", size=11)
            pdf.set_xy(20, 25)
            pdf.multi_cell(170, 6, item)
            continue
        landscape = item.width > item.height
        pdf.add_page(orientation="L" if landscape else "P")
        width, height = (A4_MM[1], A4_MM[0]) if landscape else A4_MM
        pdf.image(item, x=0, y=0, w=width, h=height)
    path = directory / name
    pdf.output(str(path))
    return path


def boxed_text_pdf(
    directory: Path,
    *,
    box: str,
    name: str = "boxed.pdf",
    lines: Sequence[str] = PAGE_LINES,
) -> Path:
    """A text page of `lines` (the second is REDACTED_SENTENCE) with a filled box: `box` is
    "black" (over the second line), "removed" (the second line not written, a black box in its
    place), "grey" (a light highlight over it), "empty" (a black box below all text) or "none".
    """
    pdf = FPDF(unit="mm", format="A4")
    pdf.set_auto_page_break(False)
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    for i, (line, y) in enumerate(zip(lines, _LINE_Y_MM, strict=False)):
        if box == "removed" and i == 1:
            continue
        pdf.text(20, y, line)
    width = pdf.get_string_width(lines[1]) + 2
    # The second line's baseline is at 50 mm; 12 pt letters rise about 3.5 mm above it.
    colour = {"black": 0, "removed": 0, "grey": 200, "empty": 0}.get(box)
    if colour is not None:
        pdf.set_fill_color(colour)
        y = 150 if box == "empty" else 45.5
        pdf.rect(19, y, width, 6, style="F")
    # Text after the box, so the check must look at where the box is, not at what follows it.
    pdf.text(20, 80, "Signed by both parties on the date first written above.")
    path = directory / name
    pdf.output(str(path))
    return path
