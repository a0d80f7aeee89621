"""Text a reader cannot see: under bad redactions, and invisible on the rendered page.

The check decides per character, on the page as pdfium renders it (page content, images, Form
XObjects at any depth, annotations' appearance streams, clipping, optional-content layers off by
default), so every way of drawing over text or of not drawing it is covered at once, and no list
of drawn shapes can be exhausted by decoys:

1. The page is rendered in grey at RENDER_DPI, or at less on a page too large for
   MAX_RENDER_PIXELS, down to MIN_RENDER_DPI. A page larger still, one of more than
   MAX_CHARS_PER_PAGE characters, or one whose render or check fails, is not passed: the check fails closed (`PageRedactions.is_unchecked`) and the caller
   leaves the page's text out.
2. For each character of pdfium's text page (spaces, line breaks and format characters draw no
   ink and are not counted), the pixels of its glyph box, widened by PAD_PIXELS on each side,
   are looked at. A glyph a reader can see leaves ink there: pixels whose 3 x 3 neighbourhood
   spans at least MIN_CONTRAST. Where there is none, the character is hidden: under a dark box,
   image, annotation or thick line when the area is dark (at least half its pixels under
   DARK_LUMINANCE: a bad redaction), invisible otherwise (white on white, under an opaque light
   box, render modes 3 and 7 over nothing, clipped away, in a hidden layer). A character whose
   box lies outside the rendered page, or whose line is shorter than MIN_TEXT_POINTS (0.5 pt
   text), is invisible too. The cost is one render and a few array passes a page, whatever the
   page draws: nothing to exhaust.
3. Hidden characters under dark areas are grouped into boxes (one per run on a line): those are
   the bad redactions reported. Text drawn on top of a black banner (white letters) shows in the
   render, so it is not hidden; a scan's invisible OCR layer lies over the scan's ink, so it is
   not hidden either.

The hidden characters are returned by their index in pdfium's text page, so the page's text can
be rebuilt without them (`text_without`). Nothing here reads or logs the text.
"""

from __future__ import annotations

import ctypes
import functools
import math
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from pipelines.documents import RedactionBox

DARK_LUMINANCE = 80  # of 255: a hidden character's area darker than this is a redaction
MIN_CONTRAST = 24  # of 255: a glyph a reader can see differs this much from its background
PAD_PIXELS = 2  # around a glyph's box: a stroke that fills its box ("l", "-") still has edges
MIN_TEXT_POINTS = 2.0  # a line of text (ascent to descent) shorter than this cannot be read
RENDER_DPI = 96
MAX_RENDER_PIXELS = 25_000_000  # grey bytes; an A0 page at RENDER_DPI is 14 million
MIN_RENDER_DPI = 20  # 12 pt text is over 3 pixels high: still enough to tell ink from none
MAX_CHARS_PER_PAGE = 200_000  # twice the text cap a page is read with (ParseLimits)
# Hidden characters further apart than this many line heights on one line are separate boxes.
MAX_BOX_GAP_LINES = 1.5
_NONCHARACTERS = frozenset("\ufffe\uffff")
_BLANK_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class PageRedactions:
    """What one page hides: its bad redactions, how many characters are invisible, and, when
    anything is hidden, the page's text without it (pdfium's reading, less those characters).
    `is_unchecked`: the check could not finish (the page could not be rendered within its
    caps), so nothing on the page can be taken as visible."""

    boxes: tuple[RedactionBox, ...] = ()
    num_invisible_chars: int = 0
    text_without_hidden: str | None = None
    is_unchecked: bool = False


class PageTooLargeError(Exception):
    """The page needs more pixels than the cap allows at the resolution asked for."""


def check_render_size(page: pdfium.PdfPage, dpi: float, max_pixels: int) -> None:
    """Raise PageTooLargeError when `page` at `dpi` would be more than `max_pixels`."""
    width, height = page.get_size()
    scale = dpi / 72
    if width * scale * height * scale > max_pixels:
        raise PageTooLargeError


def render_dpi(page: pdfium.PdfPage) -> float:
    """RENDER_DPI, or less for a page too large for MAX_RENDER_PIXELS at it; PageTooLargeError
    below MIN_RENDER_DPI."""
    width, height = page.get_size()
    if width <= 0 or height <= 0:
        raise PageTooLargeError
    dpi = min(float(RENDER_DPI), 72 * math.sqrt(MAX_RENDER_PIXELS / (width * height)))
    if dpi < MIN_RENDER_DPI:
        raise PageTooLargeError
    return dpi


