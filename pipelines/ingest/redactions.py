"""Bad redactions: dark boxes drawn over text that is still in the file and still extractable.

The idea is Free Law Project's x-ray's; the code is ours, on pdfium's page objects:

1. Candidates are the page's filled path objects (pdfium's FPDFPath_GetDrawMode says filled)
   whose fill colour is dark (each of red, green and blue at most MAX_DARK_CHANNEL) and whose
   bounds are at least MIN_BOX_POINTS on each side.
2. The characters under a candidate are those of pdfium's text page whose box centre lies
   inside it (spaces and line breaks pdfium generates are not counted). A box over no
   character is a black bar, a border or a rule: not a redaction.
3. The page is rendered and the box's pixels looked at: at least MIN_DARK_SHARE of them must be
   dark (luminance under DARK_LUMINANCE). Text drawn on top of the box (white letters on a
   black banner) shows in the render and is readable, so it is not hidden; a grey highlight is
   never dark enough to be a candidate at all.

The hidden characters are what the check returns, by their index in pdfium's text page, so the
page's text can be rebuilt without them (`text_without`). Nothing here reads or logs the text.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from pipelines.documents import RedactionBox

MAX_DARK_CHANNEL = 64  # of 255
MIN_BOX_POINTS = 4.0
DARK_LUMINANCE = 80  # of 255
MIN_DARK_SHARE = 0.97
RENDER_DPI = 96
MAX_CANDIDATES_PER_PAGE = 500  # a page of thousands of filled shapes is a drawing, not a filing
_CHARS_NOT_COUNTED = frozenset(" \t\r\n\u00a0\ufffe\uffff")


@dataclass(frozen=True)
class PageRedactions:
    """The bad redactions of one page and, when there are any, the page's text without what
    they hide (pdfium's reading of the page, less the covered characters)."""

    boxes: tuple[RedactionBox, ...] = ()
    text_without_hidden: str | None = None


def find_redactions(page: pdfium.PdfPage, number: int) -> PageRedactions:
    """The boxes on `page` (page `number`, from 1) that hide characters still in its text."""
    candidates = list(_dark_filled_boxes(page))
    if not candidates:
        return PageRedactions()  # most pages: no text page is even built
    textpage = page.get_textpage()
    try:
        centres = _char_centres(textpage)
        covered = [_covered_chars(centres, box) for box in candidates]
        with_text = [(box, chars) for box, chars in zip(candidates, covered, strict=True) if chars]
        if not with_text:
            return PageRedactions()
        solid = _solid_boxes(page, [box for box, _ in with_text])
        boxes: list[RedactionBox] = []
        hidden: set[int] = set()
        for (box, chars), is_solid in zip(with_text, solid, strict=True):
            new_chars = chars - hidden
            if not is_solid or not new_chars:
                continue
            hidden |= new_chars
            left, bottom, right, top = (round(value, 1) for value in box)
            boxes.append(RedactionBox(number, left, bottom, right, top, len(new_chars)))
        if not boxes:
            return PageRedactions()
        return PageRedactions(tuple(boxes), text_without(textpage, hidden))
    finally:
        textpage.close()


def text_without(textpage: pdfium.PdfTextPage, hidden: Iterable[int]) -> str:
    """The page's text as pdfium reads it, less the characters at the `hidden` indices."""
    hidden = set(hidden)
    pieces = []
    for index in range(textpage.count_chars()):
        if index in hidden:
            continue
        code = pdfium_c.FPDFText_GetUnicode(textpage, index)
        if code and not 0xD800 <= code <= 0xDFFF:
            pieces.append(chr(code))
    return "".join(pieces).replace("\r\n", "\n")


def _dark_filled_boxes(page: pdfium.PdfPage) -> Iterable[tuple[float, float, float, float]]:
    num_seen = 0
    for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_PATH], max_depth=4):
        if num_seen >= MAX_CANDIDATES_PER_PAGE:
            return
        if not (_is_filled(obj) and _is_dark(obj)):
            continue
        left, bottom, right, top = obj.get_bounds()
        if right - left < MIN_BOX_POINTS or top - bottom < MIN_BOX_POINTS:
            continue
        num_seen += 1
        yield left, bottom, right, top


def _is_filled(obj: pdfium.PdfObject) -> bool:
    fill_mode, stroke = ctypes.c_int(), ctypes.c_int()
    if not pdfium_c.FPDFPath_GetDrawMode(obj, ctypes.byref(fill_mode), ctypes.byref(stroke)):
        return False
    return fill_mode.value != pdfium_c.FPDF_FILLMODE_NONE


def _is_dark(obj: pdfium.PdfObject) -> bool:
    r, g, b, a = (ctypes.c_uint() for _ in range(4))
    if not pdfium_c.FPDFPageObj_GetFillColor(
        obj, ctypes.byref(r), ctypes.byref(g), ctypes.byref(b), ctypes.byref(a)
    ):
        return False
    return a.value > 200 and max(r.value, g.value, b.value) <= MAX_DARK_CHANNEL


def _char_centres(textpage: pdfium.PdfTextPage) -> np.ndarray:
    """[index, x, y] of each character that counts (not a space or a generated line break)."""
    rows = []
    for index in range(textpage.count_chars()):
        code = pdfium_c.FPDFText_GetUnicode(textpage, index)
        if not code or chr(code) in _CHARS_NOT_COUNTED:
            continue
        c_left, c_bottom, c_right, c_top = textpage.get_charbox(index)
        rows.append((index, (c_left + c_right) / 2, (c_bottom + c_top) / 2))
    return np.array(rows, dtype=np.float64).reshape(-1, 3)


def _covered_chars(centres: np.ndarray, box: tuple[float, float, float, float]) -> frozenset[int]:
    left, bottom, right, top = box
    x, y = centres[:, 1], centres[:, 2]
    inside = (x >= left) & (x <= right) & (y >= bottom) & (y <= top)
    return frozenset(int(index) for index in centres[inside, 0])


def _solid_boxes(
    page: pdfium.PdfPage, boxes: Sequence[tuple[float, float, float, float]]
) -> list[bool]:
    bitmap = page.render(scale=RENDER_DPI / 72, grayscale=True)
    try:
        pixels = np.asarray(bitmap.to_numpy())
        pixels = pixels.reshape(pixels.shape[0], pixels.shape[1])
        to_pixels = bitmap.get_posconv(page)
        return [_is_solid(pixels, to_pixels, box) for box in boxes]
    finally:
        bitmap.close()


def _is_solid(
    pixels: np.ndarray, to_pixels: pdfium.PdfPosConv, box: tuple[float, float, float, float]
) -> bool:
    left, bottom, right, top = box
    corners = [to_pixels.to_bitmap(x, y) for x, y in ((left, bottom), (right, top))]
    xs = sorted(round(x) for x, _ in corners)
    ys = sorted(round(y) for _, y in corners)
    # One pixel in from each edge: anti-aliasing greys the border of any box.
    x0, x1 = max(xs[0] + 1, 0), min(xs[1] - 1, pixels.shape[1])
    y0, y1 = max(ys[0] + 1, 0), min(ys[1] - 1, pixels.shape[0])
    if x1 <= x0 or y1 <= y0:
        return False
    region = pixels[y0:y1, x0:x1]
    return float(np.mean(region < DARK_LUMINANCE)) >= MIN_DARK_SHARE
