"""A PDF's pages through pypdfium2 (Apache-2.0/BSD): rendered to pixels, and what they are made of.

pypdf reads the text layer; pdfium renders pages for OCR and for the redaction check, and says
where each character and each filled shape lies on the page (pipelines/ingest/redactions.py).
"""

from __future__ import annotations

import numpy as np
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

POINTS_PER_INCH = 72


def render_page(page: pdfium.PdfPage, *, dpi: int, grayscale: bool = False) -> np.ndarray:
    """The page as pixels: H x W x 3 uint8 RGB (H x W with `grayscale`), its /Rotate applied."""
    bitmap = page.render(scale=dpi / POINTS_PER_INCH, grayscale=grayscale, rev_byteorder=True)
    try:
        pixels = np.array(bitmap.to_numpy(), copy=True)
    finally:
        bitmap.close()
    if grayscale:
        return pixels.reshape(pixels.shape[0], pixels.shape[1])
    return pixels[:, :, :3]


def has_images(page: pdfium.PdfPage) -> bool:
    """Whether the page draws at least one image (a scan is one, or a strip of them)."""
    for _ in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=4):
        return True
    return False