def find_redactions(page: pdfium.PdfPage, number: int) -> PageRedactions:
    """The text on `page` (page `number`, from 1) that a reader of the rendered page cannot see."""
    textpage = page.get_textpage()
    try:
        if textpage.count_chars() > MAX_CHARS_PER_PAGE:
            return PageRedactions(is_unchecked=True)
        indices, loose, tight = _counted_chars(textpage)
        if not len(indices):
            return PageRedactions()
        try:
            states = _visibility(page, render_dpi(page), loose, tight)
        except (PageTooLargeError, MemoryError, pdfium.PdfiumError):
            return PageRedactions(is_unchecked=True)
        is_dark, is_invisible = states == _DARK, states == _INVISIBLE
        if not (is_dark.any() or is_invisible.any()):
            return PageRedactions()
        boxes = tuple(
            RedactionBox(number, *(round(float(v), 1) for v in box), num_chars)
            for box, num_chars in _group(loose[is_dark])
        )
        hidden = {int(i) for i in indices[is_dark | is_invisible]}
        return PageRedactions(boxes, int(is_invisible.sum()), text_without(textpage, hidden))
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


_VISIBLE, _DARK, _INVISIBLE = range(3)
_FAR = 1000.0


@functools.lru_cache(maxsize=4096)
def _is_blank(code: int) -> bool:
    """A space, line break or format character: it draws no ink, so it hides nothing."""
    char = chr(code)
    return char in _NONCHARACTERS or unicodedata.category(char) in _BLANK_CATEGORIES


def _counted_chars(textpage: pdfium.PdfTextPage) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The indices of the characters that count (not blank: spaces, breaks, format codes), and
    their loose and tight boxes (left, bottom, right, top), one row each."""
    raw = textpage.raw
    left, right, bottom, top = (ctypes.c_double() for _ in range(4))
    rect = pdfium_c.FS_RECTF()
    box_refs = [ctypes.byref(value) for value in (left, right, bottom, top)]
    rect_ref = ctypes.byref(rect)
    get_unicode, get_box = pdfium_c.FPDFText_GetUnicode, pdfium_c.FPDFText_GetCharBox
    get_loose = pdfium_c.FPDFText_GetLooseCharBox
    indices, loose, tight = [], [], []
    for index in range(pdfium_c.FPDFText_CountChars(raw)):
        code = get_unicode(raw, index)
        # The spaces and line breaks pdfium generates are blank: no need to ask which they are.
        if not code or _is_blank(code):
            continue
        get_box(raw, index, *box_refs)
        get_loose(raw, index, rect_ref)
        indices.append(index)
        tight.append((left.value, bottom.value, right.value, top.value))
        loose.append((rect.left, rect.bottom, rect.right, rect.top))
    shape = (-1, 4)
    return (
        np.array(indices, dtype=np.int64),
        np.array(loose, dtype=np.float64).reshape(shape),
        np.array(tight, dtype=np.float64).reshape(shape),
    )


def _visibility(
    page: pdfium.PdfPage, dpi: float, loose: np.ndarray, tight: np.ndarray
) -> np.ndarray:
    """_VISIBLE, _DARK or _INVISIBLE for each character, from the page rendered at `dpi`."""
    bitmap = page.render(scale=dpi / 72, grayscale=True, draw_annots=True)
    try:
        pixels = np.array(bitmap.to_numpy(), copy=True)
        to_pixels = bitmap.get_posconv(page)
        # The page-to-pixel map is affine; pdfium gives whole pixels, so it is read over 1000 pt.
        origin, x_far, y_far = (
            np.array(to_pixels.to_bitmap(x, y), dtype=np.float64)
            for x, y in ((0, 0), (_FAR, 0), (0, _FAR))
        )
    finally:
        bitmap.close()
    pixels = pixels.reshape(pixels.shape[0], pixels.shape[1])
    height, width = pixels.shape
    ink = _summed(_has_contrast(pixels))
    dark = _summed(pixels < DARK_LUMINANCE)
    del pixels
    # A glyph without an outline (an OCR layer's glyphless font) is looked at over its line.
    degenerate = (tight[:, 2] <= tight[:, 0]) | (tight[:, 3] <= tight[:, 1])
    box = np.where(degenerate[:, None], loose, tight)
    corners = [
        origin + (xs[:, None] * (x_far - origin) + ys[:, None] * (y_far - origin)) / _FAR
        for xs, ys in ((box[:, 0], box[:, 1]), (box[:, 2], box[:, 3]))
    ]
    px = np.sort(np.round(np.stack([corners[0][:, 0], corners[1][:, 0]], axis=1)), axis=1)
    py = np.sort(np.round(np.stack([corners[0][:, 1], corners[1][:, 1]], axis=1)), axis=1)
    x0 = np.clip(px[:, 0] - PAD_PIXELS, 0, width).astype(np.int64)
    x1 = np.clip(px[:, 1] + PAD_PIXELS + 1, 0, width).astype(np.int64)
    y0 = np.clip(py[:, 0] - PAD_PIXELS, 0, height).astype(np.int64)
    y1 = np.clip(py[:, 1] + PAD_PIXELS + 1, 0, height).astype(np.int64)
    area = np.maximum(x1 - x0, 0) * np.maximum(y1 - y0, 0)
    # Contrast is looked for one pixel in from the area's edge: a pixel's contrast is measured
    # against its neighbours, and a box's edge just outside the area is not the glyph's ink.
    ix0, iy0 = np.minimum(x0 + 1, width), np.minimum(y0 + 1, height)
    ix1, iy1 = np.maximum(x1 - 1, ix0), np.maximum(y1 - 1, iy0)
    num_ink = _area_sum(ink, ix0, ix1, iy0, iy1)
    dark_share = _area_sum(dark, x0, x1, y0, y1) / np.maximum(area, 1)
    states = np.where(dark_share >= 0.5, _DARK, _INVISIBLE)
    states[num_ink > 0] = _VISIBLE
    tiny = np.maximum(loose[:, 2] - loose[:, 0], loose[:, 3] - loose[:, 1]) < MIN_TEXT_POINTS
    states[(area == 0) | tiny] = _INVISIBLE  # off the page as shown, or too small to read
    return states


def _has_contrast(pixels: np.ndarray) -> np.ndarray:
    """Whether each pixel's 3 x 3 neighbourhood spans at least MIN_CONTRAST of luminance."""
    high, low = _spread(pixels, np.maximum), _spread(pixels, np.minimum)
    return (high.astype(np.int16) - low) >= MIN_CONTRAST


