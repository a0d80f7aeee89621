"""Text of a page image by OCR: RapidOCR on onnxruntime, with only the models its wheel ships.

The detection and recognition models are the ones inside the `rapidocr` wheel (PP-OCRv6 small,
in rapidocr/models/); their paths are passed explicitly, so RapidOCR never looks them up in its
download table. Any download it still attempts is refused with OcrModelDownloadError (the
download function is replaced before an engine is built): a missing model is a broken install,
never a reason to fetch one from the internet.

The wheel's angle classifier is not used: on clean upright pages it turned one line in three
upside down (68% of characters right instead of 100% on a generated page). Orientation is
decided per page instead: when most detected boxes are tall the page is turned a quarter turn
(and, when that reads with low confidence, the other quarter turn), otherwise it is read as it
is (and, when its confidence is low, upside down too); the reading with the higher confidence
times characters read wins.

Boxes become lines (boxes whose vertical centres fall within each other's height), read left to
right; a gap between lines larger than LINE_GAP_FOR_PARAGRAPH line heights is a blank line, so
the page cleaner (pipelines/ingest/pdf_text.py) sees paragraphs as it does in a text layer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.errors import OcrModelDownloadError, OcrUnavailableError

logger = logging.getLogger(__name__)

# Of each reading, confident enough not to try the page upside down.
CONFIDENT = 0.90
# A box this much taller than wide is a line of text turned a quarter turn.
TALL_BOX_RATIO = 1.5
LINE_GAP_FOR_PARAGRAPH = 1.2
MODEL_FILES = {
    "Det": "PP-OCRv6_det_small.onnx",
    "Rec": "PP-OCRv6_rec_small.onnx",
}
_NOT_INSTALLED = (
    "LongDoc's OCR (reading text from scanned pages) is not installed, so scanned pages cannot "
    "be read. Install LongDoc with its ocr extra (make run does), or set LONGDOC_OCR_ENABLED=false."
)
_DOWNLOAD_REFUSED = (
    "LongDoc's OCR tried to download a model from the internet; LongDoc only uses the models "
    "installed with it. Reinstall the rapidocr package (make run does) and try again."
)


@dataclass(frozen=True)
class OcrPage:
    """What OCR read on one page. `confidence` is the recognizer's mean score per character
    (0 to 1; 0 when nothing was read); `rotation` the quarter turns (degrees) the page needed."""

    text: str
    confidence: float
    num_lines: int
    rotation: int = 0


@dataclass(frozen=True)
class _Box:
    top: float
    bottom: float
    left: float
    right: float
    text: str
    score: float

    @property
    def height(self) -> float:
        return self.bottom - self.top

    @property
    def width(self) -> float:
        return self.right - self.left

    @property
    def middle(self) -> float:
        return (self.top + self.bottom) / 2


def model_dir() -> Path:
    """Where the rapidocr wheel keeps its models; OcrUnavailableError when it is not installed."""
    try:
        import rapidocr
    except ImportError as error:
        raise OcrUnavailableError(_NOT_INSTALLED) from error
    return Path(rapidocr.__file__).parent / "models"


def refuse_downloads() -> None:
    """Make every download RapidOCR attempts raise OcrModelDownloadError."""
    from rapidocr.utils import download_file

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise OcrModelDownloadError(_DOWNLOAD_REFUSED)

    download_file.DownloadFile.run = staticmethod(refuse)  # type: ignore[method-assign]
    download_file.DownloadFile._make_http_request = staticmethod(refuse)  # type: ignore[method-assign]


class PageReader:
    """One RapidOCR engine, built once per process (loading the models takes about a second)."""

    def __init__(self, *, num_threads: int = 2, models: Path | None = None) -> None:
        models = models or model_dir()
        missing = [name for name in MODEL_FILES.values() if not (models / name).is_file()]
        if missing:
            raise OcrUnavailableError(
                f"LongDoc's OCR models are missing from {models} ({', '.join(missing)}), so "
                "scanned pages cannot be read. Reinstall the rapidocr package (make run does)."
            )
        try:
            from rapidocr import RapidOCR
        except ImportError as error:
            raise OcrUnavailableError(_NOT_INSTALLED) from error
        refuse_downloads()
        params: dict[str, Any] = {
            "Global.log_level": "critical",  # its messages may carry file paths, never needed
            "Global.use_cls": False,
            "EngineConfig.onnxruntime.intra_op_num_threads": num_threads,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            **{f"{task}.model_path": str(models / name) for task, name in MODEL_FILES.items()},
        }
        self._engine = RapidOCR(params=params)
        logging.getLogger("RapidOCR").setLevel(logging.CRITICAL)

    def read(self, image: np.ndarray) -> OcrPage:
        """OCR a page image (H x W x 3, uint8), in whichever orientation reads best."""
        boxes = self._boxes(image)
        if _is_mostly_tall(boxes):
            turned = self._read_turned(image, 90)
            if turned.confidence >= CONFIDENT:
                return turned
            return max((turned, self._read_turned(image, 270)), key=_score)
        upright = _page_of(boxes, 0)
        if upright.confidence >= CONFIDENT or not upright.text:
            return upright
        return max((upright, self._read_turned(image, 180)), key=_score)

    def _read_turned(self, image: np.ndarray, degrees: int) -> OcrPage:
        # np.rot90 turns counter-clockwise; `degrees` counts clockwise turns of the page.
        turned = np.ascontiguousarray(np.rot90(image, k=-(degrees // 90)))
        return _page_of(self._boxes(turned), degrees)

    def _boxes(self, image: np.ndarray) -> list[_Box]:
        result = self._engine(image)
        if result.boxes is None or result.txts is None or result.scores is None:
            return []
        boxes = []
        for corners, text, score in zip(result.boxes, result.txts, result.scores, strict=True):
            if not text.strip():
                continue
            ys = [float(y) for _, y in corners]
            xs = [float(x) for x, _ in corners]
            boxes.append(_Box(min(ys), max(ys), min(xs), max(xs), text.strip(), float(score)))
        return boxes


def _is_mostly_tall(boxes: Sequence[_Box]) -> bool:
    # Tall boxes are rows of text that run down the page: a page turned a quarter turn.
    if not boxes:
        return False
    num_tall = sum(1 for box in boxes if box.height > TALL_BOX_RATIO * box.width)
    return num_tall > len(boxes) / 2


def _score(page: OcrPage) -> float:
    return page.confidence * len(page.text.replace(" ", "").replace("\n", ""))


def _page_of(boxes: Sequence[_Box], rotation: int) -> OcrPage:
    lines = assemble_lines(boxes)
    num_chars = sum(len(box.text) for box in boxes)
    confidence = sum(box.score * len(box.text) for box in boxes) / num_chars if num_chars else 0.0
    return OcrPage(
        text="\n".join(lines),
        confidence=round(confidence, 4),
        num_lines=len(lines),
        rotation=rotation,
    )


def assemble_lines(boxes: Sequence[_Box]) -> list[str]:
    """Boxes grouped into lines top to bottom, each read left to right; "" between paragraphs."""
    rows: list[list[_Box]] = []
    for box in sorted(boxes, key=lambda b: b.middle):
        row = rows[-1] if rows else None
        if row is not None and abs(box.middle - _middle(row)) < 0.5 * max(box.height, _height(row)):
            row.append(box)
        else:
            rows.append([box])
    if not rows:
        return []
    heights = sorted(_height(row) for row in rows)
    line_height = heights[len(heights) // 2]
    lines: list[str] = []
    previous_bottom: float | None = None
    for row in rows:
        top = min(box.top for box in row)
        if (
            previous_bottom is not None
            and top - previous_bottom > LINE_GAP_FOR_PARAGRAPH * line_height
        ):
            lines.append("")
        lines.append(" ".join(box.text for box in sorted(row, key=lambda b: b.left)))
        previous_bottom = max(box.bottom for box in row)
    return lines


def _middle(row: Sequence[_Box]) -> float:
    return sum(box.middle for box in row) / len(row)


def _height(row: Sequence[_Box]) -> float:
    return max(box.bottom for box in row) - min(box.top for box in row)
