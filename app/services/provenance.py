"""Sentences about where a document's text came from: OCR'd pages, bad redactions and text
a reader cannot see.

One place, so the CLI, the UI and the ingest job say the same thing. No document text here.
"""

from collections.abc import Mapping, Sequence

MAX_LISTED_PAGES = 10


def page_list(pages: Sequence[int]) -> str:
    """ "2", "2 and 5", "2, 5 and 7", at most MAX_LISTED_PAGES then "…"."""
    numbers = sorted(set(pages))
    shown = [str(n) for n in numbers[:MAX_LISTED_PAGES]]
    if len(numbers) > MAX_LISTED_PAGES:
        return ", ".join(shown) + ", …"
    if len(shown) == 1:
        return shown[0]
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def redaction_warning(*, pages: Sequence[int], is_hidden_text_kept: bool) -> str | None:
    """The warning for boxes that hide readable text, one page number per box; None if none."""
    if not pages:
        return None
    num_boxes = len(pages)
    boxes = "1 box that hides" if num_boxes == 1 else f"{num_boxes} boxes that hide"
    where = "page" if len(set(pages)) == 1 else "pages"
    sentence = f"This document has {boxes} readable text, on {where} {page_list(pages)}"
    if is_hidden_text_kept:
        return (
            f"{sentence}. The hidden text was kept for review (LONGDOC_KEEP_HIDDEN_TEXT): "
            "summaries, answers and search can show it."
        )
    return (
        f"{sentence}. That text was left out of what LongDoc stored, so summaries, answers and "
        "search never see it; the original file still holds it."
    )


def invisible_text_warning(*, counts: Mapping[int, int], is_hidden_text_kept: bool) -> str | None:
    """The warning for text a reader of the page cannot see (white on white, tiny, outside the
    page, clipped, in a hidden layer), from page number -> characters; None if there is none."""
    pages = sorted(page for page, count in counts.items() if count)
    if not pages:
        return None
    num_chars = sum(counts[page] for page in pages)
    where = "page" if len(pages) == 1 else "pages"
    sentence = (
        f"This document has {num_chars:,} character(s) of text a reader cannot see (invisible, "
        f"tiny, off the page or in a hidden layer), on {where} {page_list(pages)}"
    )
    if is_hidden_text_kept:
        return (
            f"{sentence}. It was kept for review (LONGDOC_KEEP_HIDDEN_TEXT): summaries, answers "
            "and search can show it."
        )
    return (
        f"{sentence}. It was left out of what LongDoc stored, so summaries, answers and search "
        "never see it; the original file still holds it."
    )


def ocr_notice(*, ocr_pages: Sequence[int], mean_confidence: float | None) -> str | None:
    """The note for pages read by OCR; None when there are none."""
    if not ocr_pages:
        return None
    count = len(ocr_pages)
    which = (
        f"Page {page_list(ocr_pages)} was" if count == 1 else f"Pages {page_list(ocr_pages)} were"
    )
    confidence = "" if mean_confidence is None else f" (mean confidence {mean_confidence:.0%})"
    return f"{which} read by OCR{confidence}."


def source_label(*, source: str, ocr_confidence: float | None) -> str:
    """ "text layer", or "OCR, 97% confidence"."""
    if source != "ocr":
        return "text layer"
    if ocr_confidence is None:
        return "OCR"
    return f"OCR, {ocr_confidence:.0%} confidence"