def _spread(pixels: np.ndarray, pick: np.ufunc) -> np.ndarray:
    """`pick` (maximum or minimum) over each pixel's 3 x 3 neighbourhood: rows, then columns."""
    padded = np.pad(pixels, 1, mode="edge")
    rows = pick(pick(padded[:, :-2], padded[:, 1:-1]), padded[:, 2:])
    return pick(pick(rows[:-2], rows[1:-1]), rows[2:])


def _summed(values: np.ndarray) -> np.ndarray:
    """The summed-area table of the 0/1 `values`, with a row and a column of zeros in front
    (int32: MAX_RENDER_PIXELS is far below its limit)."""
    table = np.cumsum(values, axis=0, dtype=np.int32)
    np.cumsum(table, axis=1, out=table)
    return np.pad(table, ((1, 0), (1, 0)))


def _area_sum(
    table: np.ndarray, x0: np.ndarray, x1: np.ndarray, y0: np.ndarray, y1: np.ndarray
) -> np.ndarray:
    x1, y1 = np.maximum(x1, x0), np.maximum(y1, y0)
    return table[y1, x1] - table[y0, x1] - table[y1, x0] + table[y0, x0]


def _group(dark: np.ndarray) -> list[tuple[Box, int]]:
    """Hidden characters under dark areas (their loose boxes) as boxes: a run on one line is
    one box."""
    groups: list[tuple[Box, int]] = []
    for left, bottom, right, top in dark.tolist():
        if groups:
            (g_left, g_bottom, g_right, g_top), count = groups[-1]
            line = max(g_top - g_bottom, top - bottom)
            same_line = min(top, g_top) - max(bottom, g_bottom) > 0.5 * min(
                top - bottom, g_top - g_bottom
            )
            near = left - g_right <= MAX_BOX_GAP_LINES * line and right >= g_left - line
            if same_line and near:
                box = (
                    min(left, g_left),
                    min(bottom, g_bottom),
                    max(right, g_right),
                    max(top, g_top),
                )
                groups[-1] = (box, count + 1)
                continue
        groups.append(((left, bottom, right, top), 1))
    return groups
