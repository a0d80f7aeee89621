"""Text a reader cannot see is left out and counted: drawn over (a black image, an annotation's
appearance, a thick stroked line, a box behind 500 decoys or five Form XObjects deep, all
reported as bad redactions) or not drawn visibly at all (white on white, 0.5 pt, render modes 3
and 7, outside the page, clipped away, in a layer that is off). The page's visible text stays.
A page past its caps is left out, and the document stored with its other pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.errors import NoTextLayerError, ParseMemoryError
from pipelines.ingest.limits import ParseLimits
from pipelines.ingest.page_sources import SourceOptions
from pipelines.ingest.parse import parse_pdf, parse_pdf_in_process, parse_pdf_outcome
from tests.pipelines.raw_pdf import HIDDEN_LINE, VISIBLE_LINE, page_with, text_op, write

VISIBLE = text_op(VISIBLE_LINE, 72, 700)
HIDDEN = text_op(HIDDEN_LINE, 72, 650)
BLACK_BOX = "0 g 70 645 400 20 re f"
NUM_HIDDEN = len(HIDDEN_LINE.replace(" ", ""))
DECOYS = " ".join(f"{10 + (i % 50) * 11} {20 + (i // 50) * 11} 5 5 re f" for i in range(500))
NESTED = [(f"Fx{i}", f"/Fx{i + 1} Do") for i in range(4)] + [("Fx4", BLACK_BOX)]

COVERED = {
    "black image": page_with(
        f"{VISIBLE} {HIDDEN} q 400 0 0 20 70 645 cm /Im0 Do Q",
        images=[("Im0", 4, 4, bytes(16))],
    ),
    "square annotation": page_with(f"{VISIBLE} {HIDDEN}", annots=[BLACK_BOX]),
    "500 decoys first": page_with(f"0 g {DECOYS} {VISIBLE} {HIDDEN} {BLACK_BOX}"),
    "five forms deep": page_with(f"{VISIBLE} {HIDDEN} /Fx0 Do", xobjects=NESTED),
    "stroked line": page_with(f"{VISIBLE} {HIDDEN} 0 G 20 w 70 654 m 470 654 l S"),
}
INVISIBLE = {
    "white on white": page_with(f"{VISIBLE} 1 g {HIDDEN} 0 g"),
    "half a point": page_with(f"{VISIBLE} {text_op(HIDDEN_LINE, 72, 650, size=0.5)}"),
    "render mode 3": page_with(f"{VISIBLE} BT 3 Tr /F1 12 Tf 72 650 Td ({HIDDEN_LINE}) Tj ET"),
    "render mode 7": page_with(f"{VISIBLE} BT 7 Tr /F1 12 Tf 72 650 Td ({HIDDEN_LINE}) Tj ET"),
    "outside the media box": page_with(f"{VISIBLE} {text_op(HIDDEN_LINE, 700, 650)}"),
    "clipped away": page_with(f"{VISIBLE} q 0 0 10 10 re W n {HIDDEN} Q"),
    "layer off by default": page_with(f"{VISIBLE} /OC /OC0 BDC {HIDDEN} EMC", ocg_off=True),
}


def _assert_only_visible_text(text: str) -> None:
    assert VISIBLE_LINE in text
    assert "Secret" not in text and "4,250,000" not in text and "claimant" not in text


@pytest.mark.parametrize("trick", list(COVERED))
def test_text_drawn_over_is_a_bad_redaction_and_left_out(tmp_path: Path, trick: str) -> None:
    document = parse_pdf_in_process(write(tmp_path, "covered.pdf", COVERED[trick]))
    (box,) = document.redactions
    assert (box.page, box.num_chars) == (1, NUM_HIDDEN)
    assert box.left < 80 < 340 < box.right and box.bottom < 654 < box.top
    _assert_only_visible_text(document.pages[0].text)
    assert document.invisible_text == ()


@pytest.mark.parametrize("trick", list(INVISIBLE))
def test_text_a_reader_cannot_see_is_counted_and_left_out(tmp_path: Path, trick: str) -> None:
    document = parse_pdf_in_process(write(tmp_path, "invisible.pdf", INVISIBLE[trick]))
    assert document.redactions == ()
    (invisible,) = document.invisible_text
    assert (invisible.page, invisible.num_chars) == (1, NUM_HIDDEN)
    _assert_only_visible_text(document.pages[0].text)


def test_the_same_text_drawn_plainly_is_kept(tmp_path: Path) -> None:
    document = parse_pdf_in_process(write(tmp_path, "plain.pdf", page_with(f"{VISIBLE} {HIDDEN}")))
    assert document.redactions == () and document.invisible_text == ()
    assert HIDDEN_LINE in document.pages[0].text and VISIBLE_LINE in document.pages[0].text


def test_a_highlight_under_the_text_and_white_on_black_are_readable(tmp_path: Path) -> None:
    under = f"0.8 g 70 645 400 20 re f 0 g {VISIBLE} {HIDDEN}"
    banner = f"{VISIBLE} {BLACK_BOX} 1 g {HIDDEN} 0 g"
    for name, content in (("under", under), ("banner", banner)):
        document = parse_pdf_in_process(write(tmp_path, f"{name}.pdf", page_with(content)))
        assert document.redactions == () and document.invisible_text == (), name
        assert HIDDEN_LINE in document.pages[0].text, name


def test_an_invisible_ocr_layer_over_a_scans_ink_is_kept(tmp_path: Path) -> None:
    # A searchable scan: render mode 3 text over an image that shows the words (here, stripes).
    stripes = bytes((0 if x % 2 else 255) for _ in range(8) for x in range(200))
    scan = f"q 400 0 0 20 70 645 cm /Im0 Do Q {VISIBLE} BT 3 Tr /F1 12 Tf 72 650 Td ({HIDDEN_LINE}) Tj ET"
    pdf = page_with(scan, images=[("Im0", 200, 8, stripes)])
    document = parse_pdf_in_process(write(tmp_path, "searchable.pdf", pdf))
    assert document.redactions == () and document.invisible_text == ()
    assert HIDDEN_LINE in document.pages[0].text


def test_a_cycle_of_form_xobjects_does_not_hang_the_check(tmp_path: Path) -> None:
    cycle = page_with(f"{VISIBLE} /Fx0 Do", xobjects=[("Fx0", "/Fx1 Do"), ("Fx1", "/Fx0 Do")])
    document = parse_pdf(write(tmp_path, "cycle.pdf", cycle))
    assert VISIBLE_LINE in document.pages[0].text


def test_counts_cross_the_child_and_the_reviewer_setting_keeps_the_text(tmp_path: Path) -> None:
    both = page_with(f"{VISIBLE} {HIDDEN} {BLACK_BOX} 1 g {text_op(HIDDEN_LINE, 72, 600)} 0 g")
    path = write(tmp_path, "both.pdf", both)
    document = parse_pdf(path)
    assert len(document.redactions) == 1
    assert [(i.page, i.num_chars) for i in document.invisible_text] == [(1, NUM_HIDDEN)]
    _assert_only_visible_text(document.pages[0].text)
    keep = ParseLimits(sources=SourceOptions(keep_hidden_text=True))
    kept = parse_pdf_in_process(path, limits=keep)
    assert len(kept.redactions) == 1 and len(kept.invisible_text) == 1
    assert kept.pages[0].text.count(HIDDEN_LINE) == 2


# Page-level failure: one page past its caps costs that page, not the document.

HUGE = (0, 0, 14400, 14400)


def test_a_huge_second_page_costs_that_page_not_the_document(tmp_path: Path) -> None:
    # A scan-like page of 14,400 points: rendered for OCR at 200 dpi it would take gigabytes.
    image_page = ("q 14000 0 0 14000 100 100 cm /Im0 Do Q", HUGE)
    pdf = page_with(VISIBLE, images=[("Im0", 4, 4, bytes(range(16)))], extra_pages=[image_page])
    outcome = parse_pdf_outcome(write(tmp_path, "huge.pdf", pdf))
    assert outcome.failed_pages == (2,)
    assert VISIBLE_LINE in outcome.document.pages[0].text
    assert outcome.document.pages[1].text == ""


def test_text_on_a_huge_page_is_checked_at_a_lower_resolution(tmp_path: Path) -> None:
    hidden = f"{text_op(VISIBLE_LINE, 72, 7000, size=24)} 1 g {text_op(HIDDEN_LINE, 72, 6000, 24)}"
    pdf = page_with(VISIBLE, extra_pages=[(hidden, HUGE)])
    outcome = parse_pdf_outcome(write(tmp_path, "huge_text.pdf", pdf))
    assert outcome.failed_pages == ()
    _assert_only_visible_text(outcome.document.pages[1].text)
    assert [(i.page, i.num_chars) for i in outcome.document.invisible_text] == [(2, NUM_HIDDEN)]


def test_a_page_too_large_to_check_is_left_out_not_passed(tmp_path: Path) -> None:
    # Past MAX_RENDER_PIXELS even at MIN_RENDER_DPI: the check cannot finish, so it fails
    # closed; the other page is stored.
    pdf = page_with(VISIBLE, extra_pages=[(HIDDEN, (0, 0, 200_000, 200_000))])
    outcome = parse_pdf_outcome(write(tmp_path, "unchecked.pdf", pdf))
    assert outcome.failed_pages == (2,)
    assert VISIBLE_LINE in outcome.document.pages[0].text
    assert outcome.document.pages[1].text == ""
    kept = parse_pdf_in_process(
        write(tmp_path, "unchecked.pdf", pdf),
        limits=ParseLimits(sources=SourceOptions(keep_hidden_text=True)),
    )
    assert HIDDEN_LINE in kept.pages[1].text  # the reviewer setting keeps it


def test_the_renderer_running_out_of_memory_is_not_called_damage(tmp_path: Path) -> None:
    # A 30 MB XMP stream: pdfium's allocator aborts the child under a small cap.
    import io

    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import NameObject, StreamObject

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(page_with(VISIBLE))))
    xmp = StreamObject()
    xmp.set_data(b"<x:xmpmeta xmlns:x='adobe:ns:meta/'>" + b" " * (30 << 20) + b"</x:xmpmeta>")
    xmp[NameObject("/Type")] = NameObject("/Metadata")
    xmp[NameObject("/Subtype")] = NameObject("/XML")
    writer._root_object[NameObject("/Metadata")] = writer._add_object(xmp.flate_encode(level=9))
    path = tmp_path / "xmp.pdf"
    writer.write(path)
    assert path.stat().st_size < 1 << 20  # the stream is small until inflated
    with pytest.raises(ParseMemoryError, match="150 MB"):
        parse_pdf(path, limits=ParseLimits(max_memory_mb=150))


def test_a_check_past_its_time_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipelines.ingest import page_sources

    monkeypatch.setattr(page_sources, "CHECK_PAGE_TIMEOUT_S", 1e-6)
    pdf = page_with(f"{VISIBLE} 1 g {HIDDEN} 0 g", extra_pages=[(VISIBLE, (0, 0, 612, 792))])
    with pytest.raises(NoTextLayerError):  # every page left out: nothing unchecked is stored
        parse_pdf_in_process(write(tmp_path, "slow.pdf", pdf))
